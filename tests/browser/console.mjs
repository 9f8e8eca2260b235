// Browser test of the jobwheel console, run by tests/console.rs against a served
// instance: Debian's chromium driven by playwright-core (never a downloaded
// browser). Exits non-zero, naming the step, when anything is not as expected.
//
// Env: JW_BASE (http://127.0.0.1:port), JW_ADMIN / JW_VIEWER ("name:password"),
// JW_EXPR (a schedule that never fires during the test), JW_SOON_EXPR (one that
// first fires about 40 s after the test starts), JW_ZONE, JW_FIRES (JSON: the next
// fires of JW_SOON_EXPR in the zone, local), and
// optionally JW_SCREENSHOTS (a folder for one PNG per page).
import { chromium } from 'playwright-core';

const base = process.env.JW_BASE;
const [adminName, adminPw] = process.env.JW_ADMIN.split(':');
const [viewerName, viewerPw] = process.env.JW_VIEWER.split(':');
const expected = JSON.parse(process.env.JW_FIRES);
const shots = process.env.JW_SCREENSHOTS;
const XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">';

let step = 'start';
const check = (cond, what) => {
  if (!cond) throw new Error(`${step}: ${what}`);
};
const eq = (got, want, what) => check(JSON.stringify(got) === JSON.stringify(want), `${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
const context = await browser.newContext({ viewport: { width: 1360, height: 860 } });
const page = await context.newPage();
page.setDefaultTimeout(15000);
const consoleErrors = [];
page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
page.on('pageerror', (e) => consoleErrors.push(String(e)));
const notFound = [];
page.on('response', (r) => { if (r.status() === 404) notFound.push(r.url()); });

const shot = async (name) => {
  if (shots) await page.screenshot({ path: `${shots}/${name}.png`, fullPage: false });
};
let loads = 0;
/** Loads the console afresh at `hash` (a new document each time, so a page that
 * shows the same hash again is rendered again). */
const go = async (hash) => {
  await page.goto(`${base}/?load=${++loads}${hash}`);
  await page.waitForSelector('main .head h1');
};
/** Reloads `hash` until `selector` appears (bounded: 30 tries a second apart). */
const until = async (hash, selector, what, tries = 30) => {
  for (let i = 0; i < tries; i++) {
    await go(hash);
    if (await page.locator(selector).count()) return;
    await page.waitForTimeout(1000);
  }
  check(false, `timed out waiting for ${what}`);
};
/** Clicks an action button and waits for the API's answer to it. */
const act = async (action, path) => {
  const [resp] = await Promise.all([
    page.waitForResponse((r) => r.url().includes(path) && r.request().method() !== 'GET'),
    page.click(`button[data-action=${action}]`),
  ]);
  check(resp.status() === 200, `${action} answered ${resp.status()}`);
};
const login = async (name, pw) => {
  await page.goto(`${base}/#/login`);
  await page.fill('#login input[name=name]', name);
  await page.fill('#login input[name=password]', pw);
  await page.click('#login button[type=submit]');
  await page.waitForSelector('#who');
  eq(await page.textContent('#who'), name, 'signed in as');
};
const api = (method, path, body, csrf) =>
  page.evaluate(async ([method, path, body, csrf]) => {
    const headers = { 'Content-Type': 'application/json' };
    if (csrf) headers['X-CSRF-Token'] = csrf;
    const r = await fetch('/api/v1' + path, { method, headers, body: body ? JSON.stringify(body) : undefined });
    return { status: r.status, body: await r.json().catch(() => null) };
  }, [method, path, body, csrf]);

