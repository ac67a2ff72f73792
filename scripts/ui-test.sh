#!/usr/bin/env bash
# The interest explorer's browser test (clients/typescript/ui-test, playwright-core driving headless
# Chromium) against a live `hir serve`: builds hir, synthesises, imports and trains a small world
# (seconds), serves it on a free loopback port with an API key in read-auth mode, opens /ui, goes
# through every view and checks what the page shows against the API's own answers.
# Screenshots go to $HIR_UI_ARTIFACTS (default out/ui-test); with --docs they are also copied to
# docs/ui/ (the screenshots docs/clients.md shows).
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
artifacts=${HIR_UI_ARTIFACTS:-$PWD/out/ui-test}
mkdir -p "$artifacts"

source scripts/lib/tiny-server.sh
tiny_server ui-test 20 --read-auth

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
