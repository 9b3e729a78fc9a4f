package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/ecstore/ecstore/internal/erasure"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/xrdtpc"
	"github.com/ecstore/ecstore/internal/xrootd"
)

const cpHelp = `
Copies a file to or from a root:// server — an ecstore gateway, an
ecstore node or any XRootD server — as xrdcp does. SRC and DST are each a
local file, - (standard input or output), or a URL
root://host[:port]//path; at least one of them must be a URL (for the
embedded cluster use put and get). A root:// to root:// copy streams
through this process, unless --tpc: then the destination server pulls
the file from the source itself (XRootD's third-party copy, as
xrdcp --tpc; an ecstore gateway or an xrootd with ofs.tpc at each end).
--tpc only fails where an end cannot; --tpc first then streams.

A DST that exists is not replaced without -f (--force), as xrdcp does.
If DST is a local directory, or a root:// URL that ends with a slash or
names a directory, the file is copied into it under the source's name,
as xrdcp does.

A URL may name a redirector (an XRootD manager, xrootd + cmsd, as at
WLCG sites): its redirects to data servers are followed, up to 16 for
each request, as xrdcp follows them (so do ls, stat, rm, mkdir, rmdir,
mv and bench).

An upload that fails or is interrupted leaves nothing at DST. An
ecstore gateway stores a file only when its upload is complete; to any
other server (an ecstore node, xrootd) cp uploads under a hidden
temporary name (".NAME.ecstore-tmp.*") in DST's directory, renames it to
DST when it is complete and its checksum matches, and removes it when
the upload fails. Where the server offers persist-on-close (kXR_posc:
an ecstore node, xrootd), the temporary file of a cp that is killed is
removed by the server too: by an ecstore node at once, by xrootd after
its hold time (ofs.persist; 10 minutes by default). Elsewhere it stays
until removed. Without -f, DST is checked before the
upload and again just before the rename; a file created at DST in
between is replaced, as the rename cannot refuse to.

A source that turns out longer or shorter than it was when the copy
began (a file still being written) fails the copy before the file is
committed (an upload) or renamed into place (a download).

The adler32 of the bytes sent or received is compared with the
server's checksum of the file when the server can tell it (an ecstore
gateway answers from the object's metadata); a mismatch is an error and,
for downloads, leaves no file.

Examples:
  ecstore cp run1.root root://gw.example.org//atlas/run1.root
  ecstore cp root://gw.example.org//atlas/run1.root copy.root
  ecstore cp -f - root://127.0.0.1:1094//logs/today < today.log
  ecstore cp --tpc only root://site-a.org//store/f root://gw.example.org//atlas/f
`

