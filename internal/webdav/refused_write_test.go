package webdav

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/ecstore/ecstore/internal/object"
)

// Regression: a write the archive format cannot hold (metadata past
// 1 MiB, an object too large for its chunk size) was answered 503, which
// clients retry. It is the request's fault: 400 and 413.
func TestRefusedWritesAreClientErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{object.ErrMetadataTooLarge, http.StatusBadRequest},
		{object.ErrTooLarge, http.StatusRequestEntityTooLarge},
	} {
		err := fmt.Errorf("object: write /b/k: %w: the reason", tc.err)
		if got := statusOf(err); got != tc.want {
			t.Errorf("%v: status %d, want %d", err, got, tc.want)
		}
	}
}
