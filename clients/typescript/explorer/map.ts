// Map view: a server-side sample of the ads projected on the first two
// principal components of their embeddings (GET /v1/map), coloured by
// coarse interest, with hover labels. A user's position and the ads
// retrieved for them are placed with the same basis (POST /v1/map/project).
import type { Schemas } from "../src/index.js";
import { call, colour, empty, fill, fmt, h, load, problemBox, s } from "./dom.js";
import type { View } from "./main.js";

type MapPoint = Schemas["MapPoint"];

const W = 720;
const H = 520;
const PAD = 24;
const HIGHLIGHT_K = 10;

export const mapView: View = async (app, el, arg) => {
  const limitSel = h("select", { "aria-label": "points", "data-testid": "map-limit" },
    ...[500, 1000, 2000, 5000].map((n) => h("option", { value: n, selected: n === 1000 }, `${fmt(n)} ads`)));
  const userInput = h("input", { type: "search", placeholder: "user id, e.g. u1", "data-testid": "map-user", "aria-label": "user id" });
  userInput.value = arg || app.user;
  const form = h("form", { class: "toolbar" },
    h("label", {}, "Sample ", limitSel),
    h("label", {}, "Highlight user ", userInput),
    h("button", { type: "submit", "data-testid": "map-highlight" }, "Show user and retrieved ads"),
  );
  const plot = h("div", { class: "map", "data-testid": "map" });
  const side = h("aside", { class: "legend", "data-testid": "legend" });
  const note = h("div", { class: "highlight-note", "data-testid": "highlight-note" });
  el.append(form, h("div", { class: "split map-split" }, plot, h("div", {}, note, side)));

  let current: { map: Schemas["EmbeddingMap"]; scale: (p: { x: number; y: number }) => [number, number]; layer: SVGGElement } | undefined;
  const draw = async () => {
    const limit = Number(limitSel.value);
    const m = await load(plot, "map", () => call(app.client().GET("/v1/map", { params: { query: { limit } } })), () => []);
    if (!m) {
      fill(side);
      return;
    }
    current = render(plot, side, m);
    if (userInput.value.trim()) await highlight(userInput.value.trim());
  };
  const highlight = async (user: string) => {
    if (!current) return;
    const { layer, scale } = current;
    fill(layer);
    fill(note, "Placing ", h("code", {}, user), "…");
    try {
      const res = await call(app.client().POST("/v1/retrieve", { body: { user: { type: "user", id: user }, k: HIGHLIGHT_K } }));
      const refs: Schemas["Ref"][] = [{ type: "user", id: user }, ...res.candidates.map((c) => ({ type: c.type, id: c.id }))];
      const proj = await call(app.client().POST("/v1/map/project", { body: { entities: refs } }));
      const up = proj.points.find((p) => p.type === "user");
      const ads = proj.points.filter((p) => p.type !== "user");
      if (up) {
        const [ux, uy] = scale(up);
        for (const a of ads) {
          const [ax, ay] = scale(a);
          layer.append(s("line", { x1: ux, y1: uy, x2: ax, y2: ay, class: "link" }));
        }
      }
      for (const a of ads) {
        const [ax, ay] = scale(a);
        layer.append(s("circle", { cx: ax, cy: ay, r: 7, class: "retrieved", "data-testid": "retrieved-point", "data-id": a.id },
          s("title", {}, `retrieved ${a.id}${a.label ? " — " + a.label : ""}`)));
      }
      if (up) {
        const [ux, uy] = scale(up);
        layer.append(s("g", { class: "user-mark", "data-testid": "user-point", transform: `translate(${ux},${uy})` },
          s("circle", { r: 10 }), s("text", { y: -14, "text-anchor": "middle" }, user),
          s("title", {}, `user ${user}${up.label ? " — " + up.label : ""}`)));
      }
      fill(note,
        up ? h("span", {}, "User ", h("code", {}, user), ` (coarse interest ${up.token ?? "–"}) and the ${ads.length} ads retrieved for them (k=${HIGHLIGHT_K}).`)
          : h("span", {}, "User ", h("code", {}, user), " is not known to the service: showing nothing."),
        proj.missing.length ? h("div", { class: "muted" }, `Not placed: ${proj.missing.map((r) => r.id).join(", ")}`) : null);
      app.user = user;
    } catch (err) {
      fill(note, problemBox(err));
    }
  };
  limitSel.addEventListener("change", () => void draw());
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const u = userInput.value.trim();
    if (u) void highlight(u);
    else if (current) fill(current.layer);
  });
  await draw();
};

