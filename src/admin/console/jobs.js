// jobwheel console, jobs: the list (with bulk actions), a job's page, and the job
// form, which sets every field of a definition and shows what each left empty gets.
'use strict';
(() => {
const { h, api, ok, table, badge, time, link, button, schedule, enc } = JW;
const pages = JW.pages;

/** Job ids ticked on the jobs list; kept while the list is shown again. */
const selected = new Set();

/** Why no instance would run `job`'s fires, or null: a remote job whose group this
 * server does not dispatch to, or whose group has no live instance serving its handler. */
function unserved(job, ex) {
  if (!job.remote) return null;
  const g = job.remote.group;
  if (!ex.groups.includes(g)) return 'this server does not dispatch to group ' + g;
  const serving = ex.items.filter((x) => x.info.group === g && x.live && x.info.handlers.includes(job.handler));
  return serving.length ? null : 'no live instance of group ' + g + ' serves handler ' + job.handler;
}

/** Succeeded of the latest ended runs, as a percentage. */
function success(recent) {
  if (!recent.ended) return h('span', { class: 'muted' }, '—');
  const pct = Math.round((100 * recent.succeeded) / recent.ended);
  return h('span', { class: pct < 100 ? (pct < 50 ? 'bad' : 'warn') : 'good', title: recent.succeeded + ' of the last ' + recent.ended + ' ended runs succeeded' },
    pct + ' %');
}

pages.jobs = async (_, query) => {
  const q = new URLSearchParams(query);
  const params = new URLSearchParams();
  for (const k of ['q', 'group', 'enabled', 'after']) if (q.get(k)) params.set(k, q.get(k));
  params.set('limit', '50');
  const [page, ex] = await Promise.all([api('GET', '/jobs?' + params).then(ok), api('GET', '/executors?probe=false').then(ok)]);
  const search = h('input', { type: 'search', name: 'q', placeholder: 'Search ids', value: q.get('q') || '' });
  const enabled = h('select', { name: 'enabled' },
    h('option', { value: '' }, 'All'), h('option', { value: 'true' }, 'Enabled'), h('option', { value: 'false' }, 'Paused'));
  enabled.value = q.get('enabled') || '';
  const go = () => {
    const p = new URLSearchParams();
    if (search.value) p.set('q', search.value);
    if (enabled.value) p.set('enabled', enabled.value);
    location.hash = '#/jobs?' + p;
  };
  search.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  enabled.addEventListener('change', go);
  const reload = () => JW.render();
  const shown = new Set(page.items.map((v) => v.job.id));
  for (const id of [...selected]) if (!shown.has(id)) selected.delete(id);
  const operator = JW.can('operator');
  const count = h('span', { class: 'muted', id: 'selected-count' });
  const tick = (id) => {
    const c = h('input', { type: 'checkbox', name: 'select', value: id, checked: selected.has(id), 'aria-label': 'Select ' + id });
    c.addEventListener('change', () => { if (c.checked) selected.add(id); else selected.delete(id); counted(); });
    return c;
  };
  const all = h('input', { type: 'checkbox', name: 'select-all', 'aria-label': 'Select every job on this page' });
  const counted = () => {
    count.replaceChildren(selected.size ? selected.size + ' selected' : 'Tick jobs to act on several at once');
    all.checked = page.items.length > 0 && selected.size === page.items.length;
  };
  all.addEventListener('change', () => {
    for (const v of page.items) if (all.checked) selected.add(v.job.id); else selected.delete(v.job.id);
    JW.render();
  });
  const rows = page.items.map((v) => {
    const why = unserved(v.job, ex);
    return [
      operator ? tick(v.job.id) : null,
      link('#/jobs/' + enc(v.job.id), v.job.id, { class: 'mono' }),
      h('span', { class: 'handler' }, v.job.handler),
      v.job.remote ? v.job.remote.group : h('span', { class: 'muted', title: 'runs on a scheduler node that registers the handler' }, 'local'),
      h('span', { class: 'mono' }, schedule(v.job.schedule)),
      JW.jobTime(v.next_fire_at, v.job.schedule),
      v.last_run ? h('span', { class: 'last-run' }, link('#/runs/' + v.last_run.id, badge(v.last_run.status)), ' ', JW.ago(v.last_run.started_at)) : h('span', { class: 'muted' }, 'never'),
      success(v.recent),
      h('span', {}, v.running ? link('#/runs/' + v.running, 'run ' + v.running) : badge(v.job.enabled ? 'enabled' : 'paused'),
        why ? [' ', badge('unserved', why)] : null),
      h('div', { class: 'actions' }, jobActions(v, reload)),
    ].filter((c, i) => operator || i !== 0);
  });
  const head = ['Id', 'Handler', 'Group', 'Schedule', 'Next fire (' + JW.zoneName() + ')', 'Last run', 'Success', 'State', ''];
  if (operator) head.unshift(all);
  const bulk = operator ? h('div', { class: 'filters bulk' }, count,
    bulkButton('Pause', 'pause', 'paused'), bulkButton('Resume', 'resume', 'resumed'), bulkButton('Trigger', 'trigger', 'triggered')) : null;
  counted();
  return h('div', {},
    h('div', { class: 'filters' }, search, enabled, button('Search', async () => go(), { name: 'search' }),
      JW.can('admin') ? h('a', { class: 'button primary', href: '#/jobs/new', 'data-action': 'new-job' }, 'New job') : null),
    bulk,
    h('div', { class: 'panel' }, table(head, rows, 'No job matches.')),
    page.next ? link('#/jobs?' + new URLSearchParams({ ...Object.fromEntries(q), after: page.next }), 'Next page →') : null);
};

/** A button doing `verb` to every ticked job in turn; tells how many it did and
 * what each refusal said. */
function bulkButton(label, verb, done) {
  return button(label + ' selected', async () => {
    const ids = [...selected];
    if (!ids.length) throw new Error('Tick the jobs to ' + verb + ' first.');
    const refused = [];
    for (const id of ids) {
      const r = await api('POST', '/jobs/' + enc(id) + '/' + verb);
      if (r.status !== 200) refused.push(id + ': ' + ((r.body && r.body.message) || r.status));
    }
    const n = ids.length - refused.length;
    JW.note(n + ' ' + (n === 1 ? 'job ' : 'jobs ') + done + (refused.length ? '; refused: ' + refused.join('; ') : ''), refused.length ? 'error' : 'ok');
  }, { name: 'bulk-' + verb, done: () => JW.render(), confirm: () => label + ' ' + selected.size + (selected.size === 1 ? ' job?' : ' jobs?') });
}

/** The buttons a job has for the logged-in role. */
function jobActions(v, done) {
  const id = enc(v.job.id);
  const out = [];
  if (JW.can('operator')) {
    out.push(v.job.enabled
      ? button('Pause', () => api('POST', '/jobs/' + id + '/pause').then(ok), { done })
      : button('Resume', () => api('POST', '/jobs/' + id + '/resume').then(ok), { done }));
    out.push(button('Trigger', () => api('POST', '/jobs/' + id + '/trigger').then(ok), { done }));
  }
  if (JW.can('admin')) {
    out.push(h('a', { class: 'button', href: '#/jobs/' + id + '/edit', 'data-action': 'edit' }, 'Edit'));
    out.push(button('Copy', async () => {
      const to = window.prompt('Copy ' + v.job.id + ' as', v.job.id + '.copy');
      if (to) ok(await api('POST', '/jobs/' + id + '/copy', { id: to }));
    }, { done }));
    out.push(button('Delete', async () => {
      ok(await api('DELETE', '/jobs/' + id));
      location.hash = '#/jobs';
    }, { class: 'danger', confirm: 'Delete job ' + v.job.id + '? Its runs stay in the log.' }));
  }
  return out;
}
JW.jobActions = jobActions;

pages.job = async ([id]) => {
  const [v, fires, runs] = await Promise.all([
    api('GET', '/jobs/' + enc(id)).then(ok),
    api('GET', '/jobs/' + enc(id) + '/fires?next=5').then(ok),
    api('GET', '/runs?limit=20&job=' + enc(id)).then(ok),
  ]);
  const deps = await JW.dependencyPanel(id);
  return h('div', {},
    h('div', { class: 'actions', style: 'margin-bottom:1rem' }, jobActions(v, () => JW.render())),
    h('div', { class: 'grid2' },
      h('div', { class: 'panel' }, h('h2', {}, 'State'),
        h('dl', { class: 'kv' },
          h('dt', {}, 'Id'), h('dd', { class: 'mono', id: 'job-id' }, v.job.id),
          h('dt', {}, 'State'), h('dd', {}, badge(v.job.enabled ? 'enabled' : 'paused')),
          h('dt', {}, 'Schedule'), h('dd', { class: 'mono', id: 'job-schedule' }, JW.schedule(v.job.schedule)),
          h('dt', {}, 'Next fire'), h('dd', {}, JW.jobTime(v.next_fire_at, v.job.schedule), ' ', h('span', { class: 'muted' }, v.next_trigger)),
          v.next_payload != null ? [h('dt', {}, 'Next payload'), h('dd', { class: 'mono', id: 'job-next-payload' }, JSON.stringify(v.next_payload))] : null,
          h('dt', {}, 'Attempt'), h('dd', {}, v.attempt),
          h('dt', {}, 'Running'), h('dd', {}, v.running ? link('#/runs/' + v.running, 'run ' + v.running) : '—'),
          h('dt', {}, 'Version'), h('dd', {}, v.version),
          h('dt', {}, 'Updated'), h('dd', {}, time(v.updated_at)))),
      h('div', { class: 'panel' }, h('h2', {}, 'Next fires (the job\'s zone)'),
        h('ol', { id: 'job-fires' }, fires.fires.map((f) => h('li', { class: 'mono' }, f.local))),
        v.job.schedule.kind === 'never' ? h('p', { class: 'muted' }, 'None of its own: it runs when triggered.') : null)),
    deps,
    h('div', { class: 'panel' }, h('h2', {}, 'Definition'), h('pre', { id: 'job-definition' }, JSON.stringify(v.job, null, 2))),
    JW.can('operator') ? triggerWithPayload(v) : null,
    h('div', { class: 'panel' }, h('h2', {}, 'Recent runs'), JW.runsTable(runs.items)));
};

/** Runs a job once with another payload (its retries keep it; its definition does not change). */
function triggerWithPayload(v) {
  const text = h('textarea', { name: 'trigger-payload', class: 'mono' }, JSON.stringify(v.job.payload == null ? {} : v.job.payload, null, 2));
  const run = button('Trigger with this payload', async () => {
    let payload;
    try { payload = JSON.parse(text.value); } catch (e) { throw new Error('payload: not JSON (' + e.message + ')'); }
    ok(await api('POST', '/jobs/' + enc(v.job.id) + '/trigger', { payload }));
  }, { name: 'trigger-payload', done: () => JW.render() });
  return h('div', { class: 'panel' }, h('h2', {}, 'Trigger with a payload'),
    h('p', { class: 'muted' }, 'Runs the job now with this payload in place of its own, for this fire and its retries.'),
    text, h('div', { class: 'actions', style: 'margin-top:.5rem' }, run));
}

/** A labelled row of the form, with a hint under the field. */
const row = (label, field, hint) => [h('label', {}, label), h('div', {}, field, hint instanceof Node ? hint : hint ? h('div', { class: 'hint' }, hint) : null)];

pages.jobForm = async ([id]) => {
  const editing = !!id;
  const [v, ex, d] = await Promise.all([
    editing ? api('GET', '/jobs/' + enc(id)).then(ok) : null,
    api('GET', '/executors?probe=false').then(ok),
    api('GET', '/defaults').then(ok),
  ]);
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
  const job = v ? v.job : {
    id: '', handler: '', schedule: { kind: 'cron', expr: '0 0 9 * * ?', zone }, payload: {},
    retry: d.retry, misfire: d.misfire, alarm: d.alarm, enabled: true,
  };
  const s = job.schedule;
  const r = job.retry || d.retry;
  const m = job.misfire || d.misfire;
  const a = job.alarm || d.alarm;
  const remote = job.remote || { routing: d.routing, block: d.block };
  const input = (name, value, attrs) => h('input', Object.assign({ name, value: value == null ? '' : value }, attrs || {}));
  const choice = (name, options, value) => {
    const el = h('select', { name }, options.map(([k, text]) => h('option', { value: k }, text)));
    el.value = value;
    return el;
  };
  const f = {
    id: input('id', job.id, { required: true, disabled: editing, class: 'mono' }),
    handler: input('handler', job.handler, { required: true, list: 'handler-suggestions', autocomplete: 'off' }),
    group: choice('group', [['', '(local handler)']].concat(ex.groups.map((g) => [g, g])),
      job.remote ? job.remote.group : (ex.groups[0] && !editing ? ex.groups[0] : '')),
    routing: choice('routing', d.routings.map((x) => [x, x + (x === d.routing ? ' (default)' : '')]), remote.routing),
    block: choice('block', d.blocks.map((x) => [x, x + (x === d.block ? ' (default)' : '')]), remote.block),
    kind: choice('kind', [['cron', 'cron'], ['interval', 'interval'], ['once', 'once'], ['never', 'never: only when triggered']], s.kind),
    expr: input('expr', s.expr, { class: 'mono', placeholder: 'sec min hour day month weekday [year]' }),
    zone: input('zone', s.zone || 'UTC', { placeholder: 'Asia/Shanghai' }),
    every: input('every', s.every || '5m', { placeholder: '5m' }),
    at: input('at', s.at, { placeholder: '2026-12-31T23:00:00Z' }),
    payload: h('textarea', { name: 'payload' }, JSON.stringify(job.payload == null ? {} : job.payload, null, 2)),
    timeout: input('timeout', job.timeout, { placeholder: 'none' }),
    attempts: input('retry.max_attempts', r.max_attempts, { type: 'number', min: 1 }),
    base: input('retry.base', r.base),
    maxDelay: input('retry.max_delay', r.max_delay),
    jitter: input('retry.jitter', r.jitter, { type: 'number', min: 0, max: 1, step: 0.05 }),
    misfire: choice('misfire.policy', [['fire_once', 'fire_once: run once, folding the missed fires'], ['skip', 'skip: record them misfired, run none'], ['catch_up', 'catch_up: run each missed fire, up to a number']], m.policy),
    catchUp: input('misfire.max', m.max || 10, { type: 'number', min: 1 }),
    threshold: input('misfire_threshold', job.misfire_threshold, { placeholder: d.misfire_threshold + ' (the scheduler\'s)' }),
    events: d.alarm_kinds.map((k) => h('label', { class: 'check' },
      h('input', { type: 'checkbox', name: 'alarm.events', value: k, checked: a.events.includes(k) }), ' ' + k)),
    minFires: input('alarm.misfire_min_fires', a.misfire_min_fires, { type: 'number', min: 1 }),
    recipients: input('alarm.recipients', (a.recipients || []).join(', '), { placeholder: 'ops@example.com, …' }),
    enabled: h('input', { type: 'checkbox', name: 'enabled', checked: job.enabled !== false }),
    children: input('children', JW.childrenText(job.children), { class: 'mono', placeholder: 'report, archive on failure' }),
    after: input('after', (job.after || []).join(', '), { class: 'mono', placeholder: 'extract-orders, extract-invoices' }),
    joinWindow: input('join_window', job.join_window ? job.join_window.unit + ' ' + job.join_window.zone : '', { class: 'mono', placeholder: 'none (the exact instant), or: day Europe/Paris' }),
    waitDeadline: input('wait_deadline', job.wait_deadline, { placeholder: 'none' }),
  };
  // The handlers the chosen group's live instances serve, offered as the handler is typed.
  const suggestions = h('datalist', { id: 'handler-suggestions' });
  const suggested = h('div', { class: 'hint', id: 'handler-hint' });
  const suggest = () => {
    const names = new Set();
    for (const x of ex.items) if (x.info.group === f.group.value && x.live) x.info.handlers.forEach((n) => names.add(n));
    const sorted = [...names].sort();
    suggestions.replaceChildren(...sorted.map((n) => h('option', { value: n })));
    suggested.replaceChildren(!f.group.value ? 'A local handler runs on a scheduler node that registers it.'
      : sorted.length ? 'Served by group ' + f.group.value + ': ' + sorted.join(', ')
        : 'No live instance of group ' + f.group.value + ' is registered: its fires fail until one serves this handler.');
    remoteRows.style.display = f.group.value ? 'contents' : 'none';
  };
  const remoteRows = h('div', { style: 'display:contents' },
    row('Routing', f.routing, 'Which instance of the group runs a fire.'),
    row('Block strategy', f.block, 'What an instance does with a run of a job it is still running.'));
  f.group.addEventListener('change', suggest);
  const preview = h('div', { class: 'preview', id: 'cron-preview' }, '…');
  const errors = h('div', { id: 'form-errors' });
  let timer = null;
  const refresh = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (f.kind.value !== 'cron') { preview.replaceChildren(); return; }
      const p = await api('GET', '/cron/preview?' + new URLSearchParams({ expr: f.expr.value, zone: f.zone.value, next: '5' }));
      preview.classList.toggle('bad', p.status !== 200);
      if (p.status !== 200) { preview.replaceChildren((p.body && p.body.message) || 'invalid'); return; }
      const b = p.body;
      preview.replaceChildren(
        h('div', {}, h('b', { class: 'describe' }, b.description), ' · ', b.form, ' form · ', b.zone),
        h('ol', {}, b.fires.map((x) => h('li', { class: 'mono fire' }, x.local))));
    }, 250);
  };
  for (const el of [f.expr, f.zone]) el.addEventListener('input', refresh);
  f.kind.addEventListener('change', () => { show(); refresh(); });
  const rows = {
    cron: [h('label', {}, 'Cron'), f.expr, h('label', {}, 'Zone'), f.zone, h('span'), preview],
    interval: [h('label', {}, 'Every'), f.every],
    once: [h('label', {}, 'At'), f.at],
    never: [h('span'), h('div', { class: 'hint' }, 'No fire of its own: it runs when triggered (Run now, the API, the command line).')],
  };
  const scheduleBox = h('div', { style: 'display:contents' });
  const show = () => scheduleBox.replaceChildren(...rows[f.kind.value]);
  const catchUpRow = h('div', { style: 'display:contents' }, row('Catch up at most', f.catchUp, 'Missed fires run one by one, oldest first; older ones are recorded as one misfired run.'));
  // Alarms: say when this server sends them nowhere; recipients only where an
  // e-mail alarm would use them (or the job has some, kept as they are).
  const kinds = d.alarms || [];
  const noAlarm = kinds.length ? null : h('p', { class: 'hint', id: 'no-alarm' },
    'This server has no alarm configured: the events below are recorded (Alarms page) but sent to nobody. Add [[email_alarms]] or [[webhook_alarms]] to jobwheel.toml (docs/book/src/server.md).');
  const email = kinds.includes('email');
  const recipientsRow = email || (a.recipients || []).length
    ? row('Recipients', f.recipients, email ? 'Added to the e-mail alarm\'s recipients for this job.' : 'This server has no e-mail alarm: these recipients reach nobody from here.')
    : null;
  const misfireShown = () => { catchUpRow.style.display = f.misfire.value === 'catch_up' ? 'contents' : 'none'; };
  f.misfire.addEventListener('change', misfireShown);
  show();
  refresh();
  suggest();
  misfireShown();
  const number = (el, name) => {
    const n = Number(el.value);
    if (el.value.trim() === '' || !Number.isFinite(n)) throw Object.assign(new Error('not a number: ' + JSON.stringify(el.value)), { field: name });
    return n;
  };
  const submit = async (ev) => {
    ev.preventDefault();
    errors.replaceChildren();
    try {
      let payload;
      try { payload = JSON.parse(f.payload.value || 'null'); } catch (e) { throw Object.assign(new Error(e.message), { field: 'payload' }); }
      const def = { id: f.id.value.trim(), handler: f.handler.value.trim(), payload, enabled: f.enabled.checked };
      def.schedule = f.kind.value === 'cron' ? { kind: 'cron', expr: f.expr.value.trim(), zone: f.zone.value.trim() }
        : f.kind.value === 'interval' ? { kind: 'interval', every: f.every.value.trim() }
        : f.kind.value === 'never' ? { kind: 'never' }
        : { kind: 'once', at: f.at.value.trim() };
      if (f.group.value) def.remote = { group: f.group.value, routing: f.routing.value, block: f.block.value };
      if (f.timeout.value.trim()) def.timeout = f.timeout.value.trim();
      const children = JW.parseChildren(f.children.value);
      if (children.length) def.children = children;
      const after = f.after.value.split(',').map((x) => x.trim()).filter(Boolean);
      if (after.length) def.after = after;
      const win = f.joinWindow.value.trim();
      if (win) {
        const m = /^(hour|day)(?:\s+(\S+))?$/.exec(win);
        if (!m) throw Object.assign(new Error('not "hour ZONE" or "day ZONE": ' + JSON.stringify(win)), { field: 'join_window' });
        def.join_window = { unit: m[1], zone: m[2] || 'UTC' };
      }
      if (f.waitDeadline.value.trim()) def.wait_deadline = f.waitDeadline.value.trim();
      def.retry = { max_attempts: number(f.attempts, 'retry.max_attempts'), base: f.base.value.trim(), max_delay: f.maxDelay.value.trim(), jitter: number(f.jitter, 'retry.jitter') };
      def.misfire = f.misfire.value === 'catch_up' ? { policy: 'catch_up', max: number(f.catchUp, 'misfire.max') } : { policy: f.misfire.value };
      if (f.threshold.value.trim()) def.misfire_threshold = f.threshold.value.trim();
      def.alarm = {
        events: f.events.map((l) => l.querySelector('input')).filter((c) => c.checked).map((c) => c.value),
        misfire_min_fires: number(f.minFires, 'alarm.misfire_min_fires'),
        recipients: f.recipients.value.split(',').map((x) => x.trim()).filter(Boolean),
      };
      const saved = ok(editing ? await api('PUT', '/jobs/' + enc(id), def) : await api('POST', '/jobs', def));
      location.hash = '#/jobs/' + enc(saved.job.id);
    } catch (e) {
      errors.replaceChildren(h('div', { class: 'error', role: 'alert' }, (e.field ? e.field + ': ' : '') + e.message));
    }
  };
  const dr = d.retry;
  return h('div', { class: 'panel' }, errors,
    h('form', { class: 'job', id: 'job-form', onsubmit: submit },
      h('h3', {}, 'What runs'),
      row('Id', f.id),
      row('Executor group', f.group),
      row('Handler', [f.handler, suggestions], suggested),
      remoteRows,
      row('Payload (JSON)', f.payload, 'At most ' + d.max_payload_bytes + ' bytes. A manual trigger may give another.'),
      row('Timeout', f.timeout, 'A run past it is cancelled and recorded timed_out. Default: none.'),
      row('Enabled', f.enabled),
      h('h3', {}, 'When'),
      h('label', {}, 'Schedule'), f.kind,
      scheduleBox,
      h('h3', {}, 'Then'),
      row('Children', f.children, 'Jobs to run once for each fire of this one that ends as asked: "report" (on success), "cleanup on failure", "audit on always". Each fire releases each child once, in the same step as its result; a child with a schedule keeps it.'),
      row('Waits for', f.after, 'Parents whose releases of one instant this job waits to have all of, then runs once for them (each must list it among its children). Empty: it runs once per release.'),
      row('Join window', f.joinWindow, 'Join the parents\' releases by the hour or day (in a zone) their instants fall in, instead of the exact instant: "day Europe/Paris" runs once per Paris day, after every parent released that day; a parent\'s later releases of a day already joined are not queued.'),
      row('Wait deadline', f.waitDeadline, 'A release waiting longer than this (for the rest of its instant, or for the job to take it) raises a waiting alarm, once per instant. Default: none.'),
      h('h3', {}, 'Retries'),
      row('Attempts per fire', f.attempts, 'Default ' + dr.max_attempts + '. 1: no retry; a failed fire waits for the next one.'),
      row('First delay', f.base, 'Default ' + dr.base + '; doubles after each failed attempt.'),
      row('Longest delay', f.maxDelay, 'Default ' + dr.max_delay + '.'),
      row('Jitter', f.jitter, 'Default ' + dr.jitter + ': each delay shortened by up to this fraction of itself.'),
      h('h3', {}, 'Late fires'),
      row('Misfire policy', f.misfire, 'Default ' + d.misfire.policy + '. A fire is late when it starts after its instant plus the threshold.'),
      catchUpRow,
      row('Misfire threshold', f.threshold, 'Default: the scheduler\'s, ' + d.misfire_threshold + '.'),
      h('h3', {}, 'Alarms'),
      noAlarm,
      row('Alarm on', h('div', { class: 'checks' }, f.events), 'Default: ' + d.alarm.events.join(', ') + '.'),
      row('Misfire alarm from', f.minFires, 'A misfire alarms only when it stands for at least this many fires. Default ' + d.alarm.misfire_min_fires + '.'),
      recipientsRow,
      h('span'), h('div', { class: 'actions' }, h('button', { class: 'primary', type: 'submit', 'data-action': 'save' }, editing ? 'Save' : 'Create'), link('#/jobs', 'Cancel'))));
};
})();
