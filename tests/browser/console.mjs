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
// Confirmations (kill, delete, bulk actions) are accepted and kept to be checked.
const dialogs = [];
page.on('dialog', async (d) => { dialogs.push(d.message()); await d.accept(); });
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
  // Pages are shown again only when a step asks (the auto-refresh step turns it on).
  await page.evaluate(() => localStorage.setItem('jw.auto', 'off'));

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

  step = 'the form shows the defaults, suggests handlers and sets every field';
  const defaults = (await api('GET', '/defaults')).body;
  const field = (name) => `#job-form [name="${name}"]`;
  eq(await page.inputValue(field('retry.max_attempts')), String(defaults.retry.max_attempts), 'the default attempts are shown');
  eq(await page.inputValue(field('retry.base')), defaults.retry.base, 'the default first delay is shown');
  eq(await page.inputValue(field('misfire.policy')), defaults.misfire.policy, 'the default misfire policy is shown');
  eq(await page.inputValue(field('routing')), defaults.routing, 'the default routing is shown');
  check((await page.textContent('#job-form')).includes('Default ' + defaults.retry.max_attempts + '.'), 'the form says what the default is');
  const ticked = await page.locator(field('alarm.events') + ':checked').evaluateAll((cs) => cs.map((c) => c.value));
  eq(ticked, defaults.alarm.events, 'the default alarm events are ticked');
  const offered = await page.locator('#handler-suggestions option').evaluateAll((os) => os.map((o) => o.value));
  check(['chatty', 'echo', 'xss'].every((n) => offered.includes(n)), `the group's handlers are suggested: ${offered}`);
  await page.selectOption(field('routing'), 'failover');
  await page.selectOption(field('block'), 'discard_later');
  await page.fill(field('timeout'), '1m');
  await page.fill(field('retry.max_attempts'), '2');
  await page.fill(field('retry.base'), '5s');
  await page.fill(field('retry.max_delay'), '1m');
  await page.fill(field('retry.jitter'), '0.1');
  await page.selectOption(field('misfire.policy'), 'catch_up');
  await page.fill(field('misfire.max'), '3');
  await page.fill(field('misfire_threshold'), '30s');
  await page.uncheck(field('alarm.events') + '[value=misfire]');
  await page.check(field('alarm.events') + '[value=failure]');
  await page.fill(field('alarm.misfire_min_fires'), '3');
  // This server configures no alarm: the form says so, and offers no recipients.
  check((await page.textContent('#no-alarm')).includes('sent to nobody'), 'the form says alarms go nowhere from this server');
  eq(await page.locator(field('alarm.recipients')).count(), 0, 'no e-mail alarm: no recipients field');
  await shot('job-form');
  await page.click('#job-form button[type=submit]');
  await page.waitForSelector('#job-fires li');
  eq(await page.locator('#job-fires li').allTextContents(), expected, 'the job page lists the same fires');
  check((await page.textContent('#job-definition')).includes('<script>window.__xss=1</script>'), 'the payload shows as text');
  const made = JSON.parse(await page.textContent('#job-definition'));
  eq([made.remote, made.timeout, made.retry, made.misfire, made.misfire_threshold, made.alarm], [
    { group: 'billing', routing: 'failover', block: 'discard_later' }, '1m',
    { max_attempts: 2, base: '5s', max_delay: '1m', jitter: 0.1 }, { policy: 'catch_up', max: 3 }, '30s',
    { events: ['final_failure', 'failure', 'lost', 'blocked', 'waiting'], misfire_min_fires: 3, recipients: [] },
  ], 'every field of the form is stored');

  step = 'a job that fires only when triggered';
  await go('#/jobs/new');
  await page.fill('#job-form input[name=id]', 'manual.only');
  await page.fill('#job-form input[name=handler]', 'echo');
  await page.selectOption('#job-form select[name=kind]', 'never');
  check((await page.textContent('#job-form')).includes('it runs when triggered'), 'the form says when it runs');
  await page.click('#job-form button[type=submit]');
  await page.waitForSelector('#job-definition');
  eq(JSON.parse(await page.textContent('#job-definition')).schedule, { kind: 'never' }, 'stored with no fire of its own');
  eq(await page.textContent('#job-schedule'), 'never (fires when triggered)', 'the job page says when it fires');
  eq(await page.locator('#job-fires li').count(), 0, 'no upcoming fire is listed');

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

  step = 'a parent and its child: the form, both pages, the released run';
  eq((await api('POST', '/jobs', { id: 'pipeline.load', handler: 'echo', schedule: { kind: 'never' }, remote: { group: 'billing' } }, csrf)).status, 201, 'the child');
  await go('#/jobs/new');
  await page.fill('#job-form input[name=id]', 'pipeline.extract');
  await page.fill('#job-form input[name=handler]', 'echo');
  await page.selectOption('#job-form select[name=kind]', 'never');
  await page.fill('#job-form input[name=children]', 'pipeline.load, pipeline.cleanup on failure');
  await page.click('#job-form button[type=submit]');
  await page.waitForSelector('#job-dependencies');
  eq(JSON.parse(await page.textContent('#job-definition')).children,
    [{ job: 'pipeline.load', on: 'success' }, { job: 'pipeline.cleanup', on: 'failure' }], 'stored from the form');
  check((await page.textContent('#job-downstream')).includes('pipeline.load'), 'the parent shows its child');
  await go('#/jobs/pipeline.load');
  check((await page.textContent('#job-upstream')).includes('pipeline.extract'), 'the child shows its parent');
  const cycle = await api('PUT', '/jobs/pipeline.load', { id: 'pipeline.load', handler: 'echo', schedule: { kind: 'never' }, remote: { group: 'billing' }, children: [{ job: 'pipeline.extract' }] }, csrf);
  eq([cycle.status, cycle.body.field, cycle.body.value], [400, 'job.children', 'pipeline.load → pipeline.extract → pipeline.load'], 'a cycle is refused, named');
  await go('#/jobs/pipeline.extract');
  await act('trigger', '/trigger');
  await until('#/runs?job=pipeline.load', 'tbody .badge.succeeded', 'the child released by the parent');
  const released = (await api('GET', '/runs?job=pipeline.load')).body.items[0];
  eq(released.trigger, 'upstream', 'the child run was released');
  await go('#/runs/' + released.id);
  check((await page.textContent('#run-released-by')).includes('pipeline.extract'), 'the run page names the run that released it');

  step = 'a join waits for both parents; an operator releases the instant';
  for (const [id, extra] of [['join.d', { after: ['join.b', 'join.c'] }], ['join.b', { children: [{ job: 'join.d' }] }], ['join.c', { children: [{ job: 'join.d' }] }]]) {
    const r = await api('POST', '/jobs', { id, handler: 'echo', schedule: { kind: 'never' }, remote: { group: 'billing' }, ...extra }, csrf);
    eq(r.status, 201, `create ${id}`);
  }
  eq((await api('POST', '/jobs/join.b/trigger', null, csrf)).status, 200, 'trigger one parent');
  await until('#/jobs/join.d', '#job-queued li[data-instant]', 'the release of join.b to wait in join.d\'s queue');
  check((await page.textContent('#job-after')).includes('join.b, join.c'), 'the job page says what it waits for');
  check((await page.textContent('#job-queued')).includes('join.b'), 'the queued release names its parent');
  await act('release-instant', '/release');
  await until('#/runs?job=join.d', 'tbody .badge.succeeded', 'the released join to run');
  const joined = (await api('GET', '/runs?job=join.d')).body.items[0];
  await go('#/runs/' + joined.id);
  const by = await page.textContent('#run-released-by');
  check(by.includes('join.b') && by.includes('join.c') && by.includes('in its place'), 'the run names the parent run and the operator: ' + by);
  await go('#/jobs/join.d/edit');
  eq(await page.inputValue('#job-form input[name=after]'), 'join.b, join.c', 'the form shows what the job waits for');
  await page.fill('#job-form input[name=wait_deadline]', '10m');
  await page.fill('#job-form input[name=join_window]', 'day Europe/Paris');
  await page.click('#job-form button[type=submit]');
  await page.waitForSelector('#job-dependencies');
  const kept = JSON.parse(await page.textContent('#job-definition'));
  eq([kept.after, kept.wait_deadline, kept.join_window], [['join.b', 'join.c'], '10m', { unit: 'day', zone: 'Europe/Paris' }],
    'an edit keeps the parents and stores the wait deadline and the window');
  check((await page.textContent('#job-after')).includes('once each day in Europe/Paris'), 'the job page says how it joins');
  await go('#/jobs/join.d/edit');
  eq(await page.inputValue('#job-form input[name=join_window]'), 'day Europe/Paris', 'the form shows the window');

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
  check((await page.textContent('#run-log')).startsWith('[jobwheel] dispatched to http://127.0.0.1:'), 'a remote run\'s log names the instance it went to');
  check((await page.textContent('#log-note')).includes('(from group '), `the lines came back from the group, stored by the node: ${await page.textContent('#log-note')}`);
  eq(JSON.parse(await page.textContent('#run-payload')), once, 'the run shows the payload it was given, as text');
  await page.waitForFunction((p) => (document.querySelector('#run-log') || {}).textContent?.includes(p), JSON.stringify(once));
  eq(await page.evaluate(() => window.__xss), undefined, 'no script ran from the payload');
  await shot('run');
  await act('kill', '/kill');
  check(dialogs.some((m) => m.startsWith('Kill run')), `the kill asked for confirmation: ${dialogs}`);
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
  await go('#/runs?job=long.chatty&status=cancelled');
  check((await page.textContent('tbody .executor')).startsWith('http://127.0.0.1:'), 'the Runs list names the executor instance that ran it');

  step = 'an error message with <script> renders as text';
  await go('#/jobs/xss.fail');
  await act('trigger', '/trigger');
  await until('#/runs?job=xss.fail&status=failed', 'tbody .badge.failed', 'the failing run');
  await page.click('tbody a[href^="#/runs/"]');
  await page.waitForSelector('#run-error');
  check((await page.textContent('#run-error')).includes(XSS), 'the error is shown as text, characters and all');
  eq(await page.evaluate(() => window.__xss), undefined, 'no script ran');
  eq(await page.locator('main img').count(), 0, 'no element was made from the text');

  step = 'run a run again';
  await act('rerun', '/trigger');
  await until('#/runs?job=xss.fail&status=failed', 'tbody tr:nth-child(2) .badge.failed', 'the run run again to fail as well');

  step = 'a local run\'s log, written to the store by the node that ran it';
  await until('#/runs?job=local.chatty&status=succeeded', 'tbody .badge.succeeded', 'the embedded node\'s run');
  await page.click('tbody a[href^="#/runs/"]');
  await page.waitForFunction(() => (document.querySelector('#run-log') || {}).textContent?.includes('local step <2>'));
  const localLog = (await page.textContent('#run-log')).trim().split('\n');
  eq(localLog.length, 3, 'three lines, no more');
  check(localLog.every((l, i) => l.endsWith('local step <' + i + '>')), `in order: ${localLog}`);
  check((await page.textContent('#log-note')).startsWith('stored by node embedded-1'), 'it says which node wrote it');
  eq(await page.locator('#run-log b').count(), 0, 'lines are text');

  step = 'pause';
  await go('#/jobs/tick');
  await act('pause', '/pause');
  await page.waitForSelector('button[data-action=resume]');
  check((await page.textContent('main dl')).includes('paused'), 'the job shows paused');

  step = 'bulk actions';
  const enabledOf = async (id) => (await api('GET', '/jobs/' + id)).body.job.enabled;
  const bulk = async (action, ids, message) => {
    await go('#/jobs');
    for (const c of await page.locator('input[name=select]:checked').all()) await c.uncheck();
    for (const id of ids) await page.check(`input[name=select][value="${id}"]`);
    eq(await page.textContent('#selected-count'), ids.length + ' selected', 'the ticked jobs are counted');
    await page.click(`button[data-action=bulk-${action}]`);
    await page.waitForFunction((m) => (document.querySelector('#flash') || {}).textContent?.startsWith(m), message);
  };
  // tick is paused: a trigger of it is refused, and the refusal is told.
  await bulk('trigger', ['tick', 'report.yearly'], '1 job triggered; refused: tick:');
  await bulk('pause', ['report.yearly', 'long.chatty'], '2 jobs paused');
  eq([await enabledOf('report.yearly'), await enabledOf('long.chatty')], [false, false], 'both are paused');
  await bulk('resume', ['tick', 'report.yearly', 'long.chatty'], '3 jobs resumed');
  eq([await enabledOf('tick'), await enabledOf('report.yearly'), await enabledOf('long.chatty')], [true, true, true], 'all three run again');
  check(dialogs.includes('Pause 2 jobs?'), 'a bulk action asks for confirmation');

  step = 'auto-refresh';
  await go('#/runs?job=report.yearly');
  const shown = await page.locator('tbody tr').count();
  await page.check('input[name=auto-refresh]');
  await api('POST', '/jobs/report.yearly/trigger', undefined, csrf);
  await page.waitForFunction((n) => document.querySelectorAll('tbody tr').length > n, shown, { timeout: 15000 });
  await page.uncheck('input[name=auto-refresh]');

  step = 'runs in a time range';
  await go('#/runs?job=tick');
  await page.selectOption('select[name=range]', 'custom');
  await page.fill('input[name=since]', '2099-01-01T00:00:00');
  await page.click('button[data-action=filter]');
  await page.waitForFunction(() => location.hash.includes('since=2099') && document.querySelector('main .panel')?.textContent === 'No run matches.');
  await page.selectOption('select[name=range]', '3600');
  await page.waitForFunction(() => location.hash.includes('last=3600') && document.querySelectorAll('tbody .badge.succeeded').length > 0);

  step = 'one time convention, its zone named';
  await page.selectOption('select[name=zone]', 'UTC');
  await page.waitForFunction(() => document.getElementById('zone-name')?.textContent === 'UTC');
  const [text, instant] = await page.locator('tbody .time').first().evaluate((e) => [e.textContent, e.title]);
  eq(text, instant.slice(0, 19).replace('T', ' '), 'a time shown in UTC is its instant');
  await page.selectOption('select[name=zone]', 'local');
  await page.waitForFunction(() => document.getElementById('zone-name')?.textContent.includes('(UTC'));

  step = 'the jobs list: last run, success, unserved jobs, 1280 px';
  const longHandler = 'handler.' + 'with.a.very.long.name.'.repeat(6) + 'end';
  eq((await api('POST', '/jobs', { id: 'long.handler', handler: longHandler, schedule: { kind: 'cron', expr: process.env.JW_EXPR, zone: 'UTC' }, remote: { group: 'billing' } }, csrf)).status, 201, 'create long.handler');
  await page.setViewportSize({ width: 1280, height: 860 });
  await go('#/jobs');
  const rowOf = (id) => page.locator('tbody tr', { has: page.locator(`a[href="#/jobs/${id}"]`) });
  check(await rowOf('long.handler').locator('.badge.unserved').count() === 1, 'a job no instance serves is marked');
  eq(await rowOf('tick').locator('.badge.unserved').count(), 0, 'a served job is not');
  check(await rowOf('report.yearly').locator('.last-run .badge').count() === 1, 'the last run is shown');
  check(/^\d+ %$/.test(await rowOf('report.yearly').locator('td').nth(7).textContent()), 'the success rate is shown');
  const wall = await rowOf('report.yearly').locator('.job-zone').textContent();
  check(new RegExp('^\\(\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d ' + process.env.JW_ZONE.replace('/', '\\/') + '\\)$').test(wall),
    `the next fire is also shown on the job's wall clock, its zone named: ${wall}`);
  check((await page.locator('thead th').nth(5).textContent()).startsWith('Next fire ('), 'the next fire column names the console\'s zone');
  const off = await page.evaluate(() => ({
    page: document.documentElement.scrollWidth - window.innerWidth,
    actions: [...document.querySelectorAll('td .actions')].filter((a) => a.getBoundingClientRect().right > a.closest('.panel').getBoundingClientRect().right + 1).length,
  }));
  eq(off, { page: 0, actions: 0 }, 'nothing runs past the page at 1280 px');
  await page.setViewportSize({ width: 1360, height: 860 });

  step = 'executors: live, named, loaded';
  await go('#/executors');
  check(await page.locator('tbody .badge.live').count() >= 1, 'the instance is live');
  const cells = await page.locator('main .panel').nth(1).locator('tbody tr').first().locator('td').allTextContents();
  eq(cells[1], 'i-1', 'the instance column names it');
  check(/^\d+ \/ \d+/.test(cells[5]), `running / slots as it answered: ${cells[5]}`);

  step = 'the alarm statuses are explained';
  await go('#/alarms');
  check((await page.textContent('#alarm-legend')).includes('not_needed'), 'the legend explains not_needed');

  step = 'accounts and tokens at runtime';
  await go('#/access');
  check((await page.textContent('main table')).includes('configuration file'), "the configuration's accounts are listed");
  const created = async (action, path) => {
    const [resp] = await Promise.all([
      page.waitForResponse((r) => r.url().includes(path) && r.request().method() === 'POST'),
      page.click(`button[data-action=${action}]`),
    ]);
    eq(resp.status(), 201, `${action} answered`);
  };
  await page.fill('input[name=token-name]', 'console.token');
  await page.selectOption('select[name=token-role]', 'viewer');
  await created('add-token', '/access/tokens');
  await page.waitForSelector('#token-value');
  const newToken = await page.textContent('#token-value');
  const bearer = (t) => page.evaluate(async (t) => (await fetch('/api/v1/session', { headers: { Authorization: 'Bearer ' + t } })).status, t);
  eq(await bearer(newToken), 200, 'the token made in the console works at once');
  await shot('access');
  await page.fill('input[name=account-name]', 'carl');
  await page.fill('input[name=account-password]', 'carl-password-1');
  await created('add-account', '/access/accounts');
  await page.waitForFunction(() => [...document.querySelectorAll('main tbody tr')].some((r) => r.textContent.includes('carl')));
  check(!(await page.textContent('main')).includes('carl-password-1'), 'the password is not shown');
  const tokenRow = page.locator('main tbody tr', { hasText: 'console.token' });
  await Promise.all([
    page.waitForResponse((r) => r.url().includes('/access/tokens/console.token') && r.request().method() === 'DELETE'),
    tokenRow.locator('button[data-action=remove-token]').click(),
  ]);
  check(dialogs.some((m) => m.startsWith('Remove token console.token')), 'removing asks for confirmation');
  eq(await bearer(newToken), 401, 'the removed token is refused at once');

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
    for (const a of ['new-job', 'pause', 'resume', 'trigger', 'edit', 'copy', 'delete', 'retry', 'discard', 'bulk-pause', 'bulk-resume', 'bulk-trigger', 'rerun', 'kill']) {
      eq(await page.locator(`[data-action=${a}]`).count(), 0, `${hash} has no ${a} control`);
    }
  }
  eq(await page.locator('nav a[href="#/audit"]').count(), 0, 'no audit page for a viewer');
  eq(await page.locator('nav a[href="#/access"]').count(), 0, 'no access page for a viewer');
  eq((await api('GET', '/access')).status, 403, 'a viewer may not list accounts');
  eq(await page.locator('input[name=select]').count(), 0, 'no job can be ticked by a viewer');
  const vcsrf = await page.evaluate(() => window.JW.session.csrf);
  const denied = await api('POST', '/jobs/report.yearly/trigger', undefined, vcsrf);
  eq([denied.status, denied.body.error], [403, 'forbidden'], "a viewer's request is refused");

  eq(notFound, [], 'no request the console made was for something missing');
  eq(consoleErrors.filter((e) => !/\b(400|401|403|409)\b/.test(e)), [], 'no script error on any page');
  console.log('console: every step passed');
} catch (e) {
  console.error(String(e && e.stack || e));
  await shot('failure').catch(() => {});
  await browser.close();
  process.exit(1);
}
await browser.close();
