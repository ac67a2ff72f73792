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
export GOMLX_BACKEND="${GOMLX_BACKEND:-go}" GOMLX_NO_AUTO_INSTALL=1

tmp=$(mktemp -d)
pid=
cleanup() {
	if [[ -n $pid ]]; then kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/hir" ./cmd/hir
"$tmp/hir" synth --out "$tmp/world" --users 80 --ads 120 --coarse 2 --mid 4 --fine 8 --events-per-user 40 --seed 3 >/dev/null
"$tmp/hir" import --format jsonl --src "$tmp/world" --data "$tmp/data" >/dev/null
"$tmp/hir" train --data "$tmp/data" --steps 6 --pairs 8 >/dev/null 2>"$tmp/train.log" || { cat "$tmp/train.log" >&2; exit 1; }

key="ts-test-$RANDOM$RANDOM$RANDOM"
"$tmp/hir" serve --data "$tmp/data" --addr 127.0.0.1:0 --api-key "$key" --train-steps 6 2>"$tmp/serve.log" &
pid=$!
url=
for _ in $(seq 600); do
	addr=$(sed -n 's/.*msg=serving .*addr=\([0-9.:]*\).*/\1/p' "$tmp/serve.log" | head -1)
	if [[ -n $addr ]] && curl -sf "http://$addr/readyz" >/dev/null 2>&1; then
		url="http://$addr"
		break
	fi
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; echo "ts-client-test: hir serve exited" >&2; exit 1; }
	sleep 0.2
done
[[ -n $url ]] || { cat "$tmp/serve.log" >&2; echo "ts-client-test: hir serve not ready within 120 s" >&2; exit 1; }

cd clients/typescript
if [[ ! node_modules/.package-lock.json -nt package-lock.json ]]; then
	npm ci --no-audit --no-fund >/dev/null
fi
HIR_URL="$url" HIR_API_KEY="$key" npm test --silent
