// Browser test of the interest explorer (/ui) against a live `hir serve`
// started by scripts/ui-test.sh in read-auth mode: HIR_URL, HIR_API_KEY,
// HIR_CHROMIUM (the browser executable) and HIR_UI_ARTIFACTS (where the
// screenshots go). Each view is opened in headless Chromium and what the
// page shows is checked against the API's own answers.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";

const base = process.env.HIR_URL;
const key = process.env.HIR_API_KEY;
const artifacts = process.env.HIR_UI_ARTIFACTS ?? ".";
if (!base || !key || !process.env.HIR_CHROMIUM) {
  throw new Error("HIR_URL, HIR_API_KEY and HIR_CHROMIUM must be set (run scripts/ui-test.sh)");
}

/** api calls the REST API directly, with the key. */
async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json();
  assert.ok(res.ok, `${method} ${path} = ${res.status} ${JSON.stringify(json)}`);
  return json;
}

let browser;
let page;
const consoleErrors = [];

before(async () => {
  browser = await chromium.launch({ executablePath: process.env.HIR_CHROMIUM, args: ["--no-sandbox", "--disable-gpu"] });
  page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  page.on("console", (m) => {
    // Failed requests are the API's answers the test provokes (401 before the
    // key, 404 for an unknown user); anything else logged as an error fails.
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
});

after(async () => {
  await browser?.close();
});

async function shot(name, fullPage = false) {
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: `${artifacts}/${name}.png`, fullPage });
}

const text = (sel) => page.locator(sel).first().innerText();

test("without a key the API's 401 problem is shown; with it the hierarchy loads", async () => {
  await page.goto(base + "/ui");
  const problem = page.getByTestId("problem").first();
  await problem.waitFor();
  const shown = await problem.innerText();
  const res = await fetch(base + "/v1/tokens?level=0&limit=50");
  const p = await res.json();
  assert.equal(res.status, 401);
  assert.match(shown, new RegExp(p.title));
  assert.ok(p.detail && shown.includes(p.detail), `problem box ${JSON.stringify(shown)} lacks the detail ${p.detail}`);

  await page.getByTestId("api-key").fill(key);
  await page.getByTestId("save-key").click();
  await page.getByTestId("token-row").first().waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem("hir-api-key")), key);
});

