# syntax=docker/dockerfile:1
# reel's release image: one static binary (CGO_ENABLED=0), run as a non-root
# user. Multi-arch: the build stage runs on the builder's platform and
# cross-compiles for each TARGETARCH, so no emulation is needed.
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=v0.2.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     -t ghcr.io/reelkit/reel:v0.2.0 --push .
#
#   docker build --build-arg VERSION=v0.2.0 -t reel:v0.2.0 .    # one platform
#
# The base is a small Alpine rather than distroless because the nightly
# CronJob (examples/kubernetes) runs its steps under /bin/sh; the sidecars
# and the replay Job run reel directly, as the entrypoint.
# cmd/reel/dockerfile_test.go checks these stages and builds the binary
# with the same flags.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-alpine AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=devel
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/reel ./cmd/reel

FROM alpine:3.22 AS release
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.title="reel" \
      org.opencontainers.image.description="Record the traffic reaching an AI inference gateway and replay it against a shadow cluster, on the original clock" \
      org.opencontainers.image.source="https://github.com/reelkit/reel" \
      org.opencontainers.image.url="https://github.com/reelkit/reel" \
      org.opencontainers.image.documentation="https://github.com/reelkit/reel#readme" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
RUN apk add --no-cache ca-certificates tzdata
COPY --from=build /out/reel /usr/local/bin/reel
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/reel"]
