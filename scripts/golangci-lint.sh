#!/usr/bin/env bash
# Runs golangci-lint at the pinned version, built from the Go module proxy
# into .bin/ on first use (or when the pinned version changes). Arguments go
# to golangci-lint; run it from the module to lint (., e2e/), e.g.
#   scripts/golangci-lint.sh run ./...
#   (cd e2e && ../scripts/golangci-lint.sh run --config ../.golangci.yml ./...)
set -euo pipefail
version=v2.15.0
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.bin/golangci-lint
export PATH="/usr/local/go/bin:$PATH"
if ! [ -x "$bin" ] || ! "$bin" version 2>/dev/null | grep -q "version ${version#v} "; then
  echo "installing golangci-lint $version (go install into .bin/)" >&2
  GOBIN="$root/.bin" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
fi
exec "$bin" "$@"
