// Command ecstore is the erasure-coded object store: one binary whose
// subcommands store, read and manage objects in a cluster of storage
// nodes. Run "ecstore help" for the list of commands.
//
// Each subcommand lives in its own file (cmd_put.go, cmd_get.go, ...) as a
// function that parses its own flag.FlagSet and returns an error; run maps
// errors to messages and exit codes. Tests call run in-process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands in the order "ecstore help" lists them.
var commands []command

func init() {
	commands = []command{
		{"put", "store a local file (or standard input) as an object", cmdPut},
		{"get", "read an object into a local file (or standard output)", cmdGet},
		{"ls", "list a directory (-l: type, size, mtime, geometry)", cmdLs},
		{"stat", "describe an object: size, checksums, version, placement", cmdStat},
		{"rm", "remove objects", cmdRm},
		{"mv", "rename an object or a directory", cmdMv},
		{"mkdir", "create directories and their parents", cmdMkdir},
		{"rmdir", "remove empty directories", cmdRmdir},
		{"cp", "copy a file to or from a root:// server, as xrdcp does", cmdCp},
		{"bench", "load a root:// server; print ops/s, MB/s, latencies (exit 1 on errors)", cmdBench},
		{"fsck", "check every object's redundancy and find debris", cmdFsck},
		{"repair", "rebuild missing and corrupt archives; remove debris", cmdRepair},
		{"drain", "move every archive off a node so that it can be retired", cmdDrain},
		{"nodes", "show every node's state and space (exit 1 when one is down)", cmdNodes},
		{"adopt", "take the empty directories of new nodes or new disks into use", cmdAdopt},
		{"serve", "run the gateway: root:// (and /metrics) over the cluster", cmdServe},
		{"node", "run a vanilla storage node (plain-file root:// data server)", cmdNode},
		{"version", "print the version", cmdVersion},
		{"help", "show help for a command", cmdHelp},
	}
}

// interrupt is the cause of a command's context when a signal cut the
// command short. It is a context.Canceled, as the signal's cause of
// signal.NotifyContext is.
type interrupt struct{ sig syscall.Signal }

func (i interrupt) Error() string { return i.sig.String() + " signal received" }

// Is reports whether target is context.Canceled.
func (i interrupt) Is(target error) bool { return target == context.Canceled }

// env is what a command may touch of the outside world; tests replace it.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// isTerminal reports whether w is a terminal (for progress bars).
	isTerminal func(w io.Writer) bool
}

func main() {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		signal.Stop(sigs) // a second signal kills at once
		cancel(interrupt{s.(syscall.Signal)})
	}()
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, isTerminal: isTerminal}
	os.Exit(run(ctx, e, os.Args[1:]))
}

// Exit codes. A command cut short by a signal exits 128 plus the
// signal's number, as shells report a death by it: 130 for SIGINT
// (Ctrl-C), 143 for SIGTERM.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 128 + int(syscall.SIGINT)
)

// run runs the command line args (without the program name) and returns
// the exit code. Errors are printed to e.stderr as "ecstore: <message>".
func run(ctx context.Context, e *env, args []string) int {
	// Log lines and progress bars share stderr; the caller's env is left
	// as it is.
	shared := *e
	stderrOf(&shared)
	e = &shared
	if len(args) == 0 {
		topUsage(e.stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		topUsage(e.stdout)
		return exitOK
	}
	cmd := lookup(args[0])
	if cmd == nil {
		fmt.Fprintf(e.stderr, "ecstore: unknown command %q\nRun 'ecstore help' for the list of commands.\n", args[0])
		return exitUsage
	}
	err := cmd.run(ctx, e, args[1:])
	if err != nil && ctx.Err() != nil && !errors.Is(err, errInterrupted) {
		// Whatever failed once a signal cancelled the command failed
		// for that (a call cut short, a connection closed): say so.
		err = fmt.Errorf("%s: %w", cmd.name, errInterrupted)
	}
	code := report(e.stderr, cmd.name, err)
	if errors.Is(err, errInterrupted) {
		code = exitInterrupted
		var i interrupt
		if errors.As(context.Cause(ctx), &i) {
			code = 128 + int(i.sig)
		}
	}
	return code
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func topUsage(w io.Writer) {
	fmt.Fprint(w, `ecstore: an erasure-coded object store for scientific data.

usage: ecstore COMMAND [flags] [arguments]

commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Objects are named by absolute slash paths (/dir/file). The cluster is the
embedded one in ./ecstore-data unless --data DIR, --config FILE or
--nodes LIST names another; the first put or mkdir creates it (8+2 with
1 MiB chunks and 2 spare nodes unless --ec, --chunk-size, --spares say
otherwise).

Run 'ecstore help COMMAND' for a command's flags and arguments.
`)
}

const helpHelp = `
Prints the usage of COMMAND: its arguments, what it does and its flags,
as 'ecstore COMMAND --help' does. Without COMMAND, prints the list of
commands, as 'ecstore --help' does.
`

// cmdHelp is "ecstore help [COMMAND]". It parses its own flags as every
// command does, so "help --help" and "help help" print this usage.
func cmdHelp(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "help", "help [COMMAND]", helpHelp)
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		topUsage(e.stdout)
		return nil
	}
	cmd := lookup(pos[0])
	switch {
	case cmd == nil:
		return usageErrorf("unknown command %q (run 'ecstore help' for the list of commands)", pos[0])
	case cmd.name == "help":
		fs.printHelp(e.stdout)
		return nil
	}
	// Every command prints its help on stdout for --help.
	return cmd.run(ctx, e, []string{"--help"})
}
