// User view: a user's interest tokens with weights, their events (newest
// first, paged), and a retrieval panel (k, filter, keywords, prior and
// co-engagement weights) whose candidates show the parts of their score and
// the tokens they matched. A click can be posted as the user (write key),
// after which the retrieval is run again and the changes are marked.
import type { Schemas } from "../src/index.js";
import { call, colour, empty, fill, fmt, h, load, problemBox } from "./dom.js";
import type { App, View } from "./main.js";

const EVENT_PAGE = 15;

type Candidate = Schemas["Candidate"];

export const userView: View = async (app, el, arg) => {
  const input = h("input", { type: "search", placeholder: "user id, e.g. u1", "aria-label": "user id", "data-testid": "user-id", required: true });
  input.value = arg || app.user;
  const form = h("form", { class: "toolbar" }, h("label", {}, "User ", input), h("button", { type: "submit", "data-testid": "user-search" }, "Show"));
  const body = h("div", { class: "user-body" });
  el.append(form, body);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = input.value.trim();
    if (id) app.go("user/" + encodeURIComponent(id));
  });
  if (!input.value) {
    body.append(empty("Enter a user id to see their interests, their events and what is retrieved for them."));
    return;
  }
  await showUser(app, body, input.value.trim());
};

async function showUser(app: App, el: HTMLElement, user: string): Promise<void> {
  app.user = user;
  const interests = h("section", { class: "card", "data-testid": "interests" });
  const events = h("section", { class: "card", "data-testid": "events" });
  const retrieval = h("section", { class: "card wide", "data-testid": "retrieval" });
  fill(el, h("div", { class: "cards" }, interests, events), retrieval);
  const showOnMap = h("a", { href: "#map/" + encodeURIComponent(user), class: "button-link" }, "Show on the map");
  void load(interests, "interests", () =>
    call(app.client().GET("/v1/entities/{type}/{id}/interests", { params: { path: { type: "user", id: user } } })),
  (r) => [
    h("h2", {}, "Interests of ", h("code", {}, user)),
    h("p", { class: "muted" }, `Bag-of-Meaning tokens, coarse to fine, model ${r.model_version}. `, showOnMap),
    r.tokens.length === 0 ? empty("No interest tokens.") : h("table", { class: "grid", "data-testid": "interests-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "Token"), h("th", {}, "Label"), h("th", {}, "Weight"))),
      h("tbody", {}, ...sortTokens(r.tokens).map((t) => h("tr", { "data-token": t.token },
        h("td", {}, h("a", { href: "#hierarchy/" + t.token }, h("code", {}, t.token))),
        h("td", {}, t.label ? t.label : h("span", { class: "muted" }, "(no label)")),
        h("td", { class: "num" }, h("span", { class: "wbar" }, h("span", { style: `width:${Math.round(100 * Math.min(1, t.weight ?? 0))}%` })), fmt(t.weight, 2)),
      )))),
  ]);
  void eventPage(app, events, user, [undefined]);
  retrievalPanel(app, retrieval, user, () => void eventPage(app, events, user, [undefined]));
}

async function eventPage(app: App, el: HTMLElement, user: string, cursors: (string | undefined)[]): Promise<void> {
  const cursor = cursors[cursors.length - 1];
  const page = await load(el, "events", () =>
    call(app.client().GET("/v1/entities/{type}/{id}/events", { params: { path: { type: "user", id: user }, query: { limit: EVENT_PAGE, cursor } } })), () => []);
  if (!page) return;
  const newer = h("button", { disabled: cursors.length === 1, "data-testid": "events-newer" }, "← Newer");
  const older = h("button", { disabled: !page.next_cursor, "data-testid": "events-older" }, "Older →");
  newer.addEventListener("click", () => void eventPage(app, el, user, cursors.slice(0, -1)));
  older.addEventListener("click", () => void eventPage(app, el, user, [...cursors, page.next_cursor]));
  fill(el,
    h("h2", {}, "Recent events"),
    h("p", { class: "muted", "data-testid": "events-total" }, `${fmt(page.total)} events, newest first`),
    page.events.length === 0 ? empty("This user has no events.") : h("table", { class: "grid", "data-testid": "events-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "When (UTC)"), h("th", {}, "Event"), h("th", {}, "Target"))),
      h("tbody", {}, ...page.events.map((e) => h("tr", {},
        h("td", {}, e.ts.replace("T", " ").replace(/\.\d+Z$|Z$/, "")),
        h("td", {}, h("span", { class: "etype etype-" + e.type }, e.type)),
        h("td", {}, `${e.dst.type} `, h("code", {}, e.dst.id)),
      )))),
    h("div", { class: "pager" }, newer, h("span", {}, `page ${cursors.length} of ${Math.max(1, Math.ceil(page.total / EVENT_PAGE))}`), older),
  );
}

function numberInput(label: string, attrs: Record<string, string | number>, value = ""): [HTMLElement, HTMLInputElement] {
  const i = h("input", { type: "number", ...attrs });
  i.value = value;
  return [h("label", {}, label + " ", i), i];
}

function retrievalPanel(app: App, el: HTMLElement, user: string, refreshEvents: () => void): void {
  const [kL, k] = numberInput("k", { min: 1, max: 1000, "data-testid": "k" }, "10");
  const [pL, prior] = numberInput("prior weight", { min: 0, max: 100, step: "any", placeholder: "server default", "data-testid": "prior" });
  const [cL, coeng] = numberInput("co-engagement weight", { min: 0, max: 1000, step: "any", placeholder: "server default", "data-testid": "coeng" });
  const query = h("input", { type: "search", placeholder: "keywords (optional)", "data-testid": "query", "aria-label": "keywords" });
  const filter = h("textarea", { rows: 2, placeholder: '{"attr":"status","eq":"active"} (optional)', "data-testid": "filter", "aria-label": "filter" });
  const excludeSeen = h("input", { type: "checkbox", checked: true, "data-testid": "exclude-seen" });
  const results = h("div", { class: "results", "data-testid": "results" }, empty("Run a retrieval to see candidates."));
  const form = h("form", { class: "retrieve-form" },
    kL, pL, cL,
    h("label", {}, "keywords ", query),
    h("label", { class: "filter-label" }, "filter (JSON) ", filter),
    h("label", {}, excludeSeen, " exclude seen ads"),
    h("button", { type: "submit", "data-testid": "retrieve" }, "Retrieve"),
  );
  fill(el, h("h2", {}, "Retrieval for ", h("code", {}, user)), form, results);
  let previous: Candidate[] | undefined;

  const request = (): Schemas["RetrieveRequest"] => {
    const req: Schemas["RetrieveRequest"] = { user: { type: "user", id: user }, k: Number(k.value) || 10, explain: true, exclude_seen: excludeSeen.checked };
    if (query.value.trim()) req.query = query.value.trim();
    if (prior.value !== "") req.prior_weight = Number(prior.value);
    if (coeng.value !== "") req.coengagement_weight = Number(coeng.value);
    if (filter.value.trim()) req.filter = JSON.parse(filter.value) as Schemas["Filter"];
    return req;
  };
  const run = async (note?: HTMLElement) => {
    let req: Schemas["RetrieveRequest"];
    try {
      req = request();
    } catch (err) {
      fill(results, problemBox(new Error("The filter is not valid JSON: " + (err instanceof Error ? err.message : String(err)))));
      return;
    }
    const before = previous;
    const res = await load(results, "candidates", () => call(app.client().POST("/v1/retrieve", { body: req })), () => []);
    if (!res) return;
    previous = res.candidates;
    renderCandidates(results, res, before, note, (ad) => void click(ad));
  };
  const click = async (ad: string) => {
    const note = h("div", { class: "click-note", "data-testid": "click-note" });
    try {
      const id = `ui-click-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
      const r = await call(app.client().POST("/v1/events", {
        body: { events: [{ id, src: { type: "user", id: user }, dst: { type: "ad", id: ad }, type: "click", ts: new Date().toISOString() }] },
      }));
      fill(note, `Posted a click of ${user} on ${ad} (${r.events} event stored, log seq ${r.seq ?? "–"}). Retrieval re-run: `,
        h("span", { class: "up" }, "▲ moved up"), ", ", h("span", { class: "down" }, "▼ moved down"), ", ", h("span", { class: "new" }, "new"), " against the previous run.");
      refreshEvents();
      await run(note);
    } catch (err) {
      fill(note, problemBox(err));
      results.prepend(note);
    }
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void run();
  });
}

function renderCandidates(el: HTMLElement, res: Schemas["RetrieveResponse"], before: Candidate[] | undefined, note: HTMLElement | undefined,
  click: (ad: string) => void): void {
  const prevRank = new Map(before?.map((c, i) => [c.id, i]));
  const maxScore = Math.max(1e-9, ...res.candidates.map((c) => Math.abs(c.parts?.similarity ?? 0) + Math.abs(c.parts?.prior ?? 0) + Math.abs(c.parts?.coengagement ?? 0)));
  const flags = [res.fresh_user ? "embedded now (fresh)" : "model embedding", res.new_user ? "new user" : null].filter(Boolean).join(", ");
  fill(el,
    note ?? null,
    h("p", { class: "muted", "data-testid": "retrieve-summary" }, `${res.candidates.length} candidates from model ${res.model_version} (${flags}).`),
    res.candidates.length === 0 ? empty("No candidates: the filter or keywords may exclude every ad.") : h("table", { class: "grid candidates", "data-testid": "candidates" },
      h("thead", {}, h("tr", {}, h("th", {}, "#"), h("th", {}, "Ad"), h("th", {}, "Score"), h("th", {}, "Parts: similarity + prior + co-engagement"),
        h("th", {}, "Matched tokens"), h("th", {}, ""))),
      h("tbody", {}, ...res.candidates.map((c, i) => {
        const p = c.parts ?? { similarity: 0, prior: 0, coengagement: 0 };
        const was = prevRank.get(c.id);
        const delta = before === undefined ? null : was === undefined ? h("span", { class: "new" }, "new")
          : was > i ? h("span", { class: "up" }, `▲${was - i}`) : was < i ? h("span", { class: "down" }, `▼${i - was}`) : null;
        const btn = h("button", { class: "small", "data-testid": "click-ad", "data-ad": c.id, title: "post a click of this user on this ad (needs the write key)" }, "Click");
        btn.addEventListener("click", () => click(c.id));
        return h("tr", { "data-testid": "candidate", "data-id": c.id },
          h("td", { class: "num" }, i + 1, " ", delta),
          h("td", {}, h("code", {}, c.id), c.keyword_match ? h("span", { class: "chip", title: "matched the keywords" }, "kw") : null),
          h("td", { class: "num", "data-testid": "score" }, fmt(c.score, 3)),
          h("td", {}, partsBar(p, maxScore), h("span", { class: "parts", "data-testid": "parts" },
            `${fmt(p.similarity, 3)} + ${fmt(p.prior, 3)} + ${fmt(p.coengagement, 3)}`)),
          h("td", { class: "chips" }, ...(c.tokens ?? []).map((t) => h("span", { class: "chip", title: t.label ?? "", style: `border-color:${colour(t.level === 0 ? t.token : undefined)}` }, t.token))),
          h("td", {}, btn),
        );
      })),
    ),
  );
}

function partsBar(p: Schemas["ScoreParts"], max: number): HTMLElement {
  const seg = (v: number, cls: string, name: string) =>
    h("span", { class: "seg " + cls, style: `width:${Math.max(0, (100 * Math.abs(v)) / max).toFixed(1)}%`, title: `${name} ${fmt(v, 3)}` });
  return h("span", { class: "partsbar" }, seg(p.similarity, "sim", "similarity"), seg(p.prior, "prior", "prior"), seg(p.coengagement, "coeng", "co-engagement"));
}

/** sortTokens orders a bag coarse to fine, then by weight (highest first). */
export function sortTokens(tokens: Schemas["TokenRef"][]): Schemas["TokenRef"][] {
  return [...tokens].sort((a, b) => a.level - b.level || (b.weight ?? 0) - (a.weight ?? 0) || a.token.localeCompare(b.token));
}
