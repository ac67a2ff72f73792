package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hir-ads/hir/dataset"
	"github.com/hir-ads/hir/graph"
)

// Bench modes: retrieval for users the server knows, or for fresh users
// described only by context events.
const (
	benchKnown = "known"
	benchFresh = "fresh"
)

// benchMinKnownEvents is the number of ad events a user needs to be picked
// as a known user (the server's default MinUserEvents: such users are served
// their snapshot embedding).
const benchMinKnownEvents = 3

// benchContextEvents is the number of recent positive ad events a fresh
// user's request carries.
const benchContextEvents = 5

// benchConfig is what `hir bench` runs with.
type benchConfig struct {
	url         string
	data        string
	usersFile   string
	mode        string
	duration    time.Duration
	warmup      time.Duration
	requests    int
	concurrency int
	k           int
	apiKey      string
	seed        uint64
}

func runBench(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "bench", "--addr URL (--data DIR | --users-file F) [--mode known|fresh] [--duration D] [--concurrency C]")
	var cfg benchConfig
	fs.StringVar(&cfg.url, "addr", "http://127.0.0.1:8080", "base URL of a running `hir serve`")
	fs.StringVar(&cfg.data, "data", "", "JSONL world (entities.jsonl, events.jsonl; e.g. `hir synth` output, or a demo/serve data directory with a world/ subdirectory) to take user and ad ids from")
	fs.StringVar(&cfg.usersFile, "users-file", "", "file of lines `user_id [ad_id ...]`: known users, and the ads a fresh user's context events click")
	fs.StringVar(&cfg.mode, "mode", benchKnown, "known: retrieve for known users; fresh: for unseen users with context_events")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "measurement time (after the warm-up)")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "warm-up time, not measured")
	fs.IntVar(&cfg.requests, "requests", 0, "stop after this many measured requests (0: no limit)")
	fs.IntVar(&cfg.concurrency, "concurrency", 4, "concurrent clients")
	fs.IntVar(&cfg.k, "k", 100, "candidates per request")
	fs.StringVar(&cfg.apiKey, "api-key", "", "bearer API key (for a server run with --read-auth)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the request order")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case (cfg.data == "") == (cfg.usersFile == ""):
		fmt.Fprintln(e.stderr, "give exactly one of --data and --users-file")
		fs.Usage()
		return errUsage
	case cfg.mode != benchKnown && cfg.mode != benchFresh:
		fmt.Fprintf(e.stderr, "--mode %q: want known or fresh\n", cfg.mode)
		return errUsage
	case cfg.concurrency < 1 || cfg.k < 1 || cfg.duration <= 0 || cfg.requests < 0 || cfg.warmup < 0:
		fmt.Fprintln(e.stderr, "--concurrency, --k and --duration must be positive, --requests and --warmup not negative")
		return errUsage
	}
	var profiles []benchProfile
	var err error
	if cfg.data != "" {
		profiles, err = benchProfilesFromWorld(ctx, cfg.data)
	} else {
		profiles, err = benchProfilesFromFile(cfg.usersFile)
	}
	if err != nil {
		return err
	}
	bodies, err := benchBodies(profiles, cfg, time.Now())
	if err != nil {
		return err
	}
	rep, err := benchRun(ctx, cfg, bodies)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(e.stdout).Encode(rep); err != nil {
		return err
	}
	_, err = fmt.Fprintln(e.stdout, rep.markdown())
	return err
}

// benchProfile is one real user: its id, its number of ad events, and its
// latest positively engaged ads (most recent last).
type benchProfile struct {
	user   string
	events int
	ads    []string
}

// benchCollector is a dataset.Sink that gathers user profiles from events.
type benchCollector struct {
	byUser map[string]*benchProfile
}

func (c *benchCollector) Entity(*graph.Entity) error { return nil }

func (c *benchCollector) Event(ev *graph.Event) error {
	if ev.Src.Type != graph.NodeUser || ev.Dst.Type != graph.NodeAd || ev.Type.IsStructure() {
		return nil
	}
	p := c.byUser[ev.Src.ID]
	if p == nil {
		p = &benchProfile{user: ev.Src.ID}
		c.byUser[ev.Src.ID] = p
	}
	p.events++
	if ev.Type.IsPositive() {
		p.ads = append(p.ads, ev.Dst.ID)
		if len(p.ads) > 2*benchContextEvents {
			p.ads = slices.Delete(p.ads, 0, benchContextEvents)
		}
	}
	return nil
}

