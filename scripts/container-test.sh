#!/usr/bin/env bash
# The container path, for real: builds the hir image from the Dockerfile, brings docker-compose.yml up
# (Redis, the init step, two replicas), checks that both replicas are healthy, answer the same retrieval,
# and share what one of them ingests (through Redis), then takes the stack down.
#
# Where no image registry is reachable, the base images are made locally: the Dockerfile's build stage
# runs in hir-go-builder:local (this machine's Go toolchain, CA certificates and a static busybox, via
# `docker import`), fed modules from this machine's module cache (served on loopback as a GOPROXY, with
# proxy.golang.org behind it), and Redis runs from hir-redis:local (this machine's redis-server and the
# libraries it links). Set HIR_GO_IMAGE / HIR_REDIS_IMAGE to use registry images instead.
#
# Exits 0 with a SKIP line when no container engine runs and none can be started, or HIR_SKIP_CONTAINERS
# is set (CI without Docker;
# the compose validation and the same topology with processes are Go tests: cmd/hir TestCompose*).
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
	echo "SKIP container-test: $*"
	exit 0
}
say() { echo "container-test: $*" >&2; }
[[ -z ${HIR_SKIP_CONTAINERS:-} ]] || skip "HIR_SKIP_CONTAINERS is set"

# A docker CLI that can use BuildKit: one with buildx, or a pre-23 client (DOCKER_BUILDKIT=1).
docker_cli=
for c in ${HIR_DOCKER:-} $(type -ap docker 2>/dev/null || true); do
	if "$c" buildx version >/dev/null 2>&1; then
		docker_cli=$c
		break
	fi
	v=$("$c" version --format '{{.Client.Version}}' 2>/dev/null || true)
	if [[ ${v%%.*} =~ ^[0-9]+$ ]] && ((${v%%.*} < 23)); then
		docker_cli=$c
		break
	fi
done
[[ -n $docker_cli ]] || skip "no docker CLI that can build with BuildKit (install docker.io, or buildx)"
docker() { DOCKER_BUILDKIT=1 "$docker_cli" "$@"; }

