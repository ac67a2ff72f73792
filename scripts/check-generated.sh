#!/usr/bin/env bash
# Fails when a generated file is stale: regenerates the Go client (api/api.gen.go), the
# TypeScript client's types (clients/typescript/src/schema.ts) from openapi.yaml and the explorer
# page's bundle (serving/ui/app.js, after type-checking clients/typescript/explorer) into a
# temporary directory and diffs them against the committed files. Fix with scripts/generate.sh.
# The TypeScript checks are skipped, with a line saying so, when npm is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stale=0

# The config names its output file; a copy naming the temporary one keeps api/ untouched.
sed "s|^output:.*|output: $tmp/api.gen.go|" api/oapi-codegen.yaml >"$tmp/oapi-codegen.yaml"
go tool oapi-codegen -config "$tmp/oapi-codegen.yaml" openapi.yaml
if ! diff -u api/api.gen.go "$tmp/api.gen.go" >"$tmp/go.diff"; then
	head -40 "$tmp/go.diff" >&2
	echo "check-generated: api/api.gen.go is stale: run scripts/generate.sh" >&2
	stale=1
fi

spec_version=$(sed -n 's/^  version: *//p' openapi.yaml | head -1)
pkg_version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' clients/typescript/package.json | head -1)
if [[ $spec_version != "$pkg_version" ]]; then
	echo "check-generated: clients/typescript/package.json version $pkg_version differs from openapi.yaml's $spec_version: run scripts/generate.sh" >&2
	stale=1
fi

if command -v npm >/dev/null; then
	(
		cd clients/typescript
		if [[ ! node_modules/.package-lock.json -nt package-lock.json ]]; then
			npm ci --no-audit --no-fund >/dev/null
		fi
		npx --no-install openapi-typescript ../../openapi.yaml --default-non-nullable false --output "$tmp/schema.ts" >/dev/null 2>&1
		npx --no-install tsc -p explorer/tsconfig.json
		npm run --silent bundle:ui -- --outfile="$tmp/app.js"
	)
	if ! diff -u clients/typescript/src/schema.ts "$tmp/schema.ts" >"$tmp/ts.diff"; then
		head -40 "$tmp/ts.diff" >&2
		echo "check-generated: clients/typescript/src/schema.ts is stale: run scripts/generate.sh" >&2
		stale=1
	fi
	if ! diff -u serving/ui/app.js "$tmp/app.js" >"$tmp/ui.diff"; then
		head -40 "$tmp/ui.diff" >&2
		echo "check-generated: serving/ui/app.js is stale: run scripts/generate.sh" >&2
		stale=1
	fi
else
	echo "SKIP check-generated (TypeScript client and explorer bundle): npm is not installed"
fi
if ((stale)); then
	exit 1
fi
echo "check-generated: api/api.gen.go, clients/typescript/src/schema.ts and serving/ui/app.js are current"
