# HIR container image: a static pure-Go binary on scratch, run as a non-root user. It builds with any
# Docker (the legacy builder or BuildKit) and any OCI builder:
#
#   docker build -t hir:local .
#
# Where no image registry is reachable, run scripts/local-images.sh first: it makes the base images
# (GO_IMAGE below, and the compose file's redis:7) from this machine's Go toolchain, module cache and
# redis-server. Dockerfile.xla builds the cgo binary for GPUs.
#
# Build arguments:
#   GO_IMAGE  the build stage's image: any image with Go >= 1.26 and a POSIX sh (default golang:1.26-bookworm).
#   GOPROXY   the Go module proxy the build stage downloads modules from (default: the image's own setting).
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
ARG GOPROXY
ENV GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go (no cgo, no XLA): a static binary that runs FROM scratch.
RUN go build -tags noxla -trimpath -ldflags="-s -w" -o /out/hir ./cmd/hir
# What a scratch image lacks: a non-root user, a data directory it owns, a /tmp.
RUN mkdir -p /out/etc /out/data /out/tmp \
 && echo 'hir:x:65532:65532:hir:/data:/nonexistent' > /out/etc/passwd \
 && echo 'hir:x:65532:' > /out/etc/group \
 && chown 65532:65532 /out/data && chmod 1777 /out/tmp

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
