// Command hir is the HIR ads-retrieval service and its tools: one binary with
// subcommands. Run `hir help` for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// env is what every subcommand gets: its output streams and a logger.
type env struct {
	stdout, stderr io.Writer
	logger         *slog.Logger
}

// command is one subcommand. run parses its own flags from args.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

func commands() []command {
	return []command{
		{"synth", "write a synthetic ads world (entities.jsonl, events.jsonl, truth.json)", runSynth},
		{"import", "import a data set into a data directory's event log", runImport},
		{"train", "train a model version on a data directory (DIR/models/vN)", runTrain},
		{"calibrate", "calibrate a trained version's new-ad scale and serving prior weight again", runCalibrate},
		{"serve", "serve the REST API over a data directory (retrieval, ingestion, background training)", runServe},
		{"demo", "synthesise a small ads world, train, serve it and print working curl calls", runDemo},
		{"bench", "load-test a running server with retrieve requests (queries/s, p50/p99)", runBench},
		{"ceiling", "serve the HTTP ceiling of POST /v1/retrieve (decode, canned answer) for hir bench", runCeiling},
		{"log", "check or repair a data directory's event log (hir log check|repair --data DIR)", runLog},
		{"eval", "evaluate our model and the baselines offline (chrono, replay, truth)", runEval},
		{"healthcheck", "exit 0 when a server's /readyz answers 200 (the container health check)", runHealthcheck},
		{"version", "print the version, commit, Go version and GoMLX backend", runVersion},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr,
		logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, e, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			if err != errUsage { // a bad flag value the flag package did not report
				fmt.Fprintf(stderr, "hir %s: %v\n", c.name, strings.TrimPrefix(err.Error(), errUsage.Error()+"\n"))
			}
			return 2
		}
		fmt.Fprintf(stderr, "hir %s: %v\n", c.name, err)
		return 1
	}
	fmt.Fprintf(stderr, "hir: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// errUsage reports bad flags. Alone, the flag package has already printed
// why; joined with another error, run prints that error.
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "hir: hierarchical interest retrieval for ads\n\nUsage: hir <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "  help        list the commands\n\nRun `hir <command> -h` for a command's flags.")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("hir "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: hir %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// required reports the first of the named flags of fs that is unset
// (empty), naming it with a pointer to the command's help, as errUsage.
func required(fs *flag.FlagSet, names ...string) error {
	for _, name := range names {
		if f := fs.Lookup(name); f != nil && f.Value.String() == "" {
			fmt.Fprintf(fs.Output(), "%s: missing required flag --%s (`%s -h` lists every flag)\n", fs.Name(), name, fs.Name())
			return errUsage
		}
	}
	return nil
}

// parse parses args, mapping flag errors to errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return errUsage
	}
	return nil
}
