#!/usr/bin/env bash
# The whole test suite: static checks, Go tests (with -race for the gateway,
# policy, config and store packages), Rego tests, promtool on /metrics, and
# the MCP conformance suite directly and through mcpgate.
# Installs what it needs when missing (npm packages; promtool if root).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/conformance/node_modules/*'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

step "go vet"
go vet ./...

if ! command -v redis-server >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  step "installing redis-server (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server >/dev/null
fi

step "go test -race"
# The Redis store tests start their own redis-server (store/redistest);
# without it they would skip, which CI must not accept.
export MCPGATE_REQUIRE_REDIS=1
go test -race -count=1 ./...

if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  step "installing promtool (Debian prometheus package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null
fi
step "promtool check metrics"
MCPGATE_PROMTOOL=$(command -v promtool || true) go test -count=1 -run TestMetricsPromtool ./e2e/
step "promtool check/test rules, dashboard queries (deploy/)"
MCPGATE_PROMTOOL=$(command -v promtool || true) go test -count=1 ./deploy/

step "Helm chart (lint, template goldens, Kubernetes and Envoy checks)"
scripts/chart-test.sh

step "MCP conformance suite (direct and through mcpgate)"
go build -o .bin/mcpgate ./cmd/mcpgate
MCPGATE_BIN="$PWD/.bin/mcpgate" e2e/conformance/run.sh

printf '\nall tests passed\n'
