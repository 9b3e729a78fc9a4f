//go:build !amd64

package erasure

// useIEEEFold is false: there is no folding kernel on this architecture.
const useIEEEFold = false

func ieeeFold256(crc uint32, p []byte, state *[64]byte) {
	panic("erasure: no CRC-32 folding kernel on this architecture")
}
