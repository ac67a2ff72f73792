package serving

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/explore"
	"github.com/hir-ads/hir/graph"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/retrieval"
)

// newExploreEnv is a server over a small world with a tiny trained model
// published (its checkpoint directory set, as `hir serve` sets it).
func newExploreEnv(t *testing.T, opts Options) (*persistEnv, *world) {
	t.Helper()
	w := newWorld(24, 40, 12, 5)
	return newExploreEnvOf(t, opts, w), w
}

// newExploreEnvOf is newExploreEnv over world w.
func newExploreEnvOf(t *testing.T, opts Options, w *world) *persistEnv {
	t.Helper()
	env := newEnv(t, opts)
	env.ingest(w)
	pe := &persistEnv{testEnv: env}
	ck, err := model.Train(context.Background(), env.srv.Store(), tinyTrain(), env.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pe.m, err = model.Load(ck.Dir); err != nil {
		t.Fatal(err)
	}
	pe.ckpt = ck.Dir
	pe.opts = retrieval.BuildOptions{Quantizer: tinyQuantizer(), Logger: env.srv.logger}
	snap, err := retrieval.OpenVersion(context.Background(), env.srv.Store(), pe.ckpt, nil, pe.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.srv.Publish(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	return pe
}

// getJSON GETs path with key (over real HTTP, the answer validated against
// openapi.yaml) and decodes a 200 answer into v; it returns the status and,
// for any other status, the problem.
func getJSON(t *testing.T, env *testEnv, path, key string, v any) (int, api.Problem) {
	t.Helper()
	status, h, body := env.raw(http.MethodGet, path, "", key, nil)
	if status != http.StatusOK {
		return status, decodeProblem(t, h, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: decode %s: %v", path, body, err)
	}
	return status, api.Problem{}
}

// badParams checks that each path answers 400 problem+json whose detail
// names want.
func badParams(t *testing.T, env *testEnv, cases []struct{ name, path, want string }) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v any
			status, p := getJSON(t, env, tc.path, "", &v)
			if status != http.StatusBadRequest || p.Detail == nil || !strings.Contains(*p.Detail, tc.want) {
				t.Errorf("GET %s = %d %+v, want 400 naming %q", tc.path, status, p, tc.want)
			}
		})
	}
}

