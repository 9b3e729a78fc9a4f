package xrdnode

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// delayConn is a client connection whose bytes, both ways, arrive delay
// after they were sent, as over a network with a round trip of twice
// that, without bounding its throughput: a write returns at once (as
// into a socket buffer) and a delivery goroutine sends it on when due;
// bytes read are handed over once due.
type delayConn struct {
	net.Conn
	delay time.Duration
	out   chan stamped
	in    chan stamped
	rest  []byte
	once  sync.Once
}

type stamped struct {
	b   []byte
	at  time.Time
	err error
}

func newDelayConn(c net.Conn, delay time.Duration) *delayConn {
	d := &delayConn{Conn: c, delay: delay, out: make(chan stamped, 4096), in: make(chan stamped, 4096)}
	go func() {
		for s := range d.out {
			time.Sleep(time.Until(s.at.Add(d.delay)))
			if _, err := c.Write(s.b); err != nil {
				return
			}
		}
	}()
	go func() {
		for {
			b := make([]byte, 64<<10)
			n, err := c.Read(b)
			d.in <- stamped{b: b[:n], at: time.Now(), err: err}
			if err != nil {
				close(d.in)
				return
			}
		}
	}()
	return d
}

func (d *delayConn) Write(p []byte) (int, error) {
	d.out <- stamped{b: append([]byte(nil), p...), at: time.Now()}
	return len(p), nil
}

func (d *delayConn) Read(p []byte) (int, error) {
	if len(d.rest) == 0 {
		s, ok := <-d.in
		if !ok {
			return 0, net.ErrClosed
		}
		time.Sleep(time.Until(s.at.Add(d.delay)))
		if len(s.b) == 0 {
			return 0, s.err
		}
		d.rest = s.b
	}
	n := copy(p, d.rest)
	d.rest = d.rest[n:]
	return n, nil
}

func (d *delayConn) Close() error {
	d.once.Do(func() { close(d.out) })
	return d.Conn.Close()
}

// BenchmarkWriteAhead measures one upload of 64 MiB in 1 MiB writes to
// an `ecstore node` over connections that delay every byte by a quarter
// or a whole millisecond each way (round trips of 0.5 and 2 ms, as
// between servers of a site), with the upload's writes sent ahead of
// their answers (ahead=3, the default) and one at a time (ahead=1, as
// before writes were sent ahead): MB/s is the figure to compare.
func BenchmarkWriteAhead(b *testing.B) {
	const size = 64 << 20
	s := startOurs(b, "", "127.0.0.1:0")
	data := benchData()
	for _, delay := range []time.Duration{250 * time.Microsecond, time.Millisecond} {
		for _, ahead := range []int{1, 3} {
			b.Run(fmt.Sprintf("rtt=%v/ahead=%d", 2*delay, ahead), func(b *testing.B) {
				defer func(old int) { writesAhead = old }(writesAhead)
				writesAhead = ahead
				var dialer net.Dialer
				n := newNode(b, "root://"+s.addr+"//wa", Options{Fsync: true, Client: &xrootd.DialOptions{
					Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
						c, err := dialer.DialContext(ctx, network, addr)
						if err != nil {
							return nil, err
						}
						return newDelayConn(c, delay), nil
					}}})
				ctx := context.Background()
				b.SetBytes(size)
				b.ResetTimer()
				for range b.N {
					u, err := n.Create(ctx, "/f")
					if err != nil {
						b.Fatal(err)
					}
					for off := 0; off < size; off += len(data) {
						if err := u.Write(ctx, data); err != nil {
							b.Fatal(err)
						}
					}
					if err := u.Commit(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
