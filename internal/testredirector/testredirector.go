// Package testredirector runs a minimal XRootD redirector for tests, in
// the place of an XRootD manager (xrootd + cmsd): it answers the
// handshake, kXR_protocol and kXR_login, and every request after them
// with a kXR_redirect to one data server, as a manager sends its
// clients to the server that holds, or is to hold, a file.
package testredirector

import (
	"encoding/binary"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// Redirector is a running redirector.
type Redirector struct {
	// Addr is its address, host:port.
	Addr string
	// Redirected counts the requests it redirected.
	Redirected atomic.Int64
}

// Start runs a redirector on a free loopback port that redirects to
// target (host:port) with the opaque CGI opaque (none if empty), until
// the test ends.
func Start(t testing.TB, target, opaque string) *Redirector {
	t.Helper()
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	body := binary.BigEndian.AppendUint32(nil, uint32(p))
	body = append(body, host...)
	if opaque != "" {
		body = append(append(body, '?'), opaque...)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Redirector{Addr: ln.Addr().String()}
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(conn, body)
		}
	}()
	return r
}

func (r *Redirector) serve(conn net.Conn, redirect []byte) {
	defer conn.Close()
	if xrootd.ReadHandshake(conn) != nil {
		return
	}
	conn.Write(xrootd.AppendHandshakeResponse(nil, xrootd.ProtocolVersion, xrootd.LoadBalancer))
	for {
		f, err := xrootd.ReadRequestFrame(conn, 1<<20)
		if err != nil {
			return
		}
		var resp xrootd.ResponseFrame
		resp.StreamID = f.StreamID
		switch f.ID {
		case xrootd.ReqProtocol:
			resp.Body = (&xrootd.ProtocolResponse{Version: xrootd.ProtocolVersion, Flags: xrootd.FlagIsManager}).AppendTo(nil)
		case xrootd.ReqLogin:
			resp.Body = make([]byte, 16)
		default:
			r.Redirected.Add(1)
			resp.Status, resp.Body = xrootd.StatusRedirect, redirect
		}
		if _, err := conn.Write(resp.AppendTo(nil)); err != nil {
			return
		}
	}
}
