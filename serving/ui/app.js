var __defProp = Object.defineProperty;
var __defNormalProp = (obj, key, value) => key in obj ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
var __publicField = (obj, key, value) => __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);

// node_modules/openapi-fetch/dist/index.mjs
var PATH_PARAM_RE = /\{[^{}]+\}/g;
var supportsRequestInitExt = () => {
  return typeof process === "object" && Number.parseInt(process?.versions?.node?.substring(0, 2)) >= 18 && process.versions.undici;
};
function randomID() {
  return Math.random().toString(36).slice(2, 11);
}
function createClient(clientOptions) {
  let {
    baseUrl = "",
    Request: CustomRequest = globalThis.Request,
    fetch: baseFetch = globalThis.fetch,
    querySerializer: globalQuerySerializer,
    bodySerializer: globalBodySerializer,
    pathSerializer: globalPathSerializer,
    headers: baseHeaders,
    requestInitExt = void 0,
    ...baseOptions
  } = { ...clientOptions };
  requestInitExt = supportsRequestInitExt() ? requestInitExt : void 0;
  baseUrl = removeTrailingSlash(baseUrl);
  const globalMiddlewares = [];
  async function coreFetch(schemaPath, fetchOptions) {
    const {
      baseUrl: localBaseUrl,
      fetch = baseFetch,
      Request = CustomRequest,
      headers,
      params = {},
      parseAs = "json",
      querySerializer: requestQuerySerializer,
      bodySerializer = globalBodySerializer ?? defaultBodySerializer,
      pathSerializer: requestPathSerializer,
      body,
      middleware: requestMiddlewares = [],
      ...init
    } = fetchOptions || {};
    let finalBaseUrl = baseUrl;
    if (localBaseUrl) {
      finalBaseUrl = removeTrailingSlash(localBaseUrl) ?? baseUrl;
    }
    let querySerializer = typeof globalQuerySerializer === "function" ? globalQuerySerializer : createQuerySerializer(globalQuerySerializer);
    if (requestQuerySerializer) {
      querySerializer = typeof requestQuerySerializer === "function" ? requestQuerySerializer : createQuerySerializer({
        ...typeof globalQuerySerializer === "object" ? globalQuerySerializer : {},
        ...requestQuerySerializer
      });
    }
    const pathSerializer = requestPathSerializer || globalPathSerializer || defaultPathSerializer;
    const serializedBody = body === void 0 ? void 0 : bodySerializer(
      body,
      // Note: we declare mergeHeaders() both here and below because it’s a bit of a chicken-or-egg situation:
      // bodySerializer() needs all headers so we aren’t dropping ones set by the user, however,
      // the result of this ALSO sets the lowest-priority content-type header. So we re-merge below,
      // setting the content-type at the very beginning to be overwritten.
      // Lastly, based on the way headers work, it’s not a simple “present-or-not” check becauase null intentionally un-sets headers.
      mergeHeaders(baseHeaders, headers, params.header)
    );
    const finalHeaders = mergeHeaders(
      // with no body, we should not to set Content-Type
      serializedBody === void 0 || // if serialized body is FormData; browser will correctly set Content-Type & boundary expression
      serializedBody instanceof FormData ? {} : {
        "Content-Type": "application/json"
      },
      baseHeaders,
      headers,
      params.header
    );
    const finalMiddlewares = [...globalMiddlewares, ...requestMiddlewares];
    const requestInit = {
      redirect: "follow",
      ...baseOptions,
      ...init,
      body: serializedBody,
      headers: finalHeaders
    };
    let id;
    let options;
    let request = new Request(
      createFinalURL(schemaPath, { baseUrl: finalBaseUrl, params, querySerializer, pathSerializer }),
      requestInit
    );
    let response;
    for (const key in init) {
      if (!(key in request)) {
        request[key] = init[key];
      }
    }
    if (finalMiddlewares.length) {
      id = randomID();
      options = Object.freeze({
        baseUrl: finalBaseUrl,
        fetch,
        parseAs,
        querySerializer,
        bodySerializer,
        pathSerializer
      });
      for (const m of finalMiddlewares) {
        if (m && typeof m === "object" && typeof m.onRequest === "function") {
          const result = await m.onRequest({
            request,
            schemaPath,
            params,
            options,
            id
          });
          if (result) {
            if (result instanceof Request) {
              request = result;
            } else if (result instanceof Response) {
              response = result;
              break;
            } else {
              throw new Error("onRequest: must return new Request() or Response() when modifying the request");
            }
          }
        }
      }
    }
    if (!response) {
      try {
        response = await fetch(request, requestInitExt);
      } catch (error2) {
        let errorAfterMiddleware = error2;
        if (finalMiddlewares.length) {
          for (let i = finalMiddlewares.length - 1; i >= 0; i--) {
            const m = finalMiddlewares[i];
            if (m && typeof m === "object" && typeof m.onError === "function") {
              const result = await m.onError({
                request,
                error: errorAfterMiddleware,
                schemaPath,
                params,
                options,
                id
              });
              if (result) {
                if (result instanceof Response) {
                  errorAfterMiddleware = void 0;
                  response = result;
                  break;
                }
                if (result instanceof Error) {
                  errorAfterMiddleware = result;
                  continue;
                }
                throw new Error("onError: must return new Response() or instance of Error");
              }
            }
          }
        }
        if (errorAfterMiddleware) {
          throw errorAfterMiddleware;
        }
      }
      if (finalMiddlewares.length) {
        for (let i = finalMiddlewares.length - 1; i >= 0; i--) {
          const m = finalMiddlewares[i];
          if (m && typeof m === "object" && typeof m.onResponse === "function") {
            const result = await m.onResponse({
              request,
              response,
              schemaPath,
              params,
              options,
              id
            });
            if (result) {
              if (!(result instanceof Response)) {
                throw new Error("onResponse: must return new Response() when modifying the response");
              }
              response = result;
            }
          }
        }
      }
    }
    const contentLength = response.headers.get("Content-Length");
    if (response.status === 204 || request.method === "HEAD" || contentLength === "0" && !response.headers.get("Transfer-Encoding")?.includes("chunked")) {
      return response.ok ? { data: void 0, response } : { error: void 0, response };
    }
    if (response.ok) {
      const getResponseData = async () => {
        if (parseAs === "stream") {
          return response.body;
        }
        if (parseAs === "json" && !contentLength) {
          const raw = await response.text();
          return raw ? JSON.parse(raw) : void 0;
        }
        return await response[parseAs]();
      };
      return { data: await getResponseData(), response };
    }
    let error = await response.text();
    try {
      error = JSON.parse(error);
    } catch {
    }
    return { error, response };
  }
  return {
    request(method, url, init) {
      return coreFetch(url, { ...init, method: method.toUpperCase() });
    },
    /** Call a GET endpoint */
    GET(url, init) {
      return coreFetch(url, { ...init, method: "GET" });
    },
    /** Call a PUT endpoint */
    PUT(url, init) {
      return coreFetch(url, { ...init, method: "PUT" });
    },
    /** Call a POST endpoint */
    POST(url, init) {
      return coreFetch(url, { ...init, method: "POST" });
    },
    /** Call a DELETE endpoint */
    DELETE(url, init) {
      return coreFetch(url, { ...init, method: "DELETE" });
    },
    /** Call a OPTIONS endpoint */
    OPTIONS(url, init) {
      return coreFetch(url, { ...init, method: "OPTIONS" });
    },
    /** Call a HEAD endpoint */
    HEAD(url, init) {
      return coreFetch(url, { ...init, method: "HEAD" });
    },
    /** Call a PATCH endpoint */
    PATCH(url, init) {
      return coreFetch(url, { ...init, method: "PATCH" });
    },
    /** Call a TRACE endpoint */
    TRACE(url, init) {
      return coreFetch(url, { ...init, method: "TRACE" });
    },
    /** Register middleware */
    use(...middleware) {
      for (const m of middleware) {
        if (!m) {
          continue;
        }
        if (typeof m !== "object" || !("onRequest" in m || "onResponse" in m || "onError" in m)) {
          throw new Error("Middleware must be an object with one of `onRequest()`, `onResponse() or `onError()`");
        }
        globalMiddlewares.push(m);
      }
    },
    /** Unregister middleware */
    eject(...middleware) {
      for (const m of middleware) {
        const i = globalMiddlewares.indexOf(m);
        if (i !== -1) {
          globalMiddlewares.splice(i, 1);
        }
      }
    }
  };
}
function serializePrimitiveParam(name, value, options) {
  if (value === void 0 || value === null) {
    return "";
  }
  if (typeof value === "object") {
    throw new Error(
      "Deeply-nested arrays/objects aren’t supported. Provide your own `querySerializer()` to handle these."
    );
  }
  return `${name}=${options?.allowReserved === true ? value : encodeURIComponent(value)}`;
}
function serializeObjectParam(name, value, options) {
  if (!value || typeof value !== "object") {
    return "";
  }
  const values = [];
  const joiner = {
    simple: ",",
    label: ".",
    matrix: ";"
  }[options.style] || "&";
  if (options.style !== "deepObject" && options.explode === false) {
    for (const k in value) {
      values.push(k, options.allowReserved === true ? value[k] : encodeURIComponent(value[k]));
    }
    const final2 = values.join(",");
    switch (options.style) {
      case "form": {
        return `${name}=${final2}`;
      }
      case "label": {
        return `.${final2}`;
      }
      case "matrix": {
        return `;${name}=${final2}`;
      }
      default: {
        return final2;
      }
    }
  }
  for (const k in value) {
    const finalName = options.style === "deepObject" ? `${name}[${k}]` : k;
    values.push(serializePrimitiveParam(finalName, value[k], options));
  }
  const final = values.join(joiner);
  return options.style === "label" || options.style === "matrix" ? `${joiner}${final}` : final;
}
function serializeArrayParam(name, value, options) {
  if (!Array.isArray(value)) {
    return "";
  }
  if (options.explode === false) {
    const joiner2 = { form: ",", spaceDelimited: "%20", pipeDelimited: "|" }[options.style] || ",";
    const final = (options.allowReserved === true ? value : value.map((v) => encodeURIComponent(v))).join(joiner2);
    switch (options.style) {
      case "simple": {
        return final;
      }
      case "label": {
        return `.${final}`;
      }
      case "matrix": {
        return `;${name}=${final}`;
      }
      // case "spaceDelimited":
      // case "pipeDelimited":
      default: {
        return `${name}=${final}`;
      }
    }
  }
  const joiner = { simple: ",", label: ".", matrix: ";" }[options.style] || "&";
  const values = [];
  for (const v of value) {
    if (options.style === "simple" || options.style === "label") {
      values.push(options.allowReserved === true ? v : encodeURIComponent(v));
    } else {
      values.push(serializePrimitiveParam(name, v, options));
    }
  }
  return options.style === "label" || options.style === "matrix" ? `${joiner}${values.join(joiner)}` : values.join(joiner);
}
function createQuerySerializer(options) {
  return function querySerializer(queryParams) {
    const search = [];
    if (queryParams && typeof queryParams === "object") {
      for (const name in queryParams) {
        const value = queryParams[name];
        if (value === void 0 || value === null) {
          continue;
        }
        if (Array.isArray(value)) {
          if (value.length === 0) {
            continue;
          }
          search.push(
            serializeArrayParam(name, value, {
              style: "form",
              explode: true,
              ...options?.array,
              allowReserved: options?.allowReserved || false
            })
          );
          continue;
        }
        if (typeof value === "object") {
          search.push(
            serializeObjectParam(name, value, {
              style: "deepObject",
              explode: true,
              ...options?.object,
              allowReserved: options?.allowReserved || false
            })
          );
          continue;
        }
        search.push(serializePrimitiveParam(name, value, options));
      }
    }
    return search.join("&");
  };
}
function defaultPathSerializer(pathname, pathParams) {
  let nextURL = pathname;
  for (const match of pathname.match(PATH_PARAM_RE) ?? []) {
    let name = match.substring(1, match.length - 1);
    let explode = false;
    let style = "simple";
    if (name.endsWith("*")) {
      explode = true;
      name = name.substring(0, name.length - 1);
    }
    if (name.startsWith(".")) {
      style = "label";
      name = name.substring(1);
    } else if (name.startsWith(";")) {
      style = "matrix";
      name = name.substring(1);
    }
    if (!pathParams || pathParams[name] === void 0 || pathParams[name] === null) {
      continue;
    }
    const value = pathParams[name];
    if (Array.isArray(value)) {
      nextURL = nextURL.replace(match, serializeArrayParam(name, value, { style, explode }));
      continue;
    }
    if (typeof value === "object") {
      nextURL = nextURL.replace(match, serializeObjectParam(name, value, { style, explode }));
      continue;
    }
    if (style === "matrix") {
      nextURL = nextURL.replace(match, `;${serializePrimitiveParam(name, value)}`);
      continue;
    }
    nextURL = nextURL.replace(match, style === "label" ? `.${encodeURIComponent(value)}` : encodeURIComponent(value));
  }
  return nextURL;
}
function defaultBodySerializer(body, headers) {
  if (body instanceof FormData) {
    return body;
  }
  if (headers) {
    const contentType = headers.get instanceof Function ? headers.get("Content-Type") ?? headers.get("content-type") : headers["Content-Type"] ?? headers["content-type"];
    if (contentType === "application/x-www-form-urlencoded") {
      return new URLSearchParams(body).toString();
    }
  }
  return JSON.stringify(body);
}
function createFinalURL(pathname, options) {
  let finalURL = `${options.baseUrl}${pathname}`;
  if (options.params?.path) {
    finalURL = options.pathSerializer(finalURL, options.params.path);
  }
  let search = options.querySerializer(options.params.query ?? {});
  if (search.startsWith("?")) {
    search = search.substring(1);
  }
  if (search) {
    finalURL += `?${search}`;
  }
  return finalURL;
}
function mergeHeaders(...allHeaders) {
  const finalHeaders = new Headers();
  for (const h2 of allHeaders) {
    if (!h2 || typeof h2 !== "object") {
      continue;
    }
    const iterator = h2 instanceof Headers ? h2.entries() : Object.entries(h2);
    for (const [k, v] of iterator) {
      if (v === null) {
        finalHeaders.delete(k);
      } else if (Array.isArray(v)) {
        for (const v2 of v) {
          finalHeaders.append(k, v2);
        }
      } else if (v !== void 0) {
        finalHeaders.set(k, v);
      }
    }
  }
  return finalHeaders;
}
function removeTrailingSlash(url) {
  if (url.endsWith("/")) {
    return url.substring(0, url.length - 1);
  }
  return url;
}

