package eval

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	mlg "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"

	"github.com/hir-ads/hir/model"
)

// BPROptions configures [BPR].
type BPROptions struct {
	Dim          int          // embedding size (default 64)
	Epochs       int          // passes over the training positives (default 30)
	BatchSize    int          // triples per step (default 1024)
	LearningRate float64      // Adam learning rate (default 0.01)
	L2           float64      // L2 penalty on the embeddings of each triple (default 1e-4)
	InitStddev   float64      // stddev of the normal initialisation (default 0.1)
	Seed         int64        // sampling and initialisation seed (default 1)
	Logger       *slog.Logger // default: discard
}

// BPR is Bayesian personalised ranking matrix factorisation: score(u, i) =
// <p_u, q_i> + b_i, trained on (user, positive, sampled negative) triples to
// minimise softplus(-(x_ui - x_uj)) + L2, with GoMLX automatic
// differentiation and the Adam optimizer. Items never engaged positively in
// training keep their random initial vectors and a zero bias; users unseen in
// training score every item by bias alone.
type BPR struct {
	opts    BPROptions
	users   []float32 // [nUsers*dim]
	items   []float32 // [nItems*dim]
	bias    []float32 // [nItems]
	trained []bool    // by user: has positives in training
	scores  []float32
	// LossCurve holds the mean BPR loss of each epoch (set by Fit).
	LossCurve []float64
}

var _ Recommender = (*BPR)(nil)

// NewBPR returns an unfitted BPR baseline; zero options get defaults.
func NewBPR(opts BPROptions) (*BPR, error) {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&opts.Dim, 64)
	def(&opts.Epochs, 30)
	def(&opts.BatchSize, 1024)
	if opts.LearningRate == 0 {
		opts.LearningRate = 0.01
	}
	if opts.L2 == 0 {
		opts.L2 = 1e-4
	}
	if opts.InitStddev == 0 {
		opts.InitStddev = 0.1
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Dim < 0 || opts.Epochs < 0 || opts.BatchSize < 0 || opts.LearningRate < 0 || opts.L2 < 0 || opts.InitStddev < 0 {
		return nil, fmt.Errorf("%w: negative BPR option %+v", ErrBadConfig, opts)
	}
	return &BPR{opts: opts}, nil
}

// Name returns "bpr".
func (m *BPR) Name() string { return "bpr" }

