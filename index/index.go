package index

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
)

// Well-known attribute keys of an ad. Any other key is allowed too.
const (
	AttrAdvertiser = "advertiser"
	AttrCampaign   = "campaign"
	AttrCategory   = "category"
	AttrBrand      = "brand"
	AttrStatus     = "status"
	// LabelPrefix prefixes the attribute key of a free key=value label:
	// Doc.Labels["region"] = "eu" is stored as attribute "label:region".
	LabelPrefix = "label:"
)

// Errors of the index.
var (
	// ErrDim is returned for an embedding whose length is not the index's.
	ErrDim = errors.New("wrong embedding dimension")
	// ErrBadOptions is returned by constructors for invalid options.
	ErrBadOptions = errors.New("bad index options")
	// ErrBadQuery is returned by Search for an invalid query.
	ErrBadQuery = errors.New("bad query")
)

// Doc is one indexed ad. ID is a dense uint32 chosen by the caller (for
// example the graph's node id of the ad).
type Doc struct {
	ID        uint32
	Embedding []float32
	// Attrs maps attribute keys (AttrCategory, ...) to their values.
	Attrs map[string][]string
	// Labels holds free key=value labels, stored as LabelPrefix+key.
	Labels map[string]string
	// Prior is an additive score term of the doc (for example the log of
	// its recent engagement): the exact re-rank scores a doc
	// Dot(query, Embedding) + Query.PriorWeight*Prior. Zero: no prior.
	Prior float32
	// NewUserPrior replaces Prior for the queries of new users
	// (Query.NewUser): for example the engagement of users in their first
	// events, which differs from everyone's. Zero: no prior.
	NewUserPrior float32
	// Fresh marks a doc whose popularity coordinate the re-rank reads as
	// at least the index's popularity floor (see SetPopularityFloor) when
	// the query weighs the priors: a new ad, which has no engagement to
	// show in its embedding yet.
	Fresh bool
}

// Options configures an [Index]. Zero fields take defaults.
type Options struct {
	// Quantizer turns embeddings into bags. Required.
	Quantizer *Quantizer
	// Logger defaults to slog.Default(), scoped with component=index.
	Logger *slog.Logger
	// Workers bounds the goroutines of Build (default min(2, GOMAXPROCS)).
	Workers int
	// Search holds the default search tuning.
	Search SearchOptions
}

// Index is the writer side of the inverted index: it owns the current
// immutable [Snapshot] and builds the next one on every change. Readers call
// Snapshot once per request and use it throughout. Safe for concurrent use;
// writers are serialised by a mutex, readers never block.
type Index struct {
	q    *Quantizer
	log  *slog.Logger
	opts Options

	mtx sync.Mutex // serialises writers; guards nothing read by readers
	cur atomic.Pointer[Snapshot]
}

// New returns an empty index.
func New(opts Options) (*Index, error) {
	if opts.Quantizer == nil {
		return nil, fmt.Errorf("new index: no quantizer: %w", ErrBadOptions)
	}
	s := emptySnapshot(opts.Quantizer)
	return newIndex(s, opts), nil
}

// NewFromSnapshot returns an index whose current state is s (for example a
// snapshot read with [ReadSnapshot]); opts.Quantizer is ignored, s's is used.
func NewFromSnapshot(s *Snapshot, opts Options) *Index {
	return newIndex(s, opts)
}

func newIndex(s *Snapshot, opts Options) *Index {
	opts.Quantizer = s.q
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Workers <= 0 {
		opts.Workers = min(2, runtime.GOMAXPROCS(0))
	}
	opts.Search.applyDefaults()
	s.search = opts.Search
	ix := &Index{q: s.q, log: opts.Logger.With("component", "index"), opts: opts}
	ix.cur.Store(s)
	return ix
}

// Snapshot returns the current snapshot. It is immutable: later writes
// publish new snapshots and never change this one.
func (ix *Index) Snapshot() *Snapshot { return ix.cur.Load() }

// Quantizer returns the quantizer of the index.
func (ix *Index) Quantizer() *Quantizer { return ix.q }