// src/index.ts
function createHIRClient(baseUrl, opts = {}) {
  const client = createClient({
    baseUrl: baseUrl.replace(/\/+$/, ""),
    headers: opts.headers,
    ...opts.fetch ? { fetch: opts.fetch } : {}
  });
  if (opts.apiKey) {
    const key = opts.apiKey;
    const auth = {
      onRequest({ request }) {
        request.headers.set("Authorization", `Bearer ${key}`);
        return request;
      }
    };
    client.use(auth);
  }
  return client;
}

// explorer/dom.ts
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}
var SVG_NS = "http://www.w3.org/2000/svg";
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}
function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === void 0 || v === null || v === false) continue;
    if (typeof v === "function") {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
}
function append(el, children) {
  for (const c of children) {
    if (c === null || c === void 0 || c === false) continue;
    el.append(typeof c === "number" ? String(c) : c);
  }
}
function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}
var ApiProblem = class extends Error {
  constructor(title, detail, status) {
    super(detail ? `${title}: ${detail}` : title);
    __publicField(this, "title", title);
    __publicField(this, "detail", detail);
    __publicField(this, "status", status);
  }
};
async function call(p) {
  let res;
  try {
    res = await p;
  } catch (err) {
    throw new ApiProblem("Network error", err instanceof Error ? err.message : String(err), 0);
  }
  if (res.response.ok && res.data !== void 0) return res.data;
  const e = res.error;
  if (e && typeof e === "object" && "title" in e) {
    const pb = e;
    return Promise.reject(
      new ApiProblem(String(pb.title), pb.detail === void 0 ? "" : String(pb.detail), Number(pb.status ?? res.response.status))
    );
  }
  throw new ApiProblem(`HTTP ${res.response.status}`, typeof e === "string" ? e : res.response.statusText, res.response.status);
}
function problemBox(err) {
  const p = err instanceof ApiProblem ? err : new ApiProblem("Error", err instanceof Error ? err.message : String(err), 0);
  const hint = p.status === 401 ? "Enter an API key at the top of the page (a read key when the server runs with --read-auth, the write key to post events)." : p.status === 503 ? "The server has no model yet or is busy: retry in a few seconds." : "";
  return h(
    "div",
    { class: "problem", role: "alert", "data-testid": "problem" },
    h("strong", { class: "problem-title" }, p.title),
    p.status ? h("span", { class: "problem-status" }, ` (${p.status})`) : null,
    p.detail ? h("div", { class: "problem-detail" }, p.detail) : null,
    hint ? h("div", { class: "problem-hint" }, hint) : null
  );
}
function loading(what) {
  return h("div", { class: "loading", "data-testid": "loading" }, h("span", { class: "spinner" }), ` Loading ${what}…`);
}
function empty(what) {
  return h("div", { class: "empty", "data-testid": "empty" }, what);
}
async function load(el, what, work, render3) {
  fill(el, loading(what));
  try {
    const v = await work();
    const out = render3(v);
    fill(el, ...Array.isArray(out) ? out : [out]);
    return v;
  } catch (err) {
    fill(el, problemBox(err));
    return void 0;
  }
}
function fmt(x, digits = 3) {
  if (x === void 0 || Number.isNaN(x)) return "–";
  return Number.isInteger(x) ? x.toLocaleString("en-US") : x.toFixed(digits);
}
var PALETTE = [
  "#4e79a7",
  "#f28e2b",
  "#e15759",
  "#76b7b2",
  "#59a14f",
  "#edc948",
  "#b07aa1",
  "#ff9da7",
  "#9c755f",
  "#2f4b7c",
  "#a05195",
  "#665191",
  "#86bcb6",
  "#d4a6c8",
  "#8cd17d",
  "#b6992d"
];
function colour(token) {
  if (!token) return "#bbb";
  const code = Number(token.split(".")[1] ?? 0);
  return PALETTE[code % PALETTE.length] ?? "#bbb";
}

