package serving

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hir-ads/hir/api"
	"github.com/hir-ads/hir/eventlog"
	"github.com/hir-ads/hir/graph"
)

const goodEvent = `{"id":"g1","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1700000000000}`

func TestIngestBadInputIsRejectedWhole(t *testing.T) {
	env := newEnv(t, Options{MaxBodyBytes: 4 << 10, MaxBatchItems: 3})
	// Some state to leave unchanged.
	if st, _, b := env.raw("POST", "/v1/events", "application/json", testKey,
		strings.NewReader(`{"events":[`+goodEvent+`]}`)); st != 200 {
		t.Fatalf("seed event: %d %s", st, b)
	}
	before := env.counts()
	huge := `{"events":[` + strings.Repeat(goodEvent+",", 40) + goodEvent + `]}`
	tests := []struct {
		name, path, ctype, body string
		status                  int
		detail                  string // substring of the problem detail
		item                    int    // -1: no item
	}{
		{"malformed json", "/v1/events", "application/json", `{"events":[`, 400, "malformed JSON", -1},
		{"trailing data", "/v1/events", "application/json", `{"events":[` + goodEvent + `]} {}`, 400, "trailing data", -1},
		{"empty body", "/v1/events", "application/json", ``, 400, "empty", -1},
		{"not an object", "/v1/events", "application/json", `[1,2]`, 400, "want an object", -1},
		{"events not an array", "/v1/events", "application/json", `{"events":5}`, 400, "events: want an array", -1},
		{"missing events", "/v1/events", "application/json", `{}`, 400, "events: required", -1},
		{"empty events", "/v1/events", "application/json", `{"events":[]}`, 400, "at least one item", -1},
		{"unknown top field", "/v1/events", "application/json", `{"events":[` + goodEvent + `],"x":1}`, 400, `unknown field "x"`, -1},
		{"unknown node type in second item", "/v1/events", "application/json",
			`{"events":[` + goodEvent + `,{"src":{"type":"usr","id":"1"},"dst":{"type":"ad","id":"2"},"type":"click","ts":1}]}`,
			400, `events[1]: src: unknown node type: "usr"`, 1},
		{"unknown edge type", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"1"},"dst":{"type":"ad","id":"2"},"type":"clack","ts":1}]}`,
			400, `events[0]: type: unknown edge type: "clack"`, 0},
		{"wrong weight type", "/v1/events", "application/json",
			`{"events":[` + goodEvent + `,` + goodEvent + `,{"src":{"type":"user","id":"1"},"dst":{"type":"ad","id":"2"},"type":"click","ts":1,"weight":"heavy"}]}`,
			400, "events[2]: weight: want a number, got JSON string", 2},
		{"negative weight", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"1"},"dst":{"type":"ad","id":"2"},"type":"click","ts":1,"weight":-1}]}`,
			400, "events[0]: bad value", 0},
		{"bad timestamp", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"1"},"dst":{"type":"ad","id":"2"},"type":"click","ts":"yesterday"}]}`,
			400, `events[0]: ts: bad timestamp`, 0},
		{"missing dst", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"1"},"type":"click","ts":1}]}`, 400, "events[0]: dst: missing", 0},
		{"unknown event field", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"1"},"dst":{"type":"ad","id":"2"},"type":"click","ts":1,"colour":"red"}]}`,
			400, `events[0]: unknown field "colour"`, 0},
		{"null item", "/v1/events", "application/json", `{"events":[null]}`, 400, "events[0]: want an object, got null", 0},
		// A conflict names the differing fields from 6-bit hashes (one is
		// missed 1 time in 64, eventlog.ConflictError), so only the start of
		// its message is checked here; eventlog's TestDiffering checks the
		// naming.
		{"stored id, other ts", "/v1/events", "application/json",
			`{"events":[` + strings.Replace(goodEvent, `"g1"`, `"g2"`, 1) + `,` + strings.Replace(goodEvent, `1700000000000`, `1700000000001`, 1) + `]}`,
			409, `events[1]: id "g1" is already stored with a different`, 1},
		{"stored id, other dst", "/v1/events", "application/json",
			`{"events":[` + strings.Replace(goodEvent, `"a1"`, `"a2"`, 1) + `]}`, 409, `events[0]: id "g1" is already stored with a different`, 0},
		{"one id twice in a batch, other weights", "/v1/events", "application/json",
			`{"events":[` + strings.Replace(goodEvent, `"g1"`, `"g3"`, 1) + `,` + strings.Replace(goodEvent, `"g1"`, `"g3"`, 1)[:len(goodEvent)-1] + `,"weight":2}]}`,
			409, `events[1]: id "g3" is already stored with a different`, 1},
		{"empty event id", "/v1/events", "application/json", `{"events":[` + strings.Replace(goodEvent, `"g1"`, `""`, 1) + `]}`,
			400, `events[0]: id: empty`, 0},
		{"click ad->user", "/v1/events", "application/json",
			`{"events":[` + goodEvent + `,{"src":{"type":"ad","id":"a1"},"dst":{"type":"user","id":"u1"},"type":"click","ts":1}]}`,
			400, "events[1]: edge not allowed: click from ad to user; click goes user -> ad or user -> product", 1},
		{"in_campaign user->ad", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"in_campaign","ts":1}]}`,
			400, "events[0]: edge not allowed: in_campaign from user to ad; in_campaign goes ad -> campaign", 0},
		{"purchase user->user", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"u1"},"dst":{"type":"user","id":"u2"},"type":"purchase","ts":1}]}`,
			400, "events[0]: edge not allowed: purchase from user to user", 0},
		{"of_advertiser self-loop", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"campaign","id":"c1"},"dst":{"type":"campaign","id":"c1"},"type":"of_advertiser","ts":1}]}`,
			400, "events[0]: edge not allowed: of_advertiser from campaign to campaign", 0},
		{"click user->pixel", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"u1"},"dst":{"type":"pixel","id":"p1"},"type":"click","ts":1}]}`,
			400, "events[0]: edge not allowed: click from user to pixel", 0},
		{"NUL in a user id", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"u\u00001"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1}]}`,
			400, "events[0]: src.id: bad id: control character U+0000", 0},
		{"LF in an event id", "/v1/events", "application/json", `{"events":[` + strings.Replace(goodEvent, `"g1"`, `"g\n1"`, 1) + `]}`,
			400, "events[0]: id: bad id: control character U+000A", 0},
		{"ESC in an ad id", "/v1/events", "application/json", `{"events":[` + strings.Replace(goodEvent, `"a1"`, `"a\u001b1"`, 1) + `]}`,
			400, "events[0]: dst.id: bad id: control character U+001B", 0},
		{"DEL in an entity id", "/v1/entities", "application/json", `{"entities":[{"type":"ad","id":"a\u007f"}]}`,
			400, "entities[0]: id: bad id: control character U+007F", 0},
		{"bidi override in an entity id", "/v1/entities", "application/json", `{"entities":[{"type":"ad","id":"a\u202e1"}]}`,
			400, "entities[0]: id: bad id: invisible format character U+202E", 0},
		{"zero-width space in a user id", "/v1/events", "application/json",
			`{"events":[{"src":{"type":"user","id":"u\u200b1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":1}]}`,
			400, "events[0]: src.id: bad id: invisible format character U+200B", 0},
		{"too many items", "/v1/events", "application/json",
			`{"events":[` + goodEvent + `,` + goodEvent + `,` + goodEvent + `,` + goodEvent + `]}`, 413, "limit of 3", -1},
		{"huge body", "/v1/events", "application/json", huge, 413, "exceeds 4096 bytes", -1},
		{"wrong content type", "/v1/events", "text/plain", `{"events":[` + goodEvent + `]}`, 415, "application/json", -1},
		{"no content type", "/v1/events", "", `{"events":[` + goodEvent + `]}`, 415, "application/json", -1},
		{"entity bad type", "/v1/entities", "application/json",
			`{"entities":[{"type":"ad","id":"a9"},{"type":"movie","id":"m1"}]}`, 400, `entities[1]: unknown node type: "movie"`, 1},
		{"entity missing id", "/v1/entities", "application/json", `{"entities":[{"type":"ad"}]}`, 400, "entities[0]: missing id", 0},
		{"entity text not a string", "/v1/entities", "application/json",
			`{"entities":[{"type":"ad","id":"a1","text":5}]}`, 400, "entities[0]: text: want a string, got JSON number", 0},
		{"entity attr object", "/v1/entities", "application/json",
			`{"entities":[{"type":"ad","id":"a1","attrs":{"k":{"x":1}}}]}`, 400, "entities[0]: attrs.k", 0},
		{"entity id too long", "/v1/entities", "application/json",
			`{"entities":[{"type":"ad","id":"` + strings.Repeat("x", 300) + `"}]}`, 400, "entities[0]: bad value", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := env.raw("POST", tc.path, tc.ctype, testKey, strings.NewReader(tc.body))
			if status != tc.status {
				t.Fatalf("status = %d, want %d (body %s)", status, tc.status, body)
			}
			p := decodeProblem(t, h, body)
			if p.Status != tc.status || p.Detail == nil || !strings.Contains(*p.Detail, tc.detail) {
				t.Errorf("problem = %s, want status %d and detail containing %q", body, tc.status, tc.detail)
			}
			switch {
			case tc.item < 0 && p.Item != nil:
				t.Errorf("item = %d, want none", *p.Item)
			case tc.item >= 0 && (p.Item == nil || *p.Item != tc.item):
				t.Errorf("item = %v, want %d", p.Item, tc.item)
			}
			if p.Instance == nil || !strings.HasPrefix(*p.Instance, tc.path) {
				t.Errorf("instance = %v, want the request path", p.Instance)
			}
			if got := env.counts(); got != before {
				t.Errorf("counts after rejected request = %+v, want unchanged %+v", got, before)
			}
		})
	}
}