test("hierarchy: treemap, rows, a token's ads with paging, children", async () => {
  const want = await api("GET", "/v1/tokens?level=0&limit=50");
  const rows = page.locator(".tree > ul > li > .token-row");
  assert.equal(await rows.count(), want.tokens.length);
  for (let i = 0; i < want.tokens.length; i++) {
    const t = want.tokens[i];
    const row = rows.nth(i);
    assert.equal(await row.getAttribute("data-token"), t.token);
    assert.equal(await row.locator(".size").innerText(), t.size.toLocaleString("en-US"));
    if (t.label) assert.equal(await row.locator(".label").innerText(), t.label);
    for (const m of t.sample_members ?? []) assert.ok((await row.locator(".samples").innerText()).includes(m.id));
  }
  // The treemap: one cell per token with ads; a click selects the token.
  const withAds = want.tokens.filter((t) => t.size > 0);
  assert.deepEqual(await page.getByTestId("treemap-cell").evaluateAll((els) => els.map((e) => e.dataset.token)), withAds.map((t) => t.token));
  // Every cell big enough for its token shows a label, and every label fits
  // its cell (issue 52: small cells lost their labels, or cut them).
  const cells = await page.getByTestId("treemap-cell").evaluateAll((els) => els.map((g) => {
    const r = g.querySelector("rect").getBBox();
    const t = g.querySelector("text");
    const b = t ? t.getBBox() : null;
    return { token: g.dataset.token, w: r.width, h: r.height, x: r.x, y: r.y, label: t ? t.textContent : null,
      fits: b ? b.x >= r.x && b.y >= r.y - 0.5 && b.x + b.width <= r.x + r.width + 0.5 && b.y + b.height <= r.y + r.height + 0.5 : true };
  }));
  for (const c of cells) {
    assert.ok(c.fits, `treemap label ${JSON.stringify(c.label)} overflows its ${c.w.toFixed(0)}x${c.h.toFixed(0)} cell`);
    if (c.w >= 40 && c.h >= 16) assert.ok(c.label && c.label.startsWith(c.token), `treemap cell ${c.token} (${c.w.toFixed(0)}x${c.h.toFixed(0)}) shows no label`);
  }
  if (withAds.length > 1) {
    await page.locator(`[data-testid="treemap-cell"][data-token="${withAds[1].token}"]`).click();
    await page.locator('[data-testid="token-detail"] h2').filter({ hasText: withAds[1].token }).waitFor();
    assert.equal(await text('[data-testid="token-size"]'), withAds[1].size.toLocaleString("en-US"));
  }
  // The largest coarse token: its ads, page by page.
  const tok = want.tokens[0];
  await rows.first().click();
  await page.getByTestId("members-table").waitFor();
  assert.equal(await text('[data-testid="token-size"]'), tok.size.toLocaleString("en-US"));
  const p1 = await api("GET", `/v1/tokens/${tok.token}/members?limit=20`);
  const ids = async () => page.locator('[data-testid="members-table"] tbody tr td:first-child').allInnerTexts();
  assert.deepEqual(await ids(), p1.items.map((m) => m.id));
  if (p1.next_cursor) {
    await page.getByTestId("members-next").click();
    await page.getByTestId("members-page").filter({ hasText: "page 2" }).waitFor();
    const p2 = await api("GET", `/v1/tokens/${tok.token}/members?limit=20&cursor=${p1.next_cursor}`);
    assert.deepEqual(await ids(), p2.items.map((m) => m.id));
    await page.getByTestId("members-prev").click();
    await page.getByTestId("members-page").filter({ hasText: "page 1" }).waitFor();
    assert.deepEqual(await ids(), p1.items.map((m) => m.id));
  }
  // Expand it: its children, largest first, as the API lists them.
  const kids = await api("GET", `/v1/tokens?parent=${tok.token}&limit=50`);
  await page.getByRole("button", { name: `expand ${tok.token}`, exact: true }).click();
  const childRows = page.locator(".tree > ul > li").first().locator(".children .token-row");
  await childRows.first().waitFor();
  assert.deepEqual(await childRows.evaluateAll((els) => els.map((e) => e.dataset.token)), kids.tokens.map((t) => t.token));
  await shot("hierarchy");
});

test("map: the server's sample, coloured by coarse interest, with a user and their retrieved ads", async () => {
  await page.getByTestId("tab-map").click();
  await page.getByTestId("map-point").first().waitFor();
  const m = await api("GET", "/v1/map?limit=1000");
  assert.equal(await page.getByTestId("map-point").count(), m.points.length);
  assert.equal(await page.locator(".legend-list li").count(), m.interests.length);
  const first = page.getByTestId("map-point").first();
  assert.equal(await first.getAttribute("data-id"), m.points[0].id);
  await first.hover({ force: true });
  assert.ok((await text('[data-testid="hover"]')).includes(m.points[0].id));
  // Two points of different coarse interests get different colours.
  const fills = new Set(await page.getByTestId("map-point").evaluateAll((els) => els.map((e) => e.getAttribute("fill"))));
  assert.ok(fills.size >= Math.min(2, m.interests.length), `colours ${[...fills]}`);

  await page.getByTestId("map-user").fill("u1");
  await page.getByTestId("map-highlight").click();
  await page.getByTestId("user-point").waitFor();
  const r = await api("POST", "/v1/retrieve", { user: { type: "user", id: "u1" }, k: 10 });
  const placed = await page.getByTestId("retrieved-point").evaluateAll((els) => els.map((e) => e.dataset.id));
  assert.deepEqual(placed, r.candidates.map((c) => c.id));
  await shot("map");
});