tmp=$(mktemp -d)
started_dockerd=
proxy_pid=
project="hir-ci-$$"
compose=()
cleanup() {
	set +e
	if ((${#compose[@]})); then
		"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1
	fi
	[[ -n $proxy_pid ]] && kill "$proxy_pid" 2>/dev/null
	if [[ -n $started_dockerd ]]; then
		kill "$started_dockerd" 2>/dev/null
		wait "$started_dockerd" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

if ! docker info >/dev/null 2>&1; then
	if [[ $(id -u) == 0 ]] && command -v dockerd >/dev/null; then
		say "no engine answers: starting dockerd --iptables=false"
		dockerd --iptables=false >"$tmp/dockerd.log" 2>&1 &
		started_dockerd=$!
		for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
	fi
	docker info >/dev/null 2>&1 || skip "no container engine runs here and none could be started"
fi
if docker compose version >/dev/null 2>&1; then
	compose=(docker compose -p "$project" -f docker-compose.yml)
elif command -v docker-compose >/dev/null; then
	compose=(env DOCKER_HOST="${DOCKER_HOST:-}" docker-compose -p "$project" -f docker-compose.yml)
else
	skip "neither 'docker compose' nor docker-compose is installed"
fi
start=$(date +%s)

# The build stage's image.
go_image=${HIR_GO_IMAGE:-}
if [[ -z $go_image ]]; then
	busybox=$(command -v busybox || true)
	if command -v go >/dev/null && [[ -n $busybox ]] && file -L "$busybox" | grep -q 'statically linked' && [[ -r /etc/ssl/certs/ca-certificates.crt ]]; then
		root="$tmp/builder"
		mkdir -p "$root/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/root" "$root/usr/local"
		cp "$busybox" "$root/bin/busybox"
		for c in sh mkdir echo chown chmod cp ls cat env rm; do ln -s busybox "$root/bin/$c"; done
		cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
		chmod 1777 "$root/tmp"
		echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
		goroot=$(go env GOROOT)
		tar -C "$root" -cf "$tmp/builder.tar" .
		tar -C "$(dirname "$goroot")" -rf "$tmp/builder.tar" --transform "s|^$(basename "$goroot")|usr/local/go|" "$(basename "$goroot")"
		docker import --change 'ENV PATH=/usr/local/go/bin:/bin HOME=/root' "$tmp/builder.tar" hir-go-builder:local >/dev/null
		rm -rf "$root" "$tmp/builder.tar"
		go_image=hir-go-builder:local
		say "made the build image hir-go-builder:local from $(go version | cut -d' ' -f3) and busybox"
	else
		go_image=golang:1.26-bookworm
		if ! docker image inspect "$go_image" >/dev/null 2>&1 && ! docker pull -q "$go_image" >/dev/null 2>&1; then
			echo "SKIP container-test: no registry answers for $go_image and no local build image can be made (needs go and a statically linked busybox: apt-get install busybox-static); the image was not tested"
			exit 0
		fi
	fi
fi

# Modules: this machine's module cache on loopback, the public proxy behind it.
goproxy=${HIR_GOPROXY:-}
if [[ -z $goproxy ]] && command -v go >/dev/null && command -v python3 >/dev/null && [[ -d $(go env GOMODCACHE)/cache/download ]]; then
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	python3 -m http.server "$port" --bind 127.0.0.1 --directory "$(go env GOMODCACHE)/cache/download" >/dev/null 2>&1 &
	proxy_pid=$!
	goproxy="http://127.0.0.1:$port,https://proxy.golang.org"
fi
goproxy=${goproxy:-https://proxy.golang.org,direct}

say "building hir:local (build stage $go_image)"
docker build --network host --target runtime --build-arg GO_IMAGE="$go_image" --build-arg GOPROXY="$goproxy" \
	-t hir:local . >"$tmp/build.log" 2>&1 || { tail -40 "$tmp/build.log" >&2; say "image build failed"; exit 1; }

redis_image=${HIR_REDIS_IMAGE:-}
if [[ -z $redis_image ]]; then
	if command -v redis-server >/dev/null; then
		root="$tmp/redis"
		bin=$(command -v redis-server)
		mkdir -p "$root/usr/bin" "$root/etc" "$root/data" "$root/tmp"
		cp -L "$bin" "$root/usr/bin/redis-server"
		for lib in $(ldd "$bin" | awk '/=>/ {print $3} /^\t\/.*ld-linux/ {print $1}'); do
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done
		echo 'redis:x:999:999::/data:/nonexistent' >"$root/etc/passwd"
		chown 999:999 "$root/data"
		chmod 1777 "$root/tmp"
		tar -C "$root" -c . | docker import --change 'ENV PATH=/usr/bin' --change 'USER 999:999' --change 'WORKDIR /data' \
			--change 'EXPOSE 6379' --change 'CMD ["redis-server"]' - hir-redis:local >/dev/null
		rm -rf "$root"
		redis_image=hir-redis:local
		say "made hir-redis:local from $bin ($(redis-server --version | cut -d' ' -f3))"
	else
		redis_image=redis:7
	fi
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export HIR_IMAGE=hir:local HIR_REDIS_IMAGE="$redis_image" HIR_USERS=80 HIR_ADS=120 HIR_STEPS=3
export HIR_API_KEY="ci-key-$RANDOM$RANDOM" HIR_PORT_1=$(free_port) HIR_PORT_2=$(free_port)
say "docker compose up (project $project, replicas on 127.0.0.1:$HIR_PORT_1 and :$HIR_PORT_2)"
"${compose[@]}" up -d --no-build >"$tmp/up.log" 2>&1 || { cat "$tmp/up.log" >&2; "${compose[@]}" logs --tail 40 >&2; exit 1; }

r1="http://127.0.0.1:$HIR_PORT_1" r2="http://127.0.0.1:$HIR_PORT_2"
ready=
for _ in $(seq 150); do
	if curl -sf "$r1/readyz" >/dev/null 2>&1 && curl -sf "$r2/readyz" >/dev/null 2>&1; then
		ready=1
		break
	fi
	sleep 2
done
[[ -n $ready ]] || { "${compose[@]}" logs --tail 60 >&2; say "the replicas were not ready within 300 s"; exit 1; }
say "both replicas ready after $(($(date +%s) - start)) s"

fail() {
	"${compose[@]}" logs --tail 40 >&2
	say "FAIL: $*"
	exit 1
}
retrieve() { curl -sS -X POST "$1/v1/retrieve" -H 'Content-Type: application/json' -d "$2"; }
ids() { grep -o '"id":"[^"]*"' | tr '\n' ' '; }

q='{"user":{"type":"user","id":"u1"},"k":10}'
a=$(retrieve "$r1" "$q") b=$(retrieve "$r2" "$q")
[[ $a == *'"candidates":[{'* ]] || fail "replica 1 answered $a"
[[ $(ids <<<"$a") == "$(ids <<<"$b")" ]] || fail "the replicas answer differently:\n$a\n$b"
say "both replicas answer the same retrieval: $(ids <<<"$a" | cut -c1-80)..."

# What one replica ingests, the other serves (Redis stream).
ad="ci-ad-$RANDOM"
curl -sSf -X POST "$r1/v1/entities" -H "Authorization: Bearer $HIR_API_KEY" -H 'Content-Type: application/json' \
	-d '{"entities":[{"type":"ad","id":"'"$ad"'","text":"container test ad","attrs":{"status":"active"}}]}' >/dev/null
curl -sSf -X POST "$r1/v1/events" -H "Authorization: Bearer $HIR_API_KEY" -H 'Content-Type: application/json' \
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
	id=$("${compose[@]}" ps -q "$svc")
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
echo "container-test: ok in $(($(date +%s) - start)) s"
