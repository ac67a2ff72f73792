#!/usr/bin/env bash
# bench-serve.sh: the serving benchmark (docs/benchmarks.md, "Serving"). It synthesises a world
# (2,000 users / 20,000 ads by default), imports it, trains a short model, starts `hir serve` and
# `hir ceiling` (the HTTP ceiling: the same router decoding the same request and answering k canned
# candidates) in the background on loopback, runs `hir bench` against the ceiling, known users and
# fresh users (never seen, with click context events) at each concurrency, and prints one table
# with the ratios of this run. The servers and the load generator share the machine's cores, so
# only ratios from one run compare.
#
#   scripts/bench-serve.sh                                   # defaults below
#   USERS=10000 ADS=100000 CLIENTS="4 32" DURATION=20s scripts/bench-serve.sh
#   DATA=/tmp/sp/data scripts/bench-serve.sh                 # reuse a trained data directory (world/ inside)
#   SERVE_BIN=/tmp/hir-old DATA=... scripts/bench-serve.sh   # serve with another build of hir (ceiling and bench from this one)
#   SERVE_FLAGS=--narrow-request-view scripts/bench-serve.sh # extra hir serve flags
set -euo pipefail
cd "$(dirname "$0")/.."

USERS=${USERS:-2000}
ADS=${ADS:-20000}
STEPS=${STEPS:-30}
DURATION=${DURATION:-10s}
CLIENTS=${CLIENTS:-4 32}
PORT=${PORT:-18480}
CEILING_PORT=${CEILING_PORT:-18479}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hir-bench-XXXXXX")}
mkdir -p "$WORK"
URL=http://127.0.0.1:$PORT
CEILING_URL=http://127.0.0.1:$CEILING_PORT
export GOMLX_BACKEND=${GOMLX_BACKEND:-go} GOMLX_NO_AUTO_INSTALL=${GOMLX_NO_AUTO_INSTALL:-1}

step() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

if [[ -z ${BIN:-} ]]; then
	BIN=$WORK/hir
	go build -o "$BIN" ./cmd/hir
fi
SERVE_BIN=${SERVE_BIN:-$BIN}
if [[ -z ${DATA:-} ]]; then
	DATA=$WORK/data
	step "synth $USERS users / $ADS ads into $DATA/world"
	"$BIN" synth --out "$DATA/world" --users "$USERS" --ads "$ADS" >"$WORK/synth.json"
	step "import"
	"$BIN" import --src "$DATA/world" --data "$DATA" >"$WORK/import.json" 2>"$WORK/import.log"
	step "train $STEPS steps"
	"$BIN" train --data "$DATA" --steps "$STEPS" >"$WORK/train.json" 2>"$WORK/train.log"
fi

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
step "serve on $URL (log: $WORK/serve.log), ceiling on $CEILING_URL"
# shellcheck disable=SC2086 # SERVE_FLAGS is a list of flags
"$SERVE_BIN" serve --data "$DATA" --addr "127.0.0.1:$PORT" --rate-limit -1 --log-level warn ${SERVE_FLAGS:-} 2>"$WORK/serve.log" &
pids+=($!)
"$BIN" ceiling --addr "127.0.0.1:$CEILING_PORT" >"$WORK/ceiling.log" 2>&1 &
pids+=($!)
start=$(date +%s)
until curl -sf "$URL/readyz" >/dev/null && curl -sf "$CEILING_URL/readyz" >/dev/null; do
	for p in "${pids[@]}"; do
		if ! kill -0 "$p" 2>/dev/null; then
			echo "bench-serve.sh: a server exited" >&2
			cat "$WORK/serve.log" "$WORK/ceiling.log" >&2
			exit 1
		fi
	done
	sleep 1
done
step "ready after $(($(date +%s) - start)) s (event-log replay + generation load)"

# bench NAME URL MODE CLIENTS: one hir bench run; its JSON report goes to $WORK/NAME-CLIENTS.json.
bench() {
	"$BIN" bench --addr "$2" --data "$DATA" --mode "$3" --duration "$DURATION" --concurrency "$4" >"$WORK/$1-$4.txt"
	head -1 "$WORK/$1-$4.txt" >"$WORK/$1-$4.json"
}
for c in $CLIENTS; do
	step "clients $c: ceiling, known, fresh ($DURATION each)"
	bench ceiling "$CEILING_URL" known "$c"
	bench known "$URL" known "$c"
	bench fresh "$URL" fresh "$c"
done

field() { jq -r "$2" "$WORK/$1.json"; }
echo "| clients | mode | requests | errors | queries/s | p50 ms | p99 ms | q/s ratio | p99 ratio |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in $CLIENTS; do
	cq=$(field "ceiling-$c" .qps)
	kq=$(field "known-$c" .qps)
	kp=$(field "known-$c" .latency_ms.p99)
	for name in ceiling known fresh; do
		f="$name-$c"
		q=$(field "$f" .qps)
		p99=$(field "$f" .latency_ms.p99)
		case $name in
		ceiling) qr="1.00 (ceiling)" pr="" ;;
		known) qr="$(awk -v a="$q" -v b="$cq" 'BEGIN{printf "%.2f of ceiling", a/b}')" pr="" ;;
		fresh)
			qr="$(awk -v a="$q" -v b="$kq" 'BEGIN{printf "%.2f of known", a/b}')"
			pr="$(awk -v a="$p99" -v b="$kp" 'BEGIN{printf "%.2fx known", a/b}')"
			;;
		esac
		printf '| %s | %s | %s | %s | %.1f | %.2f | %.2f | %s | %s |\n' "$c" "$name" "$(field "$f" .requests)" \
			"$(field "$f" .errors)" "$q" "$(field "$f" .latency_ms.p50)" "$p99" "$qr" "$pr"
	done
done
step "JSON reports: $WORK/{ceiling,known,fresh}-N.json; server log $WORK/serve.log"