test("user: interests, events, retrieval with score parts, a posted click", async () => {
  await page.goto(base + "/ui#user/u1");
  await page.getByTestId("interests-table").waitFor();
  const interests = await api("GET", "/v1/entities/user/u1/interests");
  assert.deepEqual(await page.locator('[data-testid="interests-table"] tbody tr').evaluateAll((els) => els.map((e) => e.dataset.token)),
    [...interests.tokens].sort((a, b) => a.level - b.level || (b.weight ?? 0) - (a.weight ?? 0) || a.token.localeCompare(b.token)).map((t) => t.token));
  const ev = await api("GET", "/v1/entities/user/u1/events?limit=15");
  await page.getByTestId("events-table").waitFor();
  assert.ok((await text('[data-testid="events-total"]')).startsWith(`${ev.total} events`));
  assert.equal(await page.locator('[data-testid="events-table"] tbody tr').count(), ev.events.length);

  const req = { user: { type: "user", id: "u1" }, k: 5, explain: true, exclude_seen: true, prior_weight: 0.5 };
  await page.getByTestId("k").fill("5");
  await page.getByTestId("prior").fill("0.5");
  await page.getByTestId("retrieve").click();
  await page.getByTestId("candidates").waitFor();
  const want = await api("POST", "/v1/retrieve", req);
  const got = await page.getByTestId("candidate").evaluateAll((els) => els.map((e) => e.dataset.id));
  assert.deepEqual(got, want.candidates.map((c) => c.id));
  const c0 = want.candidates[0];
  assert.equal(await text('[data-testid="candidate"] [data-testid="score"]'), c0.score.toFixed(3));
  assert.equal(await text('[data-testid="candidate"] [data-testid="parts"]'),
    `${c0.parts.similarity.toFixed(3)} + ${c0.parts.prior.toFixed(3)} + ${c0.parts.coengagement.toFixed(3)}`.replace(/(^|\s)0\.000(?=\s|$)/g, "$10"));
  for (const t of c0.tokens ?? []) {
    assert.ok((await page.getByTestId("candidate").first().locator(".chips").innerText()).includes(t.token));
  }
  await shot("user-before-click");

  // Post a click on the third candidate as u1: the page re-runs the retrieval.
  const target = want.candidates[2]?.id ?? c0.id;
  await page.locator(`[data-testid="click-ad"][data-ad="${target}"]`).click();
  await page.getByTestId("click-note").waitFor();
  assert.match(await text('[data-testid="click-note"]'), new RegExp(`click of u1 on ${target}`));
  await page.getByTestId("candidates").waitFor();
  const after = await api("POST", "/v1/retrieve", req);
  const gotAfter = await page.getByTestId("candidate").evaluateAll((els) => els.map((e) => e.dataset.id));
  assert.deepEqual(gotAfter, after.candidates.map((c) => c.id));
  assert.ok(!gotAfter.includes(target), "the clicked ad is seen now and excluded");
  await page.getByTestId("events-total").filter({ hasText: `${ev.total + 1} events` }).waitFor();
  await shot("user", true);

  // A filter the API refuses: its 400 problem, title and detail.
  const bad = { ...req, filter: { attr: "status" } };
  await page.getByTestId("filter").fill(JSON.stringify(bad.filter));
  await page.getByTestId("retrieve").click();
  const badBox = page.getByTestId("results").getByTestId("problem");
  await badBox.waitFor();
  const badRes = await fetch(base + "/v1/retrieve", {
    method: "POST", headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" }, body: JSON.stringify(bad),
  });
  const badProblem = await badRes.json();
  assert.equal(badRes.status, 400);
  const badShown = await badBox.innerText();
  assert.ok(badShown.includes(badProblem.title) && badShown.includes(badProblem.detail), `problem box ${JSON.stringify(badShown)}, want ${JSON.stringify(badProblem)}`);
  // Not JSON at all: refused by the page before any request.
  await page.getByTestId("filter").fill("{status");
  await page.getByTestId("retrieve").click();
  await page.getByTestId("results").getByTestId("problem").filter({ hasText: "not valid JSON" }).waitFor();

  // An unknown user: the API's problem, title and detail.
  await page.goto(base + "/ui#user/nobody-here");
  const problem = page.getByTestId("interests").getByTestId("problem");
  await problem.waitFor();
  const res = await fetch(base + "/v1/entities/user/nobody-here/interests", { headers: { Authorization: `Bearer ${key}` } });
  const p = await res.json();
  assert.equal(res.status, 404);
  const shown = await problem.innerText();
  assert.ok(shown.includes(p.title) && shown.includes(p.detail), `problem box ${JSON.stringify(shown)}, want ${p.title} / ${p.detail}`);
  // The events panel words the same 404 the same way (issue 52).
  const evProblem = page.getByTestId("events").getByTestId("problem");
  await evProblem.waitFor();
  assert.equal(await evProblem.innerText(), shown, "the interests and events panels word the unknown user differently");
});

