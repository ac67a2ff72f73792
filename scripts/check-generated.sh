#!/usr/bin/env bash
# Fails when a generated client is stale: regenerates the Go client (api/api.gen.go) and the
# TypeScript client's types (clients/typescript/src/schema.ts) from openapi.yaml into a temporary
# directory and diffs them against the committed files. Fix with scripts/generate.sh.
# The TypeScript check is skipped, with a line saying so, when npm is not installed.
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

if command -v npm >/dev/null; then
	(
		cd clients/typescript
		if [[ ! node_modules/.package-lock.json -nt package-lock.json ]]; then
			npm ci --no-audit --no-fund >/dev/null
		fi
		npx --no-install openapi-typescript ../../openapi.yaml --default-non-nullable false --output "$tmp/schema.ts" >/dev/null 2>&1
	)
	if ! diff -u clients/typescript/src/schema.ts "$tmp/schema.ts" >"$tmp/ts.diff"; then
		head -40 "$tmp/ts.diff" >&2
		echo "check-generated: clients/typescript/src/schema.ts is stale: run scripts/generate.sh" >&2
		stale=1
	fi
else
	echo "SKIP check-generated (TypeScript): npm is not installed"
fi
if ((stale)); then
	exit 1
fi
echo "check-generated: api/api.gen.go and clients/typescript/src/schema.ts match openapi.yaml"
