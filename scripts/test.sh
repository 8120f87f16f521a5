#!/usr/bin/env bash
# The whole test suite: static checks (gofmt, go vet, golangci-lint), Go
# tests with -race, Rego tests, promtool on /metrics, the demo walkthrough
# of docs/start/demo.md, and the MCP conformance suite directly and through
# mcpgate, the approval page in headless Chromium.
# Two Go modules: the product (.) and its end-to-end tests (e2e/, module
# github.com/mcpgate/mcpgate/e2e, which holds the test-only dependencies
# such as the OpenID provider); every Go step covers both.
# Installs what it needs when missing (golangci-lint into .bin/, see
# scripts/golangci-lint.sh; npm packages; promtool, redis-server, chromium,
# curl and jq if root).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/conformance/node_modules/*'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

step "go vet"
go vet ./...
(cd e2e && go vet ./...)

step "golangci-lint (.golangci.yml)"
scripts/golangci-lint.sh run ./...
(cd e2e && ../scripts/golangci-lint.sh run --config ../.golangci.yml ./...)

if ! command -v redis-server >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  step "installing redis-server (Debian package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server >/dev/null
fi

if ! { command -v curl && command -v jq; } >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  step "installing curl and jq (Debian packages, for the demo walkthrough's test)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends curl jq >/dev/null
fi

if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  step "installing chromium (Debian package, for the approval page's browser test)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null
fi
if command -v npm >/dev/null 2>&1 && { [ ! -f e2e/browser/node_modules/playwright-core/package.json ] ||
  [ e2e/browser/package-lock.json -nt e2e/browser/node_modules/.package-lock.json ]; }; then
  step "installing playwright-core (npm ci in e2e/browser)"
  (cd e2e/browser && npm ci --no-audit --no-fund --loglevel=error)
fi

if command -v npm >/dev/null 2>&1 && { [ ! -f e2e/stdio/node_modules/@modelcontextprotocol/server-everything/package.json ] ||
  [ e2e/stdio/package-lock.json -nt e2e/stdio/node_modules/.package-lock.json ]; }; then
  step "installing @modelcontextprotocol/server-everything (npm ci in e2e/stdio)"
  (cd e2e/stdio && npm ci --no-audit --no-fund --loglevel=error)
fi

step "go test -race"
# The Redis store tests start their own redis-server (store/redistest);
# without it they would skip, which CI must not accept. The approval
# page's browser test (Chromium + playwright-core) skips without them only
# outside CI (CI set, or MCPGATE_REQUIRE_BROWSER=1: it fails).
export MCPGATE_REQUIRE_REDIS=1
# The stdio upstream test with the published npm server fails, not skips,
# without it (e2e/stdio_test.go).
export MCPGATE_REQUIRE_NPM_STDIO=1
export MCPGATE_CHROMIUM=${MCPGATE_CHROMIUM:-$(command -v chromium || echo /usr/bin/chromium)}
go test -race -count=1 ./...
(cd e2e && go test -race -count=1 ./...)

if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  step "installing promtool (Debian prometheus package)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null
fi
step "promtool check metrics"
(cd e2e && MCPGATE_PROMTOOL=$(command -v promtool || true) go test -count=1 -run TestMetricsPromtool .)
step "promtool check/test rules, dashboard queries (deploy/)"
MCPGATE_PROMTOOL=$(command -v promtool || true) go test -count=1 ./deploy/

step "Helm chart (lint, template goldens, Kubernetes and Envoy checks)"
scripts/chart-test.sh

step "MCP conformance suite (direct and through mcpgate)"
# Built the way the Dockerfile builds the image.
CGO_ENABLED=0 go build -trimpath -tags grpcnotrace -o .bin/mcpgate ./cmd/mcpgate
MCPGATE_BIN="$PWD/.bin/mcpgate" e2e/conformance/run.sh

printf '\nall tests passed\n'