// Upsert inserts or replaces docs (new embedding -> new bag -> postings)
// and publishes one new snapshot for the whole batch. Only the touched
// postings, attribute bitmaps and chunks are copied. Bags are computed
// before the writer lock is taken. If two docs share an id the last wins.
func (ix *Index) Upsert(ctx context.Context, docs ...Doc) error {
	for i := range docs {
		if len(docs[i].Embedding) != ix.q.dim {
			return fmt.Errorf("upsert doc %d: %w: got %d, want %d", docs[i].ID, ErrDim, len(docs[i].Embedding), ix.q.dim)
		}
	}
	bags, err := ix.bags(ctx, docs, ix.cur.Load())
	if err != nil {
		return fmt.Errorf("upsert: %w", err)
	}
	ix.mtx.Lock()
	defer ix.mtx.Unlock()
	tx := begin(ix.cur.Load())
	for i := range docs {
		tx.remove(docs[i].ID)
		tx.add(&docs[i], bags[i])
	}
	ix.cur.Store(tx.commit())
	return nil
}

// SetPriors replaces the priors of live docs (ids[i] gets priors[i] and
// newUser[i], see Doc.Prior and Doc.NewUserPrior, and fresh[i], see
// Doc.Fresh; a nil fresh marks none of ids fresh) and publishes one new
// snapshot; bags and postings are untouched. Ids that are not live are
// ignored.
func (ix *Index) SetPriors(ctx context.Context, ids []uint32, priors, newUser []float32, fresh []bool) error {
	if len(ids) != len(priors) || len(ids) != len(newUser) || fresh != nil && len(ids) != len(fresh) {
		return fmt.Errorf("set priors: %w: %d ids, %d priors, %d new-user priors, %d fresh flags", ErrBadQuery, len(ids), len(priors), len(newUser), len(fresh))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("set priors: %w", err)
	}
	ix.mtx.Lock()
	defer ix.mtx.Unlock()
	tx := begin(ix.cur.Load())
	for i, id := range ids {
		if tx.s.live.Contains(id) {
			tx.setPriors(id, priors[i], newUser[i])
			tx.setFresh(id, fresh != nil && fresh[i])
		}
	}
	ix.cur.Store(tx.commit())
	return nil
}

// SetPopularityFloor names the popularity coordinate of the embeddings
// (axis) and sets the popularity floor of fresh docs (Doc.Fresh), and
// publishes one new snapshot: a fresh doc's coordinate reads as at least
// the rank-th largest among the live docs now (rank >= 1; the floor is
// computed once, here; rank < 1: no floor). With an axis, the token stage
// of Search also scores the live docs with the largest coordinate for a
// query whose coordinate is not negative. axis < 0 turns both off.
func (ix *Index) SetPopularityFloor(ctx context.Context, axis, rank int) error {
	if axis >= ix.q.dim {
		return fmt.Errorf("set popularity floor: %w: axis %d of %d", ErrBadQuery, axis, ix.q.dim)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("set popularity floor: %w", err)
	}
	ix.mtx.Lock()
	defer ix.mtx.Unlock()
	tx := begin(ix.cur.Load())
	tx.s.popAxis, tx.s.popFloor = max(axis, -1), noFloor
	if axis >= 0 && rank >= 1 && !tx.s.live.IsEmpty() {
		coord := func(id uint32) float32 { return tx.s.emb.at(int(id))[axis] }
		top := topLive(tx.s.live, rank, coord)
		tx.s.popFloor = coord(top[len(top)-1])
	}
	ix.cur.Store(tx.commit())
	return nil
}

// Delete removes docs by id and publishes one new snapshot. Unknown ids are
// ignored.
func (ix *Index) Delete(ctx context.Context, ids ...uint32) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	ix.mtx.Lock()
	defer ix.mtx.Unlock()
	tx := begin(ix.cur.Load())
	for _, id := range ids {
		tx.remove(id)
	}
	ix.cur.Store(tx.commit())
	return nil
}

