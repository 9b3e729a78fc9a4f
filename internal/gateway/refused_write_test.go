package gateway

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/xrootd"
)

// Regression: a write the archive format cannot hold (metadata past
// 1 MiB, an object too large for its chunk size) passed through as
// kXR_ServerError, and quorum loss as kXR_IOError. It is the request's
// fault: kXR_ArgTooLong, with the engine's reason.
func TestRefusedWritesAreArgumentErrors(t *testing.T) {
	for _, sentinel := range []error{object.ErrMetadataTooLarge, object.ErrTooLarge} {
		err := fmt.Errorf("object: write /b/k: %w: the reason", sentinel)
		var xe *xrootd.Error
		if got := mapErr(err); !errors.As(got, &xe) || xe.Code != xrootd.ErrArgTooLong || xe.Message != err.Error() {
			t.Errorf("%v: mapped to %v, want kXR_ArgTooLong", err, got)
		}
	}
}
