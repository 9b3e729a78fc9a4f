package obs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ecstore/ecstore/internal/object"
)

// nodeCollector asks the nodes for their state at each scrape: whether
// they answer, and their space. A gauge set by the engine would show a
// node's state only as of its last use; a node that nobody writes to
// must still show as down.
type nodeCollector struct {
	states                func(ctx context.Context) []object.NodeState
	timeout               time.Duration
	up, capacity, free    *prometheus.Desc
	avoided, retiredNodes *prometheus.Desc
}

// scrapeTimeout bounds the nodes' answers to one scrape, below
// Prometheus's default scrape timeout (10 s). The engine gives each node
// its metadata timeout (2 s by default) and does not ask nodes known to
// hang.
const scrapeTimeout = 8 * time.Second

// WatchNodes registers per-node gauges read from states at every scrape:
// ec_node_up (1 when the node answered), ec_node_capacity_bytes and
// ec_node_free_bytes (for nodes that answered), ec_node_avoided (1 while
// reads avoid the node, by reason) and ec_node_retired. states is
// usually a Store's NodeStates without asking hung nodes.
func (m *Metrics) WatchNodes(states func(ctx context.Context) []object.NodeState) {
	m.reg.MustRegister(&nodeCollector{
		states:  states,
		timeout: scrapeTimeout,
		up: prometheus.NewDesc("ec_node_up",
			"Whether the storage node answered a space query at this scrape (0: down, refused or hung).", []string{"node"}, nil),
		capacity: prometheus.NewDesc("ec_node_capacity_bytes",
			"Size of the file system holding the node's data, for nodes that answered.", []string{"node"}, nil),
		free: prometheus.NewDesc("ec_node_free_bytes",
			"Free space on the file system holding the node's data, for nodes that answered.", []string{"node"}, nil),
		avoided: prometheus.NewDesc("ec_node_avoided",
			"1 while reads avoid the node, by reason (slow, hung, failing).", []string{"node", "reason"}, nil),
		retiredNodes: prometheus.NewDesc("ec_node_retired",
			"1 for a retired node (it takes no new archives).", []string{"node"}, nil),
	})
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.capacity, c.free, c.avoided, c.retiredNodes} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	for _, n := range c.states(ctx) {
		up, retired := 0.0, 0.0
		if n.Up() {
			up = 1
			ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(n.Space.Total), n.ID)
			ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(n.Space.Free), n.ID)
		}
		if n.Retired {
			retired = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, n.ID)
		ch <- prometheus.MustNewConstMetric(c.retiredNodes, prometheus.GaugeValue, retired, n.ID)
		if n.Suspect != "" {
			ch <- prometheus.MustNewConstMetric(c.avoided, prometheus.GaugeValue, 1, n.ID, n.Suspect)
		}
	}
}
