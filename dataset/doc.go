// Package dataset reads and writes the HIR interchange format (JSON Lines),
// imports public data sets into it, and generates a synthetic ads world with a
// planted interest hierarchy.
//
// # Interchange format
//
// A data set is a directory with two JSON Lines files. entities.jsonl holds one
// [graph.Entity] per line:
//
//	{"type":"ad","id":"a17","text":"...","attrs":{"k":"v"},"vector":[0.1,0.2]}
//
// events.jsonl holds one [graph.Event] per line (ts is unix milliseconds or an
// RFC 3339 string; weight defaults to 1; id is an optional idempotency key):
//
//	{"id":"r1-2","src":{"type":"user","id":"u1"},"dst":{"type":"ad","id":"a17"},"type":"click","ts":1700000000000,"weight":1}
//
// Structural relations (in_campaign, of_advertiser, promotes, in_category,
// of_brand, fires) are events too. Blank lines are skipped; lines may be many
// megabytes long. Files ending in ".gz" are decompressed on the fly. Decoding
// and validation are those of [graph.Entity.UnmarshalJSON] and
// [graph.Event.UnmarshalJSON]; an error names the file and line as a
// [*LineError]. [AppendEntity] and [AppendEvent] encode records without
// reflection; [Writer] is a [Sink] that writes a data set directory.
//
// # Example
//
//	sum, err := dataset.Import(ctx, "movielens", "../shared/data/movielens-100k", dataset.Discard)
//	if err != nil { ... }          // a *LineError names file:line
//	fmt.Println(sum)               // one JSON line: counts by type, ts range
//
// # Importers
//
// [Import] streams a data set into a [Sink]; [Formats] lists the formats.
// Memory is bounded by the number of distinct entities (a set of the ids
// already emitted), never by the number of events, except for MovieLens-100K
// whose 100,000 ratings are sorted by time before they are emitted.
//
//   - "jsonl": a directory holding entities.jsonl and/or events.jsonl (the
//     output of [Synth] or [Writer]; truth.json is ignored), or one .jsonl
//     file. Entities are read before events.
//   - "movielens" (MovieLens-100K: u.user, u.item, u.data, u.genre): users
//     "u<id>" (text = occupation; attrs age, gender, occupation, zip); movies
//     as ad entities "m<id>" (text = title and genre names, converted from
//     latin-1 to UTF-8; attrs year, genres); genres as category entities
//     "g<index>" (text = genre name) with ad -> category in_category edges at
//     the movie's first rating time (or the data set's first rating time when
//     the movie has none); ratings >= 4 become click, 3 impression, <= 2
//     not_interested, with ts = rating time in ms, weight 1 and the
//     idempotency id "r<user>-<item>". Events are emitted in time order.
//     [Summary.Ratings] counts the rating events.
//   - "taobao-ad" (Alimama "Ad Display/Click Data on Taobao.com" extracts: a
//     FuxiCTR CSV with a header line, or the PaddleRec DMR 267-column text
//     file; src is one file or a directory of them): adgroup -> ad "a<id>",
//     campaign "cp<id>", customer -> advertiser "adv<id>", cate -> category
//     "c<id>", brand "b<id>", user "u<id>" with the user-profile columns
//     present as attrs. Structure edges ad -> campaign (in_campaign), campaign
//     -> advertiser (of_advertiser), ad -> category (in_category) and ad ->
//     brand (of_brand) are emitted when an ad is first seen; clk=1 becomes a
//     click and clk=0 an impression. FuxiCTR time stamps are Beijing time
//     (UTC+8), as in the original raw_sample. DMR rows carry no time: row i
//     (0-based) gets 2017-05-06T00:00:00+08:00 plus i seconds, so file order
//     is kept; its behaviour-sequence columns are not imported.
//   - "taobao-behavior" (UserBehavior.csv: user,item,category,behavior,ts):
//     items become ad entities "i<id>" (not product: retrieval ranks ads, and
//     these are the things users are shown and buy) with an in_category edge
//     to category "c<id>" when first seen; pv -> impression, cart ->
//     add_to_cart, fav -> interested, buy -> purchase. Rows are emitted in
//     file order; out-of-window time stamps are kept.
//
// # Synthetic ads world
//
// [Synth] writes entities.jsonl, events.jsonl (sorted by time, ids
// "e<day>-<n>") and truth.json for a world with a planted three-level interest
// hierarchy (fine -> mid -> coarse, contiguous balanced blocks).
//
//   - Supply: advertisers "adv<i>" (each with a brand "b<i>" and a
//     conversion pixel "px<i>"), campaigns "cp<i>", products "p<i>" and ads
//     "a<i>" each serve one fine interest; an advertiser's campaigns stay under
//     its coarse interest, and a campaign's products and ads share its fine
//     interest. Categories "cat<m>" stand for mid interests. Structure edges:
//     ad -> campaign, ad -> product, ad -> category, product -> category,
//     product -> brand, campaign -> advertiser, pixel -> advertiser, each at
//     the time its source arrives. Ads carry advertiser, brand, campaign,
//     category, product and status attributes.
//   - Content: ad, product, campaign and advertiser text is drawn from
//     per-interest vocabularies of made-up words (coarse + mid + fine words
//     plus shared noise words), so text carries the interest signal.
//   - Demand: users "u<i>" hold 2-4 weighted fine interests (often siblings
//     under one mid or coarse interest) and age/region attributes.
//   - Engagement over Days: impressions target the user's fine interest
//     (50%), its mid (15%) or coarse (5%) interest, or explore at random
//     (30%); clicks are about 3% of impressions, over ten times likelier on
//     the user's own fine interest than on unrelated ads; add_to_cart follows
//     roughly 30% of clicks; purchases (each with a user -> pixel fires edge)
//     are about 0.3% of impressions; interested follows some on-interest
//     clicks and not_interested some impressions of unrelated ads.
//   - Arrivals: 60% of users and ads exist from the start, 15% arrive in the
//     last 20% of the window (cold start), the rest in between; campaigns,
//     products and advertisers arrive with their first ad.
//
// truth.json ([Truth], read with [ReadTruth]) records every entity's fine,
// mid and coarse interest (users: all their interests with weights), arrival
// time and cold-start flag, the hierarchy parents, the vocabularies and the
// options. The output depends only on [SynthOptions]: the same options give
// byte-identical files (on the same architecture), whatever GOMAXPROCS.
// [SynthID] maps a dense index to the external id.
package dataset
