package eval

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hir-ads/hir/dataset"
)

// MethodNames lists the baselines [NewMethod] builds, in report order.
var methodNames = [...]string{"popularity", MethodRecentPopularity, "item-knn", "bpr", "content", MethodContentWords}

// MethodNames returns the names of the built-in baselines.
func MethodNames() []string { return slices.Clone(methodNames[:]) }

// Config configures [Run] and [Evaluate]. Zero fields get the defaults
// documented on each field.
type Config struct {
	// Data is the data set directory (a label in the report; [Run] loads it
	// with Load).
	Data string
	// Format is the importer format (see dataset.Formats); default
	// "movielens" when Data holds u.data, else "jsonl".
	Format string
	// Load streams the data set into the collector (default: dataset.Import).
	Load func(ctx context.Context, format, dir string, sink *Collector) error
	// Protocol is "chrono" (default), "replay" or "truth" (chrono queries
	// scored against the planted structure in Truth).
	Protocol string
	// TestFraction is the share of the latest interactions in the test
	// window (default 0.2).
	TestFraction float64
	// ValFraction is the share of the latest training interactions in the
	// validation window (default 0.1).
	ValFraction float64
	// Window is "test" (default) or "validation": evaluate on the
	// validation window, fitting on what precedes it. Tune on validation.
	Window string
	// Ks are the metric cut-offs (default 10, 20, 50, 100).
	Ks []int
	// ColdUserMax: a user with at most this many interactions before the
	// query is cold (default 5).
	ColdUserMax int
	// Methods names the built-in baselines to run (default all of
	// [MethodNames]).
	Methods []string
	// Extra are further methods evaluated in the same run after the
	// baselines (our dense retrieval and token index). They are fitted by
	// the harness like the baselines.
	Extra []Recommender
	// MaxQueries caps the queries (users in chrono, events in replay),
	// spread evenly; 0 means all.
	MaxQueries int
	// Truth is the planted structure (protocol truth); [Run] reads
	// Data/truth.json when it is nil.
	Truth *Truth
	// TokenLevels, when set with Truth, yields our token assignment whose
	// NMI/purity against the planted levels is reported.
	TokenLevels TokenLevels

	ItemKNN          ItemKNNOptions
	BPR              BPROptions
	Content          ContentOptions
	RecentPopularity RecentPopularityOptions
	// Logger receives progress (default: discard).
	Logger *slog.Logger
}

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	if cfg.Protocol == "" {
		cfg.Protocol = ProtocolChrono
	}
	if cfg.TestFraction == 0 {
		cfg.TestFraction = 0.2
	}
	if cfg.ValFraction == 0 {
		cfg.ValFraction = 0.1
	}
	if cfg.Window == "" {
		cfg.Window = "test"
	}
	if len(cfg.Ks) == 0 {
		cfg.Ks = DefaultKs()
	}
	if cfg.ColdUserMax == 0 {
		cfg.ColdUserMax = 5
	}
	if cfg.Methods == nil {
		cfg.Methods = MethodNames()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.Protocol != ProtocolChrono && cfg.Protocol != ProtocolReplay && cfg.Protocol != ProtocolTruth:
		return cfg, fmt.Errorf("%w: protocol %q (want chrono, replay or truth)", ErrBadConfig, cfg.Protocol)
	case cfg.Protocol == ProtocolTruth && cfg.Truth == nil:
		return cfg, fmt.Errorf("%w: protocol truth needs Truth", ErrBadConfig)
	case cfg.Window != "test" && cfg.Window != "validation":
		return cfg, fmt.Errorf("%w: window %q (want test or validation)", ErrBadConfig, cfg.Window)
	case cfg.ColdUserMax < 0 || cfg.MaxQueries < 0:
		return cfg, fmt.Errorf("%w: negative ColdUserMax or MaxQueries", ErrBadConfig)
	}
	cfg.Ks = slices.Clone(cfg.Ks)
	slices.Sort(cfg.Ks)
	if cfg.Ks[0] <= 0 {
		return cfg, fmt.Errorf("%w: cut-off %d", ErrBadConfig, cfg.Ks[0])
	}
	cfg.BPR.Logger = cmpOr(cfg.BPR.Logger, cfg.Logger.With("method", "bpr"))
	return cfg, nil
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// NewMethod builds a built-in baseline by name with the options of cfg.
func NewMethod(name string, cfg *Config) (Recommender, error) {
	switch name {
	case "popularity":
		return NewPopularity(), nil
	case MethodRecentPopularity:
		return NewRecentPopularity(cfg.RecentPopularity)
	case "item-knn":
		return NewItemKNN(cfg.ItemKNN)
	case "bpr":
		return NewBPR(cfg.BPR)
	case "content":
		return NewContent(cfg.Content)
	case MethodContentWords:
		return NewContentWords(), nil
	}
	return nil, fmt.Errorf("%w: %q (known: %s)", ErrUnknownMethod, name, strings.Join(MethodNames(), ", "))
}