// TestLookAlikeIDs (issue 48, defect 5): the NFC and NFD spellings of an
// id name one node, through ingestion, retrieval and the entity endpoints.
func TestLookAlikeIDs(t *testing.T) {
	env := newEnv(t, Options{})
	const nfc, nfd = "Zo\u00eb", "Zoe\u0308"
	for i, id := range []string{nfc, nfd} {
		body := fmt.Sprintf(`{"events":[{"id":"e%d","src":{"type":"user","id":"%s"},"dst":{"type":"ad","id":"caf%s"},"type":"click","ts":%d}]}`,
			i, id, []string{"\u00e9", "e\u0301"}[i], 1700000000000+i)
		if st, _, b := env.raw("POST", "/v1/events", "application/json", testKey, strings.NewReader(body)); st != 200 {
			t.Fatalf("post %s: %d %s", id, st, b)
		}
	}
	if got := env.srv.Store().NumNodes(graph.NodeUser); got != 1 {
		t.Errorf("%d users stored for the NFC and NFD spellings of one id, want 1", got)
	}
	if got := env.srv.Store().NumNodes(graph.NodeAd); got != 1 {
		t.Errorf("%d ads stored for the NFC and NFD spellings of one id, want 1", got)
	}
	id, ok := env.srv.Store().Lookup(graph.Ref{Type: graph.NodeUser, ID: "Zo\u00eb"})
	if !ok {
		t.Fatal("the NFC id is not stored")
	}
	if n := env.srv.Store().Degree(id, math.MaxInt64); n != 2 {
		t.Errorf("the user has %d edges, want both events' 2", n)
	}
}

