#!/usr/bin/env bash
# bench-serve.sh: the serving benchmark of the README ("Serving"). It synthesises a world
# (10k users / 100k ads by default), imports it, trains a short model, starts `hir serve` in the
# background on loopback, runs `hir bench` for known and for fresh users, and stops the server.
# The server and the load generator share the machine's cores.
#
#   scripts/bench-serve.sh                      # defaults below
#   USERS=2000 ADS=5000 DURATION=10s scripts/bench-serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."

USERS=${USERS:-10000}
ADS=${ADS:-100000}
STEPS=${STEPS:-30}
DURATION=${DURATION:-20s}
CONCURRENCY=${CONCURRENCY:-4}
PORT=${PORT:-18480}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hir-bench-XXXXXX")}
DATA=$WORK/data
URL=http://127.0.0.1:$PORT

step() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

go build -o "$WORK/hir" ./cmd/hir
step "synth $USERS users / $ADS ads into $DATA/world"
"$WORK/hir" synth --out "$DATA/world" --users "$USERS" --ads "$ADS" >"$WORK/synth.json"
step "import"
"$WORK/hir" import --src "$DATA/world" --data "$DATA" >"$WORK/import.json" 2>"$WORK/import.log"
step "train $STEPS steps"
"$WORK/hir" train --data "$DATA" --steps "$STEPS" >"$WORK/train.json" 2>"$WORK/train.log"

step "serve on $URL (log: $WORK/serve.log)"
"$WORK/hir" serve --data "$DATA" --addr "127.0.0.1:$PORT" --rate-limit -1 --log-level warn 2>"$WORK/serve.log" &
server=$!
trap 'kill -TERM $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
start=$(date +%s)
until curl -sf "$URL/readyz" >/dev/null; do
	if ! kill -0 "$server" 2>/dev/null; then
		echo "bench-serve.sh: the server exited" >&2
		cat "$WORK/serve.log" >&2
		exit 1
	fi
	sleep 2
done
step "ready after $(($(date +%s) - start)) s (event-log replay + snapshot build)"

echo "| mode | concurrency | requests | errors | queries/s | p50 ms | p99 ms |"
echo "|---|---|---|---|---|---|---|"
for mode in known fresh; do
	"$WORK/hir" bench --addr "$URL" --data "$DATA" --mode "$mode" --duration "$DURATION" \
		--concurrency "$CONCURRENCY" >"$WORK/bench-$mode.txt"
	head -1 "$WORK/bench-$mode.txt" >"$WORK/bench-$mode.json"
	tail -1 "$WORK/bench-$mode.txt"
done
step "JSON reports: $WORK/bench-known.json $WORK/bench-fresh.json"
