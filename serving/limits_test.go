package serving

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hir-ads/hir/index"
	"github.com/hir-ads/hir/retrieval"
)

// TestInputLimits covers the bounds on request content: future timestamps
// (defect 2), query, entity and id bounds (defect 3), invalid UTF-8 and
// duplicate keys (defect 7). Each case must give a 400 whose detail names
// the field, repeats at most a short prefix of the input, and store nothing.
func TestInputLimits(t *testing.T) {
	env := newEnv(t, Options{})
	env.ingest(newWorld(4, 6, 3, 1))
	ev := func(id string, ts string) string {
		return `{"id":"` + id + `","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"ad1"},"type":"click","ts":` + ts + `}`
	}
	now := time.Now()
	soon := fmt.Sprint(now.Add(30 * time.Minute).UnixMilli())
	later := fmt.Sprint(now.Add(2 * time.Hour).UnixMilli())
	long := strings.Repeat("x", 100_000)
	manyAttrs := make([]string, MaxAttrs+1)
	for i := range manyAttrs {
		manyAttrs[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	tests := []struct {
		name, path, body string
		status           int
		detail           string
	}{
		{"ts far in the future", "/v1/events", `{"events":[` + ev("f0", "1700000000000") + `,` + ev("f1", "1700000000001") + `,` +
			ev("f2", "1700000000002") + `,` + ev("f3", `"2199-06-01T00:00:00Z"`) + `]}`, 400, "events[3].ts: 2199-06-01T00:00:00Z is more than 1h0m0s ahead"},
		{"ts two hours ahead", "/v1/events", `{"events":[` + ev("f4", later) + `]}`, 400, "events[0].ts"},
		{"ts within the skew", "/v1/events", `{"events":[` + ev("f5", soon) + `]}`, 200, ""},
		{"old ts", "/v1/events", `{"events":[` + ev("f6", `"1999-01-01T00:00:00Z"`) + `]}`, 200, ""},
		{"future context event", "/v1/retrieve", `{"context_events":[{"dst":{"type":"ad","id":"ad1"},"type":"click","ts":"2199-06-01T00:00:00Z"}]}`,
			400, "context_events[0].ts"},
		{"query too long", "/v1/retrieve", `{"query":"` + long + `"}`, 400, "query: 100000 bytes exceed the limit"},
		{"query too many terms", "/v1/retrieve", `{"query":"` + strings.Repeat("shoe ", MaxQueryTerms+1) + `"}`, 400, "terms exceed the limit"},
		{"entity text too long", "/v1/entities", `{"entities":[{"type":"ad","id":"big","text":"` + strings.Repeat("y", MaxTextBytes+1) + `"}]}`,
			400, "entities[0]: text:"},
		{"too many attrs", "/v1/entities", `{"entities":[{"type":"ad","id":"attrs","attrs":{` + strings.Join(manyAttrs, ",") + `}}]}`,
			400, "entities[0]: attrs:"},
		{"vector too long", "/v1/entities", `{"entities":[{"type":"ad","id":"vec","vector":[` + strings.Repeat("0.5,", MaxVectorLen) + `0.5]}]}`,
			400, "entities[0]: vector:"},
		{"id too long", "/v1/entities", `{"entities":[{"type":"ad","id":"` + long + `"}]}`, 400, "entities[0]: bad value: id longer than"},
		{"invalid UTF-8 in an id", "/v1/entities", "{\"entities\":[{\"type\":\"ad\",\"id\":\"a\xff\"}]}", 400, "not valid UTF-8"},
		{"lone surrogate in an event id", "/v1/events", `{"events":[` + ev(`\ud800`, "1700000000000") + `]}`, 400, "events[0]: id: bad id: not valid UTF-8"},
		{"lone surrogate in a dst id", "/v1/events", `{"events":[{"id":"s1","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"\udc01"},"type":"click","ts":1}]}`,
			400, "dst.id: bad id: not valid UTF-8"},
		{"duplicate top-level key", "/v1/retrieve", `{"user":{"type":"user","id":"u1"},"user":{"type":"user","id":"u2"}}`, 400, `duplicate key "user"`},
		{"duplicate nested key", "/v1/events", `{"events":[{"id":"d1","id":"d2","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"ad1"},"type":"click","ts":1}]}`,
			400, `duplicate key "id"`},
		{"long unknown field is clipped", "/v1/retrieve", `{"` + long + `":1}`, 400, "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := env.counts()
			status, h, b := env.raw(http.MethodPost, tc.path, "application/json", testKey, strings.NewReader(tc.body))
			if status != tc.status {
				t.Fatalf("status = %d, want %d (%.300s)", status, tc.status, b)
			}
			if tc.status == 200 {
				return
			}
			p := decodeProblem(t, h, b)
			if p.Detail == nil || !strings.Contains(*p.Detail, tc.detail) {
				t.Errorf("detail = %.300s, want it to contain %q", ptrStr(p.Detail), tc.detail)
			}
			if len(b) > 1200 || strings.Contains(string(b), strings.Repeat("x", maxEcho+1)) ||
				strings.Contains(string(b), strings.Repeat("y", maxEcho+1)) {
				t.Errorf("problem repeats more than %d bytes of the input: %d bytes: %.300s", maxEcho, len(b), b)
			}
			if after := env.counts(); after != before {
				t.Errorf("a rejected request changed the counts: %+v -> %+v", before, after)
			}
		})
	}
	if logs := env.logBuf.String(); strings.Contains(logs, strings.Repeat("x", maxEcho+1)) {
		t.Errorf("the log repeats more than %d bytes of an input", maxEcho)
	}
}

func TestMaxClockSkewOption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		skew   time.Duration
		ahead  time.Duration
		status int
	}{
		{"default refuses 2h", 0, 2 * time.Hour, 400},
		{"5m refuses 10m", 5 * time.Minute, 10 * time.Minute, 400},
		{"5m accepts 1m", 5 * time.Minute, time.Minute, 200},
		{"negative disables", -1, 100 * 365 * 24 * time.Hour, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, Options{MaxClockSkew: tc.skew})
			body := fmt.Sprintf(`{"events":[{"id":"e","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a1"},"type":"click","ts":%d}]}`,
				time.Now().Add(tc.ahead).UnixMilli())
			if status, _, b := env.raw(http.MethodPost, "/v1/events", "application/json", testKey, strings.NewReader(body)); status != tc.status {
				t.Errorf("status = %d, want %d (%s)", status, tc.status, b)
			}
		})
	}
}

