// Hierarchy view: the interest tokens level by level (coarse to fine) as a
// tree whose rows show each token's label, size and sample members; a
// token's children load when it is expanded, and selecting a token lists
// its ads page by page.
import type { Schemas } from "../src/index.js";
import { call, colour, empty, fill, fmt, h, load, s } from "./dom.js";
import type { App, View } from "./main.js";

const TOKEN_PAGE = 50;
const MEMBER_PAGE = 20;

type TokenSummary = Schemas["TokenSummary"];

export const hierarchyView: View = async (app, el, arg) => {
  const tree = h("div", { class: "tree", "data-testid": "tree" });
  const detail = h("section", { class: "detail", "data-testid": "token-detail" },
    empty("Select a token to see its ads."));
  const levelSel = h("select", { "aria-label": "level", "data-testid": "level" });
  const intro = h("p", { class: "intro" },
    "Interest tokens from coarse (level 0) to fine. Each row shows the token's label, the number of ads indexed under it, ",
    "and a few of them; expand a row for its children, select it for its ads.");
  const map = h("div", { class: "treemap-holder" });
  el.append(h("div", { class: "toolbar" }, h("label", {}, "Level ", levelSel)), intro, map,
    h("div", { class: "split" }, tree, detail));

  const select = (tok: string) => {
    for (const r of tree.querySelectorAll(".token-row.selected")) r.classList.remove("selected");
    tree.querySelector(`.token-row[data-token="${CSS.escape(tok)}"]`)?.classList.add("selected");
    void showToken(app, detail, tok);
  };
  const showLevel = async (level: number) => {
    fill(tree);
    fill(map);
    const page = await tokenList(app, tree, { level }, select);
    if (page) fill(map, treemap(page, select));
  };
  levelSel.addEventListener("change", () => void showLevel(Number(levelSel.value)));

  const first = await load(tree, "tokens", () => call(app.client().GET("/v1/tokens", { params: { query: { level: 0, limit: TOKEN_PAGE } } })), () => []);
  if (!first) return;
  for (let l = 0; l < Math.max(first.levels, 1); l++) {
    levelSel.append(h("option", { value: l }, l === 0 ? "0 (coarsest)" : l === first.levels - 1 ? `${l} (finest)` : String(l)));
  }
  renderTokens(app, tree, first, { level: 0 }, select);
  fill(map, treemap(first, select));
  if (arg) select(arg);
};

interface ListQuery {
  level?: number;
  parent?: string;
}

/** tokenList loads the first page of a level or of a token's children into el. */
async function tokenList(app: App, el: HTMLElement, q: ListQuery, select: (t: string) => void, cursor?: string): Promise<Schemas["TokenPage"] | undefined> {
  const holder = h("div", {});
  el.append(holder);
  const page = await load(holder, "tokens", () =>
    call(app.client().GET("/v1/tokens", { params: { query: { ...q, limit: TOKEN_PAGE, cursor } } })), () => []);
  if (page) renderTokens(app, holder, page, q, select);
  return page;
}

const TM_W = 1000;
const TM_H = 120;

/**
 * treemap draws the page's tokens that have ads as rectangles whose areas
 * are their sizes (split in two halves of about equal size, along the
 * longer side, recursively); clicking one selects the token.
 */
function treemap(page: Schemas["TokenPage"], select: (t: string) => void): Element {
  const items = page.tokens.filter((t) => t.size > 0);
  if (items.length === 0) return h("span", {});
  const svg = s("svg", { viewBox: `0 0 ${TM_W} ${TM_H}`, class: "treemap", role: "img", "data-testid": "treemap",
    "aria-label": `treemap of the ${items.length} largest tokens of level ${page.level}` });
  const layout = (its: TokenSummary[], x: number, y: number, w: number, hgt: number): void => {
    if (its.length === 1) {
      const t = its[0]!;
      const r = s("g", { class: "cell", "data-token": t.token, "data-testid": "treemap-cell" },
        s("rect", { x: x.toFixed(1), y: y.toFixed(1), width: Math.max(0, w - 1).toFixed(1), height: Math.max(0, hgt - 1).toFixed(1), fill: colour(t.token) }),
        s("title", {}, `${t.token} ${t.label ?? ""} · ${fmt(t.size)} ads`));
      const label = cellLabel(t, w - 1, hgt - 1);
      if (label) r.append(s("text", { x: x + 3, y: y + label.size + 2, style: `font-size:${label.size}px`, "data-testid": "treemap-label" }, label.text));
      r.addEventListener("click", () => select(t.token));
      svg.append(r);
      return;
    }
    const total = its.reduce((a, t) => a + t.size, 0);
    let acc = 0;
    let k = 0;
    while (k < its.length - 1 && acc + its[k]!.size <= total / 2) acc += its[k++]!.size;
    if (k === 0) acc = its[k++]!.size;
    const f = acc / total;
    if (w >= hgt) {
      layout(its.slice(0, k), x, y, w * f, hgt);
      layout(its.slice(k), x + w * f, y, w * (1 - f), hgt);
    } else {
      layout(its.slice(0, k), x, y, w, hgt * f);
      layout(its.slice(k), x, y + hgt * f, w, hgt * (1 - f));
    }
  };
  layout(items, 0, 0, TM_W, TM_H);
  return h("div", { class: "treemap-box" }, svg,
    h("div", { class: "muted" }, `Areas are sizes: the ${items.length} largest tokens of level ${page.level} on this page (${fmt(page.total)} in all); click one for its ads.`));
}

/** The widest a treemap label's character is, as a share of its font size (monospace). */
const CHAR_W = 0.62;

/**
 * cellLabel returns the longest label that fits a w x hgt cell: the token
 * and its size, else the token alone, in 12px, then in 9px; null when not
 * even that fits (the cell's title still names it).
 */
