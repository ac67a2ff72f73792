# HIR container image. Needs BuildKit (the default builder since Docker 23; DOCKER_BUILDKIT=1 before):
# it skips the stages a target does not need and keeps Go's caches between builds.
#
#   docker build -t hir .                      # default target "runtime": static binary, pure-Go backend
#   docker build --target runtime-xla -t hir:xla --build-arg XLA_BASE=... .   # CUDA/XLA (see below)
#
# Build arguments:
#   GO_IMAGE  the build stage's image: any image with Go >= 1.26 and a POSIX sh (default golang:1.26-bookworm;
#             scripts/container-test.sh passes a locally made one where no registry is reachable).
#   GOPROXY   the Go module proxy the build stage downloads modules from.
#   XLA_BASE  runtime-xla's base image: glibc, the CUDA runtime and a PJRT plugin (see runtime-xla).
ARG GO_IMAGE=golang:1.26-bookworm
ARG XLA_BASE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

FROM ${GO_IMAGE} AS build
ARG GOPROXY=https://proxy.golang.org,direct
ENV GOPROXY=${GOPROXY} GOFLAGS=-buildvcs=false GOMODCACHE=/go/pkg/mod GOCACHE=/root/.cache/go-build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Pure Go (no cgo, no XLA): a static binary that runs FROM scratch.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -tags noxla -trimpath -ldflags="-s -w" -o /out/hir ./cmd/hir
# What a scratch image lacks: a non-root user, a data directory it owns, a /tmp.
RUN mkdir -p /out/etc /out/data /out/tmp \
 && echo 'hir:x:65532:65532:hir:/data:/nonexistent' > /out/etc/passwd \
 && echo 'hir:x:65532:' > /out/etc/group \
 && chown 65532:65532 /out/data && chmod 1777 /out/tmp

# The cgo build for runtime-xla: the same binary with the XLA backend linked in (the PJRT plugin is loaded at run time).
FROM build AS build-xla
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/hir-xla ./cmd/hir

# runtime-xla: the cgo binary on a CUDA base with a PJRT plugin, for training on a GPU.
# Not built by CI: it needs a registry for XLA_BASE (an image with CUDA and cuDNN) and the CUDA PJRT plugin
# (e.g. the pjrt_c_api_cuda_plugin.so of the jax-cuda PJRT packages) copied or installed at
# /opt/pjrt/pjrt_c_api_cuda_plugin.so; run it with `docker run --gpus all`.
FROM ${XLA_BASE} AS runtime-xla
RUN groupadd -g 65532 hir && useradd -u 65532 -g 65532 -d /data -M -s /usr/sbin/nologin hir
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build-xla /out/hir-xla /hir
ENV GOMLX_BACKEND=xla:/opt/pjrt/pjrt_c_api_cuda_plugin.so GOMLX_NO_AUTO_INSTALL=1
USER 65532:65532
WORKDIR /data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=300s --retries=3 CMD ["/hir", "healthcheck"]
ENTRYPOINT ["/hir"]
CMD ["serve", "--data", "/data", "--addr", ":8080"]

# runtime: the default image (the last stage, so a plain `docker build .` makes it). Only the static binary;
# pure-Go GoMLX backend.
FROM scratch AS runtime
COPY --from=build /out/etc/ /etc/
COPY --from=build /out/tmp /tmp
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/hir /hir
ENV GOMLX_BACKEND=go GOMLX_NO_AUTO_INSTALL=1 TMPDIR=/tmp
USER 65532:65532
WORKDIR /data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 CMD ["/hir", "healthcheck"]
ENTRYPOINT ["/hir"]
CMD ["serve", "--data", "/data", "--addr", ":8080"]
