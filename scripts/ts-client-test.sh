#!/usr/bin/env bash
# The TypeScript client's test (clients/typescript, node's test runner) against a live `hir serve`:
# builds hir, synthesises, imports and trains a small world (seconds), serves it on a free loopback
# port with an API key, runs `npm test` with HIR_URL and HIR_API_KEY, and stops the server.
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
