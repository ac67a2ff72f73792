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
			"check reads the event log of DIR and lists every damaged region and every damaged tail the\n"+
			"server moved aside (exit status 1 for anything but a torn tail, an incomplete last write).\n"+
			"repair rewrites the damaged segments, keeping every valid batch, and reports what it\n"+
			"dropped. Stop the server first: both lock the log.")
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
	if err := required(fs, "data"); err != nil {
		return err
	}
	if err := requireLog(*data); err != nil {
		return err
	}
	dir := filepath.Join(*data, "log")
	if sub == "check" {
		rep, err := eventlog.Check(ctx, dir)
		if err != nil {
			return err
		}
		printLogReport(e.stdout, rep, false)
		switch {
		case rep.Refused():
			return fmt.Errorf("%w: stop the server and run `hir log repair --data %s`", errLogCorrupt, *data)
		case rep.Corrupt():
			return fmt.Errorf("%w: a damaged last record (see above); inspect it, then remove the moved-aside files", errLogCorrupt)
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
		switch {
		case d.TornTail:
			kind = "torn tail"
		case d.AtEnd:
			kind = "corrupt last record (moved aside at the next start)"
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
	for _, f := range rep.MovedAside {
		fmt.Fprintf(w, "moved aside: %s holds a damaged last record the server cut at a start; inspect it, then remove it\n", f)
	}
	state := "clean"
	switch {
	case repaired && len(rep.Damage) > 0:
		state = "repaired"
	case rep.Refused():
		state = "CORRUPT (the server refuses to start; run `hir log repair`)"
	case rep.Corrupt():
		state = "CORRUPT at its end (the server starts without the damaged record and keeps its bytes aside)"
	case len(rep.Damage) > 0:
		state = "torn tail only (cut at the next start)"
	}
	fmt.Fprintf(w, "event log %s: %d segments, %d valid batches, %d events, last seq %d\n",
		state, rep.Segments, rep.Batches, rep.Events, rep.LastSeq)
}