try {
  step = 'login page';
  await page.goto(base + '/');
  await page.waitForSelector('#login');
  await shot('login');
  await page.fill('#login input[name=name]', adminName);
  await page.fill('#login input[name=password]', 'not-the-password');
  await page.click('#login button[type=submit]');
  await page.waitForSelector('#login-errors .error');
  await login(adminName, adminPw);

  step = 'create a cron job with the preview';
  await go('#/jobs/new');
  await page.fill('#job-form input[name=id]', 'report.yearly');
  await page.fill('#job-form input[name=handler]', 'echo');
  await page.selectOption('#job-form select[name=group]', 'billing');
  await page.fill('#job-form input[name=zone]', process.env.JW_ZONE);
  await page.fill('#job-form input[name=expr]', '0 0 12 1 1 ? 20');
  await page.waitForSelector('#cron-preview.bad');
  await page.fill('#job-form input[name=expr]', process.env.JW_SOON_EXPR);
  await page.waitForFunction((n) => document.querySelectorAll('#cron-preview li.fire').length === n && !document.querySelector('#cron-preview.bad'), expected.length);
  eq(await page.locator('#cron-preview li.fire').allTextContents(), expected, 'the preview lists the next fires in the zone');
  check((await page.textContent('#cron-preview .describe')).length > 0, 'the preview describes the expression');
  await page.fill('#job-form textarea[name=payload]', JSON.stringify({ note: XSS }));
  await shot('job-form');
  await page.click('#job-form button[type=submit]');
  await page.waitForSelector('#job-fires li');
  eq(await page.locator('#job-fires li').allTextContents(), expected, 'the job page lists the same fires');
  check((await page.textContent('#job-definition')).includes('<script>window.__xss=1</script>'), 'the payload shows as text');

  step = 'a job id with <script> is refused';
  const csrf = await page.evaluate(() => window.JW.session.csrf);
  const bad = await api('POST', '/jobs', { id: '<script>x</script>', handler: 'echo', schedule: { kind: 'once', at: '2030-01-01T00:00:00Z' } }, csrf);
  eq([bad.status, bad.body.field], [400, 'job.id'], 'refused, naming the field');

  step = 'a forged request without the CSRF token';
  const forged = await api('POST', '/jobs/report.yearly/pause');
  eq([forged.status, forged.body.error], [403, 'csrf'], 'refused');

  step = 'watch a job fire';
  for (const [id, handler, expr] of [['tick', 'echo', '*/2 * * * * ?'], ['long.chatty', 'chatty', process.env.JW_EXPR], ['xss.fail', 'xss', process.env.JW_EXPR]]) {
    const r = await api('POST', '/jobs', { id, handler, schedule: { kind: 'cron', expr, zone: 'UTC' }, remote: { group: 'billing' }, payload: { note: XSS } }, csrf);
    eq(r.status, 201, `create ${id}`);
  }
  await until('#/runs?job=tick&status=succeeded', 'tbody .badge.succeeded', 'a run of tick to succeed');
  await until('#/runs?job=report.yearly&trigger=schedule&status=succeeded', 'tbody .badge.succeeded', 'the job made in the form to fire on schedule', 90);
  await shot('runs');

  step = 'trigger a job';
  await go('#/jobs/report.yearly');
  await act('trigger', '/trigger');
  await until('#/runs?job=report.yearly&trigger=manual', 'tbody .badge.succeeded', 'the triggered run');
  check((await page.textContent('tbody')).includes('manual'), 'the run is manual');

  step = 'trigger a long run with a payload, open it and its log, kill it';
  await go('#/jobs/long.chatty');
  await page.fill('textarea[name=trigger-payload]', '{"once": ');
  await page.click('button[data-action=trigger-payload]');
  await page.waitForSelector('#flash .error');
  check((await page.textContent('#flash')).startsWith('payload: not JSON'), 'text that is not JSON is refused in the page');
  const once = { once: XSS };
  await page.fill('textarea[name=trigger-payload]', JSON.stringify(once));
  await act('trigger-payload', '/trigger');
  await until('#/runs?job=long.chatty&status=running', 'tbody .badge.running', 'the long run to start');
  await page.click('tbody a[href^="#/runs/"]');
  await page.waitForFunction(() => (document.querySelector('#run-log') || {}).textContent?.includes('step <2>'));
  check((await page.textContent('#run-log')).includes('step <0>'), 'the log shows the first line as text');
  eq(JSON.parse(await page.textContent('#run-payload')), once, 'the run shows the payload it was given, as text');
  await page.waitForFunction((p) => (document.querySelector('#run-log') || {}).textContent?.includes(p), JSON.stringify(once));
  eq(await page.evaluate(() => window.__xss), undefined, 'no script ran from the payload');
  await shot('run');
  await act('kill', '/kill');
  await page.waitForFunction(() => document.querySelector('#run-status .badge')?.textContent === 'cancelled', null, { timeout: 20000 }).catch(async () => {
    // The page re-renders once the kill is sent; reload until the run has ended.
    for (let i = 0; i < 20; i++) {
      await page.reload();
      await page.waitForSelector('#run-status');
      if ((await page.textContent('#run-status')) === 'cancelled') return;
      await page.waitForTimeout(500);
    }
  });
  eq(await page.textContent('#run-status'), 'cancelled', 'the killed run ended cancelled');
  check((await page.textContent('#run-error')).startsWith('killed on'), 'it says where it was killed');

  step = 'an error message with <script> renders as text';
  await go('#/jobs/xss.fail');
  await act('trigger', '/trigger');
  await until('#/runs?job=xss.fail&status=failed', 'tbody .badge.failed', 'the failing run');
  await page.click('tbody a[href^="#/runs/"]');
  await page.waitForSelector('#run-error');
  check((await page.textContent('#run-error')).includes(XSS), 'the error is shown as text, characters and all');
  eq(await page.evaluate(() => window.__xss), undefined, 'no script ran');
  eq(await page.locator('main img').count(), 0, 'no element was made from the text');

  step = 'pause';
  await go('#/jobs/tick');
  await act('pause', '/pause');
  await page.waitForSelector('button[data-action=resume]');
  check((await page.textContent('main dl')).includes('paused'), 'the job shows paused');

  step = 'the other pages';
  await go('#/overview');
  await page.waitForSelector('#runs-chart');
  await page.waitForTimeout(300);
  check(await page.evaluate(() => !!window.Chart && !!window.Chart.getChart(document.getElementById('runs-chart'))), 'the chart is drawn by Chart.js');
  await shot('overview');
  await go('#/jobs');
  await shot('jobs');
  await go('#/jobs/report.yearly');
  await shot('job');
  for (const p of ['executors', 'nodes', 'alarms', 'audit']) {
    await go('#/' + p);
    await shot(p);
  }
  check((await page.textContent('main table')).includes('job.pause'), 'the audit page lists the pause');

  step = 'a viewer sees no mutation controls';
  await page.click('button[data-action=logout]');
  await page.waitForSelector('#login');
  await login(viewerName, viewerPw);
  for (const hash of ['#/jobs', '#/jobs/report.yearly', '#/alarms']) {
    await go(hash);
    for (const a of ['new-job', 'pause', 'resume', 'trigger', 'edit', 'copy', 'delete', 'retry', 'discard']) {
      eq(await page.locator(`[data-action=${a}]`).count(), 0, `${hash} has no ${a} control`);
    }
  }
  eq(await page.locator('nav a[href="#/audit"]').count(), 0, 'no audit page for a viewer');
  const vcsrf = await page.evaluate(() => window.JW.session.csrf);
  const denied = await api('POST', '/jobs/report.yearly/trigger', undefined, vcsrf);
  eq([denied.status, denied.body.error], [403, 'forbidden'], "a viewer's request is refused");

  eq(notFound, [], 'no request the console made was for something missing');
  eq(consoleErrors.filter((e) => !e.includes('401') && !e.includes('403') && !e.includes('400')), [], 'no script error on any page');
  console.log('console: every step passed');
} catch (e) {
  console.error(String(e && e.stack || e));
  await shot('failure').catch(() => {});
  await browser.close();
  process.exit(1);
}
await browser.close();
