package serving

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/hir-ads/hir/graph"
)

// FuzzDecodeEvents checks that the events decoder never panics, that what it
// accepts is valid and re-decodes to the same events, and that what it
// refuses maps to a 4xx problem.
func FuzzDecodeEvents(f *testing.F) {
	for _, s := range []string{
		`{"events":[` + goodEvent + `]}`,
		`{"events":[{"src":{"type":"user","id":1},"dst":{"type":"ad","id":"a"},"type":"click","ts":"2024-01-02T03:04:05Z","weight":0.5}]}`,
		`{"events":[{"src":{"type":"usr","id":"1"},"dst":{"type":"ad","id":"2"},"type":"click","ts":1}]}`,
		`{"events":[null,{}]}`, `{"events":5}`, `[]`, `{"events":[{"src":{"type":"user","id":"1"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := decodeEvents(body, 100)
		if err != nil {
			if status, _, _ := classify(err); status < 400 || status >= 500 {
				t.Fatalf("decode error %v maps to status %d, want 4xx", err, status)
			}
			var ie *ItemError
			if errors.As(err, &ie) && (ie.Index < 0 || ie.Field != "events") {
				t.Fatalf("item error %+v", ie)
			}
			return
		}
		for i := range evs {
			if err := evs[i].Validate(); err != nil {
				t.Fatalf("accepted invalid event %d: %v", i, err)
			}
		}
		again, err := json.Marshal(map[string]any{"events": evs})
		if err != nil {
			t.Fatal(err)
		}
		evs2, err := decodeEvents(again, 100)
		if err != nil || len(evs2) != len(evs) {
			t.Fatalf("re-decode of %s: %v", again, err)
		}
		for i := range evs {
			if evs[i] != evs2[i] {
				t.Fatalf("round trip changed event %d: %+v -> %+v", i, evs[i], evs2[i])
			}
		}
	})
}

// FuzzDecodeEntities is FuzzDecodeEvents for entities.
func FuzzDecodeEntities(f *testing.F) {
	for _, s := range []string{
		`{"entities":[{"type":"ad","id":"a1","text":"t","attrs":{"k":"v","n":3,"b":true},"vector":[0.5,1]}]}`,
		`{"entities":[{"type":"movie","id":"m"}]}`, `{"entities":[{"type":"ad"}]}`, `{"entities":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ents, err := decodeEntities(body, 100)
		if err != nil {
			if status, _, _ := classify(err); status < 400 || status >= 500 {
				t.Fatalf("decode error %v maps to status %d, want 4xx", err, status)
			}
			return
		}
		for i := range ents {
			if err := ents[i].Validate(); err != nil {
				t.Fatalf("accepted invalid entity %d: %v", i, err)
			}
		}
	})
}

// FuzzDecodeRetrieve checks that the retrieve decoder never panics, that
// what it refuses maps to a 4xx problem, and that what it accepts is within
// the documented limits.
func FuzzDecodeRetrieve(f *testing.F) {
	for _, s := range []string{
		`{"user":{"type":"user","id":"u1"}}`,
		`{"user":{"type":"user","id":"u1"},"k":5,"exclude_seen":false,"explain":true,"prior_weight":2,"coengagement_weight":3}`,
		`{"user":{"type":"user","id":"u1"},"coengagement_weight":-1}`, `{"user":{"type":"user","id":"u1"},"prior_weight":1e9}`,
		`{"context_events":[{"dst":{"type":"ad","id":"a"},"type":"click","ts":1}],"filter":{"attr":"status","eq":"active"}}`,
		`{"query":"shoes","k":0}`, `{}`, `{"user":null}`, `[]`, `{"k":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeRetrieve(body)
		if err != nil {
			if status, _, _ := classify(err); status < 400 || status >= 500 {
				t.Fatalf("decode error %v maps to status %d, want 4xx", err, status)
			}
			return
		}
		req := p.req
		switch {
		case req.K < 1 || req.K > MaxK:
			t.Fatalf("accepted k %d", req.K)
		case req.Validate() != nil:
			t.Fatalf("accepted an invalid request: %v", req.Validate())
		case len(req.ContextEvents) > MaxContextEvents:
			t.Fatalf("accepted %d context events", len(req.ContextEvents))
		case req.User == nil && len(req.ContextEvents) == 0 && req.Query == "":
			t.Fatalf("accepted a request with no user, context or query")
		case req.User != nil && req.User.Type != graph.NodeUser:
			t.Fatalf("accepted a retrieval for a %s", req.User.Type)
		}
	})
}