// cmdCp is "ecstore cp [-f] SRC DST".
func cmdCp(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "cp", "cp [flags] SRC DST", cpHelp)
	force := fs.forceFlag("replace DST if it exists")
	noCksum := fs.Bool("no-cksum", false, "skip the end-to-end adler32 comparison")
	tpc := fs.String("tpc", "", "third-party copy between two root:// URLs, `MODE` only (fail where an end\ncannot) or first (then stream through this process)")
	pos, err := fs.parse(args, 2, 2)
	if err != nil {
		return err
	}
	if *tpc != "" && *tpc != "only" && *tpc != "first" {
		return usageErrorf("--tpc takes only or first, not %q", *tpc)
	}
	src, srcRemote, err := parseRootURL(pos[0])
	if err != nil {
		return err
	}
	dst, dstRemote, err := parseRootURL(pos[1])
	if err != nil {
		return err
	}
	if !srcRemote && !dstRemote {
		return usageErrorf("cp needs a root:// URL on at least one side; use put and get for the embedded cluster")
	}
	// The name a copy into a directory takes.
	base := filepath.Base(pos[0])
	switch {
	case srcRemote:
		base = path.Base(src.path)
	case pos[0] == "-":
		base = ""
	}

	if *tpc != "" {
		if !srcRemote || !dstRemote {
			return usageErrorf("--tpc copies between two root:// URLs")
		}
		err := thirdPartyCopy(ctx, src, dst, base, *force, *noCksum)
		if *tpc == "first" && errors.Is(err, xrdtpc.ErrNotSupported) {
			fmt.Fprintf(e.stderr, "cp: %v; copying through this process\n", err)
		} else {
			return err
		}
	}

	// Source.
	var (
		in    io.Reader
		size  int64 = -1
		srcCk string
	)
	if srcRemote {
		c, err := dialRoot(ctx, src)
		if err != nil {
			return err
		}
		defer c.Close()
		f, ck, err := openWithChecksum(ctx, c, src, !*noCksum)
		if err != nil {
			return err
		}
		defer f.Close(context.WithoutCancel(ctx))
		size = f.OpenInfo().Size
		in = &remoteReader{ctx: ctx, f: f}
		srcCk = ck
	} else if pos[0] == "-" {
		in = e.stdin
	} else {
		f, err := os.Open(pos[0])
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if st.IsDir() {
			// Before the destination is created: a plain data server
			// keeps the empty file of an abandoned upload.
			return fmt.Errorf("cp: %s is a directory (cp copies one file)", pos[0])
		}
		if st.Mode().IsRegular() {
			size = st.Size() // a pipe or device says 0
		}
		in = f
	}

	if !srcRemote {
		// A read of standard input (a terminal, an idle pipe) or a
		// FIFO must not hold off an interrupt.
		var stop func()
		in, stop = pump(ctx, in)
		defer stop()
	}

	// Destination, then the copy.
	sum := erasure.NewAdler32()
	bar := startProgress(e, "cp", size)
	counted := progressReader{r: in, p: bar}
	if dstRemote {
		var r io.Reader = counted
		if size >= 0 {
			// A source of another size than it said fails the upload
			// before the commit.
			r = &sizedReader{r: r, size: size, name: pos[0]}
		}
		_, err = uploadTo(ctx, dst, base, io.TeeReader(r, sum), *force, *noCksum)
	} else {
		_, err = downloadTo(pos[1], base, io.TeeReader(counted, sum), e.stdout, *force, func(n int64) error {
			if size >= 0 && n != size {
				return fmt.Errorf("cp: copied %d bytes, source has %d", n, size)
			}
			return checkSum(src, srcCk, sum.Sum32())
		})
	}
	bar.finish(err == nil)
	if err != nil {
		return err
	}
	if dstRemote && srcCk != "" {
		return checkSum(src, srcCk, sum.Sum32())
	}
	return nil
}

