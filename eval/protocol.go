package eval

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Slices of the evaluation queries.
const (
	// SliceAll holds every query.
	SliceAll = "all"
	// SliceColdUsers holds queries of users with at most ColdUserMax
	// interactions before the query.
	SliceColdUsers = "cold_users"
	// SliceColdItems holds queries whose relevant items had no interaction
	// before the cut (chrono: the relevant set is restricted to them).
	SliceColdItems = "cold_items"
)

var sliceOrder = []string{SliceAll, SliceColdUsers, SliceColdItems}

// Protocols.
const (
	ProtocolChrono = "chrono"
	ProtocolReplay = "replay"
	ProtocolTruth  = "truth"
)

// runner evaluates the methods on one window.
type runner struct {
	cfg     *Config
	data    *Data
	w       Window
	methods []Recommender
	acc     map[string]map[string]*accumulator // method -> slice -> metrics
	timing  map[string]*MethodInfo
	exact   map[string]int // approximating method index -> exact method index
	lists   [][]int32      // by method: this query's top-K
	vals    map[string]float64
	queries map[string]int // slice -> queries

	// Truth protocol: planted interests by dense id (nil otherwise).
	truthItem []int                   // by item: fine interest, -1 unknown
	truthUser map[int32]map[int]bool  // user -> planted interests
	interest  map[string]*accumulator // method -> interest recall
}

// setTruth maps the planted interests to dense ids.
func (r *runner) setTruth(t *Truth) {
	cat := r.data.Catalog
	r.truthItem = make([]int, cat.NumItems())
	for i, id := range cat.Items {
		r.truthItem[i] = -1
		if in, ok := t.ItemInterest[id]; ok {
			r.truthItem[i] = in
		}
	}
	r.truthUser = make(map[int32]map[int]bool, len(t.UserInterests))
	for id, ins := range t.UserInterests {
		if u, ok := cat.User(id); ok {
			set := make(map[int]bool, len(ins))
			for _, in := range ins {
				set[in] = true
			}
			r.truthUser[u] = set
		}
	}
	r.interest = make(map[string]*accumulator)
}

// interestResults returns the mean interest recall by method.
func (r *runner) interestResults() []Result {
	var out []Result
	for _, m := range r.methods {
		if a := r.interest[m.Name()]; a != nil {
			out = append(out, Result{Method: m.Name(), Slice: SliceAll, Queries: a.count, Metrics: a.means()})
		}
	}
	return out
}

func newRunner(cfg *Config, data *Data, w Window, methods []Recommender) (*runner, error) {
	r := &runner{
		cfg: cfg, data: data, w: w, methods: methods,
		acc:     make(map[string]map[string]*accumulator),
		timing:  make(map[string]*MethodInfo),
		exact:   make(map[string]int),
		lists:   make([][]int32, len(methods)),
		vals:    make(map[string]float64),
		queries: make(map[string]int),
	}
	idx := make(map[string]int)
	for i, m := range methods {
		if _, dup := idx[m.Name()]; dup {
			return nil, fmt.Errorf("%w: method %q twice", ErrBadConfig, m.Name())
		}
		idx[m.Name()] = i
		r.acc[m.Name()] = make(map[string]*accumulator)
		r.timing[m.Name()] = &MethodInfo{Name: m.Name()}
	}
	for _, m := range methods {
		if a, ok := m.(Approximator); ok && a.Exact() != "" {
			j, ok := idx[a.Exact()]
			if !ok {
				return nil, fmt.Errorf("%w: %s approximates %q, which is not evaluated", ErrBadConfig, m.Name(), a.Exact())
			}
			r.exact[m.Name()] = j
		}
	}
	return r, nil
}