// explorer/hierarchy.ts
var TOKEN_PAGE = 50;
var MEMBER_PAGE = 20;
var hierarchyView = async (app, el, arg) => {
  const tree = h("div", { class: "tree", "data-testid": "tree" });
  const detail = h(
    "section",
    { class: "detail", "data-testid": "token-detail" },
    empty("Select a token to see its ads.")
  );
  const levelSel = h("select", { "aria-label": "level", "data-testid": "level" });
  const intro = h(
    "p",
    { class: "intro" },
    "Interest tokens from coarse (level 0) to fine. Each row shows the token's label, the number of ads indexed under it, ",
    "and a few of them; expand a row for its children, select it for its ads."
  );
  const map = h("div", { class: "treemap-holder" });
  el.append(
    h("div", { class: "toolbar" }, h("label", {}, "Level ", levelSel)),
    intro,
    map,
    h("div", { class: "split" }, tree, detail)
  );
  const select = (tok) => {
    for (const r of tree.querySelectorAll(".token-row.selected")) r.classList.remove("selected");
    tree.querySelector(`.token-row[data-token="${CSS.escape(tok)}"]`)?.classList.add("selected");
    void showToken(app, detail, tok);
  };
  const showLevel = async (level) => {
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
async function tokenList(app, el, q, select, cursor) {
  const holder = h("div", {});
  el.append(holder);
  const page = await load(holder, "tokens", () => call(app.client().GET("/v1/tokens", { params: { query: { ...q, limit: TOKEN_PAGE, cursor } } })), () => []);
  if (page) renderTokens(app, holder, page, q, select);
  return page;
}
var TM_W = 1e3;
var TM_H = 120;
function treemap(page, select) {
  const items = page.tokens.filter((t) => t.size > 0);
  if (items.length === 0) return h("span", {});
  const svg = s("svg", {
    viewBox: `0 0 ${TM_W} ${TM_H}`,
    class: "treemap",
    role: "img",
    "data-testid": "treemap",
    "aria-label": `treemap of the ${items.length} largest tokens of level ${page.level}`
  });
  const layout = (its, x, y, w, hgt) => {
    if (its.length === 1) {
      const t = its[0];
      const r = s(
        "g",
        { class: "cell", "data-token": t.token, "data-testid": "treemap-cell" },
        s("rect", { x: x.toFixed(1), y: y.toFixed(1), width: Math.max(0, w - 1).toFixed(1), height: Math.max(0, hgt - 1).toFixed(1), fill: colour(t.token) }),
        s("title", {}, `${t.token} ${t.label ?? ""} · ${fmt(t.size)} ads`)
      );
      const label = cellLabel(t, w - 1, hgt - 1);
      if (label) r.append(s("text", { x: x + 3, y: y + label.size + 2, style: `font-size:${label.size}px`, "data-testid": "treemap-label" }, label.text));
      r.addEventListener("click", () => select(t.token));
      svg.append(r);
      return;
    }
    const total = its.reduce((a, t) => a + t.size, 0);
    let acc = 0;
    let k = 0;
    while (k < its.length - 1 && acc + its[k].size <= total / 2) acc += its[k++].size;
    if (k === 0) acc = its[k++].size;
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
  return h(
    "div",
    { class: "treemap-box" },
    svg,
    h("div", { class: "muted" }, `Areas are sizes: the ${items.length} largest tokens of level ${page.level} on this page (${fmt(page.total)} in all); click one for its ads.`)
  );
}
var CHAR_W = 0.62;
function cellLabel(t, w, hgt) {
  for (const [text, size] of [[`${t.token} · ${fmt(t.size)}`, 12], [t.token, 12], [t.token, 9]]) {
    if (text.length * size * CHAR_W + 6 <= w && size + 5 <= hgt) return { text, size };
  }
  return null;
}
function renderTokens(app, el, page, q, select) {
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
    const more = h(
      "button",
      { class: "more", "data-testid": "more-tokens" },
      `More (${fmt(page.tokens.length)} of ${fmt(page.total)} shown)`
    );
    more.addEventListener("click", () => {
      more.remove();
      void tokenList(app, el, q, select, page.next_cursor);
    });
    el.append(more);
  }
}
function tokenRow(app, t, maxSize, select) {
  const children = h("div", { class: "children" });
  let open = false;
  const toggle = h(
    "button",
    { class: "toggle", "aria-label": `expand ${t.token}`, disabled: t.children === 0 },
    t.children === 0 ? "·" : "▸"
  );
  toggle.addEventListener("click", (ev) => {
    ev.stopPropagation();
    open = !open;
    toggle.textContent = open ? "▾" : "▸";
    if (open) void tokenList(app, children, { parent: t.token }, select);
    else fill(children);
  });
  const samples = (t.sample_members ?? []).map((m) => m.id).join(", ");
  const row = h(
    "div",
    { class: "token-row", "data-token": t.token, "data-testid": "token-row", tabindex: 0, role: "treeitem" },
    toggle,
    h("span", { class: "swatch", style: `background:${colour(t.level === 0 ? t.token : t.parent?.startsWith("0.") ? t.parent : void 0)}` }),
    h("code", { class: "tok" }, t.token),
    h("span", { class: "label" }, t.label || "(no label)"),
    h("span", { class: "bar" }, h("span", { style: `width:${Math.round(100 * t.size / maxSize)}%` })),
    h("span", { class: "size", title: "ads indexed under the token" }, fmt(t.size)),
    h("span", { class: "samples", title: "sample member ads" }, samples ? samples + (t.size > (t.sample_members?.length ?? 0) ? ", …" : "") : "no ads")
  );
  row.addEventListener("click", () => select(t.token));
  row.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") select(t.token);
  });
  return h("li", {}, row, children);
}
async function showToken(app, el, token) {
  const info = await load(el, `token ${token}`, () => call(app.client().GET("/v1/tokens/{token}", { params: { path: { token } } })), () => []);
  if (!info) return;
  const members = h("div", { class: "members", "data-testid": "members" });
  fill(
    el,
    h("h2", {}, h("code", {}, info.token), " ", info.label || "(no label)"),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Level"),
      h("dd", {}, info.level),
      h("dt", {}, "Ads"),
      h("dd", { "data-testid": "token-size" }, fmt(info.size)),
      h("dt", {}, "Parent"),
      h("dd", {}, info.parent ? h("code", {}, info.parent) : "–"),
      h("dt", {}, "Children"),
      h("dd", {}, info.children?.length ? info.children.join(", ") : "none")
    ),
    members
  );
  await memberPage(app, members, token, [void 0]);
}
async function memberPage(app, el, token, cursors) {
  const cursor = cursors[cursors.length - 1];
  const page = await load(el, "ads", () => call(app.client().GET("/v1/tokens/{token}/members", { params: { path: { token }, query: { limit: MEMBER_PAGE, cursor } } })), () => []);
  if (!page) return;
  const pageNo = cursors.length;
  const pages = Math.max(1, Math.ceil(page.total / MEMBER_PAGE));
  const prev = h("button", { disabled: pageNo === 1, "data-testid": "members-prev" }, "← Previous");
  const next = h("button", { disabled: !page.next_cursor, "data-testid": "members-next" }, "Next →");
  prev.addEventListener("click", () => void memberPage(app, el, token, cursors.slice(0, -1)));
  next.addEventListener("click", () => void memberPage(app, el, token, [...cursors, page.next_cursor]));
  fill(
    el,
    h("h3", {}, `Ads under ${token}`),
    page.items.length === 0 ? empty("No ads are indexed under this token.") : h(
      "table",
      { class: "grid", "data-testid": "members-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "Ad"), h("th", {}, "Text"))),
      h("tbody", {}, ...page.items.map((m) => h("tr", {}, h("td", {}, h("code", {}, m.id)), h("td", {}, m.text ?? ""))))
    ),
    h("div", { class: "pager" }, prev, h("span", { "data-testid": "members-page" }, `page ${pageNo} of ${pages} · ${fmt(page.total)} ads`), next)
  );
}

// explorer/map.ts
var W = 720;
var H = 520;
var PAD = 24;
var HIGHLIGHT_K = 10;
var mapView = async (app, el, arg) => {
  const limitSel = h(
    "select",
    { "aria-label": "points", "data-testid": "map-limit" },
    ...[500, 1e3, 2e3, 5e3].map((n) => h("option", { value: n, selected: n === 1e3 }, `${fmt(n)} ads`))
  );
  const userInput = h("input", { type: "search", placeholder: "user id, e.g. u1", "data-testid": "map-user", "aria-label": "user id" });
  userInput.value = arg || app.user;
  const form = h(
    "form",
    { class: "toolbar" },
    h("label", {}, "Sample ", limitSel),
    h("label", {}, "Highlight user ", userInput),
    h("button", { type: "submit", "data-testid": "map-highlight" }, "Show user and retrieved ads")
  );
  const plot = h("div", { class: "map", "data-testid": "map" });
  const side = h("aside", { class: "legend", "data-testid": "legend" });
  const note = h("div", { class: "highlight-note", "data-testid": "highlight-note" });
  el.append(form, h("div", { class: "split map-split" }, plot, h("div", {}, note, side)));
  let current;
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
  const highlight = async (user) => {
    if (!current) return;
    const { layer, scale } = current;
    fill(layer);
    fill(note, "Placing ", h("code", {}, user), "…");
    try {
      const res = await call(app.client().POST("/v1/retrieve", { body: { user: { type: "user", id: user }, k: HIGHLIGHT_K } }));
      const refs = [{ type: "user", id: user }, ...res.candidates.map((c) => ({ type: c.type, id: c.id }))];
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
        layer.append(s(
          "circle",
          { cx: ax, cy: ay, r: 7, class: "retrieved", "data-testid": "retrieved-point", "data-id": a.id },
          s("title", {}, `retrieved ${a.id}${a.label ? " — " + a.label : ""}`)
        ));
      }
      if (up) {
        const [ux, uy] = scale(up);
        layer.append(s(
          "g",
          { class: "user-mark", "data-testid": "user-point", transform: `translate(${ux},${uy})` },
          s("circle", { r: 10 }),
          s("text", { y: -14, "text-anchor": "middle" }, user),
          s("title", {}, `user ${user}${up.label ? " — " + up.label : ""}`)
        ));
      }
      fill(
        note,
        up ? h("span", {}, "User ", h("code", {}, user), ` (coarse interest ${up.token ?? "–"}) and the ${ads.length} ads retrieved for them (k=${HIGHLIGHT_K}).`) : h("span", {}, "User ", h("code", {}, user), " is not known to the service: showing nothing."),
        proj.missing.length ? h("div", { class: "muted" }, `Not placed: ${proj.missing.map((r) => r.id).join(", ")}`) : null
      );
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
function render(plot, side, m) {
  const xs = m.points.map((p) => p.x);
  const ys = m.points.map((p) => p.y);
  const [x0, x1] = [Math.min(...xs, 0), Math.max(...xs, 0)];
  const [y0, y1] = [Math.min(...ys, 0), Math.max(...ys, 0)];
  const sx = (W - 2 * PAD) / (x1 - x0 || 1);
  const sy = (H - 2 * PAD) / (y1 - y0 || 1);
  const k = Math.min(sx, sy) * 0.92;
  const cx = (x0 + x1) / 2;
  const cy = (y0 + y1) / 2;
  const scale = (p) => [W / 2 + (p.x - cx) * k, H / 2 - (p.y - cy) * k];
  const hover = h("div", { class: "hover", "data-testid": "hover" }, "Hover a point for its ad and interest.");
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "scatter", role: "img", "aria-label": "map of ad embeddings" });
  const [ox, oy] = scale({ x: 0, y: 0 });
  svg.append(
    s("line", { x1: PAD, y1: oy, x2: W - PAD, y2: oy, class: "axis" }),
    s("line", { x1: ox, y1: PAD, x2: ox, y2: H - PAD, class: "axis" }),
    s("text", { x: W - PAD, y: oy - 4, "text-anchor": "end", class: "axis-label" }, `PC1 (${fmt(100 * (m.explained_variance[0] ?? 0), 1)}% of variance)`),
    s("text", { x: ox + 4, y: PAD + 10, class: "axis-label" }, `PC2 (${fmt(100 * (m.explained_variance[1] ?? 0), 1)}%)`)
  );
  const dots = s("g", { class: "dots" });
  for (const p of m.points) {
    const [x, y] = scale(p);
    const c = s(
      "circle",
      { cx: x.toFixed(1), cy: y.toFixed(1), r: 3.5, fill: colour(p.token), "data-testid": "map-point", "data-id": p.id, "data-token": p.token ?? "" },
      s("title", {}, describe(p))
    );
    c.addEventListener("mouseenter", () => fill(hover, describe(p)));
    dots.append(c);
  }
  const layer = s("g", { class: "highlights" });
  svg.append(dots, layer);
  if (m.points.length === 0) fill(plot, empty("The model has no ads to map."));
  else fill(plot, svg, hover);
  fill(
    side,
    h("h3", {}, "Coarse interests"),
    h(
      "p",
      { class: "muted", "data-testid": "map-summary" },
      `${fmt(m.points.length)} of ${fmt(m.total)} ads, model ${m.model_version}. ${m.method}.`
    ),
    h("ul", { class: "legend-list" }, ...m.interests.map((t) => h(
      "li",
      {},
      h("span", { class: "swatch", style: `background:${colour(t.token)}` }),
      h("code", {}, t.token),
      " ",
      t.label ?? "",
      h("span", { class: "muted" }, ` ${fmt(100 * (t.weight ?? 0), 1)}%`)
    )))
  );
  return { map: m, scale, layer };
}
function describe(p) {
  return `${p.type} ${p.id} · ${p.token ?? "no token"}${p.label ? " — " + p.label : ""} · (${fmt(p.x, 2)}, ${fmt(p.y, 2)})`;
}

// explorer/model.ts
var POLL_MS = 3e3;
var modelView = async (app, el) => {
  const body = h("div", {});
  el.append(body);
  const show = async (quiet) => {
    const work = () => call(app.client().GET("/v1/model"));
    if (quiet) {
      try {
        render2(body, await work());
      } catch {
      }
      return;
    }
    await load(body, "model", work, () => []).then((m) => m && render2(body, m));
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
function render2(el, m) {
  if (!m.ready) {
    fill(
      el,
      empty("No model is served yet: the first training round is running or has not started (POST /v1/model/train)."),
      h("p", { "data-testid": "training" }, m.training ? "A training round is running." : "No training round is running.")
    );
    return;
  }
  const metrics = m.metrics ?? {};
  const hist = m.history ?? [];
  const val = hist.filter((p) => p.val_auc !== void 0 || p.val_loss !== void 0);
  fill(
    el,
    h(
      "div",
      { class: "cards stats" },
      stat("Serving version", m.version ?? "–", "version"),
      stat("Trained at", m.trained_at ? m.trained_at.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC") : "–", "trained-at"),
      stat("Ads in the index", fmt(m.index_size), "index-size"),
      stat("Training", m.training ? "a round is running" : "idle", "training"),
      stat("Validation AUC", fmt(metrics["val_engagement_auc"]), "val-auc")
    ),
    h(
      "section",
      { class: "card wide" },
      h("h2", {}, "Training loss"),
      hist.length === 0 ? empty("No training history is recorded for this model (it was not trained by this server's data directory).") : lineChart([
        { name: "train loss", cls: "s-train", points: hist.map((p) => [p.step, p.loss]) },
        { name: "validation loss", cls: "s-val", points: val.filter((p) => p.val_loss !== void 0).map((p) => [p.step, p.val_loss]) }
      ], versionMarks(hist), "loss-chart")
    ),
    h(
      "div",
      { class: "cards" },
      h(
        "section",
        { class: "card" },
        h("h2", {}, "Validation engagement AUC"),
        val.length === 0 ? empty("No validation recorded.") : lineChart([{ name: "AUC", cls: "s-auc", points: val.filter((p) => p.val_auc !== void 0).map((p) => [p.step, p.val_auc]) }], versionMarks(hist), "auc-chart")
      ),
      h(
        "section",
        { class: "card", "data-testid": "entropy" },
        h("h2", {}, "Prototype usage entropy"),
        h("p", { class: "muted" }, "Per level, the entropy of the prototypes' use divided by log K: 1 is uniform use, near 0 is collapse."),
        (m.usage_entropy ?? []).length === 0 ? empty("Not recorded.") : h(
          "table",
          { class: "grid" },
          h("tbody", {}, ...(m.usage_entropy ?? []).map((e, l) => h(
            "tr",
            {},
            h("td", {}, `level ${l}`),
            h("td", { class: "num" }, h("span", { class: "wbar" }, h("span", { style: `width:${Math.round(100 * Math.max(0, Math.min(1, e)))}%` })), fmt(e, 3))
          )))
        )
      )
    ),
    h(
      "section",
      { class: "card wide" },
      h("h2", {}, "Metrics"),
      h("table", { class: "grid", "data-testid": "metrics" }, h(
        "tbody",
        {},
        ...Object.keys(metrics).sort().map((k) => h("tr", {}, h("td", {}, h("code", {}, k)), h("td", { class: "num" }, fmt(metrics[k], 4))))
      ))
    )
  );
}
function stat(label, value, id) {
  return h("section", { class: "card stat" }, h("div", { class: "muted" }, label), h("div", { class: "big", "data-testid": id }, value));
}
function versionMarks(hist) {
  const out = [];
  for (let i = 1; i < hist.length; i++) {
    if (hist[i].version !== hist[i - 1].version) out.push([hist[i].step, hist[i].version]);
  }
  return out;
}
var CW = 640;
var CH = 220;
var M = { l: 52, r: 12, t: 24, b: 40 };
function lineChart(series, marks, id) {
  const all = series.flatMap((s2) => s2.points);
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
  const X = (x) => M.l + (x - x0) / (x1 - x0) * (CW - M.l - M.r);
  const Y = (y) => CH - M.b - (y - y0) / (y1 - y0) * (CH - M.t - M.b);
  const svg = s("svg", { viewBox: `0 0 ${CW} ${CH}`, class: "chart", role: "img", "aria-label": series.map((x) => x.name).join(", "), "data-testid": id });
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4;
    svg.append(
      s("line", { x1: M.l, x2: CW - M.r, y1: Y(y), y2: Y(y), class: "grid-line" }),
      s("text", { x: M.l - 6, y: Y(y) + 4, "text-anchor": "end", class: "tick" }, fmt(y, Math.abs(y1 - y0) < 1 ? 3 : 2))
    );
  }
  const xticks = /* @__PURE__ */ new Set();
  for (let i = 0; i <= 4; i++) xticks.add(Math.round(x0 + (x1 - x0) * i / 4));
  for (const x of xticks) {
    if (x < x0 || x > x1) continue;
    svg.append(s("text", { x: X(x), y: CH - M.b + 14, "text-anchor": "middle", class: "tick" }, fmt(x)));
  }
  svg.append(s("text", { x: (M.l + CW - M.r) / 2, y: CH - 4, "text-anchor": "middle", class: "tick axis-title", "data-testid": "x-axis-title" }, "training step"));
  for (const [x, v] of marks) {
    svg.append(
      s("line", { x1: X(x), x2: X(x), y1: M.t, y2: CH - M.b, class: "version-mark" }),
      s("text", { x: X(x) + 3, y: M.t + 10, class: "tick" }, v)
    );
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

// explorer/user.ts
var EVENT_PAGE = 15;
var userView = async (app, el, arg) => {
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
async function showUser(app, el, user) {
  app.user = user;
  const interests = h("section", { class: "card", "data-testid": "interests" });
  const events = h("section", { class: "card", "data-testid": "events" });
  const retrieval = h("section", { class: "card wide", "data-testid": "retrieval" });
  fill(el, h("div", { class: "cards" }, interests, events), retrieval);
  const showOnMap = h("a", { href: "#map/" + encodeURIComponent(user), class: "button-link" }, "Show on the map");
  void load(
    interests,
    "interests",
    () => call(app.client().GET("/v1/entities/{type}/{id}/interests", { params: { path: { type: "user", id: user } } })),
    (r) => [
      h("h2", {}, "Interests of ", h("code", {}, user)),
      h("p", { class: "muted" }, `Bag-of-Meaning tokens, coarse to fine, model ${r.model_version}. `, showOnMap),
      r.tokens.length === 0 ? empty("No interest tokens.") : h(
        "table",
        { class: "grid", "data-testid": "interests-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Token"), h("th", {}, "Label"), h("th", {}, "Weight"))),
        h("tbody", {}, ...sortTokens(r.tokens).map((t) => h(
          "tr",
          { "data-token": t.token },
          h("td", {}, h("a", { href: "#hierarchy/" + t.token }, h("code", {}, t.token))),
          h("td", {}, t.label ? t.label : h("span", { class: "muted" }, "(no label)")),
          h("td", { class: "num" }, h("span", { class: "wbar" }, h("span", { style: `width:${Math.round(100 * Math.min(1, t.weight ?? 0))}%` })), fmt(t.weight, 2))
        )))
      )
    ]
  );
  void eventPage(app, events, user, [void 0]);
  retrievalPanel(app, retrieval, user, () => void eventPage(app, events, user, [void 0]));
}
async function eventPage(app, el, user, cursors) {
  const cursor = cursors[cursors.length - 1];
  const page = await load(el, "events", () => call(app.client().GET("/v1/entities/{type}/{id}/events", { params: { path: { type: "user", id: user }, query: { limit: EVENT_PAGE, cursor } } })), () => []);
  if (!page) return;
  const newer = h("button", { disabled: cursors.length === 1, "data-testid": "events-newer" }, "← Newer");
  const older = h("button", { disabled: !page.next_cursor, "data-testid": "events-older" }, "Older →");
  newer.addEventListener("click", () => void eventPage(app, el, user, cursors.slice(0, -1)));
  older.addEventListener("click", () => void eventPage(app, el, user, [...cursors, page.next_cursor]));
  fill(
    el,
    h("h2", {}, "Recent events"),
    h("p", { class: "muted", "data-testid": "events-total" }, `${fmt(page.total)} events, newest first`),
    page.events.length === 0 ? empty("This user has no events.") : h(
      "table",
      { class: "grid", "data-testid": "events-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "When (UTC)"), h("th", {}, "Event"), h("th", {}, "Target"))),
      h("tbody", {}, ...page.events.map((e) => h(
        "tr",
        {},
        h("td", {}, e.ts.replace("T", " ").replace(/\.\d+Z$|Z$/, "")),
        h("td", {}, h("span", { class: "etype etype-" + e.type }, e.type)),
        h("td", {}, `${e.dst.type} `, h("code", {}, e.dst.id))
      )))
    ),
    h("div", { class: "pager" }, newer, h("span", {}, `page ${cursors.length} of ${Math.max(1, Math.ceil(page.total / EVENT_PAGE))}`), older)
  );
}
function numberInput(label, attrs, value = "") {
  const i = h("input", { type: "number", ...attrs });
  i.value = value;
  return [h("label", {}, label + " ", i), i];
}
function retrievalPanel(app, el, user, refreshEvents) {
  const [kL, k] = numberInput("k", { min: 1, max: 1e3, "data-testid": "k" }, "10");
  const [pL, prior] = numberInput("prior weight", { min: 0, max: 100, step: "any", placeholder: "server default", "data-testid": "prior" });
  const [cL, coeng] = numberInput("co-engagement weight", { min: 0, max: 1e3, step: "any", placeholder: "server default", "data-testid": "coeng" });
  const query = h("input", { type: "search", placeholder: "keywords (optional)", "data-testid": "query", "aria-label": "keywords" });
  const filter = h("textarea", { rows: 2, placeholder: '{"attr":"status","eq":"active"} (optional)', "data-testid": "filter", "aria-label": "filter" });
  const excludeSeen = h("input", { type: "checkbox", checked: true, "data-testid": "exclude-seen" });
  const results = h("div", { class: "results", "data-testid": "results" }, empty("Run a retrieval to see candidates."));
  const form = h(
    "form",
    { class: "retrieve-form" },
    kL,
    pL,
    cL,
    h("label", {}, "keywords ", query),
    h("label", { class: "filter-label" }, "filter (JSON) ", filter),
    h("label", {}, excludeSeen, " exclude seen ads"),
    h("button", { type: "submit", "data-testid": "retrieve" }, "Retrieve")
  );
  fill(el, h("h2", {}, "Retrieval for ", h("code", {}, user)), form, results);
  let previous;
  const request = () => {
    const req = { user: { type: "user", id: user }, k: Number(k.value) || 10, explain: true, exclude_seen: excludeSeen.checked };
    if (query.value.trim()) req.query = query.value.trim();
    if (prior.value !== "") req.prior_weight = Number(prior.value);
    if (coeng.value !== "") req.coengagement_weight = Number(coeng.value);
    if (filter.value.trim()) req.filter = JSON.parse(filter.value);
    return req;
  };
  const run = async (note) => {
    let req;
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
  const click = async (ad) => {
    const note = h("div", { class: "click-note", "data-testid": "click-note" });
    try {
      const id = `ui-click-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
      const r = await call(app.client().POST("/v1/events", {
        body: { events: [{ id, src: { type: "user", id: user }, dst: { type: "ad", id: ad }, type: "click", ts: (/* @__PURE__ */ new Date()).toISOString() }] }
      }));
      fill(
        note,
        `Posted a click of ${user} on ${ad} (${r.events} event stored, log seq ${r.seq ?? "–"}). Retrieval re-run: `,
        h("span", { class: "up" }, "▲ moved up"),
        ", ",
        h("span", { class: "down" }, "▼ moved down"),
        ", ",
        h("span", { class: "new" }, "new"),
        " against the previous run."
      );
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
function renderCandidates(el, res, before, note, click) {
  const prevRank = new Map(before?.map((c, i) => [c.id, i]));
  const maxScore = Math.max(1e-9, ...res.candidates.map((c) => Math.abs(c.parts?.similarity ?? 0) + Math.abs(c.parts?.prior ?? 0) + Math.abs(c.parts?.coengagement ?? 0)));
  const flags = [res.fresh_user ? "embedded now (fresh)" : "model embedding", res.new_user ? "new user" : null].filter(Boolean).join(", ");
  fill(
    el,
    note ?? null,
    h("p", { class: "muted", "data-testid": "retrieve-summary" }, `${res.candidates.length} candidates from model ${res.model_version} (${flags}).`),
    res.candidates.length === 0 ? empty("No candidates: the filter or keywords may exclude every ad.") : h(
      "table",
      { class: "grid candidates", "data-testid": "candidates" },
      h("thead", {}, h(
        "tr",
        {},
        h("th", {}, "#"),
        h("th", {}, "Ad"),
        h("th", {}, "Score"),
        h("th", {}, "Parts: similarity + prior + co-engagement"),
        h("th", {}, "Matched tokens"),
        h("th", {}, "")
      )),
      h("tbody", {}, ...res.candidates.map((c, i) => {
        const p = c.parts ?? { similarity: 0, prior: 0, coengagement: 0 };
        const was = prevRank.get(c.id);
        const delta = before === void 0 ? null : was === void 0 ? h("span", { class: "new" }, "new") : was > i ? h("span", { class: "up" }, `▲${was - i}`) : was < i ? h("span", { class: "down" }, `▼${i - was}`) : null;
        const btn = h("button", { class: "small", "data-testid": "click-ad", "data-ad": c.id, title: "post a click of this user on this ad (needs the write key)" }, "Click");
        btn.addEventListener("click", () => click(c.id));
        return h(
          "tr",
          { "data-testid": "candidate", "data-id": c.id },
          h("td", { class: "num" }, i + 1, " ", delta),
          h("td", {}, h("code", {}, c.id), c.keyword_match ? h("span", { class: "chip", title: "matched the keywords" }, "kw") : null),
          h("td", { class: "num", "data-testid": "score" }, fmt(c.score, 3)),
          h("td", {}, partsBar(p, maxScore), h(
            "span",
            { class: "parts", "data-testid": "parts" },
            `${fmt(p.similarity, 3)} + ${fmt(p.prior, 3)} + ${fmt(p.coengagement, 3)}`
          )),
          h("td", { class: "chips" }, ...(c.tokens ?? []).map((t) => h("span", { class: "chip", title: t.label ?? "", style: `border-color:${colour(t.level === 0 ? t.token : void 0)}` }, t.token))),
          h("td", {}, btn)
        );
      }))
    )
  );
}
function partsBar(p, max) {
  const seg = (v, cls, name) => h("span", { class: "seg " + cls, style: `width:${Math.max(0, 100 * Math.abs(v) / max).toFixed(1)}%`, title: `${name} ${fmt(v, 3)}` });
  return h("span", { class: "partsbar" }, seg(p.similarity, "sim", "similarity"), seg(p.prior, "prior", "prior"), seg(p.coengagement, "coeng", "co-engagement"));
}
function sortTokens(tokens) {
  return [...tokens].sort((a, b) => a.level - b.level || (b.weight ?? 0) - (a.weight ?? 0) || a.token.localeCompare(b.token));
}

// explorer/main.ts
var KEY_STORAGE = "hir-api-key";
var views = {
  hierarchy: { title: "Hierarchy", view: hierarchyView },
  map: { title: "Map", view: mapView },
  user: { title: "User", view: userView },
  model: { title: "Model", view: modelView }
};
function storedKey() {
  try {
    return sessionStorage.getItem(KEY_STORAGE) ?? "";
  } catch {
    return "";
  }
}
function start() {
  let apiKey = storedKey();
  let client = createHIRClient(location.origin, { apiKey: apiKey || void 0 });
  const main = h("main", { id: "view", "data-testid": "view" });
  const nav = h("nav", { class: "tabs" });
  const keyInput = h("input", {
    type: "password",
    id: "api-key",
    placeholder: "API key",
    autocomplete: "off",
    "aria-label": "API key",
    "data-testid": "api-key"
  });
  keyInput.value = apiKey;
  const keyState = h("span", { class: "key-state", "data-testid": "key-state" });
  const showKeyState = () => {
    keyState.textContent = apiKey ? "key set for this tab" : "no key";
  };
  const saveKey = (ev) => {
    ev.preventDefault();
    apiKey = keyInput.value.trim();
    try {
      if (apiKey) sessionStorage.setItem(KEY_STORAGE, apiKey);
      else sessionStorage.removeItem(KEY_STORAGE);
    } catch {
    }
    client = createHIRClient(location.origin, { apiKey: apiKey || void 0 });
    showKeyState();
    route();
  };
  const keyForm = h(
    "form",
    { class: "key", onsubmit: saveKey },
    keyInput,
    h("button", { type: "submit", "data-testid": "save-key" }, "Use key"),
    keyState
  );
  showKeyState();
  const app = {
    client: () => client,
    user: "",
    go: (r) => {
      if (location.hash === "#" + r) route();
      else location.hash = r;
    }
  };
  for (const [name, v] of Object.entries(views)) {
    nav.append(h("a", { href: "#" + name, "data-view": name, "data-testid": "tab-" + name }, v.title));
  }
  document.body.append(
    h(
      "header",
      {},
      h("h1", {}, "HIR interest explorer"),
      nav,
      keyForm
    ),
    main,
    h("footer", {}, "Reads the public REST API (", h("a", { href: "/docs" }, "/docs"), "); problems are shown as their title and detail.")
  );
  function route() {
    const [name = "hierarchy", ...rest] = location.hash.replace(/^#/, "").split("/");
    const v = views[name] ?? views.hierarchy;
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
