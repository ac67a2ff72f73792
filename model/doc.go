// Package model is HIR's hierarchical encoder and trainer, written with GoMLX
// (DESIGN §5).
//
// A node is encoded, per subgraph token, as the sum of a type embedding, a deep
// hash embedding of its external id (k hashes in [-1,1] through a shared MLP:
// no per-id table), an EmbeddingBag of hashed words and word bigrams of its
// text (bleve's "en" analyzer), a projection of its client content vector,
// hashed key=value attributes, a position encoding (hop, random-walk
// frequency) and an edge encoding (type, decayed weight, time bucket of the
// edge that reached it). A pre-LN transformer whose attention logits add
// bias[h, spd(i,j)] + bias[h, type(i), type(j)] runs over each subgraph; the
// anchor token is projected and L2-normalised into the universal embedding.
//
// Training ([Train]) combines cross-view distillation onto 3 levels of learned
// prototypes (teacher view -> Sinkhorn-Knopp balanced targets -> student
// cross-entropy), a hierarchy consistency loss between levels, and engagement
// prediction with in-batch, random and not_interested negatives, optimised by
// AdamW with a pipelined sampler. Versions are written to DIR/models/vN and
// loaded for inference with [Load]. On the pure-Go backend inference runs
// the encoder's forward pass natively in Go over the trained weights
// (native.go, checked against GoMLX's by a test), which embeds about 10x
// faster at batch 1 than GoMLX's pure-Go executor; [LoadGoMLX] keeps GoMLX
// running inference, as it does on other backends.
//
// # Example
//
//	ck, err := model.Train(ctx, store, model.TrainConfig{Steps: 300}, dataDir, os.Stderr)
//	...
//	m, err := model.Load(dataDir) // latest version
//	embs, err := m.Embed(ctx, store, ids, asOf)
//	scores := m.PrototypeScores(embs[0]) // per level
//
// # Sections
//
//   - GoMLX patches (gomlx_patches.go, pinned to [PatchedGoMLXVersion] by a
//     test): [Backend] picks GoMLX's backend: GOMLX_BACKEND when set (xla:cuda,
//     xla:/path/plugin.so, go), else the pure-Go one; the XLA backend is linked
//     (cgo) and loaded at run time. [RegisterFastDotGradients] replaces GoMLX
//     v0.26.0's slow DotGeneral gradient; every constructor calls it.
//   - Files: encoder.go and features.go (the encoder and its inputs), heads.go
//     (losses), train.go (the training loop), schedule.go (which events a step
//     trains on), batches.go (sampling, featurising, the pipelined loader),
//     metrics.go (progress and validation), version.go and checkpoint.go
//     (versions on disk), infer.go (inference), native.go (the native
//     forward pass).
//   - Opt-in levers (off by default, measured in docs/evaluation-log.md):
//     Config.IDRows (per-id hashed rows beside the deep hash embedding) and
//     TrainConfig.Negatives (a queue of earlier destinations in a
//     log-popularity-corrected sampled softmax, replacing the random negative
//     anchors).
//   - Checkpoints: config.json ([CheckpointConfig]), weights.gob,
//     optimizer.gob, prototypes.json, metrics.json ([TrainMetrics]).
//   - Evaluation helpers: [NMI], [AUC].
package model