// fit fits every method on the window's training view.
func (r *runner) fit(ctx context.Context) error {
	view := r.data.View(r.w)
	for _, m := range r.methods {
		start := time.Now()
		if err := m.Fit(ctx, view); err != nil {
			return fmt.Errorf("fit %s: %w", m.Name(), err)
		}
		r.timing[m.Name()].FitSeconds = time.Since(start).Seconds()
		r.cfg.Logger.Info("fitted", "method", m.Name(), "seconds", r.timing[m.Name()].FitSeconds)
	}
	return nil
}

// query asks every method and scores their lists against relevant for the
// given slices; full selects recall and NDCG on top of hit rate and MRR.
func (r *runner) query(ctx context.Context, q *Query, relevant map[int32]bool, slices_ []string, coldRelevant map[int32]bool, full bool) error {
	for i, m := range r.methods {
		start := time.Now()
		list, err := m.TopK(ctx, q, r.lists[i])
		if err != nil {
			return fmt.Errorf("query %s for user %d: %w", m.Name(), q.User, err)
		}
		r.timing[m.Name()].QuerySeconds += time.Since(start).Seconds()
		r.lists[i] = list
	}
	for _, s := range slices_ {
		r.queries[s]++
	}
	if interests := r.truthUser[q.User]; r.truthItem != nil && len(interests) > 0 {
		for i, m := range r.methods {
			vals := make(map[string]float64, len(r.cfg.Ks))
			for _, k := range r.cfg.Ks {
				vals[MetricKey("interest_recall", k)] = interestRecall(r.lists[i], r.truthItem, interests, k)
			}
			a := r.interest[m.Name()]
			if a == nil {
				a = &accumulator{}
				r.interest[m.Name()] = a
			}
			a.add(vals)
		}
	}
	for i, m := range r.methods {
		for _, s := range slices_ {
			rel := relevant
			if s == SliceColdItems && coldRelevant != nil {
				rel = coldRelevant
			}
			clear(r.vals)
			rankingMetrics(r.lists[i], rel, r.cfg.Ks, full, r.vals)
			if j, ok := r.exact[m.Name()]; ok {
				for _, k := range r.cfg.Ks {
					r.vals[MetricKey(MetricOverlap, k)] = Overlap(r.lists[i], r.lists[j], k)
				}
			}
			a := r.acc[m.Name()][s]
			if a == nil {
				a = &accumulator{}
				r.acc[m.Name()][s] = a
			}
			a.add(r.vals)
		}
	}
	return nil
}

// results returns the averaged metrics, methods in evaluation order.
func (r *runner) results() ([]Result, []MethodInfo) {
	var res []Result
	var infos []MethodInfo
	for _, m := range r.methods {
		for _, s := range sliceOrder {
			if a := r.acc[m.Name()][s]; a != nil {
				res = append(res, Result{Method: m.Name(), Slice: s, Queries: a.count, Metrics: a.means()})
			}
		}
		info := *r.timing[m.Name()]
		if n := r.queries[SliceAll]; n > 0 {
			info.QueryMicros = info.QuerySeconds / float64(n) * 1e6
		}
		infos = append(infos, info)
	}
	return res, infos
}