func TestIngestStoresThenApplies(t *testing.T) {
	env := newEnv(t, Options{})
	ctx := context.Background()
	w := newWorld(6, 8, 5, 1)
	res, err := env.client.PostEntitiesWithResponse(ctx, api.EntitiesRequest{Entities: w.entities})
	if err != nil || res.JSON200 == nil {
		t.Fatalf("post entities: %v %d %s", err, res.StatusCode(), res.Body)
	}
	if res.JSON200.Entities != len(w.entities) || res.JSON200.Seq == nil || *res.JSON200.Seq != 1 {
		t.Errorf("entities result = %+v, want %d entities at seq 1", res.JSON200, len(w.entities))
	}
	evRes, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: w.events})
	if err != nil || evRes.JSON200 == nil {
		t.Fatalf("post events: %v %s", err, evRes.Body)
	}
	want := api.IngestResult{Entities: 0, Events: len(w.events), Duplicates: 0, Seq: ptr(int64(2))}
	if d := cmp.Diff(want, *evRes.JSON200); d != "" {
		t.Errorf("events result (-want +got):\n%s", d)
	}
	st := env.srv.Store()
	if got := st.NumEvents(); got != int64(len(w.events)) {
		t.Errorf("graph events = %d, want %d", got, len(w.events))
	}
	id, ok := st.Lookup(graph.Ref{Type: graph.NodeAd, ID: "ad3"})
	if !ok || st.Entity(id) == nil || st.Entity(id).Attrs["status"] != "active" {
		t.Errorf("ad3 not stored with its content")
	}

	// Re-posting the same events (same ids) stores nothing, and a mixed
	// batch stores only the new ones.
	before := env.counts()
	dup, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: w.events[:10]})
	if err != nil || dup.JSON200 == nil {
		t.Fatalf("re-post: %v %s", err, dup.Body)
	}
	if dup.JSON200.Events != 0 || dup.JSON200.Duplicates != 10 || dup.JSON200.Seq != nil {
		t.Errorf("re-post result = %+v, want 0 stored, 10 duplicates, no seq", dup.JSON200)
	}
	if got := env.counts(); got.graphEvents != before.graphEvents || got.logEvents != before.logEvents {
		t.Errorf("re-post changed counts: %+v -> %+v", before, got)
	}
	fresh := apiEvent("brand-new", api.User, "u1", api.Ad, "ad1", api.Click, worldT0+5)
	mixed, err := env.client.PostEventsWithResponse(ctx, api.EventsRequest{Events: []api.Event{w.events[0], fresh, fresh}})
	if err != nil || mixed.JSON200 == nil {
		t.Fatalf("mixed post: %v %s", err, mixed.Body)
	}
	if mixed.JSON200.Events != 1 || mixed.JSON200.Duplicates != 2 {
		t.Errorf("mixed result = %+v, want 1 stored, 2 duplicates", mixed.JSON200)
	}
	if got := st.NumEvents(); got != before.graphEvents+1 {
		t.Errorf("graph events = %d, want %d", got, before.graphEvents+1)
	}

	// Restart: replaying the log rebuilds the same graph.
	if err := env.log.Close(); err != nil {
		t.Fatal(err)
	}
	log2, st2, rep, err := OpenStore(ctx, eventlogOptions(env.dir), graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log2.Close()
	if rep.Batches != 3 || st2.NumEvents() != st.NumEvents() || st2.NumNodes(graph.NodeAd) != st.NumNodes(graph.NodeAd) {
		t.Errorf("replay: %+v, %d events, %d ads; want 3 batches, %d events, %d ads", rep, st2.NumEvents(),
			st2.NumNodes(graph.NodeAd), st.NumEvents(), st.NumNodes(graph.NodeAd))
	}
}

