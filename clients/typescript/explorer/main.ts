// The interest explorer page served at /ui by `hir serve`: four views of
// the public REST API (hierarchy, map, user, model), read through the typed
// client of ../src. The API key the user enters is kept in sessionStorage
// and sent as a bearer token.
import { createHIRClient, type HIRClient } from "../src/index.js";
import { fill, h } from "./dom.js";
import { hierarchyView } from "./hierarchy.js";
import { mapView } from "./map.js";
import { modelView } from "./model.js";
import { userView } from "./user.js";

const KEY_STORAGE = "hir-api-key";

/** App is what every view shares: the client and the selected user. */
export interface App {
  client(): HIRClient;
  /** The user last searched in the User view ("" when none). */
  user: string;
  /** go shows a view (its hash route). */
  go(route: string): void;
}

/** A View renders into its element each time it is shown. */
export type View = (app: App, el: HTMLElement, arg: string) => void | Promise<void>;

const views: Record<string, { title: string; view: View }> = {
  hierarchy: { title: "Hierarchy", view: hierarchyView },
  map: { title: "Map", view: mapView },
  user: { title: "User", view: userView },
  model: { title: "Model", view: modelView },
};

function storedKey(): string {
  try {
    return sessionStorage.getItem(KEY_STORAGE) ?? "";
  } catch {
    return "";
  }
}

function start(): void {
  let apiKey = storedKey();
  let client = createHIRClient(location.origin, { apiKey: apiKey || undefined });
  const main = h("main", { id: "view", "data-testid": "view" });
  const nav = h("nav", { class: "tabs" });
  const keyInput = h("input", {
    type: "password", id: "api-key", placeholder: "API key", autocomplete: "off", "aria-label": "API key", "data-testid": "api-key",
  });
  keyInput.value = apiKey;
  const keyState = h("span", { class: "key-state", "data-testid": "key-state" });
  const showKeyState = () => {
    keyState.textContent = apiKey ? "key set for this tab" : "no key";
  };
  const saveKey = (ev: Event) => {
    ev.preventDefault();
    apiKey = keyInput.value.trim();
    try {
      if (apiKey) sessionStorage.setItem(KEY_STORAGE, apiKey);
      else sessionStorage.removeItem(KEY_STORAGE);
    } catch {
      // storage disabled: the key lives until the page is reloaded
    }
    client = createHIRClient(location.origin, { apiKey: apiKey || undefined });
    showKeyState();
    route();
  };
  const keyForm = h(
    "form", { class: "key", onsubmit: saveKey },
    keyInput,
    h("button", { type: "submit", "data-testid": "save-key" }, "Use key"),
    keyState,
  );
  showKeyState();
  const app: App = {
    client: () => client,
    user: "",
    go: (r) => {
      if (location.hash === "#" + r) route();
      else location.hash = r;
    },
  };
  for (const [name, v] of Object.entries(views)) {
    nav.append(h("a", { href: "#" + name, "data-view": name, "data-testid": "tab-" + name }, v.title));
  }
  document.body.append(
    h("header", {},
      h("h1", {}, "HIR interest explorer"),
      nav,
      keyForm,
    ),
    main,
    h("footer", {}, "Reads the public REST API (", h("a", { href: "/docs" }, "/docs"), "); problems are shown as their title and detail."),
  );
  function route(): void {
    const [name = "hierarchy", ...rest] = location.hash.replace(/^#/, "").split("/");
    const v = views[name] ?? views.hierarchy!;
    for (const a of nav.querySelectorAll("a")) {
      a.classList.toggle("active", a.dataset.view === (views[name] ? name : "hierarchy"));
    }
    document.title = `${v.title} · HIR interest explorer`;
    fill(main);
    main.dataset.view = views[name] ? name : "hierarchy";
    void v.view(app, main, decodeURIComponent(rest.join("/")));
  }
  window.addEventListener("hashchange", route);
  route();
}

start();