func TestKeywordErrorStatus(t *testing.T) {
	ti, err := index.NewTextIndex("")
	if err != nil {
		t.Fatal(err)
	}
	defer ti.Close()
	if err := ti.Index(context.Background(), map[uint32]index.TextDoc{1: {Title: "red running shoes"}}); err != nil {
		t.Fatal(err)
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	gone, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		query  string
		status int
	}{
		{"deadline", expired, "shoes", http.StatusServiceUnavailable},
		{"client gone", gone, "shoes", 499},
		{"unparsable", context.Background(), "+" + strings.Repeat("z", 200) + ":\"unterminated", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ti.Search(tc.ctx, tc.query, 10)
			if err == nil {
				t.Fatal("Search succeeded")
			}
			err = retrieval.KeywordError(err)
			if status, _, _ := classify(err); status != tc.status {
				t.Errorf("classify(KeywordError(%v)) = %d, want %d", err, status, tc.status)
			}
			if d := clipDetail(clientDetail(err)); strings.Contains(d, strings.Repeat("z", maxEcho+1)) {
				t.Errorf("problem detail repeats the query: %.200s", d)
			}
		})
	}
}

// TestReadBodyLimit (issue 48, defect 6): a retrieve body is capped at
// Options.MaxReadBodyBytes, not at the ingest cap, and refused before it
// is read or decoded: a declared 7 MB body with a huge query gets 413 from
// its headers alone (the test never sends the rest), and an undeclared
// (chunked) one gets 413 once the cap is passed. Both close the
// connection. An ingest batch of the same size is still read.
func TestReadBodyLimit(t *testing.T) {
	env := newEnv(t, Options{})
	addr := strings.TrimPrefix(env.http.URL, "http://")
	huge := `{"user":{"type":"user","id":"u1"},"query":"` + strings.Repeat("x", 7<<20) + `"}` // under the ingest cap
	for _, tc := range []struct {
		name string
		send func(c net.Conn)
	}{
		{"declared length", func(c net.Conn) {
			fmt.Fprintf(c, "POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(huge), huge[:1024])
		}},
		{"chunked", func(c net.Conn) {
			fmt.Fprint(c, "POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
			for i := 0; i < len(huge); i += 64 << 10 {
				chunk := huge[i:min(i+64<<10, len(huge))]
				if _, err := fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
					return // the server answered and closed
				}
			}
			fmt.Fprint(c, "0\r\n\r\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go tc.send(c)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "1048576") {
				t.Errorf("answer = %d %s, want 413 naming the limit of 1048576 bytes", res.StatusCode, b)
			}
			if !res.Close {
				t.Errorf("the 413 keeps the connection open, want Connection: close")
			}
		})
	}
	// The ingest cap is the larger one: a 2 MiB batch is read (and refused
	// for its content, not its size).
	batch := `{"events":[],"pad":"` + strings.Repeat("y", 2<<20) + `"}`
	req, _ := http.NewRequest(http.MethodPost, env.http.URL+"/v1/events", strings.NewReader(batch))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("2 MiB ingest body: %d, want 400 (read under the 8 MiB ingest cap)", res.StatusCode)
	}
}
