package xrootd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errNoSendfile reports that a frame could not be sent with sendfile and
// nothing of it was written: the caller sends it another way.
var errNoSendfile = errors.New("xrootd: sendfile not possible here")

// sendFileFrames answers a kXR_read of remaining bytes at off with
// sendfile(2), one frame of at most ResponseChunk bytes at a time. It
// returns errNoSendfile, having sent nothing, when the first frame cannot
// go that way, and the caller then answers with ReadAt.
func (s *session) sendFileFrames(ctx context.Context, sid StreamID, name string, f FileSender, remaining int, off int64) error {
	sc, ok := s.conn.(syscall.Conn)
	if !ok || s.underTLS.Load() {
		return errNoSendfile
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return errNoSendfile
	}
	first := true
	for {
		want := min(remaining, s.limits.ResponseChunk)
		src, n, err := f.SendSource(ctx, off, want)
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", name, off, err)
		}
		if src == nil {
			if first {
				return errNoSendfile
			}
			return Errorf(ErrServerError, "read %s at %d: the file can no longer be sent", name, off)
		}
		if n < 0 || n > want {
			return Errorf(ErrServerError, "read %s at %d: %d bytes for a %d-byte request", name, off, n, want)
		}
		st := StatusOKSoFar
		if n < want || remaining == n {
			st = StatusOK
		}
		if err := s.sendFileFrame(raw, sid, st, src, off, n); err != nil {
			return sent(err)
		}
		if st == StatusOK {
			return nil
		}
		first = false
		remaining -= n
		off += int64(n)
	}
}

// sendFileFrame writes one response frame whose body is n bytes of src
// at off, under the write lock. The header goes with MSG_MORE so that it
// leaves in the same segment as the first bytes of the body. A file that
// turns out shorter than n leaves the frame unfinished: the connection is
// then closed, as after any failed write.
func (s *session) sendFileFrame(raw syscall.RawConn, sid StreamID, st Status, src *os.File, off int64, n int) error {
	hdr := AppendResponseHeader(make([]byte, 0, ResponseHeaderLen), sid, st, n)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.werr != nil {
		return s.werr
	}
	if s.underTLS.Load() {
		// The session moved to TLS after the read began (it cannot after
		// login; belt and braces): the bytes must not go out in the clear.
		return s.writeFailed(errors.New("xrootd: sendfile on a TLS session"))
	}
	s.conn.SetWriteDeadline(time.Now().Add(s.limits.WriteTimeout))
	file, err := src.SyscallConn()
	if err != nil {
		return s.writeFailed(err)
	}
	var werr error
	// Control keeps the file's descriptor open while the bytes go out.
	cerr := file.Control(func(in uintptr) {
		left := n
		err := raw.Write(func(out uintptr) bool {
			werr = sendHeaderAndFile(int(out), &hdr, int(in), &off, &left)
			return werr != unix.EAGAIN
		})
		if err != nil && werr == nil {
			werr = err
		}
	})
	if cerr != nil && werr == nil {
		werr = cerr
	}
	if werr != nil {
		return s.writeFailed(werr)
	}
	s.tx.Add(int64(ResponseHeaderLen + n))
	return nil
}

// sendHeaderAndFile writes what is left of *hdr, then what is left of the
// *left bytes of file in from *off, to the non-blocking socket out,
// advancing all three. It returns nil when everything is written,
// unix.EAGAIN when the socket is full, or the error that stopped it.
func sendHeaderAndFile(out int, hdr *[]byte, in int, off *int64, left *int) error {
	for len(*hdr) > 0 {
		flags := 0
		if *left > 0 {
			flags = unix.MSG_MORE
		}
		m, err := unix.SendmsgN(out, *hdr, nil, nil, flags)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		*hdr = (*hdr)[m:]
	}
	for *left > 0 {
		m, err := unix.Sendfile(out, in, off, *left)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if m == 0 {
			return fmt.Errorf("sendfile: %w: the file ended %d bytes short of the frame", io.ErrUnexpectedEOF, *left)
		}
		*left -= m
	}
	return nil
}
