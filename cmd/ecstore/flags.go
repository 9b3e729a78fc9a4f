package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ecstore/ecstore/internal/cluster"
	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// flagSet is a subcommand's flags with its help text.
type flagSet struct {
	*flag.FlagSet
	e        *env
	synopsis string // "put [flags] LOCAL /path"
	help     string // paragraphs after the synopsis
	cluster  *clusterFlags
	// aliases maps a flag's other name to the name the help lists it
	// under ("force" → "f").
	aliases map[string]string
}

// newFlagSet returns the flags of subcommand name. synopsis follows
// "usage: ecstore "; help explains the command.
func newFlagSet(e *env, name, synopsis, help string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), e: e, synopsis: synopsis, help: help}
	fs.SetOutput(io.Discard) // errors are reported by run; help by printHelp
	return fs
}

// forceFlag adds -f and its xrdcp spelling --force, one flag under two
// names.
func (fs *flagSet) forceFlag(usage string) *bool {
	force := fs.Bool("f", false, usage)
	fs.BoolVar(force, "force", false, usage)
	if fs.aliases == nil {
		fs.aliases = map[string]string{}
	}
	fs.aliases["force"] = "f"
	return force
}

// parse parses args, allowing flags after positional arguments ("ls /d
// -l"); "--" ends the flags. It prints the help and returns errHelp for
// -h/--help, and returns a usage error if the number of positional
// arguments is outside [min, max] (max < 0: no limit).
func (fs *flagSet) parse(args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.printHelp(fs.e.stdout)
				return nil, errHelp
			}
			return nil, usageErrorf("%s: %v", fs.Name(), err)
		}
		rest := fs.Args()
		consumed := args[:len(args)-len(rest)]
		if len(rest) == 0 || len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < min || max >= 0 && len(pos) > max {
		want := fmt.Sprintf("%d", min)
		switch {
		case max < 0:
			want = fmt.Sprintf("at least %d", min)
		case max == min:
		case min == 0:
			want = fmt.Sprintf("at most %d", max)
		default:
			want = fmt.Sprintf("%d to %d", min, max)
		}
		return nil, usageErrorf("%s: takes %s arguments, got %d\nusage: ecstore %s", fs.Name(), want, len(pos), fs.synopsis)
	}
	return pos, nil
}

// printHelp prints the synopsis, the help text and the flags.
func (fs *flagSet) printHelp(w io.Writer) {
	fmt.Fprintf(w, "usage: ecstore %s\n\n%s\n", fs.synopsis, strings.TrimSpace(fs.help))
	var own, common []*flag.Flag
	alias := map[string]string{} // "f" → "force"
	for a, name := range fs.aliases {
		alias[name] = a
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := fs.aliases[f.Name]; ok {
			return // listed with the flag it names
		}
		if fs.cluster == nil || !slices.Contains(clusterFlagNames, f.Name) {
			own = append(own, f)
		}
	})
	if fs.cluster != nil {
		for _, name := range clusterFlagNames {
			common = append(common, fs.Lookup(name))
		}
	}
	printFlags := func(title string, flags []*flag.Flag) {
		if len(flags) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s:\n", title)
		for _, f := range flags {
			arg, usage := flag.UnquoteUsage(f)
			if cf, ok := f.Value.(*configFlag); ok {
				arg = cf.arg
			}
			if isBool(f) {
				arg = ""
			}
			// One-letter flags read as the short options of cp and ls
			// (-f, -l); the flag package takes either form.
			head := "  --" + f.Name
			if a, ok := alias[f.Name]; ok {
				head = "  -" + f.Name + ", --" + a
			} else if len(f.Name) == 1 {
				head = "  -" + f.Name
			}
			if arg != "" {
				head += " " + arg
			}
			if def := helpDefault(f); def != "" && !strings.Contains(usage, "default") {
				usage += " (default " + def + ")"
			}
			fmt.Fprintf(w, "%s\n      %s\n", head, strings.ReplaceAll(usage, "\n", "\n      "))
		}
	}
	printFlags("flags", own)
	printFlags("cluster flags (all commands that use a cluster)", common)
}