// Fit trains the factorisation on the positives of the view.
func (m *BPR) Fit(ctx context.Context, train *TrainView) (err error) {
	nUsers, nItems, dim := train.Catalog.NumUsers(), train.Catalog.NumItems(), m.opts.Dim
	type pair struct{ u, i int32 }
	var pos []pair
	posSet := make(map[pair]bool)
	m.trained = make([]bool, nUsers)
	for _, in := range train.Interactions {
		p := pair{in.User, in.Item}
		if in.Positive() && !posSet[p] {
			posSet[p] = true
			pos = append(pos, p)
			m.trained[in.User] = true
		}
	}
	if len(pos) == 0 || nItems < 2 {
		return fmt.Errorf("fit bpr: %w", ErrNoData)
	}
	// The process-wide backend ($GOMLX_BACKEND, the pure-Go one by
	// default, with the model's workarounds), shared with the model.
	backend, err := model.Backend()
	if err != nil {
		return fmt.Errorf("fit bpr: %w", err)
	}

	gctx := mlctx.New()
	gctx.SetParam(mlctx.ParamInitialSeed, m.opts.Seed)
	gctx = gctx.In("bpr")
	opt := optimizers.Adam().LearningRate(m.opts.LearningRate).Done()
	var usersVar, itemsVar, biasVar *mlctx.Variable
	l2 := m.opts.L2
	step := func(ctx *mlctx.Context, u, i, j *mlg.Node) *mlg.Node {
		g := u.Graph()
		ctx.SetTraining(g, true)
		init := ctx.WithInitializer(initializers.RandomNormalFn(ctx, m.opts.InitStddev))
		usersVar = init.VariableWithShape("users", shapes.Make(dtypes.Float32, nUsers, dim))
		itemsVar = init.VariableWithShape("items", shapes.Make(dtypes.Float32, nItems, dim))
		biasVar = ctx.WithInitializer(initializers.Zero).VariableWithShape("bias", shapes.Make(dtypes.Float32, nItems))
		U, I, B := usersVar.ValueGraph(g), itemsVar.ValueGraph(g), biasVar.ValueGraph(g)
		u, i, j = mlg.InsertAxes(u, -1), mlg.InsertAxes(i, -1), mlg.InsertAxes(j, -1)
		pu, qi, qj := mlg.Gather(U, u), mlg.Gather(I, i), mlg.Gather(I, j) // [B, dim]
		x := mlg.Add(mlg.ReduceSum(mlg.Mul(pu, mlg.Sub(qi, qj)), -1), mlg.Sub(mlg.Gather(B, i), mlg.Gather(B, j)))
		loss := mlg.ReduceAllMean(mlg.Softplus(mlg.Neg(x)))
		reg := mlg.ReduceAllMean(mlg.ReduceSum(mlg.Add(mlg.Add(mlg.Square(pu), mlg.Square(qi)), mlg.Square(qj)), -1))
		opt.UpdateGraph(ctx, g, mlg.Add(loss, mlg.MulScalar(reg, l2)))
		return loss
	}
	exec, err := mlctx.NewExec(backend, gctx, step)
	if err != nil {
		return fmt.Errorf("fit bpr: build step: %w", err)
	}
	defer exec.Finalize()

	rng := rand.New(rand.NewPCG(uint64(m.opts.Seed), 0x6270722d73616d70))
	bs := m.opts.BatchSize
	us, is, js := make([]int32, bs), make([]int32, bs), make([]int32, bs)
	stepsPerEpoch := max(1, (len(pos)+bs-1)/bs)
	m.LossCurve = m.LossCurve[:0]
	for epoch := range m.opts.Epochs {
		rng.Shuffle(len(pos), func(a, b int) { pos[a], pos[b] = pos[b], pos[a] })
		var sum float64
		for s := range stepsPerEpoch {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("fit bpr: %w", err)
			}
			for b := range bs { // fixed batch shape: wrap around the shuffled positives
				p := pos[(s*bs+b)%len(pos)]
				us[b], is[b] = p.u, p.i
				for {
					j := int32(rng.IntN(nItems))
					if !posSet[pair{p.u, j}] {
						js[b] = j
						break
					}
				}
			}
			loss, err := execStep(exec, us, is, js)
			if err != nil {
				return fmt.Errorf("fit bpr: epoch %d step %d: %w", epoch, s, err)
			}
			sum += loss
		}
		m.LossCurve = append(m.LossCurve, sum/float64(stepsPerEpoch))
		m.opts.Logger.Debug("bpr epoch", "epoch", epoch, "loss", sum/float64(stepsPerEpoch))
	}
	if m.users, err = variableData(usersVar); err != nil {
		return err
	}
	if m.items, err = variableData(itemsVar); err != nil {
		return err
	}
	if m.bias, err = variableData(biasVar); err != nil {
		return err
	}
	m.scores = make([]float32, nItems)
	return nil
}

// execStep runs one training step and returns its BPR loss.
func execStep(exec *mlctx.Exec, us, is, js []int32) (loss float64, err error) {
	n := len(us)
	out, err := exec.Exec(tensors.FromFlatDataAndDimensions(us, n),
		tensors.FromFlatDataAndDimensions(is, n), tensors.FromFlatDataAndDimensions(js, n))
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, t := range out {
			_ = t.FinalizeAll()
		}
	}()
	return float64(tensors.ToScalar[float32](out[0])), nil
}

func variableData(v *mlctx.Variable) ([]float32, error) {
	if v == nil {
		return nil, fmt.Errorf("read bpr variable: %w", ErrNoData)
	}
	t, err := v.Value()
	if err != nil {
		return nil, fmt.Errorf("read bpr variable %s: %w", v.Name(), err)
	}
	out, err := tensors.CopyFlatData[float32](t)
	if err != nil {
		return nil, fmt.Errorf("read bpr variable %s: %w", v.Name(), err)
	}
	return out, nil
}

// TopK ranks items by the factorised score.
func (m *BPR) TopK(_ context.Context, q *Query, dst []int32) ([]int32, error) {
	dim := m.opts.Dim
	var pu []float32
	if int(q.User) < len(m.trained) && m.trained[q.User] {
		pu = m.users[int(q.User)*dim : int(q.User+1)*dim]
	}
	for i := range m.scores {
		s := m.bias[i]
		if pu != nil {
			qi := m.items[i*dim : (i+1)*dim]
			for d, x := range pu {
				s += x * qi[d]
			}
		}
		m.scores[i] = s
	}
	return topKScores(m.scores, q, dst), nil
}
