package dataset_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hir-ads/hir/dataset"
)

// Import a MovieLens-100K directory (here a three-movie fixture) with a
// first validation pass into Discard.
func ExampleImport() {
	sum, err := dataset.Import(context.Background(), "movielens", "testdata/movielens", dataset.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sum.Entities, sum.Events, sum.Ratings, sum.EventsByType["click"])
	// Output: 25 12 5 2
}

// Generate a small synthetic world and read it back with the jsonl importer.
func ExampleSynth() {
	dir, err := os.MkdirTemp("", "synth")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	opts := dataset.SynthOptions{Users: 100, Ads: 200, Days: 7, Seed: 42}
	sum, err := dataset.Synth(context.Background(), opts, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	back, err := dataset.Import(context.Background(), "jsonl", dir, dataset.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	truth, err := dataset.ReadTruth(filepath.Join(dir, dataset.TruthFile))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.Events == sum.Events, len(truth.FineParent), sum.Options.Advertisers)
	// Output: true 512 4
}
