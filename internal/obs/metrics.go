// Package obs binds ecstore's hooks (object.Events, gateway.Hooks) to a
// Prometheus registry and serves it. It is the only package, besides cmd/,
// that knows about Prometheus. Metric names follow
// ec_<subsystem>_<name>_<unit>; labels never hold object names or paths.
package obs

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ecstore/ecstore/internal/archive"
	"github.com/ecstore/ecstore/internal/gateway"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// Metrics holds the gateway's metrics and their registry.
type Metrics struct {
	reg            *prometheus.Registry
	requests       *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	bytes          *prometheus.CounterVec
	degradedReads  prometheus.Counter
	degradedWrites prometheus.Counter
	nodeErrors     *prometheus.CounterVec
	hedgedReads    prometheus.Counter
	slowNodes      *prometheus.CounterVec
	healed         *prometheus.CounterVec
	healedBytes    prometheus.Counter
	openTransfers  prometheus.Gauge
	pendingTemps   prometheus.Gauge
	stuckCalls     *prometheus.GaugeVec
	authFailures   *prometheus.CounterVec
	brokenUploads  *prometheus.CounterVec
	nodeOps        *prometheus.CounterVec
	nodeLatency    *prometheus.HistogramVec
	nodeBytes      *prometheus.CounterVec
	pageSums       *prometheus.CounterVec
	pageHits       prometheus.Counter // pageSums{result="hit"}
	pageMisses     prometheus.Counter // pageSums{result="miss"}
	damaged        prometheus.Counter

	// The series of node operations and gateway requests, by their
	// labels, looked up once: a vector's WithLabelValues checks and
	// hashes its labels at every call, some 5% of the gateway's CPU on
	// random reads, which count several per read.
	nodeSeries    sync.Map // nodeKey -> *nodeSeries
	requestSeries sync.Map // requestKey -> *requestSeries
	byteSeries    sync.Map // direction -> prometheus.Counter
}

type nodeKey struct{ id, op, status string }

// nodeSeries are the series one outcome of one operation on a node
// counts in.
type nodeSeries struct {
	ops           prometheus.Counter
	latency       prometheus.Observer
	read, written prometheus.Counter
}

type requestKey struct{ op, status string }

// requestSeries are the series one outcome of one gateway operation
// counts in.
type requestSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// New registers every metric in a fresh registry (with the Go runtime and
// process collectors).
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_gateway_requests_total", Help: "Requests handled by the gateway, by operation and outcome.",
		}, []string{"op", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ec_gateway_request_duration_seconds", Help: "Time to handle a request, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"op"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_gateway_bytes_total", Help: "Object bytes read and written by clients.",
		}, []string{"direction"}),
		degradedReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ec_object_degraded_reads_total", Help: "Blocks that needed parity to be read.",
		}),
		degradedWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ec_object_degraded_writes_total", Help: "Objects committed with fewer than K+M archives.",
		}),
		nodeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_node_errors_total", Help: "Failed or timed-out operations on storage nodes.",
		}, []string{"node", "op"}),
		hedgedReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ec_object_hedged_reads_total", Help: "Blocks whose chunks were not all back within the hedge delay, so that more were read.",
		}),
		slowNodes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_node_slow_total", Help: "Times a node became suspect of being slow (a chunk read past the hedge delay while others answered).",
		}, []string{"node"}),
		healed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_repair_healed_objects_total", Help: "Objects the background healer handled, by result.",
		}, []string{"result"}),
		healedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ec_repair_rebuilt_bytes_total", Help: "Chunk bytes rebuilt by the background healer.",
		}),
		openTransfers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ec_object_open_transfers", Help: "Object readers and writers open (all frontends and the healer).",
		}),
		pendingTemps: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ec_object_pending_temp_removals", Help: "Temporary archives of aborted writes whose node did not answer the abort, kept to be removed once it answers.",
		}),
		brokenUploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_gateway_broken_uploads_total", Help: "root:// uploads whose connection ended before their close, by outcome: committed (every byte announced was there), kept (for the client's write recovery to take up again), resumed (taken up), expired (not taken up within a minute), discarded.",
		}, []string{"outcome"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_gateway_auth_failures_total", Help: "Requests refused for their credentials, by frontend (root, s3, http) and reason (credentials: wrong ones; permission: valid ones that do not allow it; anonymous: none, over root://).",
		}, []string{"frontend", "reason"}),
		stuckCalls: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ec_node_stuck_calls", Help: "Calls to a local node's file system left running after their deadline (the file system does not answer), by node.",
		}, []string{"node"}),
		nodeOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_node_requests_total", Help: "Operations on storage nodes, by node, operation and outcome (ok, not_found: the node does not have the path, as most lookups of an object find on most nodes, error): requests to a remote node's data server (op is the XRootD request: open, read, write, sync, close, mv, fattr, ...), calls into a local node directory's file system (op is the call: open, read, create, write, finish, commit, remove, ...).",
		}, []string{"node", "op", "status"}),
		nodeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ec_node_request_duration_seconds", Help: "Time an operation on a storage node took, by node and operation (see ec_node_requests_total).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, []string{"node", "op"}),
		nodeBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_node_bytes_total", Help: "Archive bytes read from and written to storage nodes, by node and direction.",
		}, []string{"node", "direction"}),
		damaged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ec_object_damaged_archives_total", Help: "Checksum failures that reads found in archives, one per chunk, page or page-checksum entry read (a chunk's CRC-32 or local header, a page's CRC-32C, a page checksum entry's CRC-32); the healer rebuilds those archives.",
		}),
		pageSums: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ec_object_page_checksum_lookups_total", Help: "Random reads of a chunk's pages, by whether their page checksums were cached (hit) or read from the node (miss).",
		}, []string{"result"}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.bytes, m.degradedReads, m.degradedWrites, m.nodeErrors, m.hedgedReads, m.slowNodes, m.healed, m.healedBytes, m.openTransfers, m.pendingTemps, m.stuckCalls, m.authFailures, m.brokenUploads,
		m.nodeOps, m.nodeLatency, m.nodeBytes, m.pageSums, m.damaged,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.pageHits, m.pageMisses = m.pageSums.WithLabelValues("hit"), m.pageSums.WithLabelValues("miss")
	return m
}

