package serving

import (
	"context"
	"testing"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/retrieval"
)

// TestSwapCatchesUp checks that a model swap loses no update: what is
// ingested while a training round runs, after its generation was built, is
// in the generation it publishes (the new ad in the index with its clicks
// in its prior, the new user's events read by their retrieval).
func TestSwapCatchesUp(t *testing.T) {
	env := newEnv(t, Options{})
	ctx := context.Background()
	env.ingest(newWorld(16, 24, 8, 4))
	job := retrieval.NewTrainJob(env.srv.Store(), retrieval.JobOptions{DataDir: env.dir, Train: tinyTrain(),
		Build: retrieval.BuildOptions{Quantizer: tinyQuantizer()}})
	const day = 24 * 3600 * 1000
	late := worldT0 + 40*day
	during := func(ctx context.Context, prev *retrieval.Served) (*retrieval.Served, float64, error) {
		next, loss, err := job(ctx, prev)
		if err != nil {
			return nil, 0, err
		}
		// Ingested after the build, before the publication.
		text := "late trail running shoes"
		w := &world{entities: []api.Entity{{Type: api.Ad, Id: "late-ad", Text: &text}}}
		w.events = append(w.events, apiEvent("late-s", api.Ad, "late-ad", api.Campaign, "camp0", api.InCampaign, late))
		for i, u := range []string{"late-u1", "late-u2", "late-u3"} {
			w.events = append(w.events,
				apiEvent("late-c"+u, api.User, u, api.Ad, "late-ad", api.Click, late+int64(i)),
				apiEvent("late-d"+u, api.User, u, api.Ad, "ad0", api.Click, late+int64(10+i)))
		}
		env.ingest(w)
		return next, loss, nil
	}
	tr, err := env.srv.AttachTrainer(TrainerOptions{Job: during})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	cur := env.srv.Served()
	ad, ok := env.srv.Store().Lookup(graph.Ref{Type: graph.NodeAd, ID: "late-ad"})
	if !ok {
		t.Fatal("late ad not in the store")
	}
	st, ok := cur.Ad(ad.Idx)
	if !ok {
		t.Fatalf("the ad ingested during the round is not in the published index")
	}
	if st.Prior <= 0 {
		t.Errorf("the published prior of the ad clicked during the round = %v, want > 0", st.Prior)
	}
	// The user's clicks during the round are read by their retrieval: their
	// clicked ads are excluded as seen, and co-engagement lifts what others
	// clicked after the same ad.
	res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &api.Ref{Type: api.User, Id: "late-u1"},
		K: ptr(24), Explain: ptr(true)})
	if err != nil || res.JSON200 == nil {
		t.Fatalf("retrieve: %v %s", err, res.Body)
	}
	for _, c := range res.JSON200.Candidates {
		if c.Id == "late-ad" || c.Id == "ad0" {
			t.Errorf("candidate %s was clicked during the round: not excluded as seen", c.Id)
		}
	}
	res, err = env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &api.Ref{Type: api.User, Id: "late-u1"},
		K: ptr(30), ExcludeSeen: ptr(false), Explain: ptr(true), PriorWeight: ptr(float32(0))})
	if err != nil || res.JSON200 == nil {
		t.Fatalf("retrieve: %v %s", err, res.Body)
	}
	lifted := false
	for _, c := range res.JSON200.Candidates {
		if (c.Id == "ad0" || c.Id == "late-ad") && c.Parts != nil && c.Parts.Coengagement > 0 {
			lifted = true
		}
	}
	if !lifted {
		t.Errorf("co-engagement counted during the round lifts nothing: %+v", res.JSON200.Candidates)
	}
}
