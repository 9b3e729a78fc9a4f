package s3_test

import (
	"log/slog"
	"net/http"
	"os"

	"github.com/ecstore/ecstore/internal/object"
	"github.com/ecstore/ecstore/internal/s3"
)

// Serving S3 over a store, with the first key from the environment and
// virtual-host-style buckets under s3.example.org.
func ExampleNewHandler() {
	var store *object.Store // from object.New
	creds := map[string]string{}
	if ak := os.Getenv("ECSTORE_ACCESS_KEY"); ak != "" {
		creds[ak] = os.Getenv("ECSTORE_SECRET_KEY")
	}
	h := s3.NewHandler(store, s3.Options{
		Credentials: creds,
		Domain:      "s3.example.org",
		Logger:      slog.Default(),
	})
	srv := &http.Server{Addr: "127.0.0.1:9000", Handler: h}
	_ = srv // srv.ListenAndServe()
}