// Events returns engine hooks that count degraded and hedged reads,
// degraded writes, node errors and slow nodes, and follow the open
// transfers.
func (m *Metrics) Events() object.Events {
	return object.Events{
		DegradedRead:        func(string, int64, []int) { m.degradedReads.Inc() },
		DegradedWrite:       func(string, []int) { m.degradedWrites.Inc() },
		NodeError:           func(id, op string, _ error) { m.nodeErrors.WithLabelValues(id, op).Inc() },
		HedgedRead:          func(string, int64) { m.hedgedReads.Inc() },
		NodeSlow:            func(id string) { m.slowNodes.WithLabelValues(id).Inc() },
		Transfers:           func(open int) { m.openTransfers.Set(float64(open)) },
		PendingTempRemovals: func(n int) { m.pendingTemps.Set(float64(n)) },
		NodeStuckCalls:      func(id string, n int) { m.stuckCalls.WithLabelValues(id).Set(float64(n)) },
		NodeOperation:       m.nodeOperation,
		PageChecksums:       m.pageChecksums,
		DamagedArchive:      func(string, archive.Version, int, int64) { m.damaged.Inc() },
	}
}

// pageChecksums counts a lookup of page checksums.
func (m *Metrics) pageChecksums(hit bool) {
	if hit {
		m.pageHits.Inc()
	} else {
		m.pageMisses.Inc()
	}
}

// nodeOperation counts one operation on a node, its time and its bytes.
func (m *Metrics) nodeOperation(id string, op node.Operation) {
	status := "ok"
	switch {
	case op.Err == nil:
	case errors.Is(op.Err, node.ErrNotExist):
		status = "not_found"
	default:
		status = "error"
	}
	k := nodeKey{id, op.Name, status}
	v, ok := m.nodeSeries.Load(k)
	if !ok {
		v, _ = m.nodeSeries.LoadOrStore(k, &nodeSeries{
			ops:     m.nodeOps.WithLabelValues(id, op.Name, status),
			latency: m.nodeLatency.WithLabelValues(id, op.Name),
			read:    m.nodeBytes.WithLabelValues(id, "read"),
			written: m.nodeBytes.WithLabelValues(id, "write"),
		})
	}
	ns := v.(*nodeSeries)
	ns.ops.Inc()
	ns.latency.Observe(op.Duration.Seconds())
	if op.Read > 0 {
		ns.read.Add(float64(op.Read))
	}
	if op.Written > 0 {
		ns.written.Add(float64(op.Written))
	}
}

// request counts one gateway request and its time.
func (m *Metrics) request(op string, took time.Duration, err error) {
	status := "ok"
	if err != nil {
		status = "error"
	}
	k := requestKey{op, status}
	v, ok := m.requestSeries.Load(k)
	if !ok {
		v, _ = m.requestSeries.LoadOrStore(k, &requestSeries{
			requests: m.requests.WithLabelValues(op, status),
			latency:  m.latency.WithLabelValues(op),
		})
	}
	rs := v.(*requestSeries)
	rs.requests.Inc()
	rs.latency.Observe(took.Seconds())
}

// clientBytes counts object bytes read or written by clients.
func (m *Metrics) clientBytes(direction string, n int) {
	v, ok := m.byteSeries.Load(direction)
	if !ok {
		v, _ = m.byteSeries.LoadOrStore(direction, m.bytes.WithLabelValues(direction))
	}
	v.(prometheus.Counter).Add(float64(n))
}

// GatewayHooks returns frontend hooks that count requests, latencies and
// bytes.
func (m *Metrics) GatewayHooks() gateway.Hooks {
	return gateway.Hooks{
		Request:      m.request,
		Bytes:        m.clientBytes,
		AuthFailure:  func(frontend, reason string) { m.authFailures.WithLabelValues(frontend, reason).Inc() },
		BrokenUpload: func(outcome string) { m.brokenUploads.WithLabelValues(outcome).Inc() },
	}
}

// Healed counts one object handled by the background healer (a
// repair.HealerOptions.Healed hook).
func (m *Metrics) Healed(_ string, bytes int64, ok bool) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.healed.WithLabelValues(result).Inc()
	m.healedBytes.Add(float64(bytes))
}

// WatchHealer exports the background healer's queue at every scrape:
// queued, the objects waiting to be healed (those waiting to be tried
// again included), and retrying, those whose last heal failed (a node
// they need still down, say): the healer tries them again for a day,
// then leaves them to a repair.
func (m *Metrics) WatchHealer(queued, retrying func() int, dropped func() int64) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ec_repair_dropped_reports_total", Help: "Reports of degraded objects that the background healer did not queue, its queue being full: they wait for a full repair (ecstore repair, or --heal-interval).",
		}, func() float64 { return float64(dropped()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ec_repair_queued_objects", Help: "Objects waiting for the background healer, including those waiting to be tried again.",
		}, func() float64 { return float64(queued()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ec_repair_retrying_objects", Help: "Objects whose last heal failed, which the background healer tries again for a day before leaving them to a repair.",
		}, func() float64 { return float64(retrying()) }),
	)
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
