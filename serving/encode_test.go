package serving

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	"github.com/hir-ads/hir/api"
)

// TestAppendRetrieveResponseMatchesEncodingJSON checks that the hand-written
// encoder of retrieve answers writes exactly what encoding/json writes.
func TestAppendRetrieveResponseMatchesEncodingJSON(t *testing.T) {
	yes, no := true, false
	label, odd := "running shoes", "<b>\"café\" & \u2028 \x01 \xff"
	w1, w2 := float32(0.42), float32(1e-7)
	tokens := []api.TokenRef{{Token: "0.3", Level: 0, Label: &label, Weight: &w1}, {Token: "4.12", Level: 4, Weight: &w2},
		{Token: "1.7", Level: 1, Label: &odd}}
	empty := []api.TokenRef{}
	var nilTokens []api.TokenRef
	floats := []float32{0, 1, -1, 0.1, 1.0 / 3, 6.24, -0.0000012, 1e-6, 9.99e-7, 1e20, 1e21, 3.4e38, -1e-30,
		math.SmallestNonzeroFloat32, 123456789, 0.000123}
	cases := []struct {
		name string
		r    api.RetrieveResponse
	}{
		{"no candidates", api.RetrieveResponse{ModelVersion: "v1", Candidates: []api.Candidate{}, FreshUser: &no, NewUser: &no}},
		{"nil candidates, no flags", api.RetrieveResponse{ModelVersion: "v1"}},
		{"plain", api.RetrieveResponse{ModelVersion: "v12", FreshUser: &yes, NewUser: &no, Candidates: []api.Candidate{
			{Type: "ad", Id: "a17", Score: 6.24}, {Type: "ad", Id: "a<&>\"é", Score: -0.5}}}},
		{"explained", api.RetrieveResponse{ModelVersion: "v1", FreshUser: &no, NewUser: &yes, Candidates: []api.Candidate{
			{Type: "ad", Id: "a1", Score: 1.83, Parts: &api.ScoreParts{Similarity: 0.41, Prior: 1.42}, Tokens: &tokens, KeywordMatch: &yes},
			{Type: "ad", Id: "a2", Score: 1e-8, Parts: &api.ScoreParts{Coengagement: 2e21}, Tokens: &empty},
			{Type: "ad", Id: "a3", Score: 3, Tokens: &nilTokens, KeywordMatch: &no}}}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var many api.RetrieveResponse
	many.ModelVersion = "v3"
	for i := range 300 {
		f := floats[i%len(floats)]
		if i >= len(floats) {
			f = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(50)-25)))
		}
		many.Candidates = append(many.Candidates, api.Candidate{Type: "ad", Id: "a" + string(rune('a'+i%26)), Score: f,
			Parts: &api.ScoreParts{Similarity: f, Prior: -f, Coengagement: f / 3}})
	}
	cases = append(cases, struct {
		name string
		r    api.RetrieveResponse
	}{"many floats", many})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(tc.r); err != nil {
				t.Fatal(err)
			}
			got, err := appendRetrieveResponse(nil, &tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("appendRetrieveResponse =\n%s\nwant\n%s", got, want.Bytes())
			}
			rec := httptest.NewRecorder()
			writeRetrieveResponse(rec, 200, &tc.r)
			if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
				t.Errorf("writeRetrieveResponse: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
		})
	}
	t.Run("NaN falls back", func(t *testing.T) {
		r := api.RetrieveResponse{ModelVersion: "v1", Candidates: []api.Candidate{{Type: "ad", Id: "a", Score: float32(math.NaN())}}}
		if _, err := appendRetrieveResponse(nil, &r); err == nil {
			t.Fatal("appendRetrieveResponse(NaN) succeeded, want an error")
		}
		rec := httptest.NewRecorder()
		writeRetrieveResponse(rec, 200, &r)
		if rec.Body.Len() != 0 {
			t.Errorf("body %q, want what writeJSON writes (nothing)", rec.Body)
		}
	})
}
