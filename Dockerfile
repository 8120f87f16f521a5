# mcpgate's container image: a static binary on a distroless base, run as
# the non-root user 65532 that the Helm chart's securityContext expects.
#   docker build -t registry.example.com/mcpgate:0.1.0 .
# The chart passes only arguments (serve / validate), so the binary is the
# entrypoint. CGO is off: a static binary needs no libc in the image (and
# maps ~1.5 MiB less of it, docs/operations/memory.md). The grpcnotrace tag
# leaves out gRPC's x/net/trace pages, whose html/template would make the
# linker keep every exported method of the whole program (+16 MB; same page).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -o /out/mcpgate ./cmd/mcpgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcpgate /usr/local/bin/mcpgate
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/mcpgate"]
CMD ["version"]