func ptr[T any](v T) *T { return &v }

func TestAuth(t *testing.T) {
	tests := []struct {
		name     string
		readAuth bool
		method   string
		path     string
		key      string
		want     int
	}{
		{"write without key", false, "POST", "/v1/events", "", 401},
		{"write with wrong key", false, "POST", "/v1/events", "wrong-key-xxxxxxxx", 401},
		{"write with key", false, "POST", "/v1/events", testKey, 200},
		{"train without key", false, "POST", "/v1/model/train", "", 401},
		{"entities without key", false, "POST", "/v1/entities", "", 401},
		{"read open", false, "GET", "/v1/model", "", 200},
		{"read with wrong key", false, "GET", "/v1/model", "wrong-key-xxxxxxxx", 401},
		{"read keyed without key", true, "GET", "/v1/model", "", 401},
		{"read keyed with key", true, "GET", "/v1/model", testKey, 200},
		{"retrieve keyed without key", true, "POST", "/v1/retrieve", "", 401},
		{"healthz stays open", true, "GET", "/healthz", "", 200},
		{"metrics stays open", true, "GET", "/metrics", "", 200},
	}
	envs := map[bool]*testEnv{false: newEnv(t, Options{}), true: newEnv(t, Options{ReadAuth: true})}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := envs[tc.readAuth]
			body := ""
			if tc.method == "POST" {
				body = `{"events":[` + goodEvent + `]}`
			}
			status, h, b := env.raw(tc.method, tc.path, "application/json", tc.key, strings.NewReader(body))
			if status != tc.want {
				t.Fatalf("status = %d, want %d (%s)", status, tc.want, b)
			}
			if status == 401 {
				decodeProblem(t, h, b)
				if h.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	env := newEnv(t, Options{MaxBodyBytes: 1024})
	before := env.counts()
	big := `{"events":[` + strings.Repeat(goodEvent+",", 20) + goodEvent + `]}`
	// Declared Content-Length over the cap.
	status, h, b := env.raw("POST", "/v1/events", "application/json", testKey, strings.NewReader(big))
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413 (%s)", status, b)
	}
	decodeProblem(t, h, b)
	// Chunked body (no Content-Length): the cap hits while reading.
	status, h, b = env.raw("POST", "/v1/events", "application/json", testKey, struct{ *strings.Reader }{strings.NewReader(big)})
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: status = %d, want 413 (%s)", status, b)
	}
	decodeProblem(t, h, b)
	if got := env.counts(); got != before {
		t.Errorf("counts = %+v, want unchanged %+v", got, before)
	}
}

