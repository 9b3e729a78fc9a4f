package s3

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ecstore/ecstore/internal/object"
)

// Expiry of abandoned multipart uploads. A client that dies between
// CreateMultipartUpload and Complete (or Abort) leaves its parts behind,
// and nothing in the protocol ever removes them: S3 has a lifecycle rule
// (AbortIncompleteMultipartUpload) for that. ecstore applies such a rule
// to every bucket: ExpireUploads aborts the uploads initiated before a
// cutoff, removing their parts, and RunUploadExpiry does so periodically
// for the gateway. An aborted upload never made an object, so nothing
// visible changes; a client still uploading parts to it gets NoSuchUpload
// (and a part that lands meanwhile is removed again, see stillOpen).

// uploadTime returns the initiation time recorded in an upload id.
func uploadTime(id string) (time.Time, bool) {
	if !validUploadID(id) {
		return time.Time{}, false
	}
	b, _ := hex.DecodeString(id[:16])
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))), true
}

// ExpireUploads aborts every multipart upload, in every bucket, that was
// initiated before cutoff, and removes its parts. Directories in the
// uploads area that are not uploads (no valid upload id) go when their
// modification time is before cutoff. It returns how many were removed;
// failures do not stop it and are joined in the error.
func ExpireUploads(ctx context.Context, store *object.Store, cutoff time.Time) (int, error) {
	buckets, err := store.List(ctx, uploadsRoot)
	if err != nil {
		if missing(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("s3: expire uploads: %w", err)
	}
	n := 0
	var errs []error
	for _, b := range buckets {
		if !b.IsDir {
			continue
		}
		ups, err := store.List(ctx, uploadsRoot+"/"+b.Name)
		if err != nil {
			if !missing(err) {
				errs = append(errs, fmt.Errorf("s3: expire uploads of %s: %w", b.Name, err))
			}
			continue
		}
		for _, u := range ups {
			t, ok := uploadTime(u.Name)
			if !ok {
				t = u.MTime
			}
			if !u.IsDir || !t.Before(cutoff) {
				continue
			}
			if err := removeUpload(ctx, store, b.Name, u.Name, ""); err != nil {
				errs = append(errs, fmt.Errorf("s3: expire upload %s of %s: %w", u.Name, b.Name, err))
				continue
			}
			n++
		}
		if len(ups) == 0 {
			_ = store.Rmdir(ctx, uploadsRoot+"/"+b.Name)
		}
	}
	return n, errors.Join(errs...)
}

// ExpiryOptions configure RunUploadExpiry.
type ExpiryOptions struct {
	// Age is how long an upload may stay incomplete. It must be positive.
	Age time.Duration
	// Interval is the time between two passes. Default Age/4, clamped to
	// [1s, 1h].
	Interval time.Duration
	// Logger receives one Info record per pass that removed uploads and
	// one Warn record per failed pass. Default: discard.
	Logger *slog.Logger
}

// RunUploadExpiry runs ExpireUploads with the cutoff Age ago, at once and
// then every Interval, until ctx is done.
func RunUploadExpiry(ctx context.Context, store *object.Store, opts ExpiryOptions) {
	if opts.Age <= 0 {
		return
	}
	if opts.Interval <= 0 {
		opts.Interval = min(max(opts.Age/4, time.Second), time.Hour)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	for {
		n, err := ExpireUploads(ctx, store, time.Now().Add(-opts.Age))
		if n > 0 {
			opts.Logger.Info("s3: expired abandoned multipart uploads", "uploads", n, "age", opts.Age)
		}
		if err != nil && ctx.Err() == nil {
			opts.Logger.Warn("s3: expiring multipart uploads", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
