// approve.mjs drives Debian's Chromium (headless, playwright-core) through
// mcpgate's approval page the way a person does: it opens each approval
// link, signs in at the OpenID provider's sign-in page when the page sends
// it there, reads the action, approves or rejects it, and saves
// screenshots. e2e/browser_test.go runs it and checks what it reports.
//
// Input: a JSON plan on stdin (or in the file named by the first
// argument):
//
//   {
//     "chromium": "/usr/bin/chromium",        // default: $MCPGATE_CHROMIUM or /usr/bin/chromium
//     "subject": "olivia",                    // typed into the provider's #subject field
//     "timeout_ms": 20000,                    // bound on each navigation and wait
//     "failure_shot": "artifacts/failure.png",// optional: the page where a step failed
//     "actions": [{
//       "url": "http://127.0.0.1:4100/approvals/a/act_1",
//       "decision": "approve",                // or "reject"
//       "reason": "not tonight",              // the rejection reason (reject only)
//       "login_shot": "artifacts/login.png",  // optional: the provider's sign-in page
//       "page_shot": "artifacts/approval.png",// optional: the action before the decision
//       "result_shot": "artifacts/approved.png" // optional: the page after it
//     }]
//   }
//
// Output: one JSON object on stdout (see report in main); the exit code is
// 0 when every step could be driven, 1 when one could not (an element
// missing, a wait that ran out): the report then has "error", the URL it
// failed at, the start of that page's HTML and, with "failure_shot" in the
// plan, its screenshot. Whether what the page showed is right is for the
// Go test to judge.
//
// Chromium runs with a fresh profile in a temporary directory, removed at
// the end, and the flags the machine needs offline
// (--disable-background-networking and friends).
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync, readFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
];

function readPlan() {
  const src = process.argv[2] ? readFileSync(process.argv[2], 'utf8') : readFileSync(0, 'utf8');
  const plan = JSON.parse(src);
  if (!Array.isArray(plan.actions) || plan.actions.length === 0) throw new Error('plan: actions is empty');
  if (!plan.subject) throw new Error('plan: subject is required');
  for (const [i, a] of plan.actions.entries()) {
    if (!a.url) throw new Error(`plan: actions[${i}].url is required`);
    if (a.decision !== 'approve' && a.decision !== 'reject') throw new Error(`plan: actions[${i}].decision must be approve or reject`);
  }
  return plan;
}

async function shot(page, path) {
  if (!path) return;
  mkdirSync(dirname(path), { recursive: true });
  await page.screenshot({ path, fullPage: true });
}

// text returns the trimmed text of the first element matching sel, or null.
async function text(page, sel) {
  const el = await page.$(sel);
  return el ? (await el.innerText()).trim() : null;
}

// readAction reads what the action page shows a person.
async function readAction(page) {
  return page.evaluate(() => {
    const q = (s) => document.querySelector(s);
    const content = q('#content');
    const inside = content ? [...content.querySelectorAll('*')] : [];
    return {
      title: document.title,
      summary: q('#summary')?.innerText.trim() ?? null,
      content: content?.innerText.trim() ?? null,
      // Third-party text is marked class="untrusted" (the element itself
      // or a descendant of #content).
      untrusted: [...document.querySelectorAll('#content.untrusted, #content .untrusted')].map((e) => e.innerText.trim()),
      // Every element inside #content, by tag: markup in third-party text
      // must arrive as text, never as elements.
      content_tags: [...new Set(inside.map((e) => e.tagName.toLowerCase()))],
      requester: q('#requester')?.innerText.trim() ?? null,
      expires: q('#expires')?.innerText.trim() ?? null,
      approve_form: !!q('#approve-form'),
      reject_form: !!q('#reject-form'),
      csrf_fields: document.querySelectorAll('form input[name="csrf"]').length,
      scripts: document.scripts.length,
      canary: window.__mcpgate_canary ?? null,
    };
  });
}

async function main() {
  const plan = readPlan();
  const timeout = plan.timeout_ms || 20000;
  const executablePath = plan.chromium || process.env.MCPGATE_CHROMIUM || '/usr/bin/chromium';
  const profile = mkdtempSync(join(tmpdir(), 'mcpgate-chromium-'));
  const report = { chromium: null, actions: [], cookies: [], console: [], page_errors: [], navigations: [], requests: [] };
  let ctx;
  try {
    ctx = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1100, height: 800 },
      timeout,
    });
    report.chromium = ctx.browser()?.version() ?? null;
    ctx.setDefaultTimeout(timeout);
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    // Console lines (a Content-Security-Policy violation is one) and
    // uncaught script errors.
    page.on('console', (m) => report.console.push({ type: m.type(), text: m.text() }));
    page.on('pageerror', (e) => report.page_errors.push(String(e)));
    page.on('framenavigated', (f) => {
      if (f === page.mainFrame()) report.navigations.push(f.url());
    });
    // Every document request of the tab, each redirect hop included.
    page.on('request', (r) => {
      if (r.isNavigationRequest() && r.frame() === page.mainFrame()) report.requests.push(`${r.method()} ${r.url()}`);
    });

    for (const a of plan.actions) {
      const step = { url: a.url, login: null };
      report.actions.push(step);
      const resp = await page.goto(a.url, { waitUntil: 'load' });
      step.first_status = resp?.status() ?? null;
      // Not signed in: the page sends the browser to the provider's
      // sign-in form. Sign in there as plan.subject.
      await page.waitForSelector('#login-form, #approve-form, #result', { state: 'attached' });
      if (await page.$('#login-form')) {
        step.login = { url: page.url(), hint: await page.inputValue('#subject') };
        await shot(page, a.login_shot);
        await page.fill('#subject', plan.subject);
        await Promise.all([page.waitForURL((u) => u.toString().startsWith(new URL(a.url).origin)), page.click('#sign-in')]);
        await page.waitForSelector('#approve-form, #reject-form, #result', { state: 'attached' });
      }
      step.landed = page.url();
      Object.assign(step, await readAction(page));
      await shot(page, a.page_shot);
      if (a.decision === 'approve') {
        await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#approve')]);
      } else {
        await page.fill('#reject-form textarea[name="reason"]', a.reason || '');
        await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#reject')]);
      }
      await page.waitForSelector('#result', { state: 'attached' });
      step.after = page.url();
      step.result = await text(page, '#result');
      step.canary_after = await page.evaluate(() => window.__mcpgate_canary ?? null);
      await shot(page, a.result_shot);
    }
    report.cookies = (await ctx.cookies()).map((c) => ({
      name: c.name, domain: c.domain, path: c.path, http_only: c.httpOnly, secure: c.secure, same_site: c.sameSite,
      session: c.expires === -1,
    }));
  } catch (e) {
    // What was seen so far, the page as it was and where it was.
    report.error = String(e && e.message ? e.message : e);
    if (ctx && plan.failure_shot) {
      const page = ctx.pages()[0];
      if (page) {
        report.failed_at = page.url();
        report.failed_html = (await page.content().catch(() => '')).slice(0, 4000);
        await shot(page, plan.failure_shot).catch(() => {});
      }
    }
  } finally {
    if (ctx) await ctx.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(report) + '\n');
  if (report.error) process.exitCode = 1;
}

main().catch((e) => {
  process.stderr.write(`approve.mjs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
