package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/ecstore/ecstore/internal/layout"
)

// ErrConfig reports a bad config file line or a bad setting.
var ErrConfig = errors.New("cluster: bad config")

// Config keys. They are also the names of the command-line flags that set
// the same things, so that a config file reads like a saved command line.
const (
	KeyEC          = "ec"
	KeyChunkSize   = "chunk-size"
	KeySpares      = "spares"
	KeyFsync       = "fsync"
	KeyWriteQuorum = "write-quorum"
	KeyRetired     = "retired"
	KeySmallSize   = "small-object-size"
	KeyNodes       = "nodes"
)

// keys lists the known keys in the order Format writes them.
var keys = []string{KeyEC, KeyChunkSize, KeySpares, KeyFsync, KeyWriteQuorum, KeySmallSize, KeyRetired, KeyNodes}

// Defaults of a new cluster.
const (
	DefaultK         = 8
	DefaultM         = 2
	DefaultChunkSize = 1 << 20
	DefaultSpares    = 2
)

// Config is a cluster's configuration: the content of a config file, or
// the same settings given as flags. The zero value holds no settings; Get
// methods return the defaults for keys that are not set.
//
// The file format is one "key = value" setting per line. Blank lines and
// lines whose first non-blank character is '#' are ignored; so is
// everything after a " #" on a line. Keys are those of the Key constants;
// an unknown key, a repeated key (other than access-key, token and http-token,
// which may repeat) or a bad value is an error naming the line. Example:
//
//	# ecstore cluster
//	ec = 8+2
//	chunk-size = 1MiB
//	spares = 2
//	fsync = true
//	nodes = /srv/disk0/ecstore, /srv/disk1/ecstore, ...
type Config struct {
	k, m        int
	chunkSize   int64
	spares      int
	fsync       bool
	writeQuorum int
	retired     []string // node ids that take no new archives
	smallSize   int64    // largest object stored as 1+M; -1 off
	nodes       []string
	set         map[string]bool
	access      access            // gateway access settings (access.go)
	gateway     map[string]string // gateway flags (gateway.go)
}

// Set parses value for key, as a config line or a flag would give it.
func (c *Config) Set(key, value string) error {
	value = strings.TrimSpace(value)
	switch key {
	case KeyEC:
		k, m, err := layout.ParseEC(value)
		if err != nil {
			return fmt.Errorf("%w: ec %q: want K+M such as 8+2", ErrConfig, value)
		}
		c.k, c.m = k, m
	case KeyChunkSize:
		n, err := layout.ParseSize(value)
		if err != nil || n <= 0 {
			return fmt.Errorf("%w: chunk-size %q: want a byte count such as 1MiB", ErrConfig, value)
		}
		c.chunkSize = n
	case KeySpares:
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: spares %q: want a count >= 0", ErrConfig, value)
		}
		c.spares = n
	case KeyFsync:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%w: fsync %q: want true or false", ErrConfig, value)
		}
		c.fsync = b
	case KeyWriteQuorum:
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return fmt.Errorf("%w: write-quorum %q: want a count >= 1", ErrConfig, value)
		}
		c.writeQuorum = n
	case KeySmallSize:
		n, err := layout.ParseSize(value)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: small-object-size %q: want a byte count such as 128KiB (0: off)", ErrConfig, value)
		}
		c.smallSize = n
		if n == 0 {
			c.smallSize = -1
		}
	case KeyRetired:
		c.retired = nil
		for _, id := range strings.Split(value, ",") {
			if id = strings.TrimSpace(id); id != "" {
				if _, err := strconv.Atoi(id); err != nil {
					return fmt.Errorf("%w: retired %q: want node ids such as 03, 07", ErrConfig, value)
				}
				c.retired = append(c.retired, id)
			}
		}
	case KeyNodes:
		nodes, err := SplitNodes(value)
		if err != nil {
			return err
		}
		c.nodes = nodes
	default:
		if c.setGateway(key, value) {
			break
		}
		handled, err := c.access.set(key, value)
		if err != nil {
			return err
		}
		if !handled {
			known := append(append(slices.Clone(keys), accessKeys...), GatewayKeys...)
			return fmt.Errorf("%w: unknown key %q (known: %s)", ErrConfig, key, strings.Join(known, ", "))
		}
	}
	if c.set == nil {
		c.set = map[string]bool{}
	}
	c.set[key] = true
	return nil
}

