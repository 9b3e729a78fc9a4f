//go:build !amd64

package erasure

// useAdler32Vector is false: there is no vector kernel on this
// architecture.
const useAdler32Vector = false

func adler32Blocks(p []byte) (sum, prefix, weighted uint32) {
	panic("erasure: no adler32 vector kernel on this architecture")
}