function render(plot: HTMLElement, side: HTMLElement, m: Schemas["EmbeddingMap"]) {
  const xs = m.points.map((p) => p.x);
  const ys = m.points.map((p) => p.y);
  const [x0, x1] = [Math.min(...xs, 0), Math.max(...xs, 0)];
  const [y0, y1] = [Math.min(...ys, 0), Math.max(...ys, 0)];
  const sx = (W - 2 * PAD) / (x1 - x0 || 1);
  const sy = (H - 2 * PAD) / (y1 - y0 || 1);
  // Keep the map's aspect ratio honest: one scale for both axes.
  const k = Math.min(sx, sy) * 0.92;
  const cx = (x0 + x1) / 2;
  const cy = (y0 + y1) / 2;
  const scale = (p: { x: number; y: number }): [number, number] => [W / 2 + (p.x - cx) * k, H / 2 - (p.y - cy) * k];
  const hover = h("div", { class: "hover", "data-testid": "hover" }, "Hover a point for its ad and interest.");
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "scatter", role: "img", "aria-label": "map of ad embeddings" });
  const [ox, oy] = scale({ x: 0, y: 0 });
  svg.append(s("line", { x1: PAD, y1: oy, x2: W - PAD, y2: oy, class: "axis" }), s("line", { x1: ox, y1: PAD, x2: ox, y2: H - PAD, class: "axis" }),
    s("text", { x: W - PAD, y: oy - 4, "text-anchor": "end", class: "axis-label" }, `PC1 (${fmt(100 * (m.explained_variance[0] ?? 0), 1)}% of variance)`),
    s("text", { x: ox + 4, y: PAD + 10, class: "axis-label" }, `PC2 (${fmt(100 * (m.explained_variance[1] ?? 0), 1)}%)`));
  const dots = s("g", { class: "dots" });
  for (const p of m.points) {
    const [x, y] = scale(p);
    const c = s("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: 3.5, fill: colour(p.token), "data-testid": "map-point", "data-id": p.id, "data-token": p.token ?? "" },
      s("title", {}, describe(p)));
    c.addEventListener("mouseenter", () => fill(hover, describe(p)));
    dots.append(c);
  }
  const layer = s("g", { class: "highlights" });
  svg.append(dots, layer);
  if (m.points.length === 0) fill(plot, empty("The model has no ads to map."));
  else fill(plot, svg, hover);
  fill(side,
    h("h3", {}, "Coarse interests"),
    h("p", { class: "muted", "data-testid": "map-summary" },
      `${fmt(m.points.length)} of ${fmt(m.total)} ads, model ${m.model_version}. ${m.method}.`),
    h("ul", { class: "legend-list" }, ...m.interests.map((t) => h("li", {},
      h("span", { class: "swatch", style: `background:${colour(t.token)}` }),
      h("code", {}, t.token), " ", t.label ?? "", h("span", { class: "muted" }, ` ${fmt(100 * (t.weight ?? 0), 1)}%`)))),
  );
  return { map: m, scale, layer };
}

function describe(p: MapPoint): string {
  return `${p.type} ${p.id} · ${p.token ?? "no token"}${p.label ? " — " + p.label : ""} · (${fmt(p.x, 2)}, ${fmt(p.y, 2)})`;
}
