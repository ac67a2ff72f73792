// Package explore holds the computations behind the interest explorer's
// read endpoints (GET /v1/map, POST /v1/map/project and the paged lists of
// package serving): a 2-D principal-component projection of embeddings
// computed on a bounded sample, evenly spaced sampling, and opaque paging
// cursors. It has no HTTP and no model code: serving feeds it vectors.
//
// # Example
//
//	sample := explore.Spread(n, 4096) // indices of at most 4096 of n vectors
//	vecs := make([][]float32, len(sample))
//	for i, j := range sample {
//		vecs[i] = embedding(j)
//	}
//	p, err := explore.FitPCA(ctx, vecs)
//	if err != nil {
//		return err
//	}
//	x, y := p.Project(embedding(42))
//
// # Sections
//
// Projection: [FitPCA] centres the sample, forms its covariance matrix
// (d×d for d-dimensional vectors, O(n·d²) for n vectors) and finds its two
// leading eigenvectors by power iteration with deflation from a fixed
// start, so the same sample always gives the same basis. Each axis is
// signed so that its largest-magnitude coefficient is positive, which keeps
// the map from flipping between identical fits. [PCA.Project] places any
// vector of the same dimension with that basis; [PCA.Explained] is the share
// of the sample's variance along each axis.
//
// Sampling: [Spread] picks at most k of n indices, evenly spaced and
// deterministic, so a map of a million ads ships only k of them.
//
// Paging: [ParseCursor] and [FormatCursor] encode a page position as an
// opaque decimal string; [Page] bounds a slice to one page.
package explore
