package xrdtpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/ecstore/ecstore/internal/xrootd"
)

// ErrNotSupported is the error of Copy when an end does not do
// third-party copies (its kXR_query config "tpc" is not a number above
// zero); nothing was written then.
var ErrNotSupported = errors.New("third-party copy not supported")

// CopyOptions configure Copy.
type CopyOptions struct {
	// Force replaces an existing destination (kXR_delete); else the
	// destination must not exist (kXR_new).
	Force bool
	// SrcTLS tells the destination to reach the source with roots://.
	SrcTLS bool
}

// Copy has the server of dst pull srcPath from the server of src into
// dstPath, as xrdcp --tpc only does: the client side of a third-party
// copy. src and dst are connections to the two servers, as the client
// reaches them: the destination is told the source's address as src
// has it, and the source the destination's host as dst has it. The
// destination stores the file at the close that ends a copy it pulled
// whole (a gateway; xrootd leaves what it got).
func Copy(ctx context.Context, src, dst *xrootd.Client, srcPath, dstPath string, o CopyOptions) error {
	for _, end := range []struct {
		c    *xrootd.Client
		name string
	}{{src, "source"}, {dst, "destination"}} {
		v, err := end.c.QueryConfig(ctx, "tpc")
		if err != nil {
			return fmt.Errorf("asking the %s whether it does third-party copies: %w", end.name, err)
		}
		if n, err := strconv.Atoi(strings.TrimSpace(first(v))); err != nil || n <= 0 {
			return fmt.Errorf("%w by the %s (%s)", ErrNotSupported, end.name, end.c.Addr())
		}
	}
	if !plainPath(srcPath) {
		return fmt.Errorf("third-party copy: source path %q cannot be sent as CGI", srcPath)
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	sf, err := src.Open(ctx, srcPath+"?tpc.stage=placement", xrootd.OpenRead, 0)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	size := sf.OpenInfo().Size
	sf.Close(ctx)

	spr := "root"
	if o.SrcTLS {
		spr = "roots"
	}
	flags := xrootd.OpenNew | xrootd.OpenUpdate | xrootd.OpenMkpath
	if o.Force {
		flags = xrootd.OpenDelete | xrootd.OpenUpdate | xrootd.OpenMkpath
	}
	cgi := fmt.Sprintf("?oss.asize=%d&tpc.key=%s&tpc.lfn=%s&tpc.spr=%s&tpc.src=%s&tpc.stage=copy&tpc.tpr=root",
		size, key, srcPath, spr, src.Addr())
	df, err := dst.Open(ctx, dstPath+cgi, flags, 0o644)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	// Any failure below: closing the destination ends its pull, and a
	// gateway then stores nothing.
	fail := func(err error) error {
		df.Close(context.WithoutCancel(ctx))
		return err
	}
	if err := df.Sync(ctx); err != nil { // starts the pull
		return fail(fmt.Errorf("destination: %w", err))
	}
	dstHost, _, err := net.SplitHostPort(dst.Addr())
	if err != nil {
		dstHost = dst.Addr()
	}
	// An address is written as xrootd writes its peers' ("[::ffff:a.b.c.d]"),
	// as xrdcp sends it: a real xrootd source compares it as a string
	// with the puller's host when the pull came before this registration.
	if a, ok := literalAddr(dstHost); ok {
		dstHost = hostOf(a)
	}
	reg, err := src.Open(ctx, srcPath+"?tpc.dst="+dstHost+"&tpc.key="+key+"&tpc.stage=copy", xrootd.OpenRead, 0)
	if err != nil {
		return fail(fmt.Errorf("source: %w", err))
	}
	syncErr := df.Sync(ctx) // waits for the pull's end
	reg.Close(ctx)
	if syncErr != nil {
		return fail(fmt.Errorf("destination: %w", syncErr))
	}
	if err := df.Close(ctx); err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	return nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// newKey returns a key as xrdcp makes them: 24 hexadecimal digits.
func newKey() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("third-party copy key: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
