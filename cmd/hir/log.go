package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/hir-ads/hir/eventlog"
)

// errLogCorrupt is returned by `hir log check` when the log has damage that
// the server refuses to start on.
var errLogCorrupt = errors.New("event log corrupt")

func runLog(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || (args[0] != "check" && args[0] != "repair") {
		fmt.Fprintln(e.stderr, "Usage: hir log check --data DIR\n       hir log repair --data DIR\n\n"+
			"check reads the event log of DIR and lists every damaged region (exit status 1 when the\n"+
			"server would refuse to start). repair rewrites the damaged segments, keeping every valid\n"+
			"batch, and reports what it dropped. Stop the server first: both lock the log.")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return flag.ErrHelp
		}
		return errUsage
	}
	sub := args[0]
	fs := newFlags(e, "log "+sub, "--data DIR")
	data := fs.String("data", "", "data directory whose event log (DIR/log) to "+sub+" (required)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if *data == "" {
		fs.Usage()
		return errUsage
	}
	dir := filepath.Join(*data, "log")
	if sub == "check" {
		rep, err := eventlog.Check(ctx, dir)
		if err != nil {
			return err
		}
		printLogReport(e.stdout, rep, false)
		if rep.Corrupt() {
			return fmt.Errorf("%w: stop the server and run `hir log repair --data %s`", errLogCorrupt, *data)
		}
		return nil
	}
	rep, err := eventlog.Repair(ctx, dir)
	if err != nil {
		return err
	}
	printLogReport(e.stdout, rep, true)
	return nil
}

// printLogReport writes what Check or Repair found, one line per damaged
// region.
func printLogReport(w io.Writer, rep eventlog.CheckReport, repaired bool) {
	for _, d := range rep.Damage {
		kind := "corrupt"
		if d.TornTail {
			kind = "torn tail"
		}
		lost := "lost batches unknown"
		if d.FirstLostSeq != 0 {
			lost = fmt.Sprintf("lost batches seq %d..%d (%d)", d.FirstLostSeq, d.LastLostSeq, d.LastLostSeq-d.FirstLostSeq+1)
		}
		verb := "found"
		if repaired {
			verb = "dropped"
		}
		fmt.Fprintf(w, "%s: %s %d bytes at offset %d (%s): %s; %s; %d valid batches after it in the segment\n",
			kind, verb, d.Bytes, d.Offset, d.File, d.Reason, lost, d.BatchesAfter)
	}
	state := "clean"
	switch {
	case repaired && len(rep.Damage) > 0:
		state = "repaired"
	case rep.Corrupt():
		state = "CORRUPT (the server refuses to start; run `hir log repair`)"
	case len(rep.Damage) > 0:
		state = "torn tail only (cut at the next start)"
	}
	fmt.Fprintf(w, "event log %s: %d segments, %d valid batches, %d events, last seq %d\n",
		state, rep.Segments, rep.Batches, rep.Events, rep.LastSeq)
}
