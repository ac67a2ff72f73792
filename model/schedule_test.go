package model

import (
	"testing"
)

// TestScheduleEndsOnNewest checks the block schedule: a run visits blocks
// in time order, shuffles only inside a block, and its last step draws from
// the newest block, however long the run and wherever it starts.
func TestScheduleEndsOnNewest(t *testing.T) {
	const pairs, blockSteps = 4, 2 // blocks of 8 events
	tests := []struct {
		name        string
		events      int
		start, runs int
		firstLo     int // first event of the block the run's first step draws from
	}{
		{"shorter than an epoch", 50, 0, 3, 50 - 2*8}, // 6 blocks of 8 (the 2 oldest events left out); 3 steps = 1.5 blocks
		{"exactly an epoch", 48, 0, 12, 0},            // 6 blocks, 12 steps
		{"longer than an epoch", 48, 0, 14, 40},       // wraps: starts in the newest block of the epoch before
		{"resumed", 50, 100, 4, 50 - 2*8},             // steps 100..103
		{"fewer events than a block", 7, 0, 2, 7 - 4}, // one block of 4
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &trainer{cfg: TrainConfig{Pairs: pairs, BlockSteps: blockSteps}}
			for i := range tc.events {
				tr.train = append(tr.train, event{ts: int64(1000 + i)})
			}
			end := tc.start + tc.runs
			tr.endOnNewest(end)
			_, epochSteps := tr.schedule()
			prevLo, wraps := -1, 0
			for s := tc.start; s < end; s++ {
				evs, asOf := tr.eventsForStep(s)
				if len(evs) != pairs {
					t.Fatalf("step %d: %d events, want %d", s, len(evs), pairs)
				}
				lo, hi := int(evs[0].ts-1000), int(evs[0].ts-1000)
				for _, e := range evs {
					lo, hi = min(lo, int(e.ts-1000)), max(hi, int(e.ts-1000))
				}
				blockLo := int(asOf + 1 - 1000) // asOf is just before the block
				if lo < blockLo || hi >= blockLo+blockSteps*pairs {
					t.Errorf("step %d: events %d..%d outside the block at %d", s, lo, hi, blockLo)
				}
				if s == tc.start && blockLo != tc.firstLo {
					t.Errorf("first step draws from the block at %d, want %d", blockLo, tc.firstLo)
				}
				if blockLo < prevLo {
					wraps++ // a new epoch starts from the oldest block again
				}
				prevLo = blockLo
			}
			if want := (tc.runs - 1) / epochSteps; wraps > want+1 {
				t.Errorf("blocks went back in time %d times in %d steps, want <= %d", wraps, tc.runs, want+1)
			}
			if _, asOf := tr.eventsForStep(end - 1); int(asOf+1-1000)+min(blockSteps*pairs, tc.events-tc.events%pairs) != tc.events {
				t.Errorf("last step's block starts at %d, does not end at the newest event %d", asOf+1-1000, tc.events-1)
			}
		})
	}
}
