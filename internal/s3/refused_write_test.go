package s3

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/ecstore/ecstore/internal/object"
)

// Regression: a write the archive format cannot hold (metadata past
// 1 MiB, an object too large for its chunk size) was answered as an
// outage, which clients retry. It is the request's fault: 400, with the
// engine's reason in the message.
func TestRefusedWritesAreClientErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want *Error
	}{
		{object.ErrMetadataTooLarge, ErrMetadataTooLarge},
		{object.ErrTooLarge, ErrEntityTooLarge},
	} {
		err := fmt.Errorf("object: write /b/k: %w: the reason", tc.err)
		got := toError(err)
		if got.Code != tc.want.Code || got.Status != http.StatusBadRequest {
			t.Errorf("%v: %s %d, want %s 400", err, got.Code, got.Status, tc.want.Code)
		}
		if got.Message != err.Error() {
			t.Errorf("%v: message %q", err, got.Message)
		}
	}
}
