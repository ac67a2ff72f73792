#!/usr/bin/env bash
# Makes the base images the README's container commands use, where no image registry is reachable:
#
#   golang:1.26-bookworm  the Dockerfile's build stage: this machine's Go toolchain, CA certificates, a
#                         static busybox and the modules go.sum names (from this machine's module cache,
#                         the Go module proxy behind it), with GOPROXY=off;
#   redis:7               docker-compose.yml's Redis: this machine's redis-server and the libraries it links.
#
# An image that is already present, or that a registry serves, is left alone; a stand-in made here is
# labelled hir.local-image and is made again when go.sum changes. Where no engine answers and this runs
# as root, it starts `dockerd --iptables=false` (log: /var/tmp/hir-dockerd.log) and leaves it running.
#
# Needs: a docker CLI; for the Go image, go, a statically linked busybox (Debian: busybox-static) and
# /etc/ssl/certs/ca-certificates.crt; for Redis, redis-server (Debian: redis-server).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "local-images: $*" >&2; }
die() {
	say "$*"
	exit 1
}
go_image=${HIR_GO_IMAGE:-golang:1.26-bookworm}
redis_image=${HIR_REDIS_IMAGE:-redis:7}

command -v docker >/dev/null || die "no docker CLI (Debian: apt-get install docker.io docker-compose)"
# shellcheck source=lib/docker-engine.sh
source scripts/lib/docker-engine.sh
docker_engine || die "no container engine answers (start dockerd, or run this as root)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
label=hir.local-image
sum=$(sha256sum go.sum | cut -c1-16)

# needed IMAGE [STAMP]: whether IMAGE must be made here: absent and not pullable, or a stand-in made
# here from another STAMP.
needed() {
	local have
	if have=$(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$1" 2>/dev/null); then
		[[ -n $have && -n ${2:-} && $have != "$2" ]] && return 0
		say "$1: present"
		return 1
	fi
	if timeout 60 docker pull -q "$1" >/dev/null 2>&1; then
		say "$1: pulled"
		return 1
	fi
	return 0
}

if needed "$go_image" "go.sum:$sum"; then
	command -v go >/dev/null || die "$go_image: no registry serves it and go is not installed here"
	busybox=$(command -v busybox || true)
	[[ -n $busybox ]] && file -L "$busybox" | grep -q 'statically linked' ||
		die "$go_image: no registry serves it and no static busybox is here (Debian: apt-get install busybox-static)"
	[[ -r /etc/ssl/certs/ca-certificates.crt ]] || die "$go_image: no /etc/ssl/certs/ca-certificates.crt"
	root="$tmp/go"
	mkdir -p "$root/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/root" "$root/usr/local" "$root/go/pkg/mod/cache"
	cp "$busybox" "$root/bin/busybox"
	for c in sh mkdir echo chown chmod cp ls cat env rm mv ln grep sed tar; do ln -s busybox "$root/bin/$c"; done
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
	chmod 1777 "$root/tmp"
	echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
	# The modules this repository's build needs, fetched into a fresh cache: from this machine's
	# module cache where it has them, from the Go module proxy otherwise.
	hostcache=$(go env GOMODCACHE)/cache/download
	GOMODCACHE="$tmp/mod" GOFLAGS=-modcacherw GOPROXY="file://$hostcache,$(go env GOPROXY)" go mod download ||
		die "$go_image: the modules could not be fetched"
	mv "$tmp/mod/cache/download" "$root/go/pkg/mod/cache/download"
	chmod -R 0755 "$tmp/mod" && rm -rf "$tmp/mod"
	goroot=$(go env GOROOT)
	tar -C "$root" -cf "$tmp/go.tar" .
	tar -C "$(dirname "$goroot")" -rf "$tmp/go.tar" --transform "s|^$(basename "$goroot")|usr/local/go|" "$(basename "$goroot")"
	docker import \
		--change 'ENV PATH=/go/bin:/usr/local/go/bin:/bin HOME=/root GOPATH=/go GOPROXY=off GOTOOLCHAIN=local' \
		--change "LABEL $label=go.sum:$sum" --change 'WORKDIR /go' \
		"$tmp/go.tar" "$go_image" >/dev/null
	rm -f "$tmp/go.tar"
	say "$go_image: made here from $(go version | cut -d' ' -f3), busybox and the modules of go.sum ($sum)"
fi

if needed "$redis_image"; then
	bin=$(command -v redis-server || true)
	[[ -n $bin ]] || die "$redis_image: no registry serves it and redis-server is not installed here (Debian: apt-get install redis-server)"
	root="$tmp/redis"
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
		--change 'EXPOSE 6379' --change 'CMD ["redis-server"]' --change "LABEL $label=redis-server" - "$redis_image" >/dev/null
	say "$redis_image: made here from $bin ($(redis-server --version | cut -d' ' -f3))"
fi