func TestRateLimit(t *testing.T) {
	env := newEnv(t, Options{RatePerSecond: 0.001, RateBurst: 3, APIKeys: []string{testKey, "other-key-0123456"}})
	for i := range 3 {
		if st, _, b := env.raw("GET", "/v1/model", "", "", nil); st != 200 {
			t.Fatalf("request %d: status %d (%s)", i, st, b)
		}
	}
	status, h, b := env.raw("GET", "/v1/model", "", "", nil)
	if status != http.StatusTooManyRequests {
		t.Fatalf("4th request: status = %d, want 429", status)
	}
	decodeProblem(t, h, b)
	if h.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// A keyed client has its own bucket.
	if st, _, b := env.raw("GET", "/v1/model", "", "other-key-0123456", nil); st != 200 {
		t.Fatalf("keyed request: status %d (%s)", st, b)
	}
}

func TestNoSnapshotYet(t *testing.T) {
	env := newEnv(t, Options{})
	ctx := context.Background()
	env.ingest(newWorld(4, 8, 4, 2))
	user := api.Ref{Type: api.User, Id: "u1"}
	r1, err := env.client.RetrieveCandidatesWithResponse(ctx, api.RetrieveRequest{User: &user})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := env.client.GetInterestsWithResponse(ctx, api.User, "u1")
	if err != nil {
		t.Fatal(err)
	}
	r3, err := env.client.GetSimilarWithResponse(ctx, api.Ad, "ad1", nil)
	if err != nil {
		t.Fatal(err)
	}
	r4, err := env.client.GetTokenWithResponse(ctx, "0.1")
	if err != nil {
		t.Fatal(err)
	}
	r5, err := env.client.ReadyzWithResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range []*api.Problem{r1.ApplicationproblemJSON503, r2.ApplicationproblemJSON503,
		r3.ApplicationproblemJSON503, r4.ApplicationproblemJSON503, r5.ApplicationproblemJSON503} {
		if p == nil || p.Detail == nil || !strings.Contains(*p.Detail, "no model trained yet") {
			t.Errorf("endpoint %d: problem = %+v, want 503 naming the missing model", i, p)
		}
	}
	m, err := env.client.GetModelWithResponse(ctx)
	if err != nil || m.JSON200 == nil || m.JSON200.Ready {
		t.Errorf("model status = %+v, %v; want not ready", m.JSON200, err)
	}
	tr, err := env.client.TrainModelWithResponse(ctx)
	if err != nil || tr.StatusCode() != 503 {
		t.Errorf("train without trainer: %d, %v; want 503", tr.StatusCode(), err)
	}
	h, err := env.client.HealthzWithResponse(ctx)
	if err != nil || h.JSON200 == nil || h.JSON200.Status != "ok" {
		t.Errorf("healthz = %v, %v", h, err)
	}
}