test("model: version, index size, training state, loss chart, entropy; a training round shows as running", async () => {
  await page.getByTestId("tab-model").click();
  await page.getByTestId("version").waitFor();
  const check = async () => {
    const m = await api("GET", "/v1/model");
    assert.equal(await text('[data-testid="version"]'), m.version);
    assert.equal(await text('[data-testid="index-size"]'), m.index_size.toLocaleString("en-US"));
    assert.ok(m.history.length > 0);
    assert.equal(await page.locator('[data-testid="loss-chart"] circle.s-train').count(), m.history.length);
    assert.equal(await page.locator('[data-testid="entropy"] tbody tr').count(), m.usage_entropy.length);
    assert.equal(await page.locator('[data-testid="metrics"] tbody tr').count(), Object.keys(m.metrics).length);
    return m;
  };
  await check();
  // The x axis title sits under the tick labels, outside the plot, and
  // covers no point (issue 52: it overlapped the last one).
  for (const chart of ["loss-chart", "auc-chart"]) {
    const geo = await page.getByTestId(chart).evaluate((svg) => {
      const box = (e) => { const b = e.getBBox(); return { x: b.x, y: b.y, w: b.width, h: b.height }; };
      const title = svg.querySelector('[data-testid="x-axis-title"]');
      return { title: title ? box(title) : null, dots: [...svg.querySelectorAll("circle")].map(box),
        grid: Math.max(...[...svg.querySelectorAll("line.grid-line")].map((l) => Number(l.getAttribute("y1")))) };
    });
    assert.ok(geo.title, `${chart} has no x axis title`);
    assert.ok(geo.title.y >= geo.grid, `${chart}: the axis title (top ${geo.title.y.toFixed(1)}) is inside the plot (bottom ${geo.grid.toFixed(1)})`);
    for (const d of geo.dots) {
      const apart = d.x + d.w <= geo.title.x || geo.title.x + geo.title.w <= d.x || d.y + d.h <= geo.title.y || geo.title.y + geo.title.h <= d.y;
      assert.ok(apart, `${chart}: the axis title covers a point at ${d.x.toFixed(1)},${d.y.toFixed(1)}`);
    }
  }
  assert.equal(await text('[data-testid="training"]'), "idle");
  // A background round (POST /v1/model/train): the page polls GET /v1/model
  // and shows it running. (Its end is not awaited: a round takes tens of
  // seconds on a busy machine, and may be rejected as a regression.)
  const res = await fetch(base + "/v1/model/train", { method: "POST", headers: { Authorization: `Bearer ${key}` } });
  assert.equal(res.status, 202);
  await page.getByTestId("training").filter({ hasText: "a round is running" }).waitFor({ timeout: 15_000 });
  assert.equal((await api("GET", "/v1/model")).training, true);
  await shot("model");
  assert.deepEqual(consoleErrors, []);
});