// SplitNodes splits a comma-separated node list, trimming blanks. Empty
// entries are an error.
func SplitNodes(list string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, fmt.Errorf("%w: nodes %q: empty entry", ErrConfig, list)
		}
		out = append(out, n)
	}
	return out, nil
}

// IsSet reports whether key was given.
func (c *Config) IsSet(key string) bool { return c.set[key] }

// Geometry returns the geometry of new objects (default 8+2, 1 MiB).
func (c *Config) Geometry() layout.Geometry {
	g := layout.Geometry{K: DefaultK, M: DefaultM, ChunkSize: DefaultChunkSize}
	if c.IsSet(KeyEC) {
		g.K, g.M = c.k, c.m
	}
	if c.IsSet(KeyChunkSize) {
		g.ChunkSize = c.chunkSize
	}
	return g
}

// Spares returns how many spare nodes a write may fall back on (default 2).
func (c *Config) Spares() int {
	if c.IsSet(KeySpares) {
		return c.spares
	}
	return DefaultSpares
}

// Fsync reports whether nodes make writes durable (default true).
func (c *Config) Fsync() bool { return !c.IsSet(KeyFsync) || c.fsync }

// WriteQuorum returns the configured write quorum, 0 for the engine's
// default (K+1).
func (c *Config) WriteQuorum() int { return c.writeQuorum }

// SmallObjectSize returns the engine's SmallObjectSize: 0 for its
// default, negative for off.
func (c *Config) SmallObjectSize() int64 { return c.smallSize }

// Retired returns the ids of the nodes that take no new archives (being
// drained before they leave the cluster).
func (c *Config) Retired() []string { return c.retired }

// Nodes returns the node list, nil if not set.
func (c *Config) Nodes() []string { return c.nodes }

// value formats the setting of key as Set accepts it.
func (c *Config) value(key string) string {
	switch key {
	case KeyEC:
		g := c.Geometry()
		return fmt.Sprintf("%d+%d", g.K, g.M)
	case KeyChunkSize:
		return layout.FormatSize(c.Geometry().ChunkSize)
	case KeySpares:
		return strconv.Itoa(c.Spares())
	case KeyFsync:
		return strconv.FormatBool(c.Fsync())
	case KeyWriteQuorum:
		return strconv.Itoa(c.writeQuorum)
	case KeyRetired:
		return strings.Join(c.retired, ", ")
	case KeySmallSize:
		return layout.FormatSize(max(c.smallSize, 0))
	case KeyNodes:
		return strings.Join(c.nodes, ", ")
	}
	return ""
}

// ParseConfig reads a config file; name is used in error messages
// ("name:line: ...").
func ParseConfig(r io.Reader, name string) (*Config, error) {
	c := &Config{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.Index(text, " #"); i >= 0 {
			text = text[:i]
		} else if i := strings.Index(text, "\t#"); i >= 0 {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
		if text == "" || text[0] == '#' {
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: %w: want key = value, got %q", name, line, ErrConfig, text)
		}
		key = strings.TrimSpace(key)
		if c.IsSet(key) && !repeatable(key) {
			return nil, fmt.Errorf("%s:%d: %w: %s is set twice", name, line, ErrConfig, key)
		}
		if err := c.Set(key, value); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// validate checks the settings together.
func (c *Config) validate() error {
	g := c.Geometry()
	if err := g.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if q := c.writeQuorum; q != 0 && (q < g.K || q > g.Width()) {
		return fmt.Errorf("%w: write-quorum %d outside [%d, %d] for %d+%d", ErrConfig, q, g.K, g.Width(), g.K, g.M)
	}
	return nil
}

// Format returns the config as file text, with a header comment. Keys
// that are not set are written with their defaults, except write-quorum,
// small-object-size, retired and nodes, which are left out. The gateway access keys (access.go) are
// never written: secrets stay in the file the operator wrote them to.
func (c *Config) Format(header string) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		if l != "" {
			fmt.Fprintf(&b, "# %s\n", l)
		}
	}
	for _, k := range keys {
		if (k == KeyWriteQuorum || k == KeySmallSize || k == KeyRetired || k == KeyNodes) && !c.IsSet(k) {
			continue
		}
		fmt.Fprintf(&b, "%s = %s\n", k, c.value(k))
	}
	return b.Bytes()
}