// Run loads cfg.Data with cfg.Load (default: dataset.Import of cfg.Format)
// and evaluates it (see [Evaluate]). For the truth protocol it reads
// truth.json from cfg.Data unless cfg.Truth is set.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Data == "" {
		return nil, fmt.Errorf("%w: no data directory", ErrBadConfig)
	}
	if cfg.Format == "" {
		cfg.Format = "jsonl"
		if _, err := os.Stat(filepath.Join(cfg.Data, "u.data")); err == nil {
			cfg.Format = "movielens"
		}
	}
	if cfg.Load == nil {
		cfg.Load = func(ctx context.Context, format, dir string, sink *Collector) error {
			_, err := dataset.Import(ctx, format, dir, sink)
			return err
		}
	}
	if cfg.Protocol == ProtocolTruth && cfg.Truth == nil {
		t, err := dataset.ReadTruth(filepath.Join(cfg.Data, dataset.TruthFile))
		if err != nil {
			return nil, fmt.Errorf("load truth: %w", err)
		}
		cfg.Truth = TruthFromDataset(t)
	}
	var col Collector
	if err := cfg.Load(ctx, cfg.Format, cfg.Data, &col); err != nil {
		return nil, fmt.Errorf("load %s: %w", cfg.Data, err)
	}
	data, err := col.Data()
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", cfg.Data, err)
	}
	return Evaluate(ctx, cfg, data)
}

// Evaluate splits data chronologically, fits every method on the training
// view of the chosen window (nothing later than its cut is visible) and runs
// the protocol on the window. Methods run one after another on each query in
// one goroutine.
func Evaluate(ctx context.Context, cfg Config, data *Data) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	test, val, err := ChronoWindows(data.Interactions, cfg.TestFraction, cfg.ValFraction)
	if err != nil {
		return nil, fmt.Errorf("split: %w", err)
	}
	w := test
	if cfg.Window == "validation" {
		w = val
	}
	var methods []Recommender
	for _, name := range cfg.Methods {
		m, err := NewMethod(name, &cfg)
		if err != nil {
			return nil, err
		}
		methods = append(methods, m)
	}
	methods = append(methods, cfg.Extra...)
	r, err := newRunner(&cfg, data, w, methods)
	if err != nil {
		return nil, err
	}
	if cfg.Protocol == ProtocolTruth {
		r.setTruth(cfg.Truth)
	}
	cfg.Logger.Info("evaluating", "protocol", cfg.Protocol, "window", w.Name, "as_of", w.AsOf,
		"train", w.TrainEnd, "eval", w.EvalEvents(), "methods", len(methods))
	switch cfg.Protocol {
	case ProtocolReplay:
		err = r.replay(ctx)
	default:
		err = r.chrono(ctx)
	}
	if err != nil {
		return nil, err
	}
	if r.queries[SliceAll] == 0 {
		return nil, ErrNoQueries
	}
	rep := &Report{
		Protocol: cfg.Protocol,
		Data:     cfg.Data,
		Window:   w,
		Ks:       cfg.Ks,
		Stats: Stats{
			Users: data.Catalog.NumUsers(), Items: data.Catalog.NumItems(), Interactions: len(data.Interactions),
			TrainInteractions: w.TrainEnd, EvalInteractions: w.EvalEvents(),
			EvalStartMS: data.Interactions[w.TrainEnd].TS, EvalEndMS: data.Interactions[w.EvalEnd-1].TS,
			ColdUserMax: cfg.ColdUserMax,
		},
	}
	rep.Results, rep.Methods = r.results()
	if cfg.Protocol == ProtocolTruth {
		rep.Truth = &TruthReport{InterestRecall: r.interestResults()}
		if cfg.TokenLevels != nil {
			tokens, err := cfg.TokenLevels(ctx)
			if err != nil {
				return nil, fmt.Errorf("assign tokens: %w", err)
			}
			if rep.Truth.Levels, err = levelAgreements(tokens, cfg.Truth); err != nil {
				return nil, err
			}
		}
	}
	return rep, nil
}
