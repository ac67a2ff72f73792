package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/hir-ads/hir/graph"
)

// Errors returned by this package.
var (
	// ErrBadConfig reports an invalid Config or TrainConfig.
	ErrBadConfig = errors.New("bad model config")
	// ErrNoCheckpoint reports that a directory holds no model version.
	ErrNoCheckpoint = errors.New("no checkpoint")
	// ErrCorrupt reports a checkpoint file that cannot be decoded.
	ErrCorrupt = errors.New("corrupt checkpoint")
	// ErrNoData reports a training window without usable events.
	ErrNoData = errors.New("no training data")
	// ErrBadLevel reports a prototype level out of range.
	ErrBadLevel = errors.New("prototype level out of range")
)

// Config holds the encoder and head hyperparameters. It is stored in every
// checkpoint, so a loaded model rebuilds exactly the graph it was trained with.
// Zero fields take the defaults of DefaultConfig (see WithDefaults).
type Config struct {
	Dim       int `json:"dim"`          // transformer width
	Heads     int `json:"heads"`        // attention heads (Dim % Heads == 0)
	Layers    int `json:"layers"`       // transformer depth
	FFNDim    int `json:"ffn_dim"`      // feed-forward hidden width
	EmbedDim  int `json:"embed_dim"`    // output embedding dimension
	HashK     int `json:"hash_k"`       // deep hash embedding: number of id hashes
	HashDim   int `json:"hash_dim"`     // deep hash embedding: hidden width of the shared MLP
	TextBkts  int `json:"text_buckets"` // hashed word / bigram buckets
	TextLen   int `json:"text_len"`     // max text features per token
	AttrBkts  int `json:"attr_buckets"` // hashed key=value buckets
	AttrLen   int `json:"attr_len"`     // max attributes per token
	VectorDim int `json:"vector_dim"`   // client vectors are truncated / zero-padded to this
	// IDRows is the size of the per-id hashed embedding table: every node
	// adds the rows of two hashes of its id (so memory stays bounded
	// whatever the vocabulary), beside the deep hash embedding. Negative
	// (the default): no table (a checkpoint written before the table
	// existed loads so). 1<<14 rows were measured (docs/evaluation-log.md).
	IDRows int `json:"id_rows"`
	// Activity, when positive, adds every token's recent and total
	// engagement counts as of the subgraph's time (graph.Subgraph.Activity)
	// to its features: what makes popularity and recency visible to the
	// embedding. Negative: not used (a checkpoint written before the
	// feature existed loads so). ActivityShared (1): the counts enter the
	// anchor's token, and one MLP of them, shared by all node types,
	// gives the popularity coordinate. ActivityTyped (2, the default):
	// only the coordinate, from an MLP that also takes the anchor's type,
	// set against a unit interest part, so that the interest part (and the
	// hierarchy) stays free of popularity. Zero selects the default.
	Activity Activity `json:"activity"`
	// History, when positive, adds to the anchor's token the content of up
	// to History of its newest engaged neighbours (graph.Subgraph.History,
	// at most graph.MaxHistory): the text and attribute buckets of the ads
	// a user engaged with, of the users who engaged with an ad, pooled by
	// the edges' importance weights through the same bucket tables, each
	// pool through its own linear map. A propagated content feature
	// computed from the graph, not learnt: the anchor sees its whole recent
	// history's content, not only the few neighbours its subgraph holds,
	// and a fresh user's context events reach it the same way. Negative:
	// not used (a checkpoint written before the feature existed loads so).
	// Zero selects the default.
	History int `json:"history"`
	// Spectral, when positive, is the number of spectral factors appended
	// to every embedding: the top eigenvectors of the normalised ad-ad
	// co-engagement matrix, computed from the graph when training starts
	// and stored with the version (FileSpectral). An ad's are its row of
	// the factorisation (when it has engagement as of the embedding's
	// time), a user's the fold-in of its history's rows, both times
	// SpectralWeight, so that the dot product of a user and an ad adds
	// the factorisation's collaborative score to the encoder's. The
	// encoder neither sees nor learns them: the interest hierarchy and the
	// BoM tokens stay the encoder's (the prototypes are zero on the
	// appended coordinates). Negative (a checkpoint written before the
	// feature loads so): not used. Zero selects the default.
	Spectral int `json:"spectral"`
	// SpectralWeight scales the appended spectral factors (Spectral); 0
	// selects the default. A checkpoint whose config.json has spectral
	// factors but no weight fed them to its encoder, and is refused.
	SpectralWeight float64 `json:"spectral_weight"`
	// SpectralContent, when positive, is the weight of an ad's content
	// (its text and attribute buckets) in the matrix the spectral factors
	// factorise, against 1 for an engagement of type prior 1: every ad
	// with content gets factors, a new one from its content alone.
	// Negative (the default): the factors read engagement only. Zero
	// selects the default. It shapes the fit only; a version's factors
	// are read as they were fitted.
	SpectralContent float64 `json:"spectral_content"`
	// SpectralProfile, when positive, gives a user with no history the
	// spectral factors of its profile: each of its content buckets (the
	// attribute values and words of its profile) that at least this many
	// users with a history share has the mean of their fold-ins as its
	// row, and such a user folds in its buckets' rows. Negative: a user
	// without history has no factors. Zero selects the default.
	SpectralProfile int `json:"spectral_profile"`
	// SpectralProfileDays is the half-life, in days, of a user's weight in
	// its buckets' profile rows by how long before the fit it arrived (its
	// first engagement): a new visitor is served what the users who share
	// its profile and arrived recently engage with, not what all of them
	// did over the years. Negative: every user weighs alike. Zero selects
	// the default.
	SpectralProfileDays float64 `json:"spectral_profile_days"`
	// SpectralHalfLifeDays is the half-life, in days, of an engagement's
	// weight in the matrix the spectral factors factorise: the shorter,
	// the more an ad's row (its length above all) holds its recent
	// engagement rather than that of months. Negative: no decay. Zero
	// selects the default. It shapes the fit only; a version's factors
	// are read as they were fitted.
	SpectralHalfLifeDays float64 `json:"spectral_half_life_days"`

	// Prototypes are the number of interest primitives per level, coarse to fine.
	Prototypes []int `json:"prototypes"`
	// StudentTemp and TeacherTemp scale prototype scores (cosines) before the
	// student softmax and the teacher Sinkhorn-Knopp respectively.
	StudentTemp float64 `json:"student_temp"`
	TeacherTemp float64 `json:"teacher_temp"`
	// AlignTemp scales dot products in the in-batch contrastive alignment loss.
	AlignTemp float64 `json:"align_temp"`
	// SinkhornIters is the number of Sinkhorn-Knopp normalisation rounds.
	SinkhornIters int `json:"sinkhorn_iters"`
	// ProtoMomentum, when > 0, learns the prototypes as an exponential
	// moving average of the teacher embeddings their balanced assignment
	// gives them (p <- m*p + (1-m)*mean, then normalised) instead of by
	// gradient; negative: by gradient (the optimizer).
	ProtoMomentum float64 `json:"proto_momentum"`
}