export function cellLabel(t: TokenSummary, w: number, hgt: number): { text: string; size: number } | null {
  for (const [text, size] of [[`${t.token} · ${fmt(t.size)}`, 12], [t.token, 12], [t.token, 9]] as const) {
    if (text.length * size * CHAR_W + 6 <= w && size + 5 <= hgt) return { text, size };
  }
  return null;
}

function renderTokens(app: App, el: HTMLElement, page: Schemas["TokenPage"], q: ListQuery, select: (t: string) => void): void {
  fill(el);
  if (page.tokens.length === 0 && !q.parent) {
    el.append(empty(page.total === 0 ? `No tokens at level ${page.level}.` : "No more tokens."));
    return;
  }
  const maxSize = Math.max(1, ...page.tokens.map((t) => t.size));
  const ul = h("ul", { class: "tokens", role: q.parent ? "group" : "tree" });
  for (const t of page.tokens) ul.append(tokenRow(app, t, maxSize, select));
  el.append(ul);
  if (page.next_cursor) {
    const more = h("button", { class: "more", "data-testid": "more-tokens" },
      `More (${fmt(page.tokens.length)} of ${fmt(page.total)} shown)`);
    more.addEventListener("click", () => {
      more.remove();
      void tokenList(app, el, q, select, page.next_cursor);
    });
    el.append(more);
  }
}

function tokenRow(app: App, t: TokenSummary, maxSize: number, select: (t: string) => void): HTMLElement {
  const children = h("div", { class: "children" });
  let open = false;
  const toggle = h("button", { class: "toggle", "aria-label": `expand ${t.token}`, disabled: t.children === 0 },
    t.children === 0 ? "·" : "▸");
  toggle.addEventListener("click", (ev) => {
    ev.stopPropagation();
    open = !open;
    toggle.textContent = open ? "▾" : "▸";
    if (open) void tokenList(app, children, { parent: t.token }, select);
    else fill(children);
  });
  const samples = (t.sample_members ?? []).map((m) => m.id).join(", ");
  const row = h("div", { class: "token-row", "data-token": t.token, "data-testid": "token-row", tabindex: 0, role: "treeitem" },
    toggle,
    h("span", { class: "swatch", style: `background:${colour(t.level === 0 ? t.token : t.parent?.startsWith("0.") ? t.parent : undefined)}` }),
    h("code", { class: "tok" }, t.token),
    h("span", { class: "label" }, t.label || "(no label)"),
    h("span", { class: "bar" }, h("span", { style: `width:${Math.round((100 * t.size) / maxSize)}%` })),
    h("span", { class: "size", title: "ads indexed under the token" }, fmt(t.size)),
    h("span", { class: "samples", title: "sample member ads" }, samples ? samples + (t.size > (t.sample_members?.length ?? 0) ? ", …" : "") : "no ads"),
  );
  row.addEventListener("click", () => select(t.token));
  row.addEventListener("keydown", (ev) => {
    if ((ev as KeyboardEvent).key === "Enter") select(t.token);
  });
  return h("li", {}, row, children);
}

/** showToken renders a token's description and its first page of ads. */
async function showToken(app: App, el: HTMLElement, token: string): Promise<void> {
  const info = await load(el, `token ${token}`, () =>
    call(app.client().GET("/v1/tokens/{token}", { params: { path: { token } } })), () => []);
  if (!info) return;
  const members = h("div", { class: "members", "data-testid": "members" });
  fill(el,
    h("h2", {}, h("code", {}, info.token), " ", info.label || "(no label)"),
    h("dl", { class: "facts" },
      h("dt", {}, "Level"), h("dd", {}, info.level),
      h("dt", {}, "Ads"), h("dd", { "data-testid": "token-size" }, fmt(info.size)),
      h("dt", {}, "Parent"), h("dd", {}, info.parent ? h("code", {}, info.parent) : "–"),
      h("dt", {}, "Children"), h("dd", {}, info.children?.length ? info.children.join(", ") : "none"),
    ),
    members,
  );
  await memberPage(app, members, token, [undefined]);
}

/** memberPage renders one page of a token's ads; cursors[-1] is its cursor, the rest are the pages before. */
async function memberPage(app: App, el: HTMLElement, token: string, cursors: (string | undefined)[]): Promise<void> {
  const cursor = cursors[cursors.length - 1];
  const page = await load(el, "ads", () =>
    call(app.client().GET("/v1/tokens/{token}/members", { params: { path: { token }, query: { limit: MEMBER_PAGE, cursor } } })), () => []);
  if (!page) return;
  const pageNo = cursors.length;
  const pages = Math.max(1, Math.ceil(page.total / MEMBER_PAGE));
  const prev = h("button", { disabled: pageNo === 1, "data-testid": "members-prev" }, "← Previous");
  const next = h("button", { disabled: !page.next_cursor, "data-testid": "members-next" }, "Next →");
  prev.addEventListener("click", () => void memberPage(app, el, token, cursors.slice(0, -1)));
  next.addEventListener("click", () => void memberPage(app, el, token, [...cursors, page.next_cursor]));
  fill(el,
    h("h3", {}, `Ads under ${token}`),
    page.items.length === 0
      ? empty("No ads are indexed under this token.")
      : h("table", { class: "grid", "data-testid": "members-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Ad"), h("th", {}, "Text"))),
        h("tbody", {}, ...page.items.map((m) => h("tr", {}, h("td", {}, h("code", {}, m.id)), h("td", {}, m.text ?? "")))),
      ),
    h("div", { class: "pager" }, prev, h("span", { "data-testid": "members-page" }, `page ${pageNo} of ${pages} · ${fmt(page.total)} ads`), next),
  );
}

