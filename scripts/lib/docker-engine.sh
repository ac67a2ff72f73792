# shellcheck shell=bash
# Sourced by scripts/local-images.sh and scripts/container-test.sh.
#
# docker_engine: succeeds when a container engine answers the docker CLI. Where none does and this
# runs as root with dockerd installed, it starts `dockerd --iptables=false` (log
# /var/tmp/hir-dockerd.log), leaves it running, and waits up to 30 s for it.
docker_engine() {
	docker info >/dev/null 2>&1 && return 0
	if [[ $(id -u) == 0 ]] && command -v dockerd >/dev/null; then
		echo "no container engine answers: starting dockerd --iptables=false (log /var/tmp/hir-dockerd.log)" >&2
		nohup dockerd --iptables=false >/var/tmp/hir-dockerd.log 2>&1 &
		for _ in $(seq 60); do docker info >/dev/null 2>&1 && return 0; sleep 0.5; done
	fi
	docker info >/dev/null 2>&1
}