// ServedDim is the dimension of the embeddings the model serves: EmbedDim,
// plus Spectral when the spectral factors are appended.
func (c Config) ServedDim() int { return c.EmbedDim + max(c.Spectral, 0) }

// maxSpectral bounds Config.Spectral.
const maxSpectral = 512

// DefaultSpectralProfileDays is Config.SpectralProfileDays' default, chosen
// on the MovieLens-100K validation window (docs/evaluation-log.md).
const DefaultSpectralProfileDays = 7

// DefaultSpectralHalfLifeDays is Config.SpectralHalfLifeDays' default, chosen
// on the MovieLens-100K validation window (docs/evaluation-log.md): 60 days
// read lower on every chrono figure of the service and the embeddings
// alone, 7 and 3 lower still on the embeddings alone.
const DefaultSpectralHalfLifeDays = 21

// Activity is the form of the encoder's engagement-count inputs
// (Config.Activity); its zero value selects the default, ActivityTyped.
type Activity int

// Forms of Config.Activity.
const (
	// ActivityOff: no counts (a checkpoint written before the feature
	// existed loads so).
	ActivityOff Activity = -1
	// ActivityShared: counts in the anchor's token and a shared MLP's
	// popularity coordinate.
	ActivityShared Activity = 1
	// ActivityTyped: a per-type popularity coordinate only.
	ActivityTyped Activity = 2
)

// on reports whether the form uses the counts at all (shared or typed).
func (a Activity) on() bool { return a > 0 }

// DefaultConfig returns the defaults, sized for a 2-core CPU: width 64, 2 layers,
// 4 heads, embeddings of 64 and prototype levels 16/64/256.
func DefaultConfig() Config {
	return Config{
		Dim: 64, Heads: 4, Layers: 2, FFNDim: 128, EmbedDim: 64,
		HashK: 16, HashDim: 64, IDRows: -1, Activity: ActivityTyped, History: 32, Spectral: 128, SpectralWeight: 2, SpectralContent: -1, SpectralProfile: 20, SpectralProfileDays: DefaultSpectralProfileDays,
		SpectralHalfLifeDays: DefaultSpectralHalfLifeDays, TextBkts: 1 << 14, TextLen: 24, AttrBkts: 1 << 10, AttrLen: 8, VectorDim: 32,
		Prototypes:    []int{16, 64, 256},
		StudentTemp:   0.1,
		TeacherTemp:   0.05,
		AlignTemp:     0.1,
		SinkhornIters: 3,
		ProtoMomentum: 0.9,
	}
}

