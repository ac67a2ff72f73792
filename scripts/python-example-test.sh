#!/usr/bin/env bash
# The Python example (examples/python/hir_example.py, requests) against a live `hir serve` on a small
# trained world: it must ingest, retrieve with a filter and explanations, and print the answer.
# Exits 0 with a SKIP line when python3 or its requests module is not installed
# (Debian: apt-get install python3-requests).
set -euo pipefail
cd "$(dirname "$0")/.."

py=${HIR_PYTHON:-python3}
if ! command -v "$py" >/dev/null || ! "$py" -c 'import requests' 2>/dev/null; then
	echo "SKIP python-example-test: $py with requests is not installed (apt-get install python3-requests); the Python example was not run"
	exit 0
fi
source scripts/lib/tiny-server.sh
tiny_server python-example-test 6

out=$(HIR_URL="$url" HIR_API_KEY="$key" "$py" examples/python/hir_example.py u1)
echo "$out"
for want in "events: {" "'duplicates': 1" "refused as expected: 400" "retrieve for u1" "score "; do
	if [[ $out != *"$want"* ]]; then
		echo "python-example-test: the output lacks \"$want\"" >&2
		exit 1
	fi
done
echo "python-example-test: ok"
