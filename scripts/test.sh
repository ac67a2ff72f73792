#!/usr/bin/env bash
# The project's test command (README, .ci/run): vet, the generated clients' freshness, every
# package's tests, the TypeScript client's test against a live server and from its packed tarball
# (skipped without node), the Python example against a live server (skipped without python3-requests), the
# interest explorer's browser test (skipped without Chromium or node), and the container path (skipped without a container engine, or with HIR_SKIP_CONTAINERS=1).
# Tests that use Redis need one at ${HIR_REDIS_ADDR:-127.0.0.1:6379}; start one when none answers.
set -euo pipefail
cd "$(dirname "$0")/.."

export GOMLX_BACKEND="${GOMLX_BACKEND:-go}"
export GOMLX_NO_AUTO_INSTALL=1
export HIR_REDIS_ADDR="${HIR_REDIS_ADDR:-127.0.0.1:6379}"
export HIR_SHARED_DATA="${HIR_SHARED_DATA:-$(cd .. && pwd)/shared/data}"

redis_up() {
	local host=${HIR_REDIS_ADDR%:*} port=${HIR_REDIS_ADDR##*:}
	(exec 3<>"/dev/tcp/$host/$port" && printf 'PING\r\n' >&3 && timeout 2 head -c 5 <&3 | grep -q PONG) 2>/dev/null
}
if ! redis_up; then
	if ! command -v redis-server >/dev/null; then
		echo "test.sh: no Redis at $HIR_REDIS_ADDR; installing redis-server" >&2
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >&2
	fi
	echo "test.sh: starting redis-server on ${HIR_REDIS_ADDR##*:}" >&2
	redis-server --daemonize yes --bind 127.0.0.1 --port "${HIR_REDIS_ADDR##*:}" --save "" --appendonly no >/dev/null
	for _ in $(seq 50); do redis_up && break; sleep 0.1; done
	redis_up || { echo "test.sh: Redis did not come up" >&2; exit 1; }
fi

go build ./...
go vet ./...
bash scripts/check-generated.sh
# The layering (docs/develop.md): the HTTP layer reads the served state only through
# the retrieval engine, so serving imports none of the packages below it.
if below=$(go list -f '{{join .Imports "\n"}}' ./serving | grep -E '^github.com/hir-ads/hir/(index|model|rank)$'); then
	echo "test.sh: serving imports $below; read through retrieval.Engine instead (docs/develop.md)" >&2
	exit 1
fi
go test -count=1 -timeout 20m "$@" ./...
(cd tools/curve && go vet ./... && go test -count=1 ./...) # the curve plotter, a module of its own
# A bounded fuzz run of the decoders of untrusted input: HIR_FUZZTIME per
# target (default 3000x: an execution count, because a duration-based
# -fuzztime can fail with a spurious "context deadline exceeded" at its end
# on Go 1.26, golang/go#75804; 10 targets, a few seconds each plus the
# instrumented builds, which the build cache keeps); HIR_FUZZTIME=0 skips it.
fuzztime="${HIR_FUZZTIME:-3000x}"
if [[ "$fuzztime" != "0" && "$fuzztime" != "0s" && "$fuzztime" != "0x" ]]; then
	for target in \
		./eventlog:FuzzDecodeBatch ./eventlog:FuzzSegment ./graph:FuzzReadCheckpoint \
		./dataset:FuzzReadJSONL \
		./index:FuzzReadSnapshot ./index:FuzzParseFilter \
		./serving:FuzzDecodeEvents ./serving:FuzzDecodeEntities ./serving:FuzzDecodeRetrieve \
		./retrieval:FuzzDecodeEmbeddings ./retrieval:FuzzDecodeTextHashes ./serving/cluster:FuzzVectorRoundTrip; do
		pkg=${target%%:*} fn=${target##*:}
		echo "test.sh: fuzz $pkg $fn for $fuzztime" >&2
		go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$fuzztime" "$pkg"
	done
fi
[ "${HIR_SKIP_REST_EVAL:-}" = 1 ] || scripts/rest-eval-check.sh # the served path vs the evaluated one (~2 min)
bash scripts/ts-client-test.sh
bash scripts/python-example-test.sh
bash scripts/ui-test.sh
bash scripts/container-test.sh
