// Package index is HIR's retrieval index: the Bag-of-Meaning (BoM)
// quantizer, roaring-bitmap postings per interest token, attribute bitmaps
// with a JSON filter algebra, an exact re-rank, immutable snapshots with
// online upserts, a checksummed on-disk format and a bleve keyword index.
// It imports no other HIR package (DESIGN §2, §6-7).
//
// A [Quantizer] turns an L2-normalised embedding into a small unordered bag
// of [Token]s: per prototype level the prototypes within a margin of the
// best, plus residual-quantization codes of what the finest prototype leaves
// unexplained, plus, with QuantizerOptions.WholeCodes, its cell of a
// k-means partition of the whole embeddings (the coordinates the prototypes
// do not span included). Queries take wider bags ([Quantizer.QueryBag]).
//
// An [Index] owns the current [Snapshot] behind an atomic pointer. Readers
// call [Index.Snapshot] once per request; [Index.Upsert] and [Index.Delete]
// build the next snapshot under a mutex, copying only touched bitmaps and
// chunks, so a reader holding an old snapshot keeps seeing the old state.
//
// # Example
//
//	q, _ := index.NewQuantizer(index.QuantizerOptions{Levels: protos})
//	_ = q.Fit(ctx, adEmbeddings)
//	ix, _ := index.New(index.Options{Quantizer: q, Logger: logger})
//	_ = ix.Upsert(ctx, index.Doc{ID: 7, Embedding: e, Attrs: map[string][]string{index.AttrCategory: {"shoes"}}})
//	f, err := index.ParseFilter([]byte(`{"not":{"attr":"status","eq":"paused"}}`)) // err is a *FilterError (400)
//	res, _ := ix.Snapshot().Search(ctx, index.Query{Vector: user, K: 100, Filter: f})
//
// # Sections
//
//   - Tokens and bags: [Token], [WeightedToken], [Quantizer], [KMeans].
//   - Set algebra: [Intersect], [Union], [Without].
//   - Filters: [Filter], [ParseFilter], [ErrBadFilter], [FilterError].
//   - Index and search: [Index], [Snapshot], [Query], [Result], [Hit].
//   - Persistence: [Snapshot.WriteTo], [ReadSnapshot], [Snapshot.SaveFile],
//     [LoadFile], [ErrCorrupt]; format in docs/format/index.md.
//   - Labels: [BuildCatalogue], [Catalogue], [TokenInfo].
//   - Keywords: [TextIndex], [Hybrid].
package index
