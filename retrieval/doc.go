// Package retrieval is HIR's retrieval core (DESIGN §2, §7): the served
// state and the one retrieval path that the REST API and the offline
// evaluation share.
//
// # Example
//
//	engine, err := retrieval.NewEngine(store, retrieval.Options{
//		Rank: rank.DefaultOptions(), Weights: rank.DefaultWeights()})
//	if err != nil {
//		return err
//	}
//	served, err := retrieval.Build(ctx, m, store, store.MaxTS(), retrieval.BuildOptions{})
//	if err != nil {
//		return err
//	}
//	if err := engine.Publish(ctx, served); err != nil {
//		return err
//	}
//	user := graph.Ref{Type: graph.NodeUser, ID: "u1"} // known or never seen
//	res, err := engine.Retrieve(ctx, retrieval.Request{User: &user, K: 100, ExcludeSeen: true})
//
// # Sections
//
// State: a generation is one trained model's immutable state (model,
// embedding matrices, token catalogue). Its liveState part (the live ad index,
// the engagement priors and the co-engagement of package rank) changes with
// every ingested event; the [Engine] is its one owner and writes it only
// under its apply lock: [Engine.Apply] applies a stored batch to the graph
// store and then to the live part, and [Engine.Publish] swaps in a new
// generation after catching it up with everything applied since it was
// built (new and re-linked ads embedded and indexed, priors and
// co-engagement counted from the store as it is then). A request loads the
// current [Served] once.
//
// Retrieval: [Engine.Retrieve] computes the user's context once (one as-of
// time, one pass over their stored events: seen ads, recent engaged ads,
// the number of events that makes them new or not), embeds the user (the
// generation's embedding for a known user who is not new and has not
// changed since; otherwise at request time from their neighbourhood, their
// context events and their content, which is how a never-seen user is
// answered), takes the query bag's token postings ∩ filter (∩ keyword
// hits) minus the seen ads, and re-ranks exactly by dot product plus the
// prior and co-engagement terms ([index.Parts] splits each score).
//
// Building: [Build] embeds every node and builds the index and catalogue;
// [Save], [Load] and [Open] persist a generation next to its checkpoint
// (the embeddings file format is in [WriteEmbeddingsFile]); [NewTrainJob]
// is the standard training round (train, calibrate, validate against the
// serving model, build).
//
// Calibration: [Calibrate] chooses a trained version's new-ad scale, the
// weight of the users' popularity coordinate and its serving prior weight
// by ranking, through this package's own path, the engagements of the
// latest events as of before them (the graph cut there with
// graph.Store.Until, the spectral factors refitted with
// model.Model.Refit); [CalibrateVersion] stores the result in the version.
// model.Load applies the scale, every retrieval the popularity weight
// ([Engine.PopularityWeight]), and an engine with Options.CalibratedPrior
// serves the prior weight ([Engine.Weights]).
//
// Dependencies: retrieval imports model, index, graph and rank, never the
// HTTP layer; package eval uses it directly.
package retrieval
