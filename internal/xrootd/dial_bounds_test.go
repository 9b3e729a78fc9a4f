package xrootd

import (
	"errors"
	"net"
	"testing"
)

// TestDialAnswersAreBounded checks that the answers of the dial (the
// handshake, kXR_protocol, kXR_login, kXR_auth), all some dozens of
// bytes, are refused past dialAnswer (64 KiB) once their header is in:
// they were bounded by MaxFrame alone (16 MiB), so that a server, or
// whatever answered on its port, made every dial read and hold that much.
func TestDialAnswersAreBounded(t *testing.T) {
	const big = 1 << 20
	oversized := func(conn net.Conn) {
		conn.Write(AppendResponseHeader(nil, StreamID{}, StatusOK, big))
		conn.Write(make([]byte, big))
	}
	for _, stage := range []string{"handshake", "protocol", "login", "auth"} {
		t.Run(stage, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				if ReadHandshake(conn) != nil {
					return
				}
				if stage == "handshake" {
					oversized(conn)
					return
				}
				conn.Write(AppendHandshakeResponse(nil, ProtocolVersion, DataServer))
				for {
					f, err := ReadRequestFrame(conn, 1<<20)
					if err != nil {
						return
					}
					switch {
					case f.ID == ReqProtocol && stage != "protocol":
						conn.Write(respond(f.StreamID, StatusOK, (&ProtocolResponse{Version: ProtocolVersion, Flags: FlagIsServer}).AppendTo(nil)))
					case f.ID == ReqLogin && stage == "auth":
						conn.Write(respond(f.StreamID, StatusOK, append(make([]byte, 16), "&P=unix"...)))
					default:
						oversized(conn)
						return
					}
				}
			}()
			_, err = Dial(testCtx(t), ln.Addr().String(), &DialOptions{Logger: testLogger(t)})
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("a %s answer of 1 MiB: %v, want ErrFrameTooLarge", stage, err)
			}
		})
	}
}
