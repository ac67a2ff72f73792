#!/usr/bin/env bash
# The interest explorer's browser test (clients/typescript/ui-test, playwright-core driving headless
# Chromium) against a live `hir serve`: builds hir, synthesises, imports and trains a small world
# (seconds), serves it on a free loopback port with an API key in read-auth mode, opens /ui, goes
# through every view and checks what the page shows against the API's own answers.
# Screenshots go to $HIR_UI_ARTIFACTS (default out/ui-test); with --docs they are also copied to
# docs/ui/ (the README's screenshots).
# Exits 0 with a SKIP line when Chromium, node or npm is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."

docs=0
[[ ${1:-} == --docs ]] && docs=1
chromium=${HIR_CHROMIUM:-}
if [[ -z $chromium ]]; then
	for c in chromium chromium-browser google-chrome-stable google-chrome; do
		if command -v "$c" >/dev/null; then
			chromium=$(command -v "$c")
			break
		fi
	done
fi
if [[ -z $chromium ]]; then
	echo "SKIP ui-test: Chromium is not installed (apt-get install chromium, or set HIR_CHROMIUM); the explorer page was not tested"
	exit 0
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "SKIP ui-test: node and npm are not installed (the explorer page was not tested)"
	exit 0
fi
export GOMLX_BACKEND="${GOMLX_BACKEND:-go}" GOMLX_NO_AUTO_INSTALL=1
artifacts=${HIR_UI_ARTIFACTS:-$PWD/out/ui-test}
mkdir -p "$artifacts"

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
"$tmp/hir" train --data "$tmp/data" --steps 20 --pairs 8 >/dev/null 2>"$tmp/train.log" || { cat "$tmp/train.log" >&2; exit 1; }

key="ui-test-$RANDOM$RANDOM$RANDOM"
"$tmp/hir" serve --data "$tmp/data" --addr 127.0.0.1:0 --api-key "$key" --read-auth --train-steps 6 2>"$tmp/serve.log" &
pid=$!
url=
for _ in $(seq 600); do
	addr=$(sed -n 's/.*msg=serving .*addr=\([0-9.:]*\).*/\1/p' "$tmp/serve.log" | head -1)
	if [[ -n $addr ]] && curl -sf "http://$addr/readyz" >/dev/null 2>&1; then
		url="http://$addr"
		break
	fi
	kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; echo "ui-test: hir serve exited" >&2; exit 1; }
	sleep 0.2
done
[[ -n $url ]] || { cat "$tmp/serve.log" >&2; echo "ui-test: hir serve not ready within 120 s" >&2; exit 1; }

cd clients/typescript
if [[ ! node_modules/.package-lock.json -nt package-lock.json ]]; then
	npm ci --no-audit --no-fund >/dev/null
fi
HIR_URL="$url" HIR_API_KEY="$key" HIR_CHROMIUM="$chromium" HIR_UI_ARTIFACTS="$artifacts" npm run --silent test:ui
cd ../..
if ((docs)); then
	mkdir -p docs/ui
	cp "$artifacts"/{hierarchy,map,user,model}.png docs/ui/
	echo "ui-test: screenshots copied to docs/ui/"
fi
echo "ui-test: screenshots in $artifacts"
