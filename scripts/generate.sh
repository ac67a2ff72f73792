#!/usr/bin/env bash
# Regenerates both clients from openapi.yaml: the Go types, chi server interface and client
# (api/api.gen.go, `go generate ./api`) and the TypeScript client's types
# (clients/typescript/src/schema.ts, openapi-typescript; needs node and npm) with the package's
# version set to the spec's info.version; then rebuilds the
# interest explorer page's bundle (serving/ui/app.js: clients/typescript/explorer type-checked with
# tsc and bundled with esbuild), which is committed so that `go build` needs no npm.
set -euo pipefail
cd "$(dirname "$0")/.."

go generate ./api
echo "generated api/api.gen.go"
if ! command -v npm >/dev/null; then
	echo "generate.sh: npm is not installed: clients/typescript/src/schema.ts NOT regenerated" >&2
	exit 1
fi
cd clients/typescript
if [[ ! node_modules/.package-lock.json -nt package-lock.json ]]; then
	npm ci --no-audit --no-fund >/dev/null
fi
npm run --silent generate
echo "generated clients/typescript/src/schema.ts"
version=$(sed -n 's/^  version: *//p' ../../openapi.yaml | head -1)
npm pkg set version="$version"
npm install --package-lock-only --no-audit --no-fund --prefer-offline >/dev/null 2>&1
echo "clients/typescript/package.json: version $version (openapi.yaml info.version)"
npm run --silent build:ui
echo "generated serving/ui/app.js"
