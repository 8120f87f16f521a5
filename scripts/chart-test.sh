#!/usr/bin/env bash
# Helm chart checks (charts/mcpgate), offline once the Go module cache holds
# tools/helmcheck's modules: helm lint and helm template through Helm's Go
# packages for every charts/mcpgate/ci values file, golden files, strict
# Kubernetes decoding of every rendered object, and config/envoy's checks on
# the Envoy configurations the chart renders. See tools/helmcheck.
#
#   scripts/chart-test.sh            run the checks
#   scripts/chart-test.sh -update    rewrite tools/helmcheck/testdata/golden
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

cd tools/helmcheck
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
go vet ./...
go test -count=1 ./... -args "$@"
