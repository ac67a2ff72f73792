package serving

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/rank"
	"github.com/hir-ads/hir/retrieval"
)

// waitModel polls GET /v1/model until the served version differs from old.
func waitModel(t *testing.T, env *testEnv, old string, tr *Trainer) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		res, err := env.client.GetModelWithResponse(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if m := res.JSON200; m != nil && m.Ready && m.Version != nil && *m.Version != old {
			return *m.Version
		}
		if tr.Rounds() > 0 && !tr.Running() && tr.LastErr() != nil {
			t.Fatalf("training failed: %v", tr.LastErr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no model other than %q within the deadline", old)
	return ""
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model twice")
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	env := newEnv(t, Options{TracerProvider: tp})
	ctx := context.Background()
	w := newWorld(24, 40, 12, 3)
	env.ingest(w)

	tr, err := env.srv.AttachTrainer(TrainerOptions{Job: retrieval.NewTrainJob(env.srv.Store(), retrieval.JobOptions{
		DataDir: env.dir, Train: tinyTrain(), Tolerance: 1, // never reject here; see the regression check below
		Build: retrieval.BuildOptions{Quantizer: tinyQuantizer()},
	})})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var runWG sync.WaitGroup
	runWG.Go(func() {
		if err := tr.Run(runCtx); err != nil {
			t.Errorf("trainer Run: %v", err)
		}
	})
	defer func() { stop(); runWG.Wait() }()

	// Train: 202, then 409 while it runs.
	first, err := env.client.TrainModelWithResponse(ctx)
	if err != nil || first.StatusCode() != http.StatusAccepted || first.JSON202 == nil || !first.JSON202.Accepted {
		t.Fatalf("train: %v %d %s", err, first.StatusCode(), first.Body)
	}
	second, err := env.client.TrainModelWithResponse(ctx)
	if err != nil || second.StatusCode() != http.StatusConflict || second.ApplicationproblemJSON409 == nil {
		t.Fatalf("second train: %v %d %s, want 409", err, second.StatusCode(), second.Body)
	}
	v1 := waitModel(t, env, "", tr)
	if v1 != "v1" {
		t.Errorf("first version = %q, want v1", v1)
	}
	for _, f := range []string{retrieval.FileEmbeddings, retrieval.FileIndex} { // the round persisted its snapshot
		if _, err := os.Stat(filepath.Join(env.dir, "models", v1, f)); err != nil {
			t.Errorf("training round did not persist %s: %v", f, err)
		}
	}
	if res, err := env.client.ReadyzWithResponse(ctx); err != nil || res.JSON200 == nil {
		t.Errorf("readyz after training: %v %d", err, res.StatusCode())
	}
	m, err := env.client.GetModelWithResponse(ctx)
	if err != nil || m.JSON200 == nil || m.JSON200.IndexSize == nil || *m.JSON200.IndexSize != 40 ||
		m.JSON200.Metrics == nil || (*m.JSON200.Metrics)["train_loss"] == 0 {
		t.Fatalf("model status = %+v (%v)", m.JSON200, err)
	}

	user := api.Ref{Type: api.User, Id: "u0"}
	seen := map[string]bool{}
	for _, ev := range w.events {
		if ev.Src == user && ev.Dst.Type == api.Ad {
			seen[ev.Dst.Id] = true
		}
	}

	t.Run("retrieve known user", func(t *testing.T) {
		res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &user, K: ptr(8), Explain: ptr(true)})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("retrieve: %v %d %s", err, res.StatusCode(), res.Body)
		}
		r := res.JSON200
		if r.ModelVersion != v1 || len(r.Candidates) != 8 || r.FreshUser == nil || *r.FreshUser {
			t.Fatalf("response = %+v, want 8 candidates of %s for a known user", r, v1)
		}
		explained := 0
		for i, c := range r.Candidates {
			if seen[c.Id] {
				t.Errorf("candidate %s was seen by the user (exclude_seen defaults to true)", c.Id)
			}
			if i > 0 && c.Score > r.Candidates[i-1].Score {
				t.Errorf("candidates not sorted by score: %v", r.Candidates)
			}
			if c.Tokens != nil && len(*c.Tokens) > 0 {
				explained++
				for _, tk := range *c.Tokens {
					if !strings.HasPrefix(tk.Token, strings.Split(tk.Token, ".")[0]+".") || tk.Weight == nil {
						t.Errorf("token %+v is not level.code with a weight", tk)
					}
				}
			}
		}
		if explained == 0 {
			t.Errorf("no candidate explained by matched tokens: %s", res.Body)
		}
		// exclude_seen false lets seen ads back in (k = all ads).
		all, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &user, K: ptr(1000), ExcludeSeen: ptr(false)})
		if err != nil || all.JSON200 == nil || len(all.JSON200.Candidates) != 40 {
			t.Fatalf("retrieve all: %v %s", err, all.Body)
		}
	})

	t.Run("filter", func(t *testing.T) {
		camp := "camp1"
		active := "active"
		f := api.Filter{And: &[]api.Filter{{Attr: ptr("campaign"), Eq: &camp}, {Attr: ptr("status"), Eq: &active}}}
		res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &user, K: ptr(100), Filter: &f, ExcludeSeen: ptr(false)})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("retrieve: %v %s", err, res.Body)
		}
		want := 0
		for _, e := range w.entities {
			if w.adTopic[e.Id] == 1 && (*e.Attrs)["status"] == "active" {
				want++
			}
		}
		if len(res.JSON200.Candidates) != want {
			t.Errorf("filtered candidates = %d, want %d", len(res.JSON200.Candidates), want)
		}
		for _, c := range res.JSON200.Candidates {
			if w.adTopic[c.Id] != 1 {
				t.Errorf("candidate %s is not in camp1", c.Id)
			}
		}
	})

	t.Run("keywords", func(t *testing.T) {
		res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{Query: ptr("espresso latte"), K: ptr(50)})
		if err != nil || res.JSON200 == nil || len(res.JSON200.Candidates) == 0 {
			t.Fatalf("keyword retrieve: %v %s", err, res.Body)
		}
		for _, c := range res.JSON200.Candidates {
			if w.adTopic[c.Id] != 1 {
				t.Errorf("keyword candidate %s is of topic %d, want 1 (coffee)", c.Id, w.adTopic[c.Id])
			}
		}
	})

	t.Run("anonymous and fresh users", func(t *testing.T) {
		ctxEvents := []api.Event{apiEvent("", api.User, "_anonymous", api.Ad, "ad2", api.Click, worldT0+40*86400000),
			apiEvent("", api.User, "_anonymous", api.Ad, "ad6", api.Click, worldT0+40*86400001)}
		for i := range ctxEvents {
			ctxEvents[i].Id = nil
		}
		res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{ContextEvents: &ctxEvents, K: ptr(10)})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("anonymous retrieve: %v %s", err, res.Body)
		}
		if !*res.JSON200.FreshUser || len(res.JSON200.Candidates) != 10 {
			t.Errorf("anonymous: %+v, want 10 fresh candidates", res.JSON200)
		}
		for _, c := range res.JSON200.Candidates {
			if c.Id == "ad2" || c.Id == "ad6" {
				t.Errorf("anonymous result holds context ad %s", c.Id)
			}
		}
		newbie := api.Ref{Type: api.User, Id: "newbie"}
		for i := range ctxEvents {
			ctxEvents[i].Src = newbie
		}
		res, err = env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &newbie, ContextEvents: &ctxEvents})
		if err != nil || res.JSON200 == nil || !*res.JSON200.FreshUser {
			t.Fatalf("fresh user retrieve: %v %s", err, res.Body)
		}
	})

	t.Run("never-seen users", func(t *testing.T) {
		ids := func(cs []api.Candidate) []string {
			out := make([]string, len(cs))
			for i, c := range cs {
				out[i] = c.Id
			}
			return out
		}
		var first []string
		for _, id := range []string{"stranger-1", "stranger-2"} {
			res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &api.Ref{Type: api.User, Id: id}, K: ptr(10)})
			if err != nil || res.JSON200 == nil {
				t.Fatalf("never-seen user %s: %v %d %s, want 200", id, err, res.StatusCode(), res.Body)
			}
			r := res.JSON200
			if !*r.FreshUser || r.NewUser == nil || !*r.NewUser || len(r.Candidates) != 10 {
				t.Errorf("never-seen user %s: fresh %v new %v, %d candidates; want fresh, new, 10", id, *r.FreshUser, r.NewUser, len(r.Candidates))
			}
			if first == nil {
				first = ids(r.Candidates)
			} else if got := ids(r.Candidates); !slices.Equal(got, first) {
				t.Errorf("two never-seen users without content got %v and %v, want the same new-user candidates", first, got)
			}
		}
		// Inline content: the user is embedded from it.
		content := &struct {
			Attrs *map[string]string `json:"attrs,omitempty"`
			Text  *string            `json:"text,omitempty"`
		}{Attrs: &map[string]string{"geo": "fr", "device": "mobile"}, Text: ptr("trail running shoes")}
		res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &api.Ref{Type: api.User, Id: "stranger-3"},
			K: ptr(10), UserContent: content, Explain: ptr(true)})
		if err != nil || res.JSON200 == nil || len(res.JSON200.Candidates) != 10 || !*res.JSON200.FreshUser {
			t.Fatalf("never-seen user with content: %v %s", err, res.Body)
		}
		// The explanation's parts add up to the score.
		for _, c := range res.JSON200.Candidates {
			if c.Parts == nil {
				t.Fatalf("explain: candidate %s without parts", c.Id)
			}
			if sum := c.Parts.Similarity + c.Parts.Prior + c.Parts.Coengagement; math.Abs(float64(sum-c.Score)) > 1e-4 {
				t.Errorf("candidate %s: parts %+v sum to %v, score %v", c.Id, *c.Parts, sum, c.Score)
			}
		}
		// Retrieval is for users: another type is a 400, not the ad itself.
		st, h, body := env.raw(http.MethodPost, "/v1/retrieve", "application/json", "",
			strings.NewReader(`{"user":{"type":"ad","id":"ad3"}}`))
		if st != http.StatusBadRequest {
			t.Errorf("retrieve for an ad: %d %s, want 400", st, body)
		} else if p := decodeProblem(t, h, body); p.Detail == nil || !strings.Contains(*p.Detail, "users") {
			t.Errorf("retrieve for an ad: detail %v", p.Detail)
		}
		// Bad inline content is refused.
		st, _, body = env.raw(http.MethodPost, "/v1/retrieve", "application/json", "",
			strings.NewReader(`{"user":{"type":"user","id":"x"},"user_content":{"attrs":{"a":1}}}`))
		if st != http.StatusBadRequest {
			t.Errorf("user_content with a number attribute: %d %s, want 400", st, body)
		}
	})

	var someToken string
	t.Run("interests", func(t *testing.T) {
		for _, ref := range []api.Ref{user, {Type: api.Ad, Id: "ad3"}, {Type: api.Campaign, Id: "camp0"}} {
			res, err := env.client.GetInterestsWithResponse(ctx, ref.Type, ref.Id)
			if err != nil || res.JSON200 == nil {
				t.Fatalf("interests %v: %v %s", ref, err, res.Body)
			}
			if res.JSON200.Entity != ref || res.JSON200.ModelVersion != v1 || len(res.JSON200.Tokens) == 0 {
				t.Errorf("interests of %v = %+v", ref, res.JSON200)
			}
			someToken = res.JSON200.Tokens[0].Token
		}
		res, err := env.client.GetInterestsWithResponse(ctx, api.User, "nobody")
		if err != nil || res.ApplicationproblemJSON404 == nil {
			t.Errorf("unknown entity: %v %d, want 404", err, res.StatusCode())
		}
	})

	t.Run("similar", func(t *testing.T) {
		tests := []struct {
			src    api.Ref
			target *api.NodeType
			k      int
			want   int
		}{
			{api.Ref{Type: api.Ad, Id: "ad0"}, nil, 5, 5},
			{user, ptr(api.Ad), 7, 7},
			{user, nil, 30, 23}, // every other user
			{api.Ref{Type: api.Ad, Id: "ad0"}, ptr(api.Campaign), 10, 4},
		}
		for _, tc := range tests {
			res, err := env.client.GetSimilarWithResponse(ctx, tc.src.Type, tc.src.Id, &api.GetSimilarParams{TargetType: tc.target, K: &tc.k})
			if err != nil || res.JSON200 == nil {
				t.Fatalf("similar %v: %v %s", tc.src, err, res.Body)
			}
			items := res.JSON200.Items
			if len(items) != tc.want {
				t.Errorf("similar %v -> %v: %d items, want %d", tc.src, tc.target, len(items), tc.want)
			}
			for i, it := range items {
				if it.Id == tc.src.Id && it.Type == tc.src.Type {
					t.Errorf("similar %v lists itself", tc.src)
				}
				if i > 0 && it.Score > items[i-1].Score {
					t.Errorf("similar items not sorted: %v", items)
				}
			}
		}
	})

	t.Run("tokens", func(t *testing.T) {
		res, err := env.client.GetTokenWithResponse(ctx, someToken)
		if err != nil || res.JSON200 == nil {
			t.Fatalf("token %s: %v %s", someToken, err, res.Body)
		}
		if res.JSON200.Token != someToken || res.JSON200.SampleMembers == nil {
			t.Errorf("token = %+v", res.JSON200)
		}
		if res.JSON200.Size != len(*res.JSON200.SampleMembers) && len(*res.JSON200.SampleMembers) != sampleMembers {
			t.Errorf("token size %d with %d sample members", res.JSON200.Size, len(*res.JSON200.SampleMembers))
		}
		coarse, err := env.client.GetTokenWithResponse(ctx, "0.0")
		if err != nil || coarse.JSON200 == nil || coarse.JSON200.Children == nil || len(*coarse.JSON200.Children) == 0 &&
			coarse.JSON200.Parent != nil {
			t.Errorf("coarse token: %v %s", err, coarse.Body)
		}
		missing, err := env.client.GetTokenWithResponse(ctx, "9.9999")
		if err != nil || missing.ApplicationproblemJSON404 == nil {
			t.Errorf("unknown token: %v %d, want 404", err, missing.StatusCode())
		}
	})

	t.Run("fresh ad is retrievable at once", func(t *testing.T) {
		text := "espresso grinder barista"
		ent := api.Entity{Type: api.Ad, Id: "ad-new", Text: &text, Attrs: &map[string]string{"status": "launch"}}
		if res, err := env.client.PostEntitiesWithResponse(ctx, api.EntitiesRequest{Entities: []api.Entity{ent}}); err != nil || res.JSON200 == nil {
			t.Fatalf("post ad: %v", err)
		}
		ev := apiEvent("s-ad-new", api.Ad, "ad-new", api.Campaign, "camp1", api.InCampaign, worldT0+50*86400000)
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: []api.Event{ev}}); err != nil || res.JSON200 == nil {
			t.Fatalf("post structure edge: %v", err)
		}
		launch := "launch"
		res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &user,
			Filter: &api.Filter{Attr: ptr("status"), Eq: &launch}})
		if err != nil || res.JSON200 == nil {
			t.Fatalf("retrieve: %v %s", err, res.Body)
		}
		if len(res.JSON200.Candidates) != 1 || res.JSON200.Candidates[0].Id != "ad-new" {
			t.Errorf("candidates = %+v, want the fresh ad", res.JSON200.Candidates)
		}
		camp := "camp1"
		res, err = env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &user, K: ptr(100), ExcludeSeen: ptr(false),
			Filter: &api.Filter{Attr: ptr("campaign"), Eq: &camp}})
		if err != nil || res.JSON200 == nil || !slices.ContainsFunc(res.JSON200.Candidates, func(c api.Candidate) bool { return c.Id == "ad-new" }) {
			t.Errorf("fresh ad missing from its campaign's candidates: %v %s", err, res.Body)
		}
		kw, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{Query: ptr("barista"), K: ptr(100)})
		if err != nil || kw.JSON200 == nil || !slices.ContainsFunc(kw.JSON200.Candidates, func(c api.Candidate) bool { return c.Id == "ad-new" }) {
			t.Errorf("fresh ad missing from keyword candidates: %v %s", err, kw.Body)
		}
	})

	t.Run("prior follows engagement", func(t *testing.T) {
		ask := func(w *float32) []api.Candidate {
			t.Helper()
			res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &user, K: ptr(40), ExcludeSeen: ptr(false), PriorWeight: w})
			if err != nil || res.JSON200 == nil {
				t.Fatalf("retrieve: %v %d %s", err, res.StatusCode(), res.Body)
			}
			return res.JSON200.Candidates
		}
		before := ask(ptr(float32(0)))
		target := before[len(before)-1].Id // the ad the embeddings rank last for u0
		prior := func() float32 {
			id, _ := env.srv.Store().Lookup(graph.Ref{Type: graph.NodeAd, ID: target})
			st, _ := env.srv.Served().Ad(id.Idx)
			return st.Prior
		}
		p0 := prior()
		// Twenty other users click it now; one event sent twice counts once.
		var evs []api.Event
		for i := range 20 {
			evs = append(evs, apiEvent(fmt.Sprintf("prior-%d", i), api.User, fmt.Sprintf("fan%d", i), api.Ad, target, api.Click, worldT0+40*24*3600*1000))
		}
		evs = append(evs, evs[0])
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: evs}); err != nil || res.JSON200 == nil {
			t.Fatalf("post clicks: %v %s", err, res.Body)
		}
		p1 := prior()
		if p1 <= p0 {
			t.Fatalf("prior of %s = %v after 20 clicks, was %v: want it to grow", target, p1, p0)
		}
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: evs[:1]}); err != nil || res.JSON200 == nil {
			t.Fatalf("post duplicate: %v %s", err, res.Body)
		}
		if p2 := prior(); p2 != p1 {
			t.Errorf("a duplicate event changed the prior: %v -> %v", p1, p2)
		}
		if got := ask(ptr(float32(0))); got[len(got)-1].Id != target {
			t.Errorf("prior_weight 0: last candidate %s, want %s (embeddings alone)", got[len(got)-1].Id, target)
		}
		if got := ask(ptr(float32(100))); got[0].Id != target {
			t.Errorf("prior_weight 100: top candidate %s, want the clicked ad %s", got[0].Id, target)
		}
		wantWeightRefused(t, env, "u0", "prior_weight", `-1`, `101`, `"x"`)
	})

	t.Run("a launched ad gets the fresh floor", func(t *testing.T) {
		const day = int64(24 * 3600 * 1000)
		date := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.DateOnly) }
		prior := func(name string) float32 {
			id, ok := env.srv.Store().Lookup(graph.Ref{Type: graph.NodeAd, ID: name})
			if !ok {
				t.Fatalf("ad %s not stored", name)
			}
			st, ok := env.srv.Served().Ad(id.Idx)
			if !ok {
				t.Fatalf("ad %s not indexed", name)
			}
			return st.Prior
		}
		text := "espresso tamper"
		var ents []api.Entity
		var evs []api.Event
		for name, start := range map[string]string{"ad-launch": date(worldT0 + 70*day), "ad-vintage": "1999-01-01"} {
			ents = append(ents, api.Entity{Type: api.Ad, Id: name, Text: &text, Attrs: &map[string]string{"start_time": start}})
			evs = append(evs, apiEvent("s-"+name, api.Ad, name, api.Campaign, "camp1", api.InCampaign, worldT0+60*day))
		}
		if res, err := env.client.PostEntitiesWithResponse(ctx, api.EntitiesRequest{Entities: ents}); err != nil || res.JSON200 == nil {
			t.Fatalf("post ads: %v", err)
		}
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: evs}); err != nil || res.JSON200 == nil {
			t.Fatalf("post structure edges: %v", err)
		}
		if p := prior("ad-launch"); p != 0 {
			t.Errorf("ad launching in 10 days: prior %v, want 0", p)
		}
		// An event on its launch day moves the service's time past it.
		ev := apiEvent("launch-day", api.User, "u1", api.Ad, "ad0", api.Impression, worldT0+71*day)
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: []api.Event{ev}}); err != nil || res.JSON200 == nil {
			t.Fatalf("post launch-day event: %v", err)
		}
		if p := prior("ad-launch"); p <= 0 {
			t.Errorf("launched ad without engagement: prior %v, want the fresh floor > 0", p)
		}
		if p := prior("ad-vintage"); p != 0 {
			t.Errorf("ad launched in 1999: prior %v, want 0", p)
		}
		// Fresh ads are marked for the popularity floor of the re-rank.
		for name, want := range map[string]bool{"ad-launch": true, "ad-vintage": false} {
			id, _ := env.srv.Store().Lookup(graph.Ref{Type: graph.NodeAd, ID: name})
			if st, _ := env.srv.Served().Ad(id.Idx); st.Fresh != want {
				t.Errorf("%s: fresh %v, want %v", name, st.Fresh, want)
			}
		}
	})

	t.Run("a known user's new event is used at once", func(t *testing.T) {
		u2 := api.Ref{Type: api.User, Id: "u2"}
		before, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &u2, K: ptr(5)})
		if err != nil || before.JSON200 == nil || len(before.JSON200.Candidates) == 0 {
			t.Fatalf("retrieve u2: %v %s", err, before.Body)
		}
		if *before.JSON200.FreshUser {
			t.Fatalf("u2 has no event since the snapshot: fresh_user true, want the snapshot's embedding")
		}
		clicked := before.JSON200.Candidates[0].Id
		ev := apiEvent("u2-new-click", api.User, "u2", api.Ad, clicked, api.Click, worldT0+72*24*3600*1000)
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: []api.Event{ev}}); err != nil || res.JSON200 == nil {
			t.Fatalf("post u2's click: %v", err)
		}
		after, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &u2, K: ptr(5)})
		if err != nil || after.JSON200 == nil {
			t.Fatalf("retrieve u2 after the click: %v %s", err, after.Body)
		}
		if !*after.JSON200.FreshUser {
			t.Errorf("u2 clicked since the snapshot: fresh_user false, want an embedding of the current neighbourhood")
		}
		for _, c := range after.JSON200.Candidates {
			if c.Id == clicked {
				t.Errorf("candidate %s was just clicked by u2", clicked)
			}
		}
	})

	t.Run("new users are ranked with the new-user priors", func(t *testing.T) {
		// ad7 is clicked by 40 users in their first event, ad8 60 times by
		// users with 12 events each (u0..u23).
		const at = worldT0 + 73*24*3600*1000
		var evs []api.Event
		for i := range 40 {
			evs = append(evs, apiEvent(fmt.Sprintf("first-%d", i), api.User, fmt.Sprintf("first%d", i), api.Ad, "ad7", api.Click, at))
		}
		for i := range 60 {
			evs = append(evs, apiEvent(fmt.Sprintf("veteran-%d", i), api.User, fmt.Sprintf("u%d", i%24), api.Ad, "ad8", api.Click, at+int64(i)))
		}
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: evs}); err != nil || res.JSON200 == nil {
			t.Fatalf("post clicks: %v", err)
		}
		top := func(req api.RetrieveRequest) string {
			t.Helper()
			req.K, req.ExcludeSeen, req.PriorWeight = ptr(3), ptr(false), ptr(float32(100))
			res, err := env.client.RetrieveCandidatesWithResponse(ctx, req)
			if err != nil || res.JSON200 == nil || len(res.JSON200.Candidates) == 0 {
				t.Fatalf("retrieve %+v: %v %s", req, err, res.Body)
			}
			return res.JSON200.Candidates[0].Id
		}
		veteran := api.Ref{Type: api.User, Id: "u5"}
		newbie := api.Ref{Type: api.User, Id: "newbie-prior"}
		ctxEvents := []api.Event{apiEvent("", api.User, newbie.Id, api.Ad, "ad3", api.Click, at)}
		ctxEvents[0].Id = nil
		for _, tc := range []struct {
			name string
			req  api.RetrieveRequest
			want string
		}{
			{"a user with 12+ events: everyone's priors", api.RetrieveRequest{User: &veteran}, "ad8"},
			{"a new user with one context event", api.RetrieveRequest{User: &newbie, ContextEvents: &ctxEvents}, "ad7"},
			{"a user who made only first clicks", api.RetrieveRequest{User: &api.Ref{Type: api.User, Id: "first3"}}, "ad7"},
		} {
			if got := top(tc.req); got != tc.want {
				t.Errorf("%s: top candidate at prior_weight 100 %s, want %s", tc.name, got, tc.want)
			}
		}
	})

	t.Run("co-engaged ads are lifted", func(t *testing.T) {
		// 30 users click ad10, then ad21 (fresh events, after the
		// snapshot); a user whose latest click is ad10 should get ad21.
		const at = worldT0 + 74*24*3600*1000
		var evs []api.Event
		for i := range 30 {
			u := fmt.Sprintf("pair%d", i)
			evs = append(evs, apiEvent(u+"-a", api.User, u, api.Ad, "ad10", api.Click, at+int64(2*i)),
				apiEvent(u+"-b", api.User, u, api.Ad, "ad21", api.Click, at+int64(2*i+1)))
		}
		evs = append(evs, apiEvent("cofan-a", api.User, "cofan", api.Ad, "ad10", api.Click, at+100))
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: evs}); err != nil || res.JSON200 == nil {
			t.Fatalf("post clicks: %v", err)
		}
		scores := func(req api.RetrieveRequest, w float32) (string, map[string]float32) {
			t.Helper()
			req.K, req.ExcludeSeen, req.PriorWeight, req.CoengagementWeight = ptr(100), ptr(true), ptr(float32(0)), ptr(w)
			res, err := env.client.RetrieveCandidatesWithResponse(ctx, req)
			if err != nil || res.JSON200 == nil || len(res.JSON200.Candidates) == 0 {
				t.Fatalf("retrieve %+v: %v %s", req, err, res.Body)
			}
			out := map[string]float32{}
			for _, c := range res.JSON200.Candidates {
				out[c.Id] = c.Score
			}
			return res.JSON200.Candidates[0].Id, out
		}
		cofan := api.Ref{Type: api.User, Id: "cofan"}
		ctxEvents := []api.Event{apiEvent("", api.User, "anon-co", api.Ad, "ad10", api.Click, at+200)}
		ctxEvents[0].Id = nil
		for _, tc := range []struct {
			name string
			req  api.RetrieveRequest
		}{
			{"a known user", api.RetrieveRequest{User: &cofan}},
			{"a new user's context events", api.RetrieveRequest{User: &api.Ref{Type: api.User, Id: "anon-co"}, ContextEvents: &ctxEvents}},
		} {
			top, on := scores(tc.req, 10)
			if top != "ad21" {
				t.Errorf("%s: top candidate %s at coengagement_weight 10, want ad21", tc.name, top)
			}
			if _, seen := on["ad10"]; seen {
				t.Errorf("%s: the clicked ad10 returned", tc.name)
			}
			_, off := scores(tc.req, 0)
			// cos(ad10, ad21) >= 30/31 from these clicks alone.
			if d := on["ad21"] - off["ad21"]; d < 5 {
				t.Errorf("%s: ad21 scores %v with the term, %v without: want the term to add about 10", tc.name, on["ad21"], off["ad21"])
			}
		}
		wantWeightRefused(t, env, "cofan", "coengagement_weight", `-1`, `1001`, `"x"`)
	})

	t.Run("new ads get the new-ad share", func(t *testing.T) {
		// camp1 holds ad-new, which nobody has engaged with, and ads that
		// a judge now sees 3 times each (the exploration budget), so that
		// ad-new is camp1's only new ad; the prior weighs engagement 100
		// times.
		camp := "camp1"
		ask := func(k int, share *float32) []api.Candidate {
			t.Helper()
			res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &user, K: ptr(k), ExcludeSeen: ptr(false),
				PriorWeight: ptr(float32(100)), NewAdShare: share, Filter: &api.Filter{Attr: ptr("campaign"), Eq: &camp}})
			if err != nil || res.JSON200 == nil {
				t.Fatalf("retrieve: %v %s", err, res.Body)
			}
			return res.JSON200.Candidates
		}
		all := ask(100, nil)
		// Before the impressions every ad of camp1 is new: the share's
		// slot goes to one of them (and the set of new ads, kept between
		// requests, must follow the impressions below).
		if got := ask(4, ptr(float32(0.5))); len(got) != 4 || got[1].NewAd == nil || !*got[1].NewAd {
			t.Errorf("share 0.5 before the impressions: candidates %+v, want the second marked new_ad", got)
		}
		var evs []api.Event
		for _, c := range all {
			for i := range rank.DefaultFreshEvents {
				if c.Id != "ad-new" {
					evs = append(evs, apiEvent(fmt.Sprintf("judge-%s-%d", c.Id, i), api.User, "judge", api.Ad, c.Id, api.Impression, worldT0+80*86400000))
				}
			}
		}
		if len(all) < 5 || len(evs) == 0 {
			t.Fatalf("camp1 holds %d ads, want 5 or more", len(all))
		}
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: evs}); err != nil || res.JSON200 == nil {
			t.Fatalf("post impressions: %v", err)
		}
		for i, c := range ask(4, nil) {
			if c.NewAd != nil || c.Id == "ad-new" {
				t.Errorf("without a share: candidate %d %s (new_ad %v), want camp1's proven ads", i+1, c.Id, c.NewAd)
			}
		}
		got := ask(4, ptr(float32(0.5)))
		if len(got) != 4 || got[1].Id != "ad-new" || got[1].NewAd == nil || !*got[1].NewAd {
			t.Errorf("share 0.5: candidates %+v, want ad-new second, marked new_ad", got)
		}
		for i, c := range got {
			if i != 1 && c.NewAd != nil {
				t.Errorf("share 0.5: candidate %d %s marked new_ad", i+1, c.Id)
			}
		}
		wantWeightRefused(t, env, "u1", "new_ad_share", `-0.1`, `0.6`, `"x"`)
	})

	t.Run("a new creative reaches the users of its campaign", func(t *testing.T) {
		// Topic 2 (guitars) is camp2's, topic 1 (coffee) camp1's. Launch,
		// with no engagement: a new creative of camp2, and two new
		// advertisers' first campaigns and ads, one with guitar words and
		// one with coffee words; then ask for every user's top 10.
		at := worldT0 + 81*86400000
		guitar, newAdv, coffee := "acoustic guitar strings chord", "guitar amplifier pedal acoustic", "espresso grinder latte barista"
		ents := []api.Entity{{Type: api.Ad, Id: "creative-new", Text: &guitar}, {Type: api.Ad, Id: "adv-new-ad", Text: &newAdv},
			{Type: api.Ad, Id: "adv2-new-ad", Text: &coffee}}
		if res, err := env.client.PostEntitiesWithResponse(ctx, api.EntitiesRequest{Entities: ents}); err != nil || res.JSON200 == nil {
			t.Fatalf("post ads: %v", err)
		}
		evs := []api.Event{
			apiEvent("l-creative", api.Ad, "creative-new", api.Campaign, "camp2", api.InCampaign, at),
			apiEvent("l-camp-new", api.Campaign, "camp-new", api.Advertiser, "adv-new", api.OfAdvertiser, at),
			apiEvent("l-adv-new-ad", api.Ad, "adv-new-ad", api.Campaign, "camp-new", api.InCampaign, at),
			apiEvent("l-camp-new2", api.Campaign, "camp-new2", api.Advertiser, "adv-new2", api.OfAdvertiser, at),
			apiEvent("l-adv2-new-ad", api.Ad, "adv2-new-ad", api.Campaign, "camp-new2", api.InCampaign, at),
		}
		if res, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: evs}); err != nil || res.JSON200 == nil {
			t.Fatalf("post launch edges: %v", err)
		}
		newAds := []string{"creative-new", "adv-new-ad", "adv2-new-ad"}
		// retrieve returns user u's candidates' ids.
		retrieve := func(u, k int, share *float32) []string {
			t.Helper()
			res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &api.Ref{Type: api.User, Id: fmt.Sprintf("u%d", u)}, K: ptr(k), NewAdShare: share})
			if err != nil || res.JSON200 == nil {
				t.Fatalf("retrieve u%d: %v", u, err)
			}
			var ids []string
			for _, c := range res.JSON200.Candidates {
				ids = append(ids, c.Id)
			}
			return ids
		}
		reach := func(share *float32) (map[string][2]int, [2]int) {
			t.Helper()
			reached := map[string][2]int{} // ad -> users of topic 2 reached, others reached
			users := [2]int{}
			for u := range 24 {
				side := 1
				if u%w.topics == 2 {
					side = 0
				}
				users[side]++
				for _, id := range retrieve(u, 10, share) {
					if slices.Contains(newAds, id) {
						r := reached[id]
						r[side]++
						reached[id] = r
					}
				}
			}
			return reached, users
		}
		// With one slot of ten for new ads, the creative reaches the guitar
		// users, and them more often than the others (for whom it is also
		// among the few new ads of this small world); without, nobody.
		on, users := reach(ptr(float32(0.1)))
		off, _ := reach(ptr(float32(0)))
		for _, ad := range newAds {
			t.Logf("new_ad_share 0.1: %s reaches %d of %d guitar users, %d of %d others (share 0: %d, %d)",
				ad, on[ad][0], users[0], on[ad][1], users[1], off[ad][0], off[ad][1])
		}
		r := on["creative-new"]
		if 3*r[0] < 2*users[0] || r[0]*users[1] <= r[1]*users[0] {
			t.Errorf("share 0.1: the new creative reaches %d of %d guitar users and %d of %d others; want two thirds of the guitar users, and a larger share of them",
				r[0], users[0], r[1], users[1])
		}
		if off["creative-new"][0] >= r[0] {
			t.Errorf("the share did not lift the new creative: %d guitar users without, %d with", off["creative-new"][0], r[0])
		}
		// The new advertisers' first ads, whose campaigns nobody has
		// engaged with, are placed by their words: among the new ads of a
		// guitar user's whole list the guitar one comes before the coffee
		// one, and the other way round for a coffee user.
		for u := range 24 {
			topic := u % w.topics
			if topic != 1 && topic != 2 {
				continue
			}
			ids := retrieve(u, 60, ptr(float32(0.1)))
			g, c := slices.Index(ids, "adv-new-ad"), slices.Index(ids, "adv2-new-ad")
			if g < 0 || c < 0 || (topic == 2) != (g < c) {
				t.Errorf("u%d (topic %d): the new guitar advertiser's ad at %d, the new coffee advertiser's at %d of %v", u, topic, g, c, ids)
			}
		}
	})

	t.Run("metrics and traces", func(t *testing.T) {
		res, err := env.client.MetricsWithResponse(ctx)
		if err != nil || res.StatusCode() != 200 {
			t.Fatalf("metrics: %v", err)
		}
		body := string(res.Body)
		for _, want := range []string{`hir_http_request_duration_seconds_bucket{http_request_method="POST",http_response_status_code="200",http_route="/v1/retrieve"`,
			`hir_retrieve_candidates_bucket`, `hir_retrieve_stage_duration_seconds_count{stage="embed"}`,
			`hir_index_size`, `hir_model_trained_at_seconds{version="v1"}`, `hir_trainer_loss`, `hir_ready 1`,
			`hir_trainer_runs_total{outcome="published"} 1`, `hir_ingest_items_total{kind="event"}`} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		names := map[string]bool{}
		for _, s := range rec.Ended() {
			names[s.Name()] = true
		}
		for _, want := range []string{"POST /v1/retrieve", "embed", "candidates", "rerank", "keywords", "ingest", "train"} {
			if !names[want] {
				t.Errorf("no span %q among %v", want, names)
			}
		}
	})

	// Swap under load: retrieve continuously while the second version is
	// trained and published; no request may fail.
	t.Run("swap under load", func(t *testing.T) {
		var failures, okV1, okV2 atomic.Int64
		var firstErr atomic.Value
		done := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Go(func() {
				u := api.Ref{Type: api.User, Id: []string{"u1", "u2", "u3"}[g]}
				for {
					select {
					case <-done:
						return
					default:
					}
					res, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &u, K: ptr(10)})
					switch {
					case err != nil || res.JSON200 == nil:
						failures.Add(1)
						firstErr.CompareAndSwap(nil, errors.New(string(res.Body)))
					case res.JSON200.ModelVersion == v1:
						okV1.Add(1)
					default:
						okV2.Add(1)
					}
				}
			})
		}
		if err := tr.Trigger(); err != nil {
			t.Fatal(err)
		}
		v2 := waitModel(t, env, v1, tr)
		deadline := time.Now().Add(10 * time.Second)
		for okV2.Load() < 5 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		close(done)
		wg.Wait()
		if failures.Load() > 0 {
			t.Errorf("%d requests failed during the swap; first: %v", failures.Load(), firstErr.Load())
		}
		if v2 != "v2" || okV1.Load() == 0 || okV2.Load() == 0 {
			t.Errorf("served %d requests on v1 and %d on %s; want some on each", okV1.Load(), okV2.Load(), v2)
		}
		// The ads posted since the first snapshot survive the rebuild (they
		// are in the graph): ad-new, ad-launch, ad-vintage, creative-new,
		// adv-new-ad and adv2-new-ad.
		if n := env.srv.Served().IndexSize(); n != 46 {
			t.Errorf("index size after rebuild = %d, want 46", n)
		}
	})

	t.Run("regression gate", func(t *testing.T) {
		job := retrieval.NewTrainJob(env.srv.Store(), retrieval.JobOptions{DataDir: env.dir, Train: tinyTrain(), Tolerance: -1,
			Build: retrieval.BuildOptions{Quantizer: tinyQuantizer()}, Log: io.Discard})
		before, err := model.LatestVersionDir(env.dir)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = job(ctx, env.srv.Served())
		if !errors.Is(err, retrieval.ErrRegressed) {
			t.Errorf("job with an impossible bar: err = %v, want retrieval.ErrRegressed", err)
		}
		// The rejected candidate is not a version: a restart serves, and the
		// next round resumes from, the model that passed.
		if after, err := model.LatestVersionDir(env.dir); err != nil || after != before {
			t.Errorf("latest version after a rejected round = %s (%v), want %s", after, err, before)
		}
		ents, err := os.ReadDir(filepath.Join(env.dir, "models"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("models/%s left behind by a rejected round", e.Name())
			}
		}
	})
}

// wantWeightRefused checks that POST /v1/retrieve for user with field set to
// each of values (JSON) answers 400 with a problem that names field.
func wantWeightRefused(t *testing.T, env *testEnv, user, field string, values ...string) {
	t.Helper()
	for _, v := range values {
		body := `{"user":{"type":"user","id":"` + user + `"},"` + field + `":` + v + `}`
		if code, h, b := env.raw(http.MethodPost, "/v1/retrieve", "application/json", testKey, strings.NewReader(body)); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", body, code)
		} else if p := decodeProblem(t, h, b); p.Detail == nil || !strings.Contains(*p.Detail, field) {
			t.Errorf("%s: problem %+v does not name %s", body, p, field)
		}
	}
}