func TestRetrieveBadInput(t *testing.T) {
	env := newEnv(t, Options{})
	tests := []struct {
		name, body string
		status     int
		detail     string
	}{
		{"k zero", `{"user":{"type":"user","id":"u1"},"k":0}`, 400, "k: 0 is out of range"},
		{"k too big", `{"user":{"type":"user","id":"u1"},"k":1001}`, 400, "k: 1001 is out of range"},
		{"k not a number", `{"user":{"type":"user","id":"u1"},"k":"ten"}`, 400, "k: want an integer"},
		{"bad user type", `{"user":{"type":"usr","id":"u1"}}`, 400, `user: unknown node type: "usr"`},
		{"bad filter", `{"user":{"type":"user","id":"u1"},"filter":{"attr":"brand"}}`, 400, "filter: bad filter"},
		{"filter two ops", `{"user":{"type":"user","id":"u1"},"filter":{"attr":"brand","eq":"x","not":{"attr":"a","eq":"b"}}}`, 400, "filter"},
		{"nothing to go on", `{"k":5}`, 400, "give a user, context_events or a query"},
		{"unknown field", `{"usr":{"type":"user","id":"u1"}}`, 400, `unknown field "usr"`},
		{"context src mismatch", `{"user":{"type":"user","id":"u1"},"context_events":[{"src":{"type":"user","id":"u2"},"dst":{"type":"ad","id":"a"},"type":"click","ts":1}]}`,
			400, "context_events[0]: src"},
		{"context bad edge", `{"context_events":[{"dst":{"type":"ad","id":"a"},"type":"klick","ts":1}]}`,
			400, `context_events[0]: type: unknown edge type`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, b := env.raw("POST", "/v1/retrieve", "application/json", "", strings.NewReader(tc.body))
			if status != tc.status {
				t.Fatalf("status = %d, want %d (%s)", status, tc.status, b)
			}
			p := decodeProblem(t, h, b)
			if p.Detail == nil || !strings.Contains(*p.Detail, tc.detail) {
				t.Errorf("detail = %v, want it to contain %q", ptrStr(p.Detail), tc.detail)
			}
		})
	}
	for _, tc := range []struct{ path, detail string }{
		{"/v1/entities/movie/m1/interests", "type"},
		{"/v1/entities/ad/a1/similar?k=0", "k: 0 is out of range"},
		{"/v1/entities/ad/a1/similar?k=abc", "parameter k"},
		{"/v1/entities/ad/a1/similar?target_type=film", "target_type"},
		{"/v1/tokens/1-2", "level.code"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			status, h, b := env.raw("GET", tc.path, "", "", nil)
			if status != 400 {
				t.Fatalf("status = %d, want 400 (%s)", status, b)
			}
			if p := decodeProblem(t, h, b); p.Detail == nil || !strings.Contains(*p.Detail, tc.detail) {
				t.Errorf("detail = %v, want it to contain %q", ptrStr(p.Detail), tc.detail)
			}
		})
	}
	status, h, b := env.raw("GET", "/v1/nope", "", "", nil)
	if status != 404 {
		t.Errorf("unknown route: %d, want 404", status)
	}
	decodeProblem(t, h, b)
	status, h, b = env.raw("DELETE", "/v1/model", "", "", nil)
	if status != 405 {
		t.Errorf("wrong method: %d, want 405", status)
	}
	decodeProblem(t, h, b)
}

func ptrStr(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *p)
}

// TestCancelledIngestIsApplied cancels many ingestions at random moments,
// many of them while their batch waits for the group commit (fsync on):
// every batch the log stored must be in the live graph ("stored means
// applied"), and a retry of the failed ones with the same ids must leave
// every event in the graph.
func TestCancelledIngestIsApplied(t *testing.T) {
	dir := t.TempDir()
	log, store, _, err := OpenStore(context.Background(), eventlog.Options{Dir: dir + "/log"}, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{APIKeys: []string{testKey}}, log, store)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const batches, perBatch = 300, 4
	batch := func(i int) eventlog.Batch {
		var b eventlog.Batch
		for j := range perBatch {
			b.Events = append(b.Events, graph.Event{ID: fmt.Sprintf("c%d-%d", i, j),
				Src:  graph.Ref{Type: graph.NodeUser, ID: fmt.Sprintf("u%d", i%17)},
				Dst:  graph.Ref{Type: graph.NodeAd, ID: fmt.Sprintf("a%d", j)},
				Type: graph.EdgeClick, TS: worldT0 + int64(i), Weight: 1})
		}
		return b
	}
	failed := make([]bool, batches)
	var wg sync.WaitGroup
	for i := range batches {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				cancel()
			}()
			_, err := srv.Ingest(ctx, batch(i))
			failed[i] = err != nil
			cancel()
		})
	}
	wg.Wait()
	nFailed := 0
	for _, f := range failed {
		if f {
			nFailed++
		}
	}
	st := log.Stats()
	t.Logf("%d of %d ingestions failed; the log stored %d batches", nFailed, batches, st.Batches)
	if got := store.NumEvents(); got != int64(st.Events) {
		t.Errorf("live graph holds %d events, the log stored %d", got, st.Events)
	}
	if int(st.Batches) != batches-nFailed {
		t.Errorf("log stored %d batches, %d ingestions succeeded: a failed ingestion was stored", st.Batches, batches-nFailed)
	}

	// Retrying the failed ones with the same ids stores and applies them.
	for i, f := range failed {
		if f {
			if _, err := srv.Ingest(context.Background(), batch(i)); err != nil {
				t.Fatalf("retry %d: %v", i, err)
			}
		}
	}
	if got := store.NumEvents(); got != batches*perBatch {
		t.Errorf("after the retries the live graph holds %d events, want %d", got, batches*perBatch)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	log2, store2, _, err := OpenStore(context.Background(), eventlog.Options{Dir: dir + "/log"}, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log2.Close()
	if got := store2.NumEvents(); got != batches*perBatch {
		t.Errorf("after reopen the log holds %d events, want %d", got, batches*perBatch)
	}
}
