// Typed client of the HIR REST API: openapi-fetch over the types that
// openapi-typescript generates from openapi.yaml into schema.ts (regenerate
// with scripts/generate.sh; never edit schema.ts by hand).
import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };

/** The API's schemas by name, e.g. `Schemas["RetrieveRequest"]`. */
export type Schemas = components["schemas"];

/** HIRClient is a typed openapi-fetch client of one HIR server. */
export type HIRClient = Client<paths>;

/** Options of {@link createHIRClient}. */
export interface HIRClientOptions {
  /** API key sent as `Authorization: Bearer KEY` (needed for writes, and for reads in read-auth mode). */
  apiKey?: string;
  /** fetch implementation (default: the global fetch). */
  fetch?: typeof globalThis.fetch;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

/**
 * createHIRClient returns a typed client of the HIR server at baseUrl
 * (e.g. "http://localhost:8080"). Each call returns `{ data, error, response }`:
 * `data` on 2xx, `error` (an RFC 9457 problem) otherwise.
 *
 * @example
 * const hir = createHIRClient("http://localhost:8080");
 * const { data, error } = await hir.POST("/v1/retrieve", {
 *   body: { user: { type: "user", id: "u1" }, k: 10, explain: true },
 * });
 */
export function createHIRClient(baseUrl: string, opts: HIRClientOptions = {}): HIRClient {
  const client = createClient<paths>({
    baseUrl: baseUrl.replace(/\/+$/, ""),
    headers: opts.headers,
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
  });
  if (opts.apiKey) {
    const key = opts.apiKey;
    const auth: Middleware = {
      onRequest({ request }) {
        request.headers.set("Authorization", `Bearer ${key}`);
        return request;
      },
    };
    client.use(auth);
  }
  return client;
}