var _ dataset.Sink = (*benchCollector)(nil)

// benchProfilesFromWorld reads user profiles from a JSONL world: dir itself
// or, for a data directory, dir/world.
func benchProfilesFromWorld(ctx context.Context, dir string) ([]benchProfile, error) {
	src := dir
	if _, err := os.Stat(filepath.Join(dir, dataset.EventsFile)); errors.Is(err, os.ErrNotExist) {
		src = filepath.Join(dir, "world")
	}
	c := &benchCollector{byUser: map[string]*benchProfile{}}
	if _, err := dataset.Import(ctx, "jsonl", src, c); err != nil {
		return nil, fmt.Errorf("read users from %s: %w", src, err)
	}
	out := make([]benchProfile, 0, len(c.byUser))
	for _, p := range c.byUser {
		p.ads = p.ads[max(0, len(p.ads)-benchContextEvents):]
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b benchProfile) int { return strings.Compare(a.user, b.user) })
	return out, nil
}

// benchProfilesFromFile reads lines `user_id [ad_id ...]`; blank lines and
// lines starting with # are skipped. A user listed is taken as known.
func benchProfilesFromFile(path string) ([]benchProfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open users file: %w", err)
	}
	defer f.Close()
	var out []benchProfile
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		out = append(out, benchProfile{user: fields[0], events: benchMinKnownEvents, ads: fields[1:]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read users file: %w", err)
	}
	return out, nil
}

// benchBodies encodes one retrieve request body per usable profile: known
// users by id; fresh users as a new id with the profile's ads as click
// context events.
func benchBodies(profiles []benchProfile, cfg benchConfig, now time.Time) ([][]byte, error) {
	type ref struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	type event struct {
		Dst  ref    `json:"dst"`
		Type string `json:"type"`
		TS   int64  `json:"ts"`
	}
	type request struct {
		User          ref     `json:"user"`
		K             int     `json:"k"`
		ContextEvents []event `json:"context_events,omitempty"`
	}
	var bodies [][]byte
	for i, p := range profiles {
		req := request{K: cfg.k}
		switch cfg.mode {
		case benchKnown:
			if p.events < benchMinKnownEvents {
				continue
			}
			req.User = ref{"user", p.user}
		case benchFresh:
			if len(p.ads) == 0 {
				continue
			}
			req.User = ref{"user", "bench-fresh-" + strconv.Itoa(i)}
			for j, ad := range p.ads {
				req.ContextEvents = append(req.ContextEvents, event{Dst: ref{"ad", ad}, Type: "click",
					TS: now.UnixMilli() - int64(len(p.ads)-j)*60_000})
			}
		}
		b, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		bodies = append(bodies, b)
	}
	if len(bodies) == 0 {
		return nil, fmt.Errorf("no users usable for --mode %s (known: >= %d ad events; fresh: >= 1 positive ad event)",
			cfg.mode, benchMinKnownEvents)
	}
	rng := rand.New(rand.NewPCG(cfg.seed, 0xbe7c))
	rng.Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i] })
	return bodies, nil
}

// benchReport is the result of a run, printed as JSON. QPS counts 2xx
// answers per second; the latencies are those of the 2xx answers.
type benchReport struct {
	Mode        string         `json:"mode"`
	URL         string         `json:"url"`
	Concurrency int            `json:"concurrency"`
	K           int            `json:"k"`
	Users       int            `json:"users"`
	Seconds     float64        `json:"seconds"`
	Requests    int            `json:"requests"`
	Errors      int            `json:"errors"`
	Status      map[string]int `json:"status"`
	QPS         float64        `json:"qps"`
	LatencyMS   benchLatency   `json:"latency_ms"`
	FirstError  string         `json:"first_error,omitempty"`
}

type benchLatency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// markdown renders the report as one row of
// | mode | concurrency | requests | errors | queries/s | p50 ms | p99 ms |.
func (r *benchReport) markdown() string {
	return fmt.Sprintf("| %s | %d | %d | %d | %.1f | %.2f | %.2f |", r.Mode, r.Concurrency, r.Requests, r.Errors,
		r.QPS, r.LatencyMS.P50, r.LatencyMS.P99)
}

