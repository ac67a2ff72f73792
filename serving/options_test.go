package serving

import (
	"errors"
	"testing"

	"github.com/hir-ads/hir/rank"
	"github.com/hir-ads/hir/retrieval"
)

// TestRetrievalOptionsValidated checks that New refuses ranking settings
// out of range (rank's Validate) with ErrBadOptions.
func TestRetrievalOptionsValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*retrieval.Options)
	}{
		{"co-engagement weight above the limit", func(o *retrieval.Options) { o.Weights.CoEngagement = rank.MaxCoEngageWeight + 1 }},
		{"negative prior weight", func(o *retrieval.Options) { o.Weights.Prior = -1 }},
		{"negative fresh rank", func(o *retrieval.Options) { o.Rank.Prior.FreshRank = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro := defaultRetrieval()
			tc.edit(&ro)
			dir := t.TempDir()
			log, store, _, err := OpenStore(t.Context(), eventlogOptions(dir), graphOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			if _, err := New(Options{Retrieval: ro}, log, store); !errors.Is(err, ErrBadOptions) {
				t.Errorf("New = %v, want ErrBadOptions", err)
			}
		})
	}
}
