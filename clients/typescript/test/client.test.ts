// Runs the typed client against a live `hir serve` on the synthetic world of
// `hir synth` (ids u1, a17, cp3 ...): scripts/ts-client-test.sh starts one
// and sets HIR_URL and HIR_API_KEY. Run with `npm test`.
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";

import { createHIRClient, type Schemas } from "../src/index.js";

const url = process.env.HIR_URL;
const apiKey = process.env.HIR_API_KEY;

describe("HIR TypeScript client", { skip: url ? false : "HIR_URL is not set (see scripts/ts-client-test.sh)" }, () => {
  const hir = createHIRClient(url ?? "http://127.0.0.1:1", { apiKey });
  const anonymous = createHIRClient(url ?? "http://127.0.0.1:1");
  const user: Schemas["Ref"] = { type: "user", id: "u1" };
  const adId = `ts-ad-${Date.now()}`;

  before(async () => {
    const { data, error } = await hir.GET("/readyz");
    assert.equal(error, undefined, `server not ready: ${JSON.stringify(error)}`);
    assert.equal(data?.status, "ready");
  });

  test("model status", async () => {
    const { data, error } = await hir.GET("/v1/model");
    assert.equal(error, undefined);
    assert.ok(data?.ready, "a model is served");
    assert.match(data.version ?? "", /^v\d+/);
    assert.ok((data.index_size ?? 0) > 0);
  });

  test("ingest an entity and events, idempotently", async () => {
    const ents = await hir.POST("/v1/entities", {
      body: { entities: [{ type: "ad", id: adId, text: "typescript client test ad", attrs: { status: "active" } }] },
    });
    assert.equal(ents.error, undefined, JSON.stringify(ents.error));
    assert.equal(ents.data?.entities, 1);

    const events: Schemas["Event"][] = [
      { id: `${adId}-cp`, src: { type: "ad", id: adId }, dst: { type: "campaign", id: "cp3" }, type: "in_campaign", ts: Date.now() },
      { id: `${adId}-click`, src: user, dst: { type: "ad", id: "a17" }, type: "click", ts: new Date().toISOString() },
    ];
    const first = await hir.POST("/v1/events", { body: { events } });
    assert.equal(first.error, undefined, JSON.stringify(first.error));
    assert.deepEqual([first.data?.events, first.data?.duplicates], [2, 0]);
    const again = await hir.POST("/v1/events", { body: { events } });
    assert.equal(again.data?.duplicates, 2, "the same event ids are stored once");
  });

  test("writes need the API key", async () => {
    const { error, response } = await anonymous.POST("/v1/entities", {
      body: { entities: [{ type: "ad", id: `${adId}-nokey` }] },
    });
    assert.equal(response.status, 401);
    assert.equal(error?.status, 401);
  });

  test("retrieve with explanations", async () => {
    const { data, error } = await hir.POST("/v1/retrieve", { body: { user, k: 5, explain: true } });
    assert.equal(error, undefined, JSON.stringify(error));
    assert.ok(data);
    assert.ok(data.candidates.length > 0 && data.candidates.length <= 5);
    for (const c of data.candidates) {
      assert.equal(c.type, "ad");
      assert.equal(typeof c.score, "number");
    }
    assert.ok(data.candidates.some((c) => (c.tokens ?? []).length > 0), "some candidate names its matched tokens");
  });

  test("retrieve for a fresh user from context events, with a filter", async () => {
    const visitor: Schemas["Ref"] = { type: "user", id: `ts-visitor-${Date.now()}` };
    const { data, error } = await hir.POST("/v1/retrieve", {
      body: {
        user: visitor,
        k: 50,
        exclude_seen: false,
        filter: { attr: "campaign", eq: "cp3" },
        context_events: [{ src: visitor, dst: { type: "ad", id: "a17" }, type: "click", ts: Date.now() }],
      },
    });
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(data?.fresh_user, true);
    assert.ok(data.candidates.length > 0, "campaign cp3 has candidates");
    assert.ok(data.candidates.some((c) => c.id === adId), `the ad ingested above (${adId}, campaign cp3) is a candidate`);
  });

  test("a never-seen user gets new-user candidates, from an inline profile", async () => {
    const { data, error } = await hir.POST("/v1/retrieve", {
      body: {
        user: { type: "user", id: "nobody-here" },
        k: 5,
        explain: true,
        user_content: { text: "running shoes", attrs: { geo: "fr", device: "mobile" } },
      },
    });
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(data?.fresh_user, true);
    assert.equal(data?.new_user, true);
    assert.equal(data?.candidates.length, 5);
    const c = data!.candidates[0]!;
    const parts = c.parts!;
    assert.ok(Math.abs(parts.similarity + parts.prior + parts.coengagement - c.score) < 1e-4, "score is the sum of its parts");
  });

  test("an unknown entity is a 404 problem", async () => {
    const { error, response } = await hir.GET("/v1/entities/{type}/{id}/interests", {
      params: { path: { type: "user", id: "nobody-here" } },
    });
    assert.equal(response.status, 404);
    assert.equal(error?.title, "Not found");
    assert.equal(response.headers.get("content-type"), "application/problem+json");
  });

  test("interests and tokens", async () => {
    const { data, error } = await hir.GET("/v1/entities/{type}/{id}/interests", {
      params: { path: { type: "user", id: "u1" } },
    });
    assert.equal(error, undefined, JSON.stringify(error));
    assert.deepEqual(data?.entity, user);
    const first = data?.tokens[0];
    assert.ok(first, "u1 has interest tokens");
    assert.match(first.token, /^\d+\.\d+$/);

    const tok = await hir.GET("/v1/tokens/{token}", { params: { path: { token: first.token } } });
    assert.equal(tok.error, undefined, JSON.stringify(tok.error));
    assert.equal(tok.data?.token, first.token);
    assert.equal(tok.data?.level, first.level);
  });

  test("similar entities", async () => {
    const { data, error } = await hir.GET("/v1/entities/{type}/{id}/similar", {
      params: { path: { type: "ad", id: "a17" }, query: { target_type: "ad", k: 3 } },
    });
    assert.equal(error, undefined, JSON.stringify(error));
    assert.equal(data?.items.length, 3);
  });

  test("the server serves the spec this client was generated from", async () => {
    const { data, error } = await hir.GET("/openapi.json");
    assert.equal(error, undefined);
    assert.equal((data as { openapi?: string } | undefined)?.openapi, "3.0.3");
  });
});
