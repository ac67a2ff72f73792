// Small DOM helpers of the explorer page: element builders, problem
// rendering and the loading / empty / error states every view shares.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | ((ev: Event) => void)>;

/** h builds an HTML element: attributes (on* are listeners), then children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** s builds an SVG element. */
export function s<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el: Element, attrs: Attrs): void {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (typeof v === "function") {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
}

function append(el: Element, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "number" ? String(c) : c);
  }
}

/** clear removes every child of el and appends children. */
export function fill(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** ApiProblem is an RFC 9457 problem answered by the API (or a network failure). */
export class ApiProblem extends Error {
  constructor(
    readonly title: string,
    readonly detail: string,
    readonly status: number,
  ) {
    super(detail ? `${title}: ${detail}` : title);
  }
}

type Result<T> = { data?: T; error?: unknown; response: Response };

/**
 * call awaits an openapi-fetch call and returns its data, or throws an
 * ApiProblem carrying the problem's title and detail.
 */
export async function call<T>(p: Promise<Result<T>>): Promise<T> {
  let res: Result<T>;
  try {
    res = await p;
  } catch (err) {
    throw new ApiProblem("Network error", err instanceof Error ? err.message : String(err), 0);
  }
  if (res.response.ok && res.data !== undefined) return res.data;
  const e = res.error;
  if (e && typeof e === "object" && "title" in e) {
    const pb = e as { title?: unknown; detail?: unknown; status?: unknown };
    return Promise.reject(
      new ApiProblem(String(pb.title), pb.detail === undefined ? "" : String(pb.detail), Number(pb.status ?? res.response.status)),
    );
  }
  throw new ApiProblem(`HTTP ${res.response.status}`, typeof e === "string" ? e : res.response.statusText, res.response.status);
}

/** problemBox renders a problem as its title and detail. */
export function problemBox(err: unknown): HTMLElement {
  const p = err instanceof ApiProblem ? err : new ApiProblem("Error", err instanceof Error ? err.message : String(err), 0);
  const hint =
    p.status === 401
      ? "Enter an API key at the top of the page (a read key when the server runs with --read-auth, the write key to post events)."
      : p.status === 503
        ? "The server has no model yet or is busy: retry in a few seconds."
        : "";
  return h(
    "div",
    { class: "problem", role: "alert", "data-testid": "problem" },
    h("strong", { class: "problem-title" }, p.title),
    p.status ? h("span", { class: "problem-status" }, ` (${p.status})`) : null,
    p.detail ? h("div", { class: "problem-detail" }, p.detail) : null,
    hint ? h("div", { class: "problem-hint" }, hint) : null,
  );
}

/** loading is the placeholder shown while a request runs. */
export function loading(what: string): HTMLElement {
  return h("div", { class: "loading", "data-testid": "loading" }, h("span", { class: "spinner" }), ` Loading ${what}…`);
}

/** empty is the placeholder of a list with nothing in it. */
export function empty(what: string): HTMLElement {
  return h("div", { class: "empty", "data-testid": "empty" }, what);
}

/**
 * load shows a loading state in el, awaits work and renders its result, or
 * the problem it threw.
 */
export async function load<T>(el: Element, what: string, work: () => Promise<T>, render: (v: T) => Child | Child[]): Promise<T | undefined> {
  fill(el, loading(what));
  try {
    const v = await work();
    const out = render(v);
    fill(el, ...(Array.isArray(out) ? out : [out]));
    return v;
  } catch (err) {
    fill(el, problemBox(err));
    return undefined;
  }
}

/** fmt formats a number with at most digits fraction digits. */
export function fmt(x: number | undefined, digits = 3): string {
  if (x === undefined || Number.isNaN(x)) return "–";
  return Number.isInteger(x) ? x.toLocaleString("en-US") : x.toFixed(digits);
}

const PALETTE = [
  "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
  "#b07aa1", "#ff9da7", "#9c755f", "#2f4b7c", "#a05195", "#665191",
  "#86bcb6", "#d4a6c8", "#8cd17d", "#b6992d",
];

/** colour returns a stable colour for a coarse token ("0.code"). */
export function colour(token: string | undefined): string {
  if (!token) return "#bbb";
  const code = Number(token.split(".")[1] ?? 0);
  return PALETTE[code % PALETTE.length] ?? "#bbb";
}