// benchWorker's results: latencies of measured requests and outcomes.
type benchResult struct {
	n        int             // requests answered
	lat      []time.Duration // of the 2xx answers
	status   map[string]int
	errors   int
	firstErr string
}

// benchRun sends the bodies round-robin from cfg.concurrency clients, each
// sending its next request when the last is answered: first for
// cfg.warmup (not measured), then until cfg.duration passes or
// cfg.requests measured requests are sent, whichever comes first. Requests
// sent before the end are waited for and measured; the rate is over the
// time until the last is answered.
func benchRun(ctx context.Context, cfg benchConfig, bodies [][]byte) (*benchReport, error) {
	url := strings.TrimRight(cfg.url, "/")
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	url += "/v1/retrieve"
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: cfg.concurrency, MaxIdleConnsPerHost: cfg.concurrency, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()

	send := func(ctx context.Context, body []byte) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		if cfg.apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+cfg.apiKey)
		}
		res, err := client.Do(req)
		if err != nil {
			return "transport", err
		}
		defer res.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		// Read the rest: a body left unread closes the connection, and every
		// request after it would pay for a new one.
		if _, err := io.Copy(io.Discard, res.Body); err != nil {
			return "transport", err
		}
		code := strconv.Itoa(res.StatusCode)
		if res.StatusCode/100 != 2 {
			return code, fmt.Errorf("status %s: %s", res.Status, bytes.TrimSpace(msg))
		}
		return code, nil
	}

	// Warm-up: the server's caches and connections, not measured. Like
	// the measurement below it is a closed loop: a client sends its next
	// request when the last one is answered, and no request is cut off
	// (one cut off would go on running in the server beside the next).
	var next atomic.Int64
	if cfg.warmup > 0 {
		end := time.Now().Add(cfg.warmup)
		var wg sync.WaitGroup
		for range cfg.concurrency {
			wg.Go(func() {
				for ctx.Err() == nil && time.Now().Before(end) {
					_, _ = send(ctx, bodies[int(next.Add(1)-1)%len(bodies)])
				}
			})
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}

	end := time.Now().Add(cfg.duration)
	var issued atomic.Int64
	results := make([]benchResult, cfg.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cfg.concurrency {
		wg.Go(func() {
			r := &results[w]
			r.status = map[string]int{}
			for ctx.Err() == nil && time.Now().Before(end) {
				if n := issued.Add(1); cfg.requests > 0 && n > int64(cfg.requests) {
					return
				}
				t0 := time.Now()
				code, err := send(ctx, bodies[int(next.Add(1)-1)%len(bodies)])
				if err != nil && ctx.Err() != nil {
					return // interrupted: not an outcome
				}
				d := time.Since(t0)
				r.status[code]++
				r.n++
				if err == nil {
					r.lat = append(r.lat, d)
				} else {
					r.errors++
					if r.firstErr == "" {
						r.firstErr = err.Error()
					}
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &benchReport{Mode: cfg.mode, URL: cfg.url, Concurrency: cfg.concurrency, K: cfg.k, Users: len(bodies),
		Seconds: elapsed.Seconds(), Status: map[string]int{}}
	var lat []time.Duration
	for _, r := range results {
		rep.Requests += r.n
		lat = append(lat, r.lat...)
		rep.Errors += r.errors
		for k, v := range r.status {
			rep.Status[k] += v
		}
		if rep.FirstError == "" {
			rep.FirstError = r.firstErr
		}
	}
	rep.QPS = float64(len(lat)) / elapsed.Seconds()
	rep.LatencyMS = latencySummary(lat)
	return rep, nil
}

// latencySummary returns the mean, nearest-rank percentiles and max of lat
// in milliseconds (zeros when empty).
func latencySummary(lat []time.Duration) benchLatency {
	if len(lat) == 0 {
		return benchLatency{}
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pct := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(lat)))) - 1
		return ms(lat[min(max(i, 0), len(lat)-1)])
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return benchLatency{Mean: ms(sum / time.Duration(len(lat))), P50: pct(50), P90: pct(90), P99: pct(99), Max: ms(lat[len(lat)-1])}
}