func TestExploreEndpoints(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model")
	}
	env, w := newExploreEnv(t, Options{})

	t.Run("tokens", func(t *testing.T) {
		var first api.TokenPage
		if status, p := getJSON(t, env.testEnv, "/v1/tokens", "", &first); status != http.StatusOK {
			t.Fatalf("GET /v1/tokens = %d %+v", status, p)
		}
		if first.Level != 0 || first.Levels < 2 || first.Total == 0 || first.Total != len(first.Tokens) || first.NextCursor != nil {
			t.Fatalf("GET /v1/tokens = %+v, want every level-0 token on one page", first)
		}
		for _, tc := range []struct {
			name, query string
			level       int
		}{
			{"level 0", "level=0", 0},
			{"level 1", "level=1", 1},
			{"children of the largest coarse token", "parent=" + first.Tokens[0].Token, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var all []api.TokenSummary
				total, pages := -1, 0
				next := ""
				for {
					var page api.TokenPage
					path := "/v1/tokens?limit=2&" + tc.query
					if next != "" {
						path += "&cursor=" + url.QueryEscape(next)
					}
					if status, p := getJSON(t, env.testEnv, path, "", &page); status != http.StatusOK {
						t.Fatalf("GET %s = %d %+v", path, status, p)
					}
					pages++
					if total >= 0 && page.Total != total {
						t.Errorf("total changed between pages: %d, then %d", total, page.Total)
					}
					total = page.Total
					if len(page.Tokens) > 2 || page.Level != tc.level {
						t.Errorf("page %d = %+v, want at most 2 tokens of level %d", pages, page, tc.level)
					}
					all = append(all, page.Tokens...)
					if page.NextCursor == nil {
						break
					}
					next = *page.NextCursor
				}
				if len(all) != total || pages != max(1, (total+1)/2) {
					t.Errorf("paging gave %d tokens in %d pages, want %d in %d", len(all), pages, total, (total+1)/2)
				}
				seen := map[string]bool{}
				for i, tk := range all {
					if seen[tk.Token] {
						t.Errorf("token %s listed twice", tk.Token)
					}
					seen[tk.Token] = true
					if i > 0 && tk.Size > all[i-1].Size {
						t.Errorf("tokens not largest first: %s (%d) after %s (%d)", tk.Token, tk.Size, all[i-1].Token, all[i-1].Size)
					}
					if tk.Level != tc.level || tk.SampleMembers == nil || len(*tk.SampleMembers) != min(tk.Size, tokenSampleMembers) {
						t.Errorf("token %+v: want level %d and min(size, %d) sample members", tk, tc.level, tokenSampleMembers)
					}
					var info api.TokenInfo
					if status, _ := getJSON(t, env.testEnv, "/v1/tokens/"+tk.Token, "", &info); status != http.StatusOK ||
						info.Size != tk.Size || info.Children == nil || len(*info.Children) != tk.Children {
						t.Errorf("token %+v disagrees with GET /v1/tokens/%s = %+v", tk, tk.Token, info)
					}
				}
			})
		}
		var past api.TokenPage
		if status, _ := getJSON(t, env.testEnv, "/v1/tokens?cursor=9999", "", &past); status != http.StatusOK || len(past.Tokens) != 0 || past.NextCursor != nil {
			t.Errorf("GET /v1/tokens?cursor=9999 = %d %+v, want an empty last page", status, past)
		}
		var v any
		if status, p := getJSON(t, env.testEnv, "/v1/tokens?parent=0.999", "", &v); status != http.StatusNotFound || p.Detail == nil || !strings.Contains(*p.Detail, "0.999") {
			t.Errorf("GET /v1/tokens?parent=0.999 = %d %+v, want 404 naming the token", status, p)
		}
		badParams(t, env.testEnv, []struct{ name, path, want string }{
			{"negative level", "/v1/tokens?level=-1", "level"},
			{"level too high", "/v1/tokens?level=64", "level"},
			{"level past the model's (issue 52)", "/v1/tokens?level=42", "level: 42 is out of range: model v1 has levels 0.."},
			{"level not a number", "/v1/tokens?level=x", "level"},
			{"limit 0", "/v1/tokens?limit=0", "limit"},
			{"limit too high", "/v1/tokens?limit=501", "limit"},
			{"cursor not ours", "/v1/tokens?cursor=abc", "cursor"},
			{"negative cursor", "/v1/tokens?cursor=-2", "cursor"},
			{"parent not a token", "/v1/tokens?parent=zz", "parent"},
		})
	})

	t.Run("token members", func(t *testing.T) {
		var first api.TokenPage
		getJSON(t, env.testEnv, "/v1/tokens?level=0&limit=1", "", &first)
		tok := first.Tokens[0]
		var ids []string
		next := ""
		for {
			var page api.MemberPage
			path := "/v1/tokens/" + tok.Token + "/members?limit=3"
			if next != "" {
				path += "&cursor=" + next
			}
			if status, p := getJSON(t, env.testEnv, path, "", &page); status != http.StatusOK {
				t.Fatalf("GET %s = %d %+v", path, status, p)
			}
			if page.Total != tok.Size || page.Token != tok.Token || len(page.Items) > 3 {
				t.Fatalf("GET %s = %+v, want total %d and at most 3 items", path, page, tok.Size)
			}
			for _, m := range page.Items {
				if m.Type != api.Ad || m.Text == nil || *m.Text == "" {
					t.Errorf("member %+v: want an ad with its text", m)
				}
				ids = append(ids, m.Id)
			}
			if page.NextCursor == nil {
				break
			}
			next = *page.NextCursor
		}
		sorted := slices.Clone(ids)
		slices.Sort(sorted)
		if len(ids) != tok.Size || len(slices.Compact(sorted)) != tok.Size {
			t.Errorf("paging gave %d members (%v), want %d distinct", len(ids), ids, tok.Size)
		}
		for _, s := range *tok.SampleMembers {
			if !slices.Contains(ids, s.Id) {
				t.Errorf("sample member %s is not among the members %v", s.Id, ids)
			}
		}
		var v any
		if status, _ := getJSON(t, env.testEnv, "/v1/tokens/0.999/members", "", &v); status != http.StatusNotFound {
			t.Errorf("members of unknown token 0.999 = %d, want 404", status)
		}
		badParams(t, env.testEnv, []struct{ name, path, want string }{
			{"bad token", "/v1/tokens/x.1/members", "token"},
			{"limit 0", "/v1/tokens/0.0/members?limit=0", "limit"},
			{"limit too high", "/v1/tokens/0.0/members?limit=1001", "limit"},
			{"cursor not ours", "/v1/tokens/0.0/members?cursor=1e3", "cursor"},
			{"cursor past uint32", "/v1/tokens/0.0/members?cursor=99999999999", "cursor"},
		})
	})

	t.Run("entity events", func(t *testing.T) {
		var want []api.Event
		for _, ev := range w.events {
			if ev.Src.Type == api.User && ev.Src.Id == "u3" {
				want = append(want, ev)
			}
		}
		var got []api.EventRecord
		next := ""
		for {
			var page api.EventPage
			path := "/v1/entities/user/u3/events?limit=5"
			if next != "" {
				path += "&cursor=" + next
			}
			if status, p := getJSON(t, env.testEnv, path, "", &page); status != http.StatusOK {
				t.Fatalf("GET %s = %d %+v", path, status, p)
			}
			if page.Total != len(want) || page.Entity.Id != "u3" || len(page.Events) > 5 {
				t.Fatalf("GET %s = %+v, want total %d", path, page, len(want))
			}
			got = append(got, page.Events...)
			if page.NextCursor == nil {
				break
			}
			next = *page.NextCursor
		}
		if len(got) != len(want) {
			t.Fatalf("paging gave %d events, want %d", len(got), len(want))
		}
		wantDst := map[string]int{}
		for _, ev := range want {
			wantDst[ev.Dst.Id+"/"+string(ev.Type)]++
		}
		for i, ev := range got {
			wantDst[ev.Dst.Id+"/"+string(ev.Type)]--
			if i > 0 && ev.Ts.After(got[i-1].Ts) {
				t.Errorf("events not newest first: %v after %v", ev.Ts, got[i-1].Ts)
			}
			if ev.Ts.Before(time.UnixMilli(worldT0)) || ev.Weight <= 0 {
				t.Errorf("event %+v: want a time of the world and a positive weight", ev)
			}
		}
		for k, n := range wantDst {
			if n != 0 {
				t.Errorf("event %s: listed %d times too few", k, n)
			}
		}
		var ad api.EventPage
		if status, _ := getJSON(t, env.testEnv, "/v1/entities/ad/ad3/events", "", &ad); status != http.StatusOK || ad.Total != 1 ||
			ad.Events[0].Type != api.InCampaign || ad.Events[0].Dst.Type != api.Campaign {
			t.Errorf("events of ad3 = %d %+v, want its one in_campaign link (not the users' clicks on it)", status, ad)
		}
		var v any
		if status, p := getJSON(t, env.testEnv, "/v1/entities/user/nobody/events", "", &v); status != http.StatusNotFound || p.Detail == nil || !strings.Contains(*p.Detail, "nobody") {
			t.Errorf("events of an unknown user = %d %+v, want 404 naming it", status, p)
		}
		badParams(t, env.testEnv, []struct{ name, path, want string }{
			{"bad type", "/v1/entities/robot/u3/events", "type"},
			{"limit 0", "/v1/entities/user/u3/events?limit=0", "limit"},
			{"limit too high", "/v1/entities/user/u3/events?limit=1001", "limit"},
			{"cursor not ours", "/v1/entities/user/u3/events?cursor=next", "cursor"},
		})
	})

	t.Run("map and projection", func(t *testing.T) {
		var full api.EmbeddingMap
		if status, p := getJSON(t, env.testEnv, "/v1/map?limit=5000", "", &full); status != http.StatusOK {
			t.Fatalf("GET /v1/map = %d %+v", status, p)
		}
		if full.Total != 40 || full.BasisSample != 40 || len(full.Points) != 40 || len(full.ExplainedVariance) != 2 {
			t.Fatalf("GET /v1/map = total %d, basis %d, %d points, variance %v; want 40, 40, 40, two shares",
				full.Total, full.BasisSample, len(full.Points), full.ExplainedVariance)
		}
		if ev := full.ExplainedVariance; !(ev[0] >= ev[1] && ev[1] >= 0 && ev[0]+ev[1] <= 1.0001) {
			t.Errorf("explained variance %v, want decreasing shares summing to at most 1", ev)
		}
		share := float32(0)
		for _, in := range full.Interests {
			if in.Level != 0 || in.Weight == nil {
				t.Errorf("interest %+v, want a level-0 token with a weight", in)
				continue
			}
			share += *in.Weight
		}
		if math.Abs(float64(share)-1) > 1e-4 {
			t.Errorf("interest shares sum to %v, want 1", share)
		}
		pos := map[string]api.MapPoint{}
		var sx, sy float64
		for _, p := range full.Points {
			pos[p.Id] = p
			sx, sy = sx+float64(p.X), sy+float64(p.Y)
			if p.Token == nil || !strings.HasPrefix(*p.Token, "0.") {
				t.Errorf("point %+v has no coarse token", p)
			}
		}
		if math.Abs(sx/40) > 1e-3 || math.Abs(sy/40) > 1e-3 {
			t.Errorf("mean of the sample's coordinates = (%v, %v), want the origin (the basis is centred on it)", sx/40, sy/40)
		}
		// The basis is that of the encoder's coordinates: the appended
		// spectral factors place no point.
		ads, e := env.srv.Engine().Current().Embeddings(graph.NodeAd), env.m.Config().EmbedDim
		if ads.Dim <= e {
			t.Fatalf("ad embeddings of %d coordinates, want the encoder's %d and spectral factors", ads.Dim, e)
		}
		vecs := make([][]float32, ads.Len())
		for i := range vecs {
			vecs[i] = ads.Data[i*ads.Dim : i*ads.Dim+e]
		}
		pca, err := explore.FitPCA(context.Background(), vecs)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vecs {
			id := env.srv.Store().Ref(graph.NodeID{Type: graph.NodeAd, Idx: ads.Idx[i]}).ID
			x, y, _ := pca.Project(v)
			if p := pos[id]; math.Abs(float64(p.X)-x) > 1e-4 || math.Abs(float64(p.Y)-y) > 1e-4 {
				t.Fatalf("%s at (%v, %v), want (%v, %v): the projection of its encoder coordinates", id, p.X, p.Y, x, y)
			}
		}
		var small api.EmbeddingMap
		getJSON(t, env.testEnv, "/v1/map?limit=5", "", &small)
		if len(small.Points) != 5 || small.Total != 40 {
			t.Errorf("GET /v1/map?limit=5 = %d points of %d, want 5 of 40", len(small.Points), small.Total)
		}
		for _, p := range small.Points {
			if f := pos[p.Id]; f.X != p.X || f.Y != p.Y {
				t.Errorf("%s at (%v, %v) with limit 5, (%v, %v) with limit 5000: want one basis", p.Id, p.X, p.Y, f.X, f.Y)
			}
		}
		for _, tc := range []struct {
			name, body  string
			status      int
			points      []string
			missing     []string
			problemWant string
		}{
			{"ads and a user", `{"entities":[{"type":"ad","id":"ad3"},{"type":"user","id":"u0"}]}`, 200, []string{"ad3", "u0"}, nil, ""},
			{"unknown entities are missing", `{"entities":[{"type":"user","id":"ghost"},{"type":"ad","id":"ad7"}]}`, 200, []string{"ad7"}, []string{"ghost"}, ""},
			{"no entities", `{"entities":[]}`, 400, nil, nil, "at least one"},
			{"bad type", `{"entities":[{"type":"robot","id":"x"}]}`, 400, nil, nil, "entities[0]"},
			{"empty id", `{"entities":[{"type":"ad","id":""}]}`, 400, nil, nil, "entities[0]"},
			{"unknown member", `{"entities":[{"type":"ad","id":"ad1","x":1}]}`, 400, nil, nil, "entities[0]"},
			{"too many", `{"entities":[` + strings.Repeat(`{"type":"ad","id":"ad1"},`, maxProject) + `{"type":"ad","id":"ad1"}]}`, 400, nil, nil, "limit"},
			{"not json", `{"entities":`, 400, nil, nil, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, h, body := env.raw(http.MethodPost, "/v1/map/project", "application/json", "", strings.NewReader(tc.body))
				if status != tc.status {
					t.Fatalf("POST /v1/map/project = %d %s, want %d", status, body, tc.status)
				}
				if status != http.StatusOK {
					if p := decodeProblem(t, h, body); p.Detail == nil || !strings.Contains(*p.Detail, tc.problemWant) {
						t.Errorf("problem %+v, want a detail naming %q", p, tc.problemWant)
					}
					return
				}
				var res api.ProjectResponse
				if err := json.Unmarshal(body, &res); err != nil {
					t.Fatal(err)
				}
				var got, missing []string
				for _, p := range res.Points {
					got = append(got, p.Id)
					if f, ok := pos[p.Id]; ok && (math.Abs(float64(f.X-p.X)) > 1e-4 || math.Abs(float64(f.Y-p.Y)) > 1e-4) {
						t.Errorf("%s projected at (%v, %v), on the map at (%v, %v)", p.Id, p.X, p.Y, f.X, f.Y)
					}
				}
				for _, m := range res.Missing {
					missing = append(missing, m.Id)
				}
				if !slices.Equal(got, tc.points) || !slices.Equal(missing, tc.missing) {
					t.Errorf("points %v, missing %v; want %v, %v", got, missing, tc.points, tc.missing)
				}
			})
		}
		if status, _, _ := env.raw(http.MethodPost, "/v1/map/project", "", "", strings.NewReader(`{"entities":[{"type":"ad","id":"ad1"}]}`)); status != http.StatusUnsupportedMediaType {
			t.Errorf("POST /v1/map/project without Content-Type = %d, want 415", status)
		}
		badParams(t, env.testEnv, []struct{ name, path, want string }{
			{"limit 0", "/v1/map?limit=0", "limit"},
			{"limit too high", "/v1/map?limit=5001", "limit"},
		})
	})

	t.Run("model history", func(t *testing.T) {
		var st api.ModelStatus
		if status, p := getJSON(t, env.testEnv, "/v1/model", "", &st); status != http.StatusOK {
			t.Fatalf("GET /v1/model = %d %+v", status, p)
		}
		if st.History == nil || len(*st.History) == 0 || st.UsageEntropy == nil {
			t.Fatalf("GET /v1/model = %+v, want a training history and usage entropy", st)
		}
		last := (*st.History)[len(*st.History)-1]
		levels := len(tinyTrain().Model.Prototypes)
		if last.Version != "v1" || last.Step != tinyTrain().Steps || last.UsageEntropy == nil || len(*last.UsageEntropy) != levels ||
			len(*st.UsageEntropy) != levels || last.ValAuc == nil {
			t.Errorf("last history point %+v (entropy %v), want v1 step %d with %d entropies and a validation AUC",
				last, *st.UsageEntropy, tinyTrain().Steps, levels)
		}
	})
}

