# Sourced by the tests that need a live `hir serve` (ts-client-test.sh, ui-test.sh, rest-eval-check.sh).
#
#   tiny_server NAME STEPS [hir serve flags...]
#
# builds hir into a temporary directory ($tmp, removed on exit with the server stopped), synthesises,
# imports and trains (STEPS steps) a small world in seconds, serves it on a free loopback port with a
# fresh API key and the extra flags, and waits until it is ready. It sets url and key; NAME prefixes
# its messages.
#
#   await_server NAME PID ADDR_FILE LOG [PROBE]
#
# waits up to 120 s until the `hir serve --addr-file ADDR_FILE` of process PID has written its address
# and answers PROBE (default /readyz; /healthz for a server without a model yet), and sets url. It fails, printing LOG, when the process exits
# first. Nothing is read before the server has written it whole: ADDR_FILE appears by a rename, so
# neither a missing file nor a half-written one can end the wait early.
await_server() {
	local name=$1 pid=$2 addr_file=$3 log=$4 probe=${5:-/readyz} addr
	url=
	for _ in $(seq 600); do
		if [[ -s $addr_file ]]; then
			addr=$(<"$addr_file")
			if curl -sf "http://$addr$probe" >/dev/null 2>&1; then
				url="http://$addr"
				return 0
			fi
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$log" >&2 2>/dev/null || true
			echo "$name: hir serve exited" >&2
			return 1
		fi
		sleep 0.2
	done
	cat "$log" >&2 2>/dev/null || true
	echo "$name: hir serve not ready within 120 s" >&2
	return 1
}

tiny_server() {
	local name=$1 steps=$2
	shift 2
	export GOMLX_BACKEND="${GOMLX_BACKEND:-go}" GOMLX_NO_AUTO_INSTALL=1
	tmp=$(mktemp -d)
	pid=
	trap 'if [[ -n $pid ]]; then kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; fi; rm -rf "$tmp"' EXIT

	go build -o "$tmp/hir" ./cmd/hir
	"$tmp/hir" synth --out "$tmp/world" --users 80 --ads 120 --coarse 2 --mid 4 --fine 8 --events-per-user 40 --seed 3 >/dev/null
	"$tmp/hir" import --format jsonl --src "$tmp/world" --data "$tmp/data" >/dev/null
	"$tmp/hir" train --data "$tmp/data" --steps "$steps" --pairs 8 >/dev/null 2>"$tmp/train.log" || { cat "$tmp/train.log" >&2; exit 1; }

	key="$name-$RANDOM$RANDOM$RANDOM"
	"$tmp/hir" serve --data "$tmp/data" --addr 127.0.0.1:0 --addr-file "$tmp/addr" --api-key "$key" --train-steps 6 "$@" 2>"$tmp/serve.log" &
	pid=$!
	await_server "$name" "$pid" "$tmp/addr" "$tmp/serve.log" || exit 1
}