// helpDefault is f's default as the help shows it, "" for a zero one
// (an empty string, 0, false): a usage text that does not say its
// default itself gets "(default X)", as flag.PrintDefaults adds it.
func helpDefault(f *flag.Flag) string {
	def := f.DefValue
	if _, ok := f.Value.(*configFlag); ok {
		return "" // their usage texts say their defaults
	}
	switch def {
	case "", "0", "false", "0s":
		return ""
	}
	if _, err := time.ParseDuration(def); err == nil {
		// 24h0m0s -> 24h, 5m0s -> 5m; 10s and 1m30s stay
		if strings.HasSuffix(def, "m0s") {
			def = strings.TrimSuffix(def, "0s")
		}
		if strings.HasSuffix(def, "h0m") {
			def = strings.TrimSuffix(def, "0m")
		}
	}
	return def
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// clusterFlags are the flags every cluster command takes.
type clusterFlags struct {
	data     string
	config   string
	nodes    string
	settings cluster.Config
	logLevel slog.Level
	// adopt lists local nodes whose empty, unmarked directory is to be
	// marked and used (cluster.Options.Adopt; repair --adopt).
	adopt []string
	// pageChecksumCache is cluster.Options.PageChecksumCache (serve's
	// --page-checksum-cache).
	pageChecksumCache int64
}

// clusterFlagNames are the cluster flags in the order the help lists them.
var clusterFlagNames = []string{"data", "config", "nodes", cluster.KeyEC, cluster.KeyChunkSize,
	cluster.KeySpares, cluster.KeyFsync, cluster.KeyWriteQuorum, cluster.KeySmallSize, cluster.KeyRetired, "log-level"}

// configFlag sets one cluster.Config key from a flag.
type configFlag struct {
	cfg  *cluster.Config
	key  string
	arg  string // argument name in the help
	def  string
	bool bool
}

func (f *configFlag) String() string {
	if f == nil || f.cfg == nil {
		return ""
	}
	return f.def
}
func (f *configFlag) Set(v string) error { return f.cfg.Set(f.key, v) }
func (f *configFlag) IsBoolFlag() bool   { return f.bool }

// addClusterFlags adds the cluster flags to fs.
func (fs *flagSet) addClusterFlags() *clusterFlags {
	cf := &clusterFlags{logLevel: slog.LevelWarn}
	fs.StringVar(&cf.data, "data", "", "directory `DIR` of the embedded cluster (default ./ecstore-data);\ncreated by the first put or mkdir")
	fs.StringVar(&cf.config, "config", "", "cluster config `FILE` listing the nodes (key = value lines; see README)")
	fs.StringVar(&cf.nodes, "nodes", "", "comma-separated `LIST` of node directories, instead of --data or --config")
	cfgFlag := func(key, arg, def, usage string, isBool bool) {
		fs.Var(&configFlag{cfg: &cf.settings, key: key, arg: arg, def: def, bool: isBool}, key, usage)
	}
	cfgFlag(cluster.KeyEC, "K+M", "8+2", "data and parity chunks per block of a new cluster (default 8+2;\nfixed when the cluster is created)", false)
	cfgFlag(cluster.KeyChunkSize, "SIZE", "1MiB", "chunk size of a new cluster (default 1MiB; fixed at creation)", false)
	cfgFlag(cluster.KeySpares, "N", "2", "spare nodes of a new cluster, used when a node fails during a write\n(default 2; fixed at creation)", false)
	cfgFlag(cluster.KeyFsync, "", "true", "make every write durable (file fsync, rename, directory fsync) before\nthe command returns (default true). --fsync=false is for scratch data:\na crash may lose or corrupt recently written objects", true)
	cfgFlag(cluster.KeyWriteQuorum, "N", "", "archives that must be durable for a write to succeed (default K+1)", false)
	cfgFlag(cluster.KeySmallSize, "SIZE", "128KiB", "objects announced at this size or less are stored as 1+M replicas\n(default 128KiB; 0: off)", false)
	cfgFlag(cluster.KeyRetired, "IDS", "", "comma-separated node ids that take no new archives (nodes being\ndrained before they leave; they are still read)", false)
	fs.TextVar(&cf.logLevel, "log-level", slog.LevelWarn, "log `LEVEL`: debug, info, warn or error (default warn)")
	fs.cluster = cf
	return cf
}

// open opens the cluster the flags name. create allows creating the
// embedded cluster (for commands that write).
func (cf *clusterFlags) open(e *env, create bool) (*cluster.Cluster, error) {
	return cf.openWith(e, create, object.Events{})
}

// openWith is open with engine event hooks (for the gateway's metrics).
func (cf *clusterFlags) openWith(e *env, create bool, events object.Events) (*cluster.Cluster, error) {
	opts := cluster.Options{DataDir: cf.data, ConfigFile: cf.config, Flags: cf.settings, Create: create,
		Logger: cf.logger(e), Events: events, Adopt: cf.adopt, PageChecksumCache: cf.pageChecksumCache}
	if cf.nodes != "" {
		nodes, err := cluster.SplitNodes(cf.nodes)
		if err != nil {
			return nil, usageErrorf("--nodes: %v", err)
		}
		opts.Nodes = nodes
	}
	c, err := cluster.Open(opts)
	if errors.Is(err, cluster.ErrUsage) {
		return nil, usageErrorf("%v", strings.TrimPrefix(err.Error(), "cluster: bad usage: "))
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// logger is the command's logger: text lines on stderr at --log-level.
func (cf *clusterFlags) logger(e *env) *slog.Logger {
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: cf.logLevel}))
}

