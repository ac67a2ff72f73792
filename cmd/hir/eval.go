package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/hir-ads/hir/eval"
	"github.com/hir-ads/hir/model"
	"github.com/hir-ads/hir/rank"
)

// evalFlags are the parsed flags of `hir eval`.
type evalFlags struct {
	cfg      eval.Config
	ours     eval.OursOptions
	useOurs  bool
	jsonPath string
	mdPath   string
	// service, when service.URL is set, scores a running service through
	// its REST API (method "service").
	service    serviceOptions
	useService bool
}

// evalMethodsDefault lists every method `hir eval` runs by default.
func evalMethodsDefault() string {
	return strings.Join(append(eval.MethodNames(), eval.MethodOurs), ",")
}

// parseEvalFlags parses the flags of `hir eval` into the harness and model
// options.
func parseEvalFlags(e *env, args []string) (*evalFlags, error) {
	fs := newFlags(e, "eval", "--data DIR [--protocol chrono|replay|truth] [--window test|validation] [--json out.json] [--steps N] [--max-queries N] [--methods m1,m2] [--service URL]")
	f := &evalFlags{}
	fs.StringVar(&f.cfg.Data, "data", "", "data set directory: MovieLens folder (u.data) or a `hir synth` output (required)")
	fs.StringVar(&f.cfg.Format, "format", "", "importer format (default: movielens when DIR holds u.data, else jsonl)")
	fs.StringVar(&f.cfg.Protocol, "protocol", eval.ProtocolChrono, "chrono, replay or truth (synthetic data with truth.json)")
	fs.StringVar(&f.cfg.Window, "window", "test", "test, or validation (tune on this one)")
	fs.Float64Var(&f.cfg.TestFraction, "test-fraction", 0.2, "latest share of the interactions in the test window")
	fs.IntVar(&f.cfg.MaxQueries, "max-queries", 0, "cap on the queries, spread evenly (0: all)")
	methods := fs.String("methods", evalMethodsDefault(), "comma-separated methods: "+evalMethodsDefault()+" (ours = ours-dense and ours-tokens; "+eval.MethodOursParts+" adds "+eval.MethodOursPopularity+" and "+eval.MethodOursInterest+", ranking by one part of the embeddings; "+eval.MethodOursContext+" asks for each user as never seen, with their profile and events as context), or "+methodService+" (with --service; then the default)")
	fs.StringVar(&f.jsonPath, "json", "", "write the JSON report here")
	fs.StringVar(&f.mdPath, "md", "", "also write the Markdown table here")
	fs.IntVar(&f.ours.Train.Steps, "steps", model.DefaultSteps, "training steps of our model")
	trainFlags(fs, &f.ours.Train)
	fs.IntVar(&f.ours.Train.SnapshotEvery, "snapshot-every", 0, "also write a model version every N training steps (quality-against-time curves)")
	fs.Uint64Var(&f.ours.Train.Seed, "seed", 1, "random seed of our model")
	fs.StringVar(&f.ours.Dir, "model-dir", "", "train into this data directory (kept); default a temporary one")
	fs.StringVar(&f.ours.ModelDir, "model", "", "load this model instead of training (must be trained on nothing after the cut)")
	prior := defaultPriorFlags()
	prior.register(fs, "weight of the ads' engagement prior in our re-rank")
	calibrate := fs.Bool("calibrate", true, "calibrate the new-ad scale and prior weight of the version our model trains (as hir train does)")
	newAd := fs.Float64("new-ad-scale", 0, "serve new ads' spectral factors at this scale instead of the model version's (0: the version's)")
	fs.BoolVar(&f.ours.NarrowRequestView, "narrow-request-view", false, "embed "+eval.MethodOursContext+"'s users from the model's narrow student view (serve's --narrow-request-view)")
	fs.IntVar(&f.ours.Build.Search.ExhaustiveMax, "exhaustive-max", 1, "token index: re-rank the whole catalogue at most this size (serving default 16384)")
	errorBand := fs.Float64("error-band", 0, errorBandUsage)
	fs.StringVar(&f.service.URL, "service", "", "also score the HIR service at this URL through its REST API (method service; alone unless --methods names others); it must start empty: the training window is posted and trained on")
	fs.StringVar(&f.service.APIKey, "service-api-key", "", "bearer API key for the service's writes (default env HIR_API_KEY)")
	fs.BoolVar(&f.service.NoIngest, "service-no-ingest", false, "the service already holds exactly the training window and serves a model of it: post and train nothing")
	fs.BoolVar(&f.service.InlineUsers, "service-inline-users", false, "post no user entities: users the training events do not name are unknown to the service (404s are scored empty and counted)")
	fs.BoolVar(&f.service.NoProfiles, "service-no-profiles", false, "post each user entity with its id alone (no text, no attributes): a client that knows its users only by their events")
	fs.DurationVar(&f.service.TrainTimeout, "service-train-timeout", defaultServiceTrainTimeout, "how long to wait for the service's training round")
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	explicit := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { explicit[fl.Name] = true })
	if f.service.URL != "" && !explicit["methods"] {
		*methods = methodService
	}
	if err := prior.check(); err != nil {
		return nil, errors.Join(errUsage, err)
	}
	f.ours.Weights = prior.weights()
	if explicit["prior-weight"] {
		f.service.PriorWeight = &f.ours.Weights.Prior
	}
	if explicit["coengage-weight"] {
		f.service.CoengagementWeight = &f.ours.Weights.CoEngagement
	}
	if explicit["new-ad-share"] {
		f.service.NewAdShare = &f.ours.Weights.NewAdShare
	}
	f.ours.Rank = prior.options()
	f.ours.CalibratedPrior = !prior.weightSet
	if !(*newAd >= 0) || math.IsInf(*newAd, 0) {
		return nil, errors.Join(errUsage, fmt.Errorf("--new-ad-scale %v: want a finite scale >= 0", *newAd))
	}
	f.ours.NewAdScale = float32(*newAd)
	if math.IsNaN(*errorBand) || math.IsInf(*errorBand, 0) {
		return nil, errors.Join(errUsage, fmt.Errorf("--error-band %v: want a finite number", *errorBand))
	}
	f.ours.Build.Search.ErrorBand = float32(*errorBand)
	if *calibrate {
		// The version is calibrated for serving: with the service's default
		// co-engagement weight, whatever weights these queries carry.
		f.ours.Calibrate = prior.calibrate(float64(rank.DefaultWeights().CoEngagement), nil)
	}
	f.cfg.RecentPopularity.HalfLife = prior.halfLife // the service's prior half-life
	if err := required(fs, "data"); err != nil {
		return nil, err
	}
	switch f.cfg.Protocol {
	case eval.ProtocolChrono, eval.ProtocolReplay, eval.ProtocolTruth:
	default:
		return nil, errors.Join(errUsage, fmt.Errorf("--protocol %q: want chrono, replay or truth", f.cfg.Protocol))
	}
	if f.cfg.Window != "test" && f.cfg.Window != "validation" {
		return nil, errors.Join(errUsage, fmt.Errorf("--window %q: want test or validation", f.cfg.Window))
	}
	if f.cfg.MaxQueries < 0 || f.ours.Train.Steps < 0 {
		return nil, errors.Join(errUsage, errors.New("--max-queries and --steps must be >= 0"))
	}
	f.cfg.Methods = []string{}
	known := append(eval.MethodNames(), eval.MethodOurs, eval.MethodOursParts, eval.MethodOursContext, methodService)
	for _, m := range strings.Split(*methods, ",") {
		m = strings.TrimSpace(m)
		switch {
		case m == "":
		case !slices.Contains(known, m):
			return nil, errors.Join(errUsage, fmt.Errorf("--methods: unknown method %q (known: %s)", m, strings.Join(known, ", ")))
		case m == eval.MethodOurs:
			f.useOurs = true
		case m == eval.MethodOursParts:
			f.useOurs, f.ours.Parts = true, true
		case m == eval.MethodOursContext:
			f.useOurs, f.ours.Context = true, true
		case m == methodService:
			f.useService = true
		case !slices.Contains(f.cfg.Methods, m):
			f.cfg.Methods = append(f.cfg.Methods, m)
		}
	}
	if len(f.cfg.Methods) == 0 && !f.useOurs && !f.useService {
		return nil, errors.Join(errUsage, errors.New("--methods: no method"))
	}
	switch {
	case f.useService && f.service.URL == "":
		return nil, errors.Join(errUsage, errors.New("--methods service needs --service URL"))
	case f.service.URL != "" && !f.useService:
		return nil, errors.Join(errUsage, errors.New("--service given but --methods does not name service"))
	}
	if f.service.APIKey == "" {
		f.service.APIKey = os.Getenv("HIR_API_KEY")
	}
	return f, nil
}

