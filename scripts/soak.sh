#!/usr/bin/env bash
# soak.sh DURATION: a soak test of one `hir serve` on loopback. It synthesises
# and imports a small world, trains a first model, serves it with a
# background trainer that swaps in a new model every TRAIN_EVERY, and for
# DURATION runs retrieval (`hir bench`, CONCURRENCY clients) and ingestion
# (a curl loop posting batches of fresh events) at once. It prints the
# requests, errors (must be 0), retrieval p50/p99, the training rounds by
# outcome (published ones are model swaps), the model versions left on
# disk, and the server's RSS and Go heap in use at start and end. Exit
# status 1 when any request failed.
#
#   scripts/soak.sh 10m            # the issue's figure
#   TRAIN_EVERY=30s CONCURRENCY=8 scripts/soak.sh 2m
set -euo pipefail
cd "$(dirname "$0")/.."

duration="${1:?usage: scripts/soak.sh DURATION (e.g. 10m)}"
train_every="${TRAIN_EVERY:-1m}"
concurrency="${CONCURRENCY:-4}"
port="${PORT:-18431}"
export GOMLX_BACKEND="${GOMLX_BACKEND:-go}" GOMLX_NO_AUTO_INSTALL=1

work=$(mktemp -d /tmp/hir-soak-XXXXXX)
server_pid=""
cleanup() {
	[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/hir" ./cmd/hir
hir="$work/hir"
data="$work/data"
key="soak-key-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
"$hir" synth --out "$data/world" --users "${USERS:-1000}" --ads "${ADS:-2000}" --seed 7 >/dev/null
"$hir" import --format jsonl --src "$data/world" --data "$data" >/dev/null
# Small rounds (STEPS steps of PAIRS engagement events) so that models swap
# often: the soak is about serving through swaps, not about model quality.
steps="${STEPS:-20}" pairs="${PAIRS:-16}"
"$hir" train --data "$data" --steps "$steps" --pairs "$pairs" >/dev/null 2>&1

"$hir" serve --data "$data" --addr "127.0.0.1:$port" --api-key "$key" --train-every "$train_every" \
	--train-steps "$steps" --train-pairs "$pairs" --rate-limit -1 --log-level warn 2>"$work/serve.log" &
# (warn: no access log; the rounds are counted from /metrics)
server_pid=$!
for _ in $(seq 600); do
	curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
	kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
	sleep 0.5
done
rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$server_pid/status"; }
version() { curl -fsS "http://127.0.0.1:$port/v1/model" | sed -n 's/.*"version":"\([^"]*\)".*/\1/p'; }
metric() { curl -fsS "http://127.0.0.1:$port/metrics" | awk -v m="$1" 'index($0, m) == 1 {s += $NF} END {printf "%.0f", s}'; }
heap() { echo "$(($(metric go_memstats_heap_inuse_bytes) / 1048576)) MiB"; }
rss_start=$(rss)
heap_start=$(heap)
version_start=$(version)
echo "soak: serving $version_start on 127.0.0.1:$port, RSS $rss_start; $duration of retrieval x$concurrency + ingestion, training every $train_every"

# Ingestion: batches of 20 fresh events for the world's users and ads.
users=($(head -c 2000000 "$data/world/entities.jsonl" | grep -o '"type":"user","id":"[^"]*"' | sed 's/.*"id":"//; s/"$//' | head -200 || true))
ads=($(head -c 2000000 "$data/world/entities.jsonl" | grep -o '"type":"ad","id":"[^"]*"' | sed 's/.*"id":"//; s/"$//' | head -200 || true))
ingest() {
	local end=$(($(date +%s) + $1)) n=0 errs=0 i
	while (($(date +%s) < end)); do
		local evs="" ts=$(($(date +%s) * 1000))
		for i in $(seq 20); do
			evs+="${evs:+,}{\"id\":\"soak-$n-$i\",\"src\":{\"type\":\"user\",\"id\":\"${users[RANDOM % ${#users[@]}]}\"},\"dst\":{\"type\":\"ad\",\"id\":\"${ads[RANDOM % ${#ads[@]}]}\"},\"type\":\"click\",\"ts\":$ts}"
		done
		code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
			--data "{\"events\":[$evs]}" "http://127.0.0.1:$port/v1/events" || echo 000)
		[[ "$code" == 200 ]] || errs=$((errs + 1))
		n=$((n + 1))
	done
	echo "$n $errs"
}
secs=$(python3 -c "import re,sys;s='$duration';m={'s':1,'m':60,'h':3600};print(sum(int(v)*m[u] for v,u in re.findall(r'(\d+)([smh])',s)))")
ingest "$secs" >"$work/ingest.out" &
ingest_pid=$!
"$hir" bench --addr "http://127.0.0.1:$port" --data "$data/world" --duration "$duration" --concurrency "$concurrency" \
	--api-key "$key" >"$work/bench.out" 2>"$work/bench.err" || true
wait "$ingest_pid"
read -r ingested ingest_errors <"$work/ingest.out"
rss_end=$(rss)
heap_end=$(heap)
version_end=$(version)
rounds=""
for outcome in published rejected failed; do
	rounds+="${rounds:+, }$outcome $(metric "hir_trainer_runs_total{outcome=\"$outcome\"")"
done
versions_on_disk=$(ls "$data/models" | grep -c '^v' || true)
bench=$(head -1 "$work/bench.out")
requests=$(sed -n 's/.*"requests":\([0-9]*\).*/\1/p' <<<"$bench")
errors=$(sed -n 's/.*"errors":\([0-9]*\).*/\1/p' <<<"$bench")
p50=$(sed -n 's/.*"p50":\([0-9.]*\).*/\1/p' <<<"$bench")
p99=$(sed -n 's/.*"p99":\([0-9.]*\).*/\1/p' <<<"$bench")
server_errors=$(grep -c 'level=ERROR' "$work/serve.log" || true)
echo "soak: duration $duration"
echo "soak: retrieve requests ${requests:-0}, errors ${errors:-?}, p50 ${p50:-?} ms, p99 ${p99:-?} ms"
echo "soak: ingest batches $ingested (20 events each), errors $ingest_errors"
echo "soak: model $version_start -> $version_end; training rounds: $rounds; model versions on disk $versions_on_disk; server ERROR lines $server_errors"
echo "soak: RSS start $rss_start, end $rss_end; Go heap in use start $heap_start, end $heap_end"
if [[ "${errors:-1}" != 0 || "$ingest_errors" != 0 || "$server_errors" != 0 ]]; then
	echo "soak: FAILED"; cat "$work/bench.err" >&2; grep 'level=ERROR' "$work/serve.log" | head -5 >&2
	exit 1
fi
echo "soak: OK"