// chrono runs the chronological protocol: one query per user with a
// positive in the window, ranking every item the user has not interacted with
// before the cut; relevant = the user's window positives.
func (r *runner) chrono(ctx context.Context) error {
	if err := r.fit(ctx); err != nil {
		return err
	}
	cat := r.data.Catalog
	hist := histories(r.data.Interactions[:r.w.TrainEnd], cat.NumUsers())
	seenItem := make([]bool, cat.NumItems())
	for _, in := range r.data.Interactions[:r.w.TrainEnd] {
		seenItem[in.Item] = true
	}
	exclude := make([]bool, cat.NumItems())
	relevant := make(map[int32]map[int32]bool)
	for _, in := range r.data.Interactions[r.w.TrainEnd:r.w.EvalEnd] {
		if !in.Positive() {
			continue
		}
		if relevant[in.User] == nil {
			relevant[in.User] = make(map[int32]bool)
		}
		relevant[in.User][in.Item] = true
	}
	users := make([]int32, 0, len(relevant))
	for u := range relevant {
		users = append(users, u)
	}
	slices.Sort(users)
	users = sample(users, r.cfg.MaxQueries)
	maxK := slices.Max(r.cfg.Ks)
	for n, u := range users {
		if n%64 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("chrono queries: %w", err)
			}
		}
		for _, in := range hist[u] {
			exclude[in.Item] = true
		}
		rel := make(map[int32]bool, len(relevant[u]))
		cold := make(map[int32]bool)
		for it := range relevant[u] {
			if exclude[it] {
				continue // re-engagement with an item the user already had: not retrievable
			}
			rel[it] = true
			if !seenItem[it] {
				cold[it] = true
			}
		}
		if len(rel) > 0 {
			sl := []string{SliceAll}
			if len(hist[u]) <= r.cfg.ColdUserMax {
				sl = append(sl, SliceColdUsers)
			}
			if len(cold) > 0 {
				sl = append(sl, SliceColdItems)
			}
			q := &Query{User: u, AsOf: r.w.AsOf, History: hist[u], K: maxK, exclude: exclude}
			if err := r.query(ctx, q, rel, sl, cold, true); err != nil {
				return err
			}
		}
		for _, in := range hist[u] {
			exclude[in.Item] = false
		}
	}
	return nil
}

// replay runs the replay protocol: walking the window in time order, each
// positive event of a user on an item new to that user is a query (top-K
// excluding the user's items so far) answered before any event of the same
// timestamp is ingested; then the events are appended to the histories and
// passed to [Observer] methods.
func (r *runner) replay(ctx context.Context) error {
	if err := r.fit(ctx); err != nil {
		return err
	}
	cat := r.data.Catalog
	hist := histories(r.data.Interactions[:r.w.TrainEnd], cat.NumUsers())
	seenItem := make([]bool, cat.NumItems())
	for _, in := range r.data.Interactions[:r.w.TrainEnd] {
		seenItem[in.Item] = true
	}
	window := r.data.Interactions[r.w.TrainEnd:r.w.EvalEnd]
	var candidates []int // window indices of positive events
	for i, in := range window {
		if in.Positive() {
			candidates = append(candidates, i)
		}
	}
	asked := make(map[int]bool)
	for _, i := range sample(candidates, r.cfg.MaxQueries) {
		asked[i] = true
	}
	exclude := make([]bool, cat.NumItems())
	maxK := slices.Max(r.cfg.Ks)
	for start := 0; start < len(window); {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		end := start + 1
		for end < len(window) && window[end].TS == window[start].TS {
			end++
		}
		for i := start; i < end; i++ {
			in := window[i]
			if !asked[i] {
				continue
			}
			h := hist[in.User]
			for _, e := range h {
				exclude[e.Item] = true
			}
			if !exclude[in.Item] {
				sl := []string{SliceAll}
				if len(h) <= r.cfg.ColdUserMax {
					sl = append(sl, SliceColdUsers)
				}
				if !seenItem[in.Item] {
					sl = append(sl, SliceColdItems)
				}
				q := &Query{User: in.User, AsOf: in.TS - 1, History: h, K: maxK, exclude: exclude}
				if err := r.query(ctx, q, map[int32]bool{in.Item: true}, sl, nil, false); err != nil {
					return err
				}
			}
			for _, e := range h {
				exclude[e.Item] = false
			}
		}
		for _, in := range window[start:end] {
			hist[in.User] = append(hist[in.User], in)
			for _, m := range r.methods {
				if o, ok := m.(Observer); ok {
					o.Observe(in)
				}
			}
		}
		start = end
	}
	return nil
}

// sample keeps at most n entries evenly spread over xs (all when n <= 0).
func sample[T any](xs []T, n int) []T {
	if n <= 0 || len(xs) <= n {
		return xs
	}
	out := make([]T, 0, n)
	for i := range n {
		out = append(out, xs[i*len(xs)/n])
	}
	return out
}
