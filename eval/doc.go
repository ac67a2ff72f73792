// Package eval is the offline evaluation harness of HIR (DESIGN §9): it
// splits a data set chronologically, fits retrieval methods on the past and
// measures them on the future, with baselines computed in the same run on
// the same split, and reports JSON plus a Markdown table.
//
// # Example
//
//	cfg := eval.Config{Data: "../shared/data/movielens-100k", Format: "movielens", Protocol: "chrono"}
//	rep, err := eval.Run(ctx, cfg)
//	if err != nil { ... }
//	fmt.Print(rep.Markdown())
//	err = rep.WriteJSON("out.json")
//
// # Sections
//
// Data. [Collector] is a dataset.Sink that gathers entities and events into
// a [Data]: a [Catalog] (users, items = ads, their text) and the user -> ad
// engagement [Interaction]s in time order. A click or deeper engagement is a
// positive (MovieLens: rating >= 4).
//
// Split. [ChronoWindows] puts the latest TestFraction (0.2) of the
// interactions in the test window and carves a validation window from the
// end of the training part. A method is fitted on a [TrainView], which holds
// nothing later than the window's cut (AsOf), so no test event can leak into
// fitting. Tune on the validation window (Config.Window = "validation").
//
// Protocols.
//   - chrono: one query per user with a positive in the window; every item
//     the user has not interacted with before the cut is ranked; relevant =
//     the user's window positives. Recall@K, NDCG@K, HitRate@K, MRR.
//   - replay: the window is walked in time order; each positive on an item
//     new to the user asks for the user's top-K before the events of that
//     timestamp are ingested (histories grow; an [Observer] sees each event).
//     HitRate@K and MRR.
//   - truth (synthetic data): chrono queries plus recall of the planted user
//     interests, and NMI/purity of our token levels against the planted
//     hierarchy ([Agreement]).
//
// Every protocol reports the slices all, cold_users (at most ColdUserMax = 5
// interactions before the query) and cold_items (relevant items with no
// interaction before the cut).
//
// Methods. A [Recommender] has Fit(train view) and TopK(query). Built in:
// [Popularity], [ItemKNN] (cosine co-occurrence over the up-to-date
// history), [BPR] (matrix factorisation trained with GoMLX autodiff and Adam)
// and [Content] (tf-idf cosine of bleve-analysed text). Our dense retrieval
// and token index plug in through Config.Extra; a method that implements
// [Approximator] also gets its top-K recall against the exact method's.
// [Ours] provides both: [NewOurs] trains our model on a graph.Store built
// from the training view only (entities, structure edges and engagement up to
// the cut), builds the generation with retrieval.Build and publishes it in a
// retrieval.Engine, and [Ours.Methods] returns "ours-dense" (Engine.Retrieve
// re-ranking every ad) and "ours-tokens" (Engine.Retrieve as POST
// /v1/retrieve runs it: BoM query bag, postings, exact re-rank with the
// engagement prior and the co-engagement term); both add the same terms to
// the dot product. With OursOptions.Parts it also returns "ours-popularity"
// and "ours-interest", which rank every ad by one part of the embeddings. Users are embedded from their
// neighbourhood as of the query time, and replayed events are added to the
// store, the priors and the co-engagement counts. [Ours.TokenLevels] gives
// the truth protocol each ad's argmax prototype per level.
//
// Metrics. [Recall], [NDCG], [HitRate], [ReciprocalRank] and [Overlap] are
// pure functions over a ranked list and a relevant set.
//
// Output. [Report] marshals to JSON ([Report.WriteJSON]) and renders as
// Markdown ([Report.Markdown]). See docs/evaluation-log.md for measured numbers.
package eval
