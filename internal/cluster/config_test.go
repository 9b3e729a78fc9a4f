package cluster

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ecstore/ecstore/internal/layout"
)

func TestParseConfig(t *testing.T) {
	def := layout.Geometry{K: 8, M: 2, ChunkSize: 1 << 20}
	tests := []struct {
		name   string
		text   string
		geo    layout.Geometry
		spares int
		fsync  bool
		quorum int
		nodes  []string
	}{
		{name: "empty", text: "", geo: def, spares: 2, fsync: true},
		{name: "comments and blanks", text: "# a comment\n\n   \n\t# indented comment\n", geo: def, spares: 2, fsync: true},
		{
			name: "all keys",
			text: "ec = 4+2\nchunk-size = 256KiB\nspares = 0\nfsync = false\nwrite-quorum = 5\nnodes = /a, /b ,/c,/d,/e,/f\n",
			geo:  layout.Geometry{K: 4, M: 2, ChunkSize: 256 << 10}, spares: 0, fsync: false, quorum: 5,
			nodes: []string{"/a", "/b", "/c", "/d", "/e", "/f"},
		},
		{name: "no spaces", text: "ec=10+4\nchunk-size=4194304", geo: layout.Geometry{K: 10, M: 4, ChunkSize: 4 << 20}, spares: 2, fsync: true},
		{name: "trailing comment", text: "ec = 2+1   # small\nspares = 1\t# one spare", geo: layout.Geometry{K: 2, M: 1, ChunkSize: 1 << 20}, spares: 1, fsync: true},
		{name: "crlf", text: "ec = 3+1\r\nfsync = 0\r\n", geo: layout.Geometry{K: 3, M: 1, ChunkSize: 1 << 20}, spares: 2, fsync: false},
		{name: "1+0", text: "ec = 1+0\nnodes = x", geo: layout.Geometry{K: 1, M: 0, ChunkSize: 1 << 20}, spares: 2, fsync: true, nodes: []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(strings.NewReader(tt.text), "test.conf")
			if err != nil {
				t.Fatal(err)
			}
			if g := c.Geometry(); g != tt.geo {
				t.Errorf("geometry %v, want %v", g, tt.geo)
			}
			if c.Spares() != tt.spares || c.Fsync() != tt.fsync || c.WriteQuorum() != tt.quorum {
				t.Errorf("spares %d fsync %v quorum %d, want %d %v %d", c.Spares(), c.Fsync(), c.WriteQuorum(), tt.spares, tt.fsync, tt.quorum)
			}
			if !slices.Equal(c.Nodes(), tt.nodes) {
				t.Errorf("nodes %q, want %q", c.Nodes(), tt.nodes)
			}
			// Format then parse gives the same settings.
			again, err := ParseConfig(strings.NewReader(string(c.Format("header\nline two"))), "again.conf")
			if err != nil {
				t.Fatalf("reparse: %v\n%s", err, c.Format(""))
			}
			if again.Geometry() != c.Geometry() || again.Spares() != c.Spares() || again.Fsync() != c.Fsync() ||
				again.WriteQuorum() != c.WriteQuorum() || !slices.Equal(again.Nodes(), c.Nodes()) {
				t.Errorf("reparse differs:\n%s", c.Format(""))
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want string // in the error message
	}{
		{"unknown key", "ec = 8+2\ncolour = blue\n", `test.conf:2: cluster: bad config: unknown key "colour"`},
		{"no equals", "# ok\n\nec 8+2\n", "test.conf:3:"},
		{"bad ec", "ec = 8-2", "test.conf:1:"},
		{"bad ec word", "ec = lots", "want K+M"},
		{"bad chunk size", "chunk-size = huge", "test.conf:1:"},
		{"zero chunk size", "chunk-size = 0", "chunk-size"},
		{"negative spares", "spares = -1", "spares"},
		{"bad fsync", "fsync = maybe", "fsync"},
		{"zero quorum", "write-quorum = 0", "write-quorum"},
		{"empty node", "nodes = /a,,/b", "empty entry"},
		{"empty nodes", "nodes =", "empty entry"},
		{"twice", "ec = 8+2\nspares = 1\nec = 4+2", "test.conf:3: cluster: bad config: ec is set twice"},
		{"empty key", "= 3", "unknown key"},
		{"geometry out of range", "ec = 0+2", "test.conf: cluster: bad config"},
		{"chunk too big", "chunk-size = 1GiB", "chunk size"},
		{"quorum above width", "ec = 4+2\nwrite-quorum = 7", "write-quorum 7 outside [4, 6]"},
		{"quorum below k", "write-quorum = 7", "write-quorum 7 outside [8, 10]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(strings.NewReader(tt.text), "test.conf")
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error %v is not ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestConfigSetFlags(t *testing.T) {
	var c Config
	if c.IsSet(KeyEC) || c.Geometry() != (layout.Geometry{K: 8, M: 2, ChunkSize: 1 << 20}) || !c.Fsync() || c.Spares() != 2 {
		t.Fatalf("zero Config does not give the defaults")
	}
	if err := c.Set("fsync", "false"); err != nil {
		t.Fatal(err)
	}
	if !c.IsSet(KeyFsync) || c.Fsync() {
		t.Errorf("fsync=false not applied")
	}
	if err := c.Set("nope", "1"); err == nil {
		t.Errorf("unknown key accepted")
	}
}

func TestSmallObjectSizeAndRetired(t *testing.T) {
	c, err := ParseConfig(strings.NewReader("small-object-size = 64KiB\nretired = 03, 07\nnodes = a, b\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if c.SmallObjectSize() != 64<<10 || !slices.Equal(c.Retired(), []string{"03", "07"}) {
		t.Fatalf("small %d retired %v", c.SmallObjectSize(), c.Retired())
	}
	if !strings.Contains(string(c.Format("")), "small-object-size = 64KiB\nretired = 03, 07\n") {
		t.Fatalf("format:\n%s", c.Format(""))
	}
	var off Config
	if err := off.Set(KeySmallSize, "0"); err != nil || off.SmallObjectSize() >= 0 {
		t.Fatalf("0 turns it off: %d %v", off.SmallObjectSize(), err)
	}
	for _, bad := range []string{"small-object-size = -1", "small-object-size = lots", "retired = x1"} {
		if _, err := ParseConfig(strings.NewReader(bad+"\n"), "t"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	var unset Config
	if unset.SmallObjectSize() != 0 || unset.Retired() != nil {
		t.Fatal("defaults")
	}
}