// Build replaces the whole index content by docs (bulk load: bags on
// Workers goroutines, postings built directly) and publishes it.
func (ix *Index) Build(ctx context.Context, docs []Doc) error {
	for i := range docs {
		if len(docs[i].Embedding) != ix.q.dim {
			return fmt.Errorf("build doc %d: %w: got %d, want %d", docs[i].ID, ErrDim, len(docs[i].Embedding), ix.q.dim)
		}
	}
	s := emptySnapshot(ix.q)
	s.search = ix.opts.Search
	bags, err := ix.bags(ctx, docs, s)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	tx := begin(s)
	tx.bulkPost = make(map[int][]uint32)
	for i := range docs {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("build: %w", err)
			}
		}
		tx.remove(docs[i].ID) // duplicates: last wins
		tx.add(&docs[i], bags[i])
	}
	tx.fitShares()
	ix.mtx.Lock()
	defer ix.mtx.Unlock()
	ix.cur.Store(tx.commit())
	ix.log.Debug("index built", "docs", len(docs))
	return nil
}

// Publish replaces the current snapshot by s (for example one read from
// disk). s must have been made with the same quantizer dimension.
func (ix *Index) Publish(s *Snapshot) error {
	if s.q.dim != ix.q.dim {
		return fmt.Errorf("publish snapshot: %w: got %d, want %d", ErrDim, s.q.dim, ix.q.dim)
	}
	ix.mtx.Lock()
	defer ix.mtx.Unlock()
	s.search = ix.opts.Search
	ix.q = s.q
	ix.cur.Store(s)
	return nil
}

// bag is what a doc's embedding gives the index: its tokens (sorted, no
// duplicates) and its first-stage code (Snapshot.firstStage): path code,
// product code (nil without one) and the norm of what they leave.
type bag struct {
	tokens []Token
	code   uint32
	pq     []byte
	norm   float32
}

// bags computes docs' bags for snapshot s (whose product code width they
// take).
func (ix *Index) bags(ctx context.Context, docs []Doc, s *Snapshot) ([]bag, error) {
	out := make([]bag, len(docs))
	var failed atomic.Bool
	width := s.pq.width
	pqs := make([]byte, len(docs)*width)
	parallelRange(len(docs), ix.opts.Workers, func(lo, hi int) {
		r := make([]float32, ix.q.dim)
		for i := lo; i < hi; i++ {
			if i%1024 == 0 && ctx.Err() != nil {
				failed.Store(true)
				return
			}
			wts := ix.q.Bag(docs[i].Embedding)
			toks := make([]Token, len(wts))
			for j, wt := range wts {
				toks[j] = wt.Token
			}
			code, ok := ix.q.bagPathCode(wts)
			if !ok {
				code = ix.q.pathCode(docs[i].Embedding)
			}
			slices.Sort(toks)
			pq := pqs[i*width : (i+1)*width : (i+1)*width]
			norm := s.firstStage(docs[i].Embedding, code, pq, r)
			if width == 0 {
				pq = nil
			}
			out[i] = bag{tokens: slices.Compact(toks), code: code, pq: pq, norm: norm}
		}
	})
	if failed.Load() {
		return nil, ctx.Err()
	}
	return out, nil
}

// attrDict interns (key, value) pairs to dense ids. It is append-only and
// shared by every snapshot of an index: a snapshot only uses ids below its
// own nAttrs, so ids added later are invisible to it.
type attrDict struct {
	mu  sync.RWMutex
	ids map[string]uint32 // mu must be held
}

func attrKey(key, value string) string { return key + "\x00" + value }

func (d *attrDict) lookup(key, value string) (uint32, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	id, ok := d.ids[attrKey(key, value)]
	return id, ok
}

type attrName struct{ key, value string }

// Snapshot is one immutable state of the index: postings, attribute
// bitmaps, doc embeddings and bags. Safe for concurrent use.
type Snapshot struct {
	q        *Quantizer
	seq      uint64
	levelOff []int // token slot of (level, 0)
	live     *roaring.Bitmap
	emb      pvec[float32] // width dim, by doc id
	prior    pvec[float32] // width 2, by doc id: Doc.Prior, Doc.NewUserPrior
	code     pvec[uint32]  // width 2, by doc id: the path code of its embedding (Quantizer.pathCode), the bits of its residual's norm
	pq       pvec[byte]    // width ProductSubspaces (0: no product codes), by doc id: the product code of its path residual
	// resShare is each axis's share of the docs' residual energy (what
	// their path and product codes leave, summing to 1), which scales the
	// error of the approximate scores; nil before Build or a load: every
	// doc is then scored exactly.
	resShare []float32
	meta     pvec[[]uint32]        // by doc id: [ntok, tokens..., attr ids...]
	post     pvec[*roaring.Bitmap] // by token slot
	dict     *attrDict
	names    pvec[attrName]        // by attr id
	attrBits pvec[*roaring.Bitmap] // by attr id
	nAttrs   int
	search   SearchOptions
	porder   *priorOrder     // this snapshot's own, made empty
	fresh    *roaring.Bitmap // Doc.Fresh; shared until a txn changes it
	popAxis  int             // the popularity coordinate (-1: none, so no floor nor popularity pass)
	popFloor float32         // the least popularity coordinate a fresh doc is read with (noFloor: none)
}

