// Model view: the serving version, whether a training round runs, the
// index size, the training curve (loss per logged step, validation loss and
// AUC) as hand-drawn SVG charts, and the prototype usage entropy per level.
import type { Schemas } from "../src/index.js";
import { call, empty, fill, fmt, h, load, s } from "./dom.js";
import type { View } from "./main.js";

const POLL_MS = 3000;

export const modelView: View = async (app, el) => {
  const body = h("div", {});
  el.append(body);
  const show = async (quiet: boolean) => {
    const work = () => call(app.client().GET("/v1/model"));
    if (quiet) {
      try {
        render(body, await work());
      } catch {
        // keep what is shown; the next poll retries
      }
      return;
    }
    await load(body, "model", work, () => []).then((m) => m && render(body, m));
  };
  await show(false);
  const timer = window.setInterval(() => {
    if (!el.isConnected || el.dataset.view !== "model") {
      window.clearInterval(timer);
      return;
    }
    void show(true);
  }, POLL_MS);
};

function render(el: HTMLElement, m: Schemas["ModelStatus"]): void {
  if (!m.ready) {
    fill(el, empty("No model is served yet: the first training round is running or has not started (POST /v1/model/train)."),
      h("p", { "data-testid": "training" }, m.training ? "A training round is running." : "No training round is running."));
    return;
  }
  const metrics = m.metrics ?? {};
  const hist = m.history ?? [];
  const val = hist.filter((p) => p.val_auc !== undefined || p.val_loss !== undefined);
  fill(el,
    h("div", { class: "cards stats" },
      stat("Serving version", m.version ?? "–", "version"),
      stat("Trained at", m.trained_at ? m.trained_at.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC") : "–", "trained-at"),
      stat("Ads in the index", fmt(m.index_size), "index-size"),
      stat("Training", m.training ? "a round is running" : "idle", "training"),
      stat("Validation AUC", fmt(metrics["val_engagement_auc"]), "val-auc"),
    ),
    h("section", { class: "card wide" },
      h("h2", {}, "Training loss"),
      hist.length === 0 ? empty("No training history is recorded for this model (it was not trained by this server's data directory).")
        : lineChart([
          { name: "train loss", cls: "s-train", points: hist.map((p) => [p.step, p.loss]) },
          { name: "validation loss", cls: "s-val", points: val.filter((p) => p.val_loss !== undefined).map((p) => [p.step, p.val_loss!]) },
        ], versionMarks(hist), "loss-chart"),
    ),
    h("div", { class: "cards" },
      h("section", { class: "card" },
        h("h2", {}, "Validation engagement AUC"),
        val.length === 0 ? empty("No validation recorded.")
          : lineChart([{ name: "AUC", cls: "s-auc", points: val.filter((p) => p.val_auc !== undefined).map((p) => [p.step, p.val_auc!]) }], versionMarks(hist), "auc-chart")),
      h("section", { class: "card", "data-testid": "entropy" },
        h("h2", {}, "Prototype usage entropy"),
        h("p", { class: "muted" }, "Per level, the entropy of the prototypes' use divided by log K: 1 is uniform use, near 0 is collapse."),
        (m.usage_entropy ?? []).length === 0 ? empty("Not recorded.") : h("table", { class: "grid" },
          h("tbody", {}, ...(m.usage_entropy ?? []).map((e, l) => h("tr", {},
            h("td", {}, `level ${l}`),
            h("td", { class: "num" }, h("span", { class: "wbar" }, h("span", { style: `width:${Math.round(100 * Math.max(0, Math.min(1, e)))}%` })), fmt(e, 3))))))),
    ),
    h("section", { class: "card wide" },
      h("h2", {}, "Metrics"),
      h("table", { class: "grid", "data-testid": "metrics" }, h("tbody", {},
        ...Object.keys(metrics).sort().map((k) => h("tr", {}, h("td", {}, h("code", {}, k)), h("td", { class: "num" }, fmt(metrics[k], 4)))))),
    ),
  );
}

function stat(label: string, value: string, id: string): HTMLElement {
  return h("section", { class: "card stat" }, h("div", { class: "muted" }, label), h("div", { class: "big", "data-testid": id }, value));
}

/** versionMarks returns the first step of each version after the first. */
function versionMarks(hist: Schemas["TrainingPoint"][]): [number, string][] {
  const out: [number, string][] = [];
  for (let i = 1; i < hist.length; i++) {
    if (hist[i]!.version !== hist[i - 1]!.version) out.push([hist[i]!.step, hist[i]!.version]);
  }
  return out;
}

interface Series {
  name: string;
  cls: string;
  points: [number, number][];
}

const CW = 640;
const CH = 220;
const M = { l: 52, r: 12, t: 24, b: 40 };

/** lineChart draws series as lines with dots, axes with a few ticks, and dashed marks where a new version starts. */
function lineChart(series: Series[], marks: [number, string][], id: string): SVGSVGElement {
  const all = series.flatMap((s) => s.points);
  let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  else {
    const xpad = (x1 - x0) * 0.04;
    [x0, x1] = [x0 - xpad, x1 + xpad];
  }
  if (y0 === y1) [y0, y1] = [y0 - Math.abs(y0) * 0.1 - 0.01, y1 + Math.abs(y1) * 0.1 + 0.01];
  const pad = (y1 - y0) * 0.08;
  y0 -= pad;
  y1 += pad;
  const X = (x: number) => M.l + ((x - x0) / (x1 - x0)) * (CW - M.l - M.r);
  const Y = (y: number) => CH - M.b - ((y - y0) / (y1 - y0)) * (CH - M.t - M.b);
  const svg = s("svg", { viewBox: `0 0 ${CW} ${CH}`, class: "chart", role: "img", "aria-label": series.map((x) => x.name).join(", "), "data-testid": id });
  for (let i = 0; i <= 4; i++) {
    const y = y0 + ((y1 - y0) * i) / 4;
    svg.append(s("line", { x1: M.l, x2: CW - M.r, y1: Y(y), y2: Y(y), class: "grid-line" }),
      s("text", { x: M.l - 6, y: Y(y) + 4, "text-anchor": "end", class: "tick" }, fmt(y, Math.abs(y1 - y0) < 1 ? 3 : 2)));
  }
  const xticks = new Set<number>();
  for (let i = 0; i <= 4; i++) xticks.add(Math.round(x0 + ((x1 - x0) * i) / 4));
  for (const x of xticks) {
    if (x < x0 || x > x1) continue;
    svg.append(s("text", { x: X(x), y: CH - M.b + 14, "text-anchor": "middle", class: "tick" }, fmt(x)));
  }
  // Under the tick labels, outside the plot: it never covers a point.
  svg.append(s("text", { x: (M.l + CW - M.r) / 2, y: CH - 4, "text-anchor": "middle", class: "tick axis-title", "data-testid": "x-axis-title" }, "training step"));
  for (const [x, v] of marks) {
    svg.append(s("line", { x1: X(x), x2: X(x), y1: M.t, y2: CH - M.b, class: "version-mark" }),
      s("text", { x: X(x) + 3, y: M.t + 10, class: "tick" }, v));
  }
  series.forEach((se, i) => {
    if (se.points.length === 0) return;
    const pts = [...se.points].sort((a, b) => a[0] - b[0]);
    svg.append(s("polyline", { points: pts.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(" "), class: "series " + se.cls }));
    for (const [x, y] of pts) {
      svg.append(s("circle", { cx: X(x).toFixed(1), cy: Y(y).toFixed(1), r: 2.5, class: "dot " + se.cls }, s("title", {}, `${se.name} at step ${x}: ${fmt(y, 4)}`)));
    }
    svg.append(s("text", { x: M.l + i * 140, y: 12, class: "legend-text " + se.cls }, "● " + se.name));
  });
  return svg;
}
