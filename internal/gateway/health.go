package gateway

import (
	"fmt"
	"net/http"

	"github.com/ecstore/ecstore/internal/object"
)

// Readiness answers whether the gateway can take writes: 200 when at
// least the write quorum of nodes that take new archives answer (reads
// need fewer), 503 otherwise, with a line saying how many do. Load
// balancers and orchestrators poll it (GET /readyz on the metrics
// listener); /healthz only says that the process serves. Each poll asks
// every node for its space, at once, within the metadata timeout; nodes
// known to hang are not asked.
func Readiness(store *object.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up, writable := 0, 0
		states := store.NodeStates(r.Context(), false)
		for _, n := range states {
			if n.Up() {
				up++
				if !n.Retired {
					writable++
				}
			}
		}
		q := store.WriteQuorum()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if writable < q {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not ready: %d of %d nodes up, %d taking new archives; writes need %d\n", up, len(states), writable, q)
			return
		}
		fmt.Fprintf(w, "ready: %d of %d nodes up; writes need %d\n", up, len(states), q)
	})
}