// errHelp is returned after a command printed its help.
var errHelp = errors.New("help printed")

// usageError is an error in how a command was invoked (exit code 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errInterrupted is returned when a signal cancelled a command.
var errInterrupted = errors.New("interrupted")

// report prints err for command name and returns the exit code.
func report(w io.Writer, name string, err error) int {
	var ue *usageError
	switch {
	case err == nil || errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(w, "ecstore: %s\nRun 'ecstore help %s' for usage.\n", ue.msg, name)
		return exitUsage
	}
	fmt.Fprintf(w, "ecstore: %s\n", err)
	return exitError
}

// checkObjectPath validates a user-given object path.
func checkObjectPath(p string) error {
	if err := node.CheckPath(p); err != nil {
		return usageErrorf("invalid object path %q: object paths are absolute slash paths such as /dir/file,\nwithout '.', '..', empty elements or a trailing slash", p)
	}
	return nil
}

// dirPaths returns the directory paths of ls, mkdir and rmdir with one
// trailing slash dropped ("/atlas/" is /atlas), as the commands' root://
// URLs and xrdfs take them.
func dirPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if len(p) > 1 && strings.HasSuffix(p, "/") {
			p = p[:len(p)-1]
		}
		out[i] = p
	}
	return out
}

// describe turns an engine error about path into a message for people.
// Unrecoverable objects keep the engine's message (it names the block and
// the chunks available).
func describe(ctx context.Context, path string, err error) error {
	var ue *object.UnrecoverableError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return errInterrupted
	case errors.As(err, &ue):
		return ue
	case errors.Is(err, object.ErrNotExist):
		return fmt.Errorf("%s: no such object", path)
	case errors.Is(err, object.ErrIsDir):
		return fmt.Errorf("%s: is a directory", path)
	case errors.Is(err, object.ErrNotDir):
		return fmt.Errorf("%s: not a directory", path)
	case errors.Is(err, object.ErrNotEmpty):
		return fmt.Errorf("%s: directory not empty", path)
	case errors.Is(err, object.ErrExist):
		return fmt.Errorf("%s: already exists", path)
	}
	return err
}

// optionalRoot returns the subtree a command was given ("/" when none),
// validated.
func optionalRoot(pos []string) (string, error) {
	if len(pos) == 0 {
		return "/", nil
	}
	if err := checkObjectPath(pos[0]); err != nil {
		return "", err
	}
	return pos[0], nil
}

// debrisAgeOption maps the --debris-age flag to repair.CheckOptions,
// where 0 means the default: a flag of 0 (or less) means "every temporary
// file is debris".
func debrisAgeOption(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}