func runEval(ctx context.Context, e *env, args []string) error {
	f, err := parseEvalFlags(e, args)
	if err != nil {
		return err
	}
	f.cfg.Logger = e.logger
	var ours *eval.Ours
	if f.useOurs {
		f.ours.Logger = e.logger.With("method", eval.MethodOurs)
		f.ours.TrainLog = e.stderr
		ours = eval.NewOurs(f.ours)
		defer ours.Close()
		f.cfg.Extra = ours.Methods()
		if f.cfg.Protocol == eval.ProtocolTruth {
			f.cfg.TokenLevels = ours.TokenLevels()
		}
	}
	var svc *serviceMethod
	if f.useService {
		f.service.Logger = e.logger.With("method", methodService)
		if svc, err = newServiceMethod(f.service); err != nil {
			return err
		}
		f.cfg.Extra = append(f.cfg.Extra, svc)
	}
	rep, err := eval.Run(ctx, f.cfg)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	if ours != nil {
		md += fmt.Sprintf("\n%s re-ranked %.0f ads per query on average (of %d).\n", eval.MethodOursTokens, ours.MeanCandidates(), rep.Stats.Items)
	}
	if svc != nil {
		md += fmt.Sprintf("\n%s: %s, model %s, re-rank weights %s; %d queries answered 404 (user unknown to the service), scored as empty lists.\n",
			methodService, f.service.URL, svc.Version(), svc.Weights(), svc.NotFound())
	}
	fmt.Fprint(e.stdout, md)
	if f.mdPath != "" {
		if err := os.WriteFile(f.mdPath, []byte(md), 0o644); err != nil {
			return fmt.Errorf("write markdown: %w", err)
		}
	}
	if f.jsonPath != "" {
		if err := rep.WriteJSON(f.jsonPath); err != nil {
			return err
		}
	}
	return nil
}