// noFloor is the popularity floor that lifts no doc: below every
// coordinate of a unit vector.
const noFloor = -2

func emptySnapshot(q *Quantizer) *Snapshot {
	s := &Snapshot{
		q:        q,
		live:     roaring.New(),
		emb:      pvec[float32]{width: q.dim},
		prior:    pvec[float32]{width: 2},
		code:     pvec[uint32]{width: 2},
		pq:       pvec[byte]{width: q.CodeBytes() - 8},
		fresh:    roaring.New(),
		popAxis:  -1,
		popFloor: noFloor,
		meta:     pvec[[]uint32]{width: 1},
		post:     pvec[*roaring.Bitmap]{width: 1},
		dict:     &attrDict{ids: make(map[string]uint32)},
		names:    pvec[attrName]{width: 1},
		attrBits: pvec[*roaring.Bitmap]{width: 1},
		porder:   &priorOrder{},
	}
	s.levelOff = levelOffsets(q)
	s.search.applyDefaults()
	return s
}

func levelOffsets(q *Quantizer) []int {
	n := q.NumTokenLevels()
	off := make([]int, n+1)
	for l := range n {
		off[l+1] = off[l] + q.LevelSize(l)
	}
	return off
}

func (s *Snapshot) slotOf(t Token) (int, bool) {
	l, c := t.Level(), t.Code()
	if l >= len(s.levelOff)-1 || c >= s.levelOff[l+1]-s.levelOff[l] {
		return 0, false
	}
	return s.levelOff[l] + c, true
}

func (s *Snapshot) tokenOf(slot int) Token {
	l := sort.Search(len(s.levelOff), func(i int) bool { return s.levelOff[i] > slot }) - 1
	return mustToken(l, slot-s.levelOff[l])
}

// Quantizer returns the quantizer the snapshot's bags were made with.
func (s *Snapshot) Quantizer() *Quantizer { return s.q }

// Seq returns the number of writes that led to this snapshot.
func (s *Snapshot) Seq() uint64 { return s.seq }

// Len returns the number of live docs.
func (s *Snapshot) Len() int { return int(s.live.GetCardinality()) }

// Live returns a copy of the bitmap of live doc ids.
func (s *Snapshot) Live() *roaring.Bitmap { return s.live.Clone() }

// Contains reports whether doc id is live.
func (s *Snapshot) Contains(id uint32) bool { return s.live.Contains(id) }

// Embedding returns the stored embedding of a live doc. The slice must not
// be modified.
func (s *Snapshot) Embedding(id uint32) ([]float32, bool) {
	if !s.live.Contains(id) {
		return nil, false
	}
	return s.emb.at(int(id)), true
}

// Priors returns both priors of a live doc (see Doc.Prior and
// Doc.NewUserPrior).
func (s *Snapshot) Priors(id uint32) (prior, newUser float32, ok bool) {
	if !s.live.Contains(id) {
		return 0, 0, false
	}
	p := s.prior.at(int(id))
	if p == nil {
		return 0, 0, true
	}
	return p[0], p[1], true
}

// Fresh reports whether a live doc is marked fresh (Doc.Fresh).
func (s *Snapshot) Fresh(id uint32) bool { return s.live.Contains(id) && s.fresh.Contains(id) }

// Tokens returns the bag (sorted tokens) of a live doc.
func (s *Snapshot) Tokens(id uint32) ([]Token, bool) {
	if !s.live.Contains(id) {
		return nil, false
	}
	m := s.meta.get(int(id))
	out := make([]Token, m[0])
	for i := range out {
		out[i] = Token(m[1+i])
	}
	return out, true
}

