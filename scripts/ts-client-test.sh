#!/usr/bin/env bash
# The TypeScript client's test (clients/typescript, node's test runner) against a live `hir serve`:
# builds hir, synthesises, imports and trains a small world (seconds), serves it on a free loopback
# port with an API key, runs `npm test` with HIR_URL and HIR_API_KEY, then packs the package
# (`npm pack`), installs the tarball into an empty project and calls the server from there, as a
# user of the package would; and stops the server.
# Exits 0 with a SKIP line when node or npm is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "SKIP ts-client-test: node and npm are not installed (the TypeScript client was not tested)"
	exit 0
fi
source scripts/lib/tiny-server.sh
tiny_server ts-client-test 6

cd clients/typescript
if [[ ! node_modules/.package-lock.json -nt package-lock.json ]]; then
	npm ci --no-audit --no-fund >/dev/null
fi
HIR_URL="$url" HIR_API_KEY="$key" npm test --silent

# The packed package, installed into an empty project.
npm pack --silent --pack-destination "$tmp" >/dev/null
tarball=$(ls "$tmp"/hir-ads-client-*.tgz)
mkdir "$tmp/consumer"
cd "$tmp/consumer"
printf '{"name":"consumer","private":true,"type":"module"}\n' >package.json
npm install --silent --no-audit --no-fund --prefer-offline "$tarball" >/dev/null
cat >consumer.mjs <<'JS'
import { createHIRClient } from "@hir-ads/client";
const hir = createHIRClient(process.env.HIR_URL, { apiKey: process.env.HIR_API_KEY });
const { data, error } = await hir.POST("/v1/retrieve", {
  body: { user: { type: "user", id: "u1" }, k: 5, filter: { attr: "status", eq: "active" }, explain: true },
});
if (error || !data.candidates.length) throw new Error(`retrieve: ${JSON.stringify(error ?? data)}`);
const bad = await hir.POST("/v1/events", { body: { events: [{ src: { type: "ad", id: "a1" }, dst: { type: "user", id: "u1" }, type: "click", ts: 1 }] } });
if (bad.error?.status !== 400) throw new Error(`an impossible edge: ${JSON.stringify(bad)}`);
console.log(`ts-client-test: the packed ${process.env.TARBALL} answers: ${data.candidates.length} candidates, first ${data.candidates[0].id}`);
JS
HIR_URL="$url" HIR_API_KEY="$key" TARBALL="$(basename "$tarball")" node consumer.mjs
