#!/usr/bin/env bash
# The README's container section, run as written: scripts/local-images.sh (base images made here where no
# registry is reachable), docker build, docker compose up (Redis, the init step, two replicas), the curl
# calls, docker compose down. Each answer is checked: both replicas ready, the same retrieval from both,
# the click stored. Then, before the stack goes down: what one replica ingests the other serves (Redis),
# both containers report healthy, and the image runs as a non-root user.
#
# The block is read from README.md, so the test and the README cannot drift apart. Where Docker's compose
# plugin is missing, `docker compose` runs as `docker-compose` (Debian's package), as the README says.
# It needs the README's ports (8081, 8082) free and no project named hir running.
#
# Exits 0 with a SKIP line when no docker CLI is installed, no container engine runs and none can be
# started, or HIR_SKIP_CONTAINERS is set (the compose validation and the same topology with processes are
# Go tests: cmd/hir TestCompose*).
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
	echo "SKIP container-test: $*"
	exit 0
}
say() { echo "container-test: $*" >&2; }
[[ -z ${HIR_SKIP_CONTAINERS:-} ]] || skip "HIR_SKIP_CONTAINERS is set"
command -v docker >/dev/null || skip "no docker CLI (Debian: apt-get install docker.io docker-compose)"

tmp=$(mktemp -d)
compose_down=
cleanup() {
	set +e
	[[ -n $compose_down ]] && eval "$compose_down" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=lib/docker-engine.sh
source scripts/lib/docker-engine.sh
docker_engine || skip "no container engine runs here and none could be started"
plugin=
docker compose version >/dev/null 2>&1 && plugin=1
[[ -n $plugin ]] || command -v docker-compose >/dev/null || skip "neither 'docker compose' nor docker-compose is installed"

# The README's block, continuation lines joined.
block=$(awk '/^## Containers$/ {on=1} on && /^```sh$/ {code=1; next} code && /^```$/ {exit} code' README.md | sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
[[ -n $block ]] || { say "README.md has no sh block under '## Containers'"; exit 1; }
count() { grep -c -- "$1" <<<"$block" || true; }
for want in 'scripts/local-images.sh:1' 'docker build -t hir:local .:1' 'docker compose -p hir up -d:1' '/readyz:1' \
	'/v1/retrieve:2' '/v1/events:1' 'docker compose -p hir down -v:1'; do
	[[ $(count "${want%:*}") == "${want##*:}" ]] || { say "README's container block should hold ${want##*:} line(s) with '${want%:*}':"$'\n'"$block"; exit 1; }
done
for port in 8081 8082; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		say "port $port is taken: the README's commands need 8081 and 8082 free"
		exit 1
	fi
done
[[ -z $(docker ps -q --filter label=com.docker.compose.project=hir) ]] || { say "a compose project named hir already runs; take it down first"; exit 1; }

# as_written LINE: the line as the README writes it, with docker-compose where the plugin is missing.
as_written() {
	local l=$1
	[[ -z $plugin ]] && l=${l//docker compose /docker-compose }
	printf '%s' "$l"
}
start=$(date +%s)
retrieved=()
while IFS= read -r line; do
	cmd=$(as_written "$line")
	case $line in
	*'docker compose -p hir down'*)
		compose_down=$cmd # run last, after the checks below
		continue ;;
	*'docker compose -p hir up'*)
		compose_down=$(as_written 'docker compose -p hir down -v --remove-orphans')
		;;
	esac
	say "\$ ${cmd:0:110}"
	case $line in
	*/readyz*)
		out=
		for _ in $(seq 150); do
			out=$(bash -c "$cmd" 2>&1 || true)
			[[ $(grep -o '"status":"ready"' <<<"$out" | wc -l) == 2 ]] && break
			sleep 2
		done
		[[ $(grep -o '"status":"ready"' <<<"$out" | wc -l) == 2 ]] || { say "FAIL: the replicas were not ready within 300 s: $out"; exit 1; }
		say "both replicas ready after $(($(date +%s) - start)) s" ;;
	*/v1/retrieve*)
		out=$(bash -c "$cmd")
		[[ $out == *'"candidates":[{'* ]] || { say "FAIL: retrieve answered $out"; exit 1; }
		retrieved+=("$out") ;;
	*/v1/events*)
		out=$(bash -c "$cmd")
		[[ $out == *'"events":1'* ]] || { say "FAIL: the click was not stored: $out"; exit 1; } ;;
	*)
		bash -c "$cmd" >"$tmp/step.log" 2>&1 || { tail -40 "$tmp/step.log" >&2; say "FAIL: $cmd"; exit 1; } ;;
	esac
done <<<"$block"

ids() { grep -o '"id":"[^"]*"' | tr '\n' ' '; }
[[ $(ids <<<"${retrieved[0]}") == "$(ids <<<"${retrieved[1]}")" ]] || { say "FAIL: the replicas answer differently:"$'\n'"${retrieved[0]}"$'\n'"${retrieved[1]}"; exit 1; }
say "both replicas answer the same retrieval: $(ids <<<"${retrieved[0]}" | cut -c1-80)..."

fail() {
	bash -c "$(as_written 'docker compose -p hir logs --tail 40')" >&2
	say "FAIL: $*"
	exit 1
}
r1=http://127.0.0.1:8081 r2=http://127.0.0.1:8082 key=compose-demo-key
retrieve() { curl -sS -X POST "$1/v1/retrieve" -H 'Content-Type: application/json' -d "$2"; }

# What one replica ingests, the other serves (Redis stream).
ad="ci-ad-$RANDOM"
curl -sSf -X POST "$r1/v1/entities" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
	-d '{"entities":[{"type":"ad","id":"'"$ad"'","text":"container test ad","attrs":{"status":"active"}}]}' >/dev/null
curl -sSf -X POST "$r1/v1/events" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
	-d '{"events":[{"id":"'"$ad"'-cp","src":{"type":"ad","id":"'"$ad"'"},"dst":{"type":"campaign","id":"cp1"},"type":"in_campaign","ts":'"$(date +%s000)"'}]}' >/dev/null
seen=
for _ in $(seq 30); do
	if retrieve "$r2" '{"user":{"type":"user","id":"u1"},"k":200,"exclude_seen":false,"filter":{"attr":"campaign","eq":"cp1"}}' | grep -q "\"$ad\""; then
		seen=1
		break
	fi
	sleep 1
done
[[ -n $seen ]] || fail "replica 2 does not serve the ad ingested by replica 1"
say "replica 2 serves the ad ingested through replica 1"

for svc in hir-r1 hir-r2; do
	id=$(bash -c "$(as_written "docker compose -p hir ps -q $svc")")
	health=
	for _ in $(seq 30); do
		health=$(docker inspect -f '{{.State.Health.Status}}' "$id")
		[[ $health == healthy ]] && break
		sleep 2
	done
	[[ $health == healthy ]] || fail "$svc health check: $health"
done
user=$(docker inspect -f '{{.Config.User}}' hir:local)
size=$(docker image inspect -f '{{.Size}}' hir:local)
say "both replicas healthy; image hir:local runs as $user, $((size / 1024 / 1024)) MiB"

say "\$ $compose_down"
bash -c "$compose_down" >"$tmp/step.log" 2>&1 || { tail -20 "$tmp/step.log" >&2; say "FAIL: $compose_down"; exit 1; }
compose_down=
[[ -z $(docker ps -aq --filter label=com.docker.compose.project=hir) ]] || { say "FAIL: containers of project hir remain after down"; exit 1; }
echo "container-test: ok in $(($(date +%s) - start)) s"