// Attrs returns the attributes of a live doc, labels included under
// LabelPrefix keys, values sorted.
func (s *Snapshot) Attrs(id uint32) (map[string][]string, bool) {
	if !s.live.Contains(id) {
		return nil, false
	}
	m := s.meta.get(int(id))
	out := make(map[string][]string)
	for _, a := range m[1+m[0]:] {
		n := s.names.get(int(a))
		out[n.key] = append(out[n.key], n.value)
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out, true
}

// Postings returns a copy of the posting list of token t (empty for an
// unknown token).
func (s *Snapshot) Postings(t Token) *roaring.Bitmap {
	if b := s.postings(t); b != nil {
		return b.Clone()
	}
	return roaring.New()
}

func (s *Snapshot) postings(t Token) *roaring.Bitmap {
	slot, ok := s.slotOf(t)
	if !ok {
		return nil
	}
	return s.post.get(slot)
}

// TokenSizes returns the number of live docs per non-empty token.
func (s *Snapshot) TokenSizes() map[Token]int {
	out := make(map[Token]int)
	for slot := range s.levelOff[len(s.levelOff)-1] {
		if b := s.post.get(slot); b != nil && !b.IsEmpty() {
			out[s.tokenOf(slot)] = int(b.GetCardinality())
		}
	}
	return out
}

// AttrValues returns the sorted values of attribute key that some live doc
// has, with their doc counts.
func (s *Snapshot) AttrValues(key string) map[string]int {
	out := make(map[string]int)
	for id := range s.nAttrs {
		n := s.names.get(id)
		if n.key != key {
			continue
		}
		if b := s.attrBits.get(id); b != nil && !b.IsEmpty() {
			out[n.value] = int(b.GetCardinality())
		}
	}
	return out
}

// attr returns the bitmap of docs with key=value, nil if none.
func (s *Snapshot) attr(key, value string) *roaring.Bitmap {
	id, ok := s.dict.lookup(key, value)
	if !ok || int(id) >= s.nAttrs {
		return nil
	}
	return s.attrBits.get(int(id))
}

// txn builds the next snapshot from a base, copying on write.
type txn struct {
	s        *Snapshot
	emb      *pvecTxn[float32]
	prior    *pvecTxn[float32]
	code     *pvecTxn[uint32]
	pq       *pvecTxn[byte]
	meta     *pvecTxn[[]uint32]
	post     *pvecTxn[*roaring.Bitmap]
	names    *pvecTxn[attrName]
	attrBits *pvecTxn[*roaring.Bitmap]
	ownPost  map[int]bool // posting bitmaps cloned in this txn
	ownAttr  map[int]bool
	ownFresh bool // s.fresh is this txn's copy
	// bulk mode (Build): postings collected as sorted id lists.
	bulkPost map[int][]uint32
}

func begin(base *Snapshot) *txn {
	ns := *base
	ns.live = base.live.Clone()
	ns.seq++
	ns.porder = &priorOrder{}
	return &txn{
		s: &ns, emb: edit(&base.emb), prior: edit(&base.prior), code: edit(&base.code), pq: edit(&base.pq), meta: edit(&base.meta), post: edit(&base.post),
		names: edit(&base.names), attrBits: edit(&base.attrBits),
		ownPost: make(map[int]bool), ownAttr: make(map[int]bool),
	}
}

func (tx *txn) postingForWrite(slot int) *roaring.Bitmap {
	b := tx.post.v.get(slot)
	if !tx.ownPost[slot] {
		if b == nil {
			b = roaring.New()
		} else {
			b = b.Clone()
		}
		tx.post.set(slot, b)
		tx.ownPost[slot] = true
	}
	return b
}

func (tx *txn) attrForWrite(id int) *roaring.Bitmap {
	b := tx.attrBits.v.get(id)
	if !tx.ownAttr[id] {
		if b == nil {
			b = roaring.New()
		} else {
			b = b.Clone()
		}
		tx.attrBits.set(id, b)
		tx.ownAttr[id] = true
	}
	return b
}

func (tx *txn) remove(id uint32) {
	if !tx.s.live.Contains(id) {
		return
	}
	tx.s.live.Remove(id)
	m := tx.meta.v.get(int(id))
	for _, t := range m[1 : 1+m[0]] {
		slot, _ := tx.s.slotOf(Token(t))
		if tx.bulkPost != nil {
			// Bulk mode: drop id from the collected list (duplicates only).
			tx.bulkPost[slot] = slices.DeleteFunc(tx.bulkPost[slot], func(x uint32) bool { return x == id })
			continue
		}
		tx.postingForWrite(slot).Remove(id)
	}
	for _, a := range m[1+m[0]:] {
		tx.attrForWrite(int(a)).Remove(id)
	}
	tx.meta.set(int(id), nil)
	tx.setFresh(id, false)
}

func (tx *txn) internAttr(key, value string) uint32 {
	d := tx.s.dict
	if id, ok := d.lookup(key, value); ok && int(id) < tx.s.nAttrs {
		return id
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := attrKey(key, value)
	if id, ok := d.ids[k]; ok && int(id) < tx.s.nAttrs {
		return id
	}
	// Ids at or beyond nAttrs may exist in the shared dictionary from a
	// discarded branch; a fresh id is always safe.
	id := uint32(tx.s.nAttrs)
	tx.s.nAttrs++
	d.ids[k] = id
	tx.names.set(int(id), attrName{key, value})
	return id
}

// setPriors writes doc id's priors, leaving a never-written chunk
// unallocated when both are zero.
func (tx *txn) setPriors(id uint32, prior, newUser float32) {
	if old := tx.prior.v.at(int(id)); prior == 0 && newUser == 0 && (old == nil || old[0] == 0 && old[1] == 0) {
		return
	}
	p := tx.prior.slot(int(id))
	p[0], p[1] = prior, newUser
}

// setFresh sets or clears doc id's Doc.Fresh, copying the snapshot's
// bitmap on the txn's first change.
func (tx *txn) setFresh(id uint32, fresh bool) {
	if tx.s.fresh.Contains(id) == fresh {
		return
	}
	if !tx.ownFresh {
		tx.s.fresh, tx.ownFresh = tx.s.fresh.Clone(), true
	}
	if fresh {
		tx.s.fresh.Add(id)
	} else {
		tx.s.fresh.Remove(id)
	}
}

func (tx *txn) add(d *Doc, b bag) {
	id, toks := d.ID, b.tokens
	copy(tx.emb.slot(int(id)), d.Embedding)
	tx.putCode(id, b.code, b.pq, b.norm)
	tx.setPriors(id, d.Prior, d.NewUserPrior)
	tx.setFresh(id, d.Fresh)
	var attrIDs []uint32
	for _, k := range sortedKeys(d.Attrs) {
		for _, v := range d.Attrs[k] {
			attrIDs = append(attrIDs, tx.internAttr(k, v))
		}
	}
	for _, k := range sortedKeys(d.Labels) {
		attrIDs = append(attrIDs, tx.internAttr(LabelPrefix+k, d.Labels[k]))
	}
	slices.Sort(attrIDs)
	attrIDs = slices.Compact(attrIDs)
	m := make([]uint32, 0, 1+len(toks)+len(attrIDs))
	m = append(m, uint32(len(toks)))
	for _, t := range toks {
		m = append(m, uint32(t))
		slot, _ := tx.s.slotOf(t)
		if tx.bulkPost != nil {
			tx.bulkPost[slot] = append(tx.bulkPost[slot], id)
			continue
		}
		tx.postingForWrite(slot).Add(id)
	}
	m = append(m, attrIDs...)
	tx.meta.set(int(id), m)
	for _, a := range attrIDs {
		tx.attrForWrite(int(a)).Add(id)
	}
	tx.s.live.Add(id)
}

// putCode stores doc id's first-stage code: path code, product code (nil
// without one) and the norm of what they leave.
func (tx *txn) putCode(id, code uint32, pq []byte, norm float32) {
	c := tx.code.slot(int(id))
	c[0], c[1] = code, math.Float32bits(norm)
	if tx.pq.v.width > 0 {
		copy(tx.pq.slot(int(id)), pq)
	}
}

// product returns the product quantizer whose codes s holds, nil when it
// holds none.
func (s *Snapshot) product() *productQuantizer {
	if s.pq.width == 0 || s.q.pq == nil || s.q.pq.subspaces() != s.pq.width {
		return nil
	}
	return s.q.pq
}

// firstStage writes vec's first-stage code under path code as s holds it:
// its product code into pq (untouched when s holds no product codes), what
// the path and product codes leave of vec into r, and returns r's norm.
func (s *Snapshot) firstStage(vec []float32, code uint32, pq []byte, r []float32) float32 {
	s.q.residual(vec, code, r)
	if p := s.product(); p != nil {
		p.encode(r, pq)
	}
	return norm32(r)
}

// addSquares adds each of r's squared coordinates to sum's: an axis's
// residual energy (resShare).
func addSquares(sum []float64, r []float32) {
	for i, x := range r {
		sum[i] += float64(x) * float64(x)
	}
}

// fillCodes computes the first-stage code of every live doc from its
// embedding (a snapshot file of a version before 4 does not store them),
// and the snapshot's resShare from what they leave, on two goroutines.
func (tx *txn) fillCodes() {
	ids := tx.s.live.ToArray()
	dim, width := tx.s.q.dim, tx.pq.v.width
	codes, norms := make([]uint32, len(ids)), make([]float32, len(ids))
	pqs := make([]byte, len(ids)*width)
	var mu sync.Mutex
	sum := make([]float64, dim)
	parallelRange(len(ids), min(2, runtime.GOMAXPROCS(0)), func(lo, hi int) {
		r, part := make([]float32, dim), make([]float64, dim)
		for i := lo; i < hi; i++ {
			v := tx.emb.v.at(int(ids[i]))
			codes[i] = tx.s.q.pathCode(v)
			norms[i] = tx.s.firstStage(v, codes[i], pqs[i*width:(i+1)*width], r)
			addSquares(part, r)
		}
		mu.Lock()
		defer mu.Unlock()
		for j, x := range part {
			sum[j] += x
		}
	})
	for i, id := range ids {
		tx.putCode(id, codes[i], pqs[i*width:(i+1)*width], norms[i])
	}
	tx.setShares(sum)
}

// fitShares sets the snapshot's resShare from what its live docs'
// first-stage codes leave of their embeddings (nil when that is zero).
func (tx *txn) fitShares() {
	dim := tx.s.q.dim
	sum := make([]float64, dim)
	r := make([]float32, dim)
	p := tx.s.product()
	for it := tx.s.live.Iterator(); it.HasNext(); {
		id := int(it.Next())
		tx.s.q.residual(tx.emb.v.at(id), tx.code.v.at(id)[0], r)
		if p != nil {
			p.subtractCode(tx.pq.v.at(id), r)
		}
		addSquares(sum, r)
	}
	tx.setShares(sum)
}

// setShares sets the snapshot's resShare from each axis's summed residual
// energy (nil when it is all zero).
func (tx *txn) setShares(sum []float64) {
	var total float64
	for _, x := range sum {
		total += x
	}
	tx.s.resShare = nil
	if total > 0 {
		tx.s.resShare = make([]float32, len(sum))
		for i, x := range sum {
			tx.s.resShare[i] = float32(x / total)
		}
	}
}

func (tx *txn) commit() *Snapshot {
	for slot, ids := range tx.bulkPost {
		if len(ids) == 0 {
			continue
		}
		slices.Sort(ids)
		b := roaring.BitmapOf(ids...)
		b.RunOptimize()
		tx.post.set(slot, b)
	}
	for slot := range tx.ownPost {
		tx.post.v.get(slot).RunOptimize()
	}
	for id := range tx.ownAttr {
		tx.attrBits.v.get(id).RunOptimize()
	}
	tx.s.live.RunOptimize()
	tx.s.emb, tx.s.prior, tx.s.code, tx.s.pq, tx.s.meta, tx.s.post = *tx.emb.v, *tx.prior.v, *tx.code.v, *tx.pq.v, *tx.meta.v, *tx.post.v
	tx.s.names, tx.s.attrBits = *tx.names.v, *tx.attrBits.v
	return tx.s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