// TestExploreWithoutModel: the explorer's endpoints answer 503 before the
// first model, as the rest of the read API does; the events of an entity
// need no model.
func TestExploreWithoutModel(t *testing.T) {
	env := newEnv(t, Options{})
	env.ingest(newWorld(2, 4, 2, 1))
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"tokens", http.MethodGet, "/v1/tokens", "", 503},
		{"members", http.MethodGet, "/v1/tokens/0.0/members", "", 503},
		{"map", http.MethodGet, "/v1/map", "", 503},
		{"project", http.MethodPost, "/v1/map/project", `{"entities":[{"type":"ad","id":"ad0"}]}`, 503},
		{"events", http.MethodGet, "/v1/entities/user/u0/events", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct := ""
			if tc.body != "" {
				ct = "application/json"
			}
			status, h, body := env.raw(tc.method, tc.path, ct, "", strings.NewReader(tc.body))
			if status != tc.status {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, status, body, tc.status)
			}
			if status != http.StatusOK {
				decodeProblem(t, h, body)
			}
		})
	}
}

// TestUIServed: the explorer page and its assets are served without a key
// even in read-auth mode (they hold no data), while the API they call needs
// one; an unknown asset is a 404 problem.
func TestUIServed(t *testing.T) {
	env := newEnv(t, Options{ReadAuth: true})
	for _, tc := range []struct {
		name, path, key, contentType, contains string
		status                                 int
	}{
		{"page", "/ui", "", "text/html; charset=utf-8", "<!DOCTYPE html>", 200},
		{"page with slash", "/ui/", "", "text/html; charset=utf-8", "/ui/app.js", 200},
		{"script", "/ui/app.js", "", "text/javascript; charset=utf-8", "", 200},
		{"style", "/ui/app.css", "", "text/css; charset=utf-8", "", 200},
		{"unknown asset", "/ui/secret.txt", "", "application/problem+json", "/ui/secret.txt", 404},
		{"dot-dot", "/ui/../openapi.yaml", "", "application/problem+json", "", 404},
		{"wrong key", "/ui", "wrong-key-123456", "application/problem+json", "", 401},
		{"API without a key", "/v1/tokens", "", "application/problem+json", "", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := env.raw(http.MethodGet, tc.path, "", tc.key, nil)
			if status != tc.status || h.Get("Content-Type") != tc.contentType || !strings.Contains(string(body), tc.contains) {
				t.Errorf("GET %s = %d %q %.80q, want %d %q containing %q", tc.path, status, h.Get("Content-Type"), body,
					tc.status, tc.contentType, tc.contains)
			}
			if status == http.StatusOK && !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
				t.Errorf("GET %s: Content-Security-Policy %q, want default-src 'self'", tc.path, h.Get("Content-Security-Policy"))
			}
		})
	}
}