// WithDefaults returns c with zero fields replaced by DefaultConfig's.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	setInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setInt(&c.Dim, d.Dim)
	setInt(&c.Heads, d.Heads)
	setInt(&c.Layers, d.Layers)
	setInt(&c.FFNDim, d.FFNDim)
	setInt(&c.EmbedDim, d.EmbedDim)
	setInt(&c.HashK, d.HashK)
	setInt(&c.HashDim, d.HashDim)
	setInt(&c.TextBkts, d.TextBkts)
	setInt(&c.TextLen, d.TextLen)
	setInt(&c.AttrBkts, d.AttrBkts)
	setInt(&c.AttrLen, d.AttrLen)
	setInt(&c.VectorDim, d.VectorDim)
	setInt(&c.IDRows, d.IDRows)
	if c.Activity == 0 {
		c.Activity = d.Activity
	}
	setInt(&c.History, d.History)
	setInt(&c.Spectral, d.Spectral)
	if c.SpectralWeight == 0 {
		c.SpectralWeight = d.SpectralWeight
	}
	if c.SpectralContent == 0 {
		c.SpectralContent = d.SpectralContent
	}
	setInt(&c.SpectralProfile, d.SpectralProfile)
	if c.SpectralProfileDays == 0 {
		c.SpectralProfileDays = d.SpectralProfileDays
	}
	if c.SpectralHalfLifeDays == 0 {
		c.SpectralHalfLifeDays = d.SpectralHalfLifeDays
	}
	setInt(&c.SinkhornIters, d.SinkhornIters)
	if len(c.Prototypes) == 0 {
		c.Prototypes = d.Prototypes
	}
	if c.StudentTemp == 0 {
		c.StudentTemp = d.StudentTemp
	}
	if c.TeacherTemp == 0 {
		c.TeacherTemp = d.TeacherTemp
	}
	if c.AlignTemp == 0 {
		c.AlignTemp = d.AlignTemp
	}
	if c.ProtoMomentum == 0 {
		c.ProtoMomentum = d.ProtoMomentum
	}
	return c
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	pos := map[string]int{"dim": c.Dim, "heads": c.Heads, "layers": c.Layers, "ffn_dim": c.FFNDim,
		"embed_dim": c.EmbedDim, "hash_k": c.HashK, "hash_dim": c.HashDim, "text_buckets": c.TextBkts,
		"text_len": c.TextLen, "attr_buckets": c.AttrBkts, "attr_len": c.AttrLen, "vector_dim": c.VectorDim,
		"sinkhorn_iters": c.SinkhornIters}
	for k, v := range pos {
		if v <= 0 {
			return fmt.Errorf("%w: %s = %d, want > 0", ErrBadConfig, k, v)
		}
	}
	if c.Dim%c.Heads != 0 {
		return fmt.Errorf("%w: dim %d is not a multiple of heads %d", ErrBadConfig, c.Dim, c.Heads)
	}
	if len(c.Prototypes) == 0 {
		return fmt.Errorf("%w: no prototype levels", ErrBadConfig)
	}
	for i, k := range c.Prototypes {
		if k < 2 {
			return fmt.Errorf("%w: prototypes[%d] = %d, want >= 2", ErrBadConfig, i, k)
		}
	}
	if c.StudentTemp <= 0 || c.TeacherTemp <= 0 {
		return fmt.Errorf("%w: temperatures must be > 0", ErrBadConfig)
	}
	if c.Activity > ActivityTyped {
		return fmt.Errorf("%w: activity %d, want %d (off), %d (shared) or %d (typed)", ErrBadConfig, c.Activity, ActivityOff, ActivityShared, ActivityTyped)
	}
	if c.History > graph.MaxHistory {
		return fmt.Errorf("%w: history %d, want <= %d", ErrBadConfig, c.History, graph.MaxHistory)
	}
	if c.Spectral > maxSpectral {
		return fmt.Errorf("%w: spectral %d, want <= %d", ErrBadConfig, c.Spectral, maxSpectral)
	}
	if math.IsNaN(c.SpectralProfileDays) || math.IsInf(c.SpectralProfileDays, 0) {
		return fmt.Errorf("%w: spectral_profile_days %v, want a finite half-life", ErrBadConfig, c.SpectralProfileDays)
	}
	if math.IsNaN(c.SpectralHalfLifeDays) || math.IsInf(c.SpectralHalfLifeDays, 0) {
		return fmt.Errorf("%w: spectral_half_life_days %v, want a finite half-life", ErrBadConfig, c.SpectralHalfLifeDays)
	}
	if math.IsNaN(c.SpectralContent) || math.IsInf(c.SpectralContent, 0) {
		return fmt.Errorf("%w: spectral_content %v, want a finite weight", ErrBadConfig, c.SpectralContent)
	}
	if c.Spectral > 0 && (!(c.SpectralWeight > 0) || math.IsInf(c.SpectralWeight, 0)) {
		return fmt.Errorf("%w: spectral_weight %v, want > 0", ErrBadConfig, c.SpectralWeight)
	}
	if c.ProtoMomentum >= 1 {
		return fmt.Errorf("%w: proto_momentum %v, want < 1", ErrBadConfig, c.ProtoMomentum)
	}
	return nil
}