// openWithChecksum opens src for reading and, when withSum, asks for its
// adler32. The checksum is asked by path, so an overwrite between the open
// and the query would pair the old bytes with the new checksum: a stat
// after the query must show the version that was opened (same id, size
// and mtime), or the file is opened again. The checksum is "" when the
// server cannot tell it.
func openWithChecksum(ctx context.Context, c *xrootd.Client, src rootURL, withSum bool) (*xrootd.ClientFile, string, error) {
	// An object overwritten every few tens of milliseconds while the
	// machine is loaded (CI: -race, packages in parallel) beat 5 tries
	// spaced 20-80 ms apart; the jitter keeps the tries from falling in
	// step with a writer that overwrites at a steady pace.
	const attempts = 10
	for attempt := 1; ; attempt++ {
		f, err := c.Open(ctx, src.path, xrootd.OpenRead, 0)
		if err != nil {
			return nil, "", remoteErr(src, err)
		}
		if !withSum {
			return f, "", nil
		}
		_, ck, err := c.Checksum(ctx, src.path, "adler32")
		if err != nil {
			return f, "", nil
		}
		now, err := c.Stat(ctx, src.path)
		if err == nil && sameVersion(f.OpenInfo(), now) {
			return f, ck, nil
		}
		f.Close(context.WithoutCancel(ctx))
		if attempt == attempts {
			return nil, "", fmt.Errorf("cp: %s keeps changing while it is opened; try again, or copy with -no-cksum", src)
		}
		select {
		case <-time.After(time.Duration(attempt) * time.Duration(10+rand.IntN(20)) * time.Millisecond):
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
}

// sameVersion reports whether two stats describe the same file version.
func sameVersion(a, b xrootd.FileInfo) bool {
	return a.ID == b.ID && a.Size == b.Size && a.ModTime.Equal(b.ModTime)
}

// checkSum compares a server's adler32 (as text; servers may drop leading
// zeros) with the local one.
func checkSum(u rootURL, server string, local uint32) error {
	if server == "" {
		return nil
	}
	if strings.TrimLeft(server, "0") != strings.TrimLeft(erasure.FormatSum(local), "0") {
		return fmt.Errorf("cp: %s: adler32 mismatch: server says %s, copied bytes have %s", u, server, erasure.FormatSum(local))
	}
	return nil
}

// intoDir returns dst, or the file named base inside it when dst names a
// directory (ends with a slash, or is one on c's server). base "" (the
// source is standard input) cannot go into a directory.
func intoDir(ctx context.Context, c *xrootd.Client, dst rootURL, base string) (rootURL, error) {
	if !dst.dir {
		fi, err := c.Stat(ctx, dst.path)
		if err != nil || !fi.IsDir() {
			return dst, nil
		}
	}
	if base == "" {
		return dst, fmt.Errorf("cp: %s is a directory: name the file to create in it", dst)
	}
	dst.path, dst.dir = path.Join(dst.path, base), false
	return dst, nil
}

// uploadTo creates dst (or base inside it, when it is a directory) and
// streams r into it; without force, an existing dst is refused before any
// data is sent. An upload that fails leaves nothing at dst: an ecstore
// gateway stores a file only when it is closed, and any other server
// (an ecstore node, xrootd) gets the file under a temporary name,
// renamed to dst once complete and removed when the upload is abandoned
// (uploadViaTemp).
func uploadTo(ctx context.Context, dst rootURL, base string, r io.Reader, force, noCksum bool) (int64, error) {
	c, err := dialRoot(ctx, dst)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if dst, err = intoDir(ctx, c, dst, base); err != nil {
		return 0, err
	}
	if !isGateway(ctx, c) {
		return uploadViaTemp(ctx, c, dst, r, force, noCksum)
	}
	flags := xrootd.OpenNew | xrootd.OpenMkpath
	if force {
		flags = xrootd.OpenDelete | xrootd.OpenMkpath
	}
	f, err := c.Open(ctx, dst.path, flags, 0o644)
	if err != nil {
		var xe *xrootd.Error
		if errors.As(err, &xe) && xe.Code == xrootd.ErrItExists {
			return 0, errExists(dst)
		}
		return 0, remoteErr(dst, err)
	}
	sum := erasure.NewAdler32()
	n, err := io.CopyBuffer(&remoteWriter{ctx: ctx, f: f}, io.TeeReader(r, sum), make([]byte, copyBuffer))
	if err != nil {
		// Closing the connection without close abandons the upload.
		return n, uploadErr(dst, err)
	}
	if err := f.Close(ctx); err != nil {
		return n, remoteErr(dst, err)
	}
	if !noCksum {
		if err := checkUploadSum(ctx, c, dst, dst.path, sum.Sum32()); err != nil {
			return n, err
		}
	}
	return n, nil
}

// isGateway reports whether c's server is an ecstore gateway, which makes
// a file visible only when its upload is closed (as xrootd's kXR_posc,
// with nothing held afterwards). It is told by its kXR_query config
// answers: "version" is xrootd.ServerVersion, as for an ecstore node, and
// xrootd.CloseSyncsKey, which every ecstore node answers, is echoed.
func isGateway(ctx context.Context, c *xrootd.Client) bool {
	v, err := c.QueryConfig(ctx, "version", xrootd.CloseSyncsKey)
	return err == nil && len(v) == 2 && v[0] == xrootd.ServerVersion && v[1] == xrootd.CloseSyncsKey
}

// uploadViaTemp streams r into a temporary file next to dst (a hidden
// name, node.TempName's, as the node driver's uploads use) and renames it
// to dst when it is complete and its checksum matches; on any error, or
// when the upload is interrupted, the temporary file is removed, so
// nothing is left. Where the server supports persist-on-successful-close
// (xrootd), the temporary file is opened with kXR_posc, so that the
// server removes it also when cp is killed (after its ofs.persist hold
// time: 10 minutes by default); elsewhere (an ecstore node) such a file
// stays until removed (ecstore fsck and repair remove it from a node of
// a cluster).
//
// Without force, dst is checked before the upload and again before the
// rename, which replaces a file: one created at dst in between is
// replaced (XRootD's kXR_mv has no form that does not replace).
func uploadViaTemp(ctx context.Context, c *xrootd.Client, dst rootURL, r io.Reader, force, noCksum bool) (n int64, err error) {
	exists := func() error {
		if force {
			return nil
		}
		if _, err := c.Stat(ctx, dst.path); err == nil {
			return errExists(dst)
		}
		return nil
	}
	if err := exists(); err != nil {
		return 0, err
	}
	dir, name := path.Split(dst.path)
	if len(name) > 64 {
		// The marker and suffix must fit in the server's name limit.
		name = strings.ToValidUTF8(name[:64], "")
	}
	var sfx [8]byte
	_, _ = crand.Read(sfx[:]) // never fails (crypto/rand docs)
	tmp := path.Join(dir, node.TempName(name, hex.EncodeToString(sfx[:])))
	flags := xrootd.OpenNew | xrootd.OpenMkpath
	if c.Protocol().Flags&xrootd.FlagSupPOSC != 0 {
		flags |= xrootd.OpenPOSC
	}
	f, err := c.Open(ctx, tmp, flags, 0o644)
	if err != nil {
		return 0, remoteErr(dst, err)
	}
	placed := false
	defer func() {
		if placed {
			return
		}
		// Removed while it may still be open: closing it would make a
		// kXR_posc file persist first.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Rm(cctx, tmp)
	}()
	sum := erasure.NewAdler32()
	n, err = io.CopyBuffer(&remoteWriter{ctx: ctx, f: f}, io.TeeReader(r, sum), make([]byte, copyBuffer))
	if err != nil {
		return n, uploadErr(dst, err)
	}
	if err := f.Close(ctx); err != nil {
		return n, remoteErr(dst, err)
	}
	if !noCksum {
		if err := checkUploadSum(ctx, c, dst, tmp, sum.Sum32()); err != nil {
			return n, err
		}
	}
	if err := exists(); err != nil {
		return n, err
	}
	if err := c.Mv(ctx, tmp, dst.path); err != nil {
		return n, remoteErr(dst, err)
	}
	placed = true
	return n, nil
}

// errExists is cp's refusal to replace dst without -f.
func errExists(dst rootURL) error {
	return fmt.Errorf("cp: %s exists (use -f to replace it)", dst)
}

// uploadErr phrases the error that made cp abandon an upload to dst.
func uploadErr(dst rootURL, err error) error {
	if sc := (*sizeChangedError)(nil); errors.As(err, &sc) {
		return fmt.Errorf("cp: %w; the upload to %s was abandoned", err, dst)
	}
	return remoteErr(dst, err)
}

// checkUploadSum compares the server's adler32 of file (dst, or the
// temporary file of its upload) with the bytes sent, when the server can
// tell it.
func checkUploadSum(ctx context.Context, c *xrootd.Client, dst rootURL, file string, sent uint32) error {
	if _, v, err := c.Checksum(ctx, file, "adler32"); err == nil {
		return checkSum(dst, v, sent)
	}
	return nil
}

// downloadTo writes r to local (or stdout for "-"; base inside local when
// it is a directory): into a temporary file renamed into place only when
// the copy and verify (given the bytes copied) succeed, and without force
// only where no file is (placeFile), or straight into a device or FIFO
// (specialTarget).
func downloadTo(local, base string, r io.Reader, stdout io.Writer, force bool, verify func(n int64) error) (int64, error) {
	if local == "-" {
		n, err := io.CopyBuffer(stdout, r, make([]byte, copyBuffer))
		if err == nil {
			err = verify(n)
		}
		return n, err
	}
	if st, err := os.Stat(local); err == nil && st.IsDir() {
		local = filepath.Join(local, base)
	}
	if f, ok, err := specialTarget(local); ok {
		if err != nil {
			return 0, fmt.Errorf("cp: %w", err)
		}
		n, err := io.CopyBuffer(f, r, make([]byte, copyBuffer))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = verify(n)
		}
		return n, err
	}
	if st, err := os.Stat(local); err == nil {
		if st.IsDir() {
			return 0, fmt.Errorf("cp: %s is a directory", local)
		}
		if !force {
			return 0, fmt.Errorf("cp: %s exists (use -f to replace it)", local)
		}
	}
	dir, base := filepath.Split(local)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".ecstore-cp-*")
	if err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(tmp, r, make([]byte, copyBuffer))
	if err == nil {
		// CreateTemp made it 0600.
		err = tmp.Chmod(fileMode(local))
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = verify(n)
	}
	if err == nil {
		if err = placeFile(tmp.Name(), local, force); err != nil {
			err = fmt.Errorf("cp: %w", err)
		}
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return n, err
}

// thirdPartyCopy has dst's server pull src into dst, or into base inside
// dst when it is a directory (xrdtpc.Copy), then compares the two
// servers' adler32 of the file unless noCksum.
func thirdPartyCopy(ctx context.Context, src, dst rootURL, base string, force, noCksum bool) error {
	sc, err := dialRoot(ctx, src)
	if err != nil {
		return err
	}
	defer sc.Close()
	dc, err := dialRoot(ctx, dst)
	if err != nil {
		return err
	}
	defer dc.Close()
	if dst, err = intoDir(ctx, dc, dst, base); err != nil {
		return err
	}
	if !force {
		if _, err := dc.Stat(ctx, dst.path); err == nil {
			return fmt.Errorf("cp: %s exists (use -f to replace it)", dst)
		}
	}
	if err := xrdtpc.Copy(ctx, sc, dc, src.path, dst.path, xrdtpc.CopyOptions{Force: force, SrcTLS: src.tls}); err != nil {
		if errors.Is(err, xrdtpc.ErrNotSupported) {
			return err
		}
		return fmt.Errorf("cp: third-party copy %s to %s: %w", src, dst, err)
	}
	if !noCksum {
		_, a, aerr := sc.Checksum(ctx, src.path, "adler32")
		_, b, berr := dc.Checksum(ctx, dst.path, "adler32")
		if aerr == nil && berr == nil && strings.TrimLeft(a, "0") != strings.TrimLeft(b, "0") {
			return fmt.Errorf("cp: %s: adler32 mismatch: the source says %s, the destination %s", dst, a, b)
		}
	}
	return nil
}

// specialTarget opens local for writing when it exists and is neither a
// regular file nor a directory (a device such as /dev/null, a FIFO, a
// terminal, or a symbolic link to one such as /dev/stdout): such a file is
// written in place, never replaced by a renamed temporary file (which
// turned /dev/null into a regular file for everyone). ok is false for any
// other local.
func specialTarget(local string) (f *os.File, ok bool, err error) {
	fi, err := os.Stat(local)
	if err != nil || fi.Mode().IsRegular() || fi.IsDir() {
		return nil, false, nil
	}
	f, err = os.OpenFile(local, os.O_WRONLY, 0)
	return f, true, err
}
