// jobwheel console, pages: overview, jobs (list, detail, form), runs (list,
// detail with the live log), executors, nodes, alarms, audit.
'use strict';
(() => {
const { h, api, ok, table, badge, time, link, button, schedule, enc } = JW;
const pages = (JW.pages = {});

const OUTCOMES = [
  ['succeeded', '#12805c'], ['failed', '#c4320a'], ['timed_out', '#f79009'],
  ['cancelled', '#9e77ed'], ['lost', '#667085'], ['misfired', '#fdb022'],
];

// ---------------------------------------------------------------- overview
pages.overview = async () => {
  const o = ok(await api('GET', '/overview'));
  const total = o.days.reduce((n, d) => n + d.total, 0);
  const ratio = o.success_ratio == null ? '—' : (o.success_ratio * 100).toFixed(1) + ' %';
  const canvas = h('canvas', { id: 'runs-chart', 'aria-label': 'Runs per day by outcome' });
  const view = h('div', {},
    h('div', { class: 'cards' },
      card('Jobs', o.jobs.total + (o.jobs.more ? '+' : '')),
      card('Paused', o.jobs.paused),
      card('Runs, 14 days', total),
      card('Success ratio', ratio),
      card('Live nodes', o.nodes.length),
      card('Executors', o.executors.length)),
    h('div', { class: 'panel' }, h('h2', {}, 'Runs per day by outcome'), h('div', { class: 'chart' }, canvas)),
    h('div', { class: 'grid2' },
      h('div', { class: 'panel' }, h('h2', {}, 'Most failing jobs'),
        table(['Job', 'Failures'], o.most_failing.map((f) => [link('#/jobs/' + enc(f.job), f.job), f.failures]), 'No failures among the last runs.')),
      h('div', { class: 'panel' }, h('h2', {}, 'Slowest jobs'),
        table(['Job', 'Mean', 'Runs'], o.slowest.map((f) => [link('#/jobs/' + enc(f.job), f.job), JW.ms(f.mean_ms), f.runs]), 'No finished runs yet.'))),
    h('div', { class: 'grid2' },
      h('div', { class: 'panel' }, h('h2', {}, 'Live nodes'),
        table(['Node', 'Host', 'Slots', 'Last beat'], o.nodes.map((n) => [h('span', { class: 'mono' }, n.info.node_id), n.info.host, n.info.capacity, JW.ago(n.last_beat, o.now)]))),
      h('div', { class: 'panel' }, h('h2', {}, 'Executor instances'),
        table(['Group', 'Address', 'Last beat'], o.executors.map((e) => [e.info.group, h('span', { class: 'mono' }, e.info.address), JW.ago(e.last_beat, o.now)]), 'No executor instance is registered.'))));
  setTimeout(() => drawChart(canvas, o.days), 0);
  return view;
};

function card(k, v) {
  return h('div', { class: 'card' }, h('div', { class: 'k' }, k), h('div', { class: 'v' }, String(v)));
}

function drawChart(canvas, days) {
  if (!window.Chart || !canvas.isConnected) return;
  new window.Chart(canvas, {
    type: 'bar',
    data: {
      labels: days.map((d) => d.day),
      datasets: OUTCOMES.map(([k, color]) => ({ label: k.replace('_', ' '), data: days.map((d) => d[k]), backgroundColor: color })),
    },
    options: {
      animation: false, maintainAspectRatio: false,
      scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } } },
      plugins: { legend: { position: 'bottom' } },
    },
  });
}

// ---------------------------------------------------------------- jobs
pages.jobs = async (_, query) => {
  const q = new URLSearchParams(query);
  const params = new URLSearchParams();
  for (const k of ['q', 'group', 'enabled', 'after']) if (q.get(k)) params.set(k, q.get(k));
  params.set('limit', '50');
  const page = ok(await api('GET', '/jobs?' + params));
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
  const rows = page.items.map((v) => [
    link('#/jobs/' + enc(v.job.id), v.job.id, { class: 'mono' }),
    v.job.handler,
    v.job.remote ? v.job.remote.group : h('span', { class: 'muted' }, 'local'),
    h('span', { class: 'mono' }, schedule(v.job.schedule)),
    time(v.next_fire_at),
    v.running ? link('#/runs/' + v.running, 'run ' + v.running) : badge(v.job.enabled ? 'enabled' : 'paused'),
    h('div', { class: 'actions' }, jobActions(v, reload)),
  ]);
  return h('div', {},
    h('div', { class: 'filters' }, search, enabled, button('Search', async () => go(), { name: 'search' }),
      JW.can('admin') ? h('a', { class: 'button primary', href: '#/jobs/new', 'data-action': 'new-job' }, 'New job') : null),
    h('div', { class: 'panel' }, table(['Id', 'Handler', 'Group', 'Schedule', 'Next fire', 'State', ''], rows, 'No job matches.')),
    page.next ? link('#/jobs?' + new URLSearchParams({ ...Object.fromEntries(q), after: page.next }), 'Next page →') : null);
};

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

pages.job = async ([id]) => {
  const v = ok(await api('GET', '/jobs/' + enc(id)));
  const fires = ok(await api('GET', '/jobs/' + enc(id) + '/fires?next=5'));
  const runs = ok(await api('GET', '/runs?limit=20&job=' + enc(id)));
  return h('div', {},
    h('div', { class: 'actions', style: 'margin-bottom:1rem' }, jobActions(v, () => JW.render())),
    h('div', { class: 'grid2' },
      h('div', { class: 'panel' }, h('h2', {}, 'State'),
        h('dl', { class: 'kv' },
          h('dt', {}, 'Id'), h('dd', { class: 'mono', id: 'job-id' }, v.job.id),
          h('dt', {}, 'State'), h('dd', {}, badge(v.job.enabled ? 'enabled' : 'paused')),
          h('dt', {}, 'Next fire'), h('dd', {}, time(v.next_fire_at), ' ', h('span', { class: 'muted' }, v.next_trigger)),
          v.next_payload != null ? [h('dt', {}, 'Next payload'), h('dd', { class: 'mono', id: 'job-next-payload' }, JSON.stringify(v.next_payload))] : null,
          h('dt', {}, 'Attempt'), h('dd', {}, v.attempt),
          h('dt', {}, 'Running'), h('dd', {}, v.running ? link('#/runs/' + v.running, 'run ' + v.running) : '—'),
          h('dt', {}, 'Version'), h('dd', {}, v.version),
          h('dt', {}, 'Updated'), h('dd', {}, time(v.updated_at)))),
      h('div', { class: 'panel' }, h('h2', {}, 'Next fires'),
        h('ol', { id: 'job-fires' }, fires.fires.map((f) => h('li', { class: 'mono' }, f.local))))),
    h('div', { class: 'panel' }, h('h2', {}, 'Definition'), h('pre', { id: 'job-definition' }, JSON.stringify(v.job, null, 2))),
    JW.can('operator') ? triggerWithPayload(v) : null,
    h('div', { class: 'panel' }, h('h2', {}, 'Recent runs'), runsTable(runs.items)));
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

pages.jobForm = async ([id]) => {
  const editing = !!id;
  const v = editing ? ok(await api('GET', '/jobs/' + enc(id))) : null;
  const ex = ok(await api('GET', '/executors'));
  const job = v ? v.job : { id: '', handler: '', schedule: { kind: 'cron', expr: '0 0 9 * * ?', zone: Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC' }, payload: {} };
  const s = job.schedule;
  const f = {
    id: h('input', { name: 'id', value: job.id, required: true, disabled: editing, class: 'mono' }),
    handler: h('input', { name: 'handler', value: job.handler, required: true }),
    group: h('select', { name: 'group' }, h('option', { value: '' }, '(local handler)'),
      ex.groups.map((g) => h('option', { value: g }, g))),
    kind: h('select', { name: 'kind' }, ['cron', 'interval', 'once'].map((k) => h('option', { value: k }, k))),
    expr: h('input', { name: 'expr', value: s.expr || '', class: 'mono', placeholder: 'sec min hour day month weekday [year]' }),
    zone: h('input', { name: 'zone', value: s.zone || 'UTC', placeholder: 'Asia/Shanghai' }),
    every: h('input', { name: 'every', value: s.every || '5m', placeholder: '5m' }),
    at: h('input', { name: 'at', value: s.at || '', placeholder: '2026-12-31T23:00:00Z' }),
    payload: h('textarea', { name: 'payload' }, JSON.stringify(job.payload == null ? {} : job.payload, null, 2)),
    timeout: h('input', { name: 'timeout', value: job.timeout || '', placeholder: 'e.g. 10m (none by default)' }),
    enabled: h('input', { type: 'checkbox', name: 'enabled', checked: job.enabled !== false }),
  };
  f.group.value = job.remote ? job.remote.group : (ex.groups[0] && !editing ? ex.groups[0] : '');
  f.kind.value = s.kind;
  const preview = h('div', { class: 'preview', id: 'cron-preview' }, '…');
  const errors = h('div', { id: 'form-errors' });
  let timer = null;
  const refresh = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      if (f.kind.value !== 'cron') { preview.replaceChildren(); return; }
      const r = await api('GET', '/cron/preview?' + new URLSearchParams({ expr: f.expr.value, zone: f.zone.value, next: '5' }));
      preview.classList.toggle('bad', r.status !== 200);
      if (r.status !== 200) { preview.replaceChildren((r.body && r.body.message) || 'invalid'); return; }
      const p = r.body;
      preview.replaceChildren(
        h('div', {}, h('b', { class: 'describe' }, p.description || '(no description)'), ' · ', p.form, ' form · ', p.zone),
        h('ol', {}, p.fires.map((x) => h('li', { class: 'mono fire' }, x.local))));
    }, 250);
  };
  for (const el of [f.expr, f.zone]) el.addEventListener('input', refresh);
  f.kind.addEventListener('change', () => { show(); refresh(); });
  const rows = {
    cron: [h('label', {}, 'Cron'), f.expr, h('label', {}, 'Zone'), f.zone, h('span'), preview],
    interval: [h('label', {}, 'Every'), f.every],
    once: [h('label', {}, 'At'), f.at],
  };
  const scheduleBox = h('div', { style: 'display:contents' });
  const show = () => scheduleBox.replaceChildren(...rows[f.kind.value]);
  show();
  refresh();
  const submit = async (ev) => {
    ev.preventDefault();
    errors.replaceChildren();
    try {
      let payload;
      try { payload = JSON.parse(f.payload.value || 'null'); } catch (e) { throw Object.assign(new Error('payload: ' + e.message), { field: 'payload' }); }
      const def = { id: f.id.value.trim(), handler: f.handler.value.trim(), payload, enabled: f.enabled.checked };
      def.schedule = f.kind.value === 'cron' ? { kind: 'cron', expr: f.expr.value.trim(), zone: f.zone.value.trim() }
        : f.kind.value === 'interval' ? { kind: 'interval', every: f.every.value.trim() }
        : { kind: 'once', at: f.at.value.trim() };
      if (f.group.value) def.remote = Object.assign({}, job.remote || {}, { group: f.group.value });
      if (f.timeout.value.trim()) def.timeout = f.timeout.value.trim();
      for (const k of ['retry', 'misfire', 'misfire_threshold', 'alarm']) if (job[k] !== undefined) def[k] = job[k];
      const saved = ok(editing ? await api('PUT', '/jobs/' + enc(id), def) : await api('POST', '/jobs', def));
      location.hash = '#/jobs/' + enc(saved.job.id);
    } catch (e) {
      errors.replaceChildren(h('div', { class: 'error', role: 'alert' }, (e.field ? e.field + ': ' : '') + e.message));
    }
  };
  return h('div', { class: 'panel' }, errors,
    h('form', { class: 'job', id: 'job-form', onsubmit: submit },
      h('label', {}, 'Id'), f.id,
      h('label', {}, 'Handler'), f.handler,
      h('label', {}, 'Executor group'), f.group,
      h('label', {}, 'Schedule'), f.kind,
      scheduleBox,
      h('label', {}, 'Payload (JSON)'), f.payload,
      h('label', {}, 'Timeout'), f.timeout,
      h('label', {}, 'Enabled'), h('div', {}, f.enabled),
      h('span'), h('div', { class: 'actions' }, h('button', { class: 'primary', type: 'submit', 'data-action': 'save' }, editing ? 'Save' : 'Create'), link('#/jobs', 'Cancel'))));
};

// ---------------------------------------------------------------- runs
function runsTable(items) {
  return table(['Run', 'Job', 'Status', 'Trigger', 'Attempt', 'Started', 'Took', 'Node', 'Error'], items.map((r) => [
    link('#/runs/' + r.id, String(r.id)),
    link('#/jobs/' + enc(r.job_id), r.job_id, { class: 'mono' }),
    badge(r.status), r.trigger, r.attempt, time(r.started_at),
    r.ended_at ? JW.ms(Date.parse(r.ended_at) - Date.parse(r.started_at)) : '—',
    h('span', { class: 'mono' }, r.node),
    h('span', { class: 'run-error' }, r.error ? r.error.slice(0, 120) : ''),
  ]), 'No run matches.');
}

pages.runs = async (_, query) => {
  const q = new URLSearchParams(query);
  const p = new URLSearchParams({ limit: '50' });
  for (const k of ['job', 'status', 'trigger', 'node', 'before']) if (q.get(k)) p.set(k, q.get(k));
  const page = ok(await api('GET', '/runs?' + p));
  const job = h('input', { name: 'job', placeholder: 'Job id', value: q.get('job') || '' });
  const status = h('select', { name: 'status' }, h('option', { value: '' }, 'Any status'),
    ['running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'lost', 'misfired', 'returned'].map((s) => h('option', { value: s }, s)));
  status.value = q.get('status') || '';
  const go = () => {
    const n = new URLSearchParams();
    if (job.value) n.set('job', job.value);
    if (status.value) n.set('status', status.value);
    location.hash = '#/runs?' + n;
  };
  status.addEventListener('change', go);
  job.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  return h('div', {},
    h('div', { class: 'filters' }, job, status, button('Filter', async () => go(), { name: 'filter' })),
    h('div', { class: 'panel' }, runsTable(page.items)),
    page.next ? link('#/runs?' + new URLSearchParams({ ...Object.fromEntries(q), before: page.next }), 'Older runs →') : null);
};

pages.run = async ([id]) => {
  const { run: r, group } = ok(await api('GET', '/runs/' + enc(id)));
  const log = h('pre', { id: 'run-log' });
  const note = h('p', { class: 'muted', id: 'log-note' });
  const view = h('div', {},
    h('div', { class: 'actions', style: 'margin-bottom:1rem' },
      r.status === 'running' && JW.can('operator')
        ? button('Kill', () => api('POST', '/runs/' + enc(id) + '/kill').then(ok), { class: 'danger', name: 'kill', done: () => JW.render() })
        : null),
    h('div', { class: 'panel' }, h('h2', {}, 'Run ' + r.id),
      h('dl', { class: 'kv' },
        h('dt', {}, 'Job'), h('dd', {}, link('#/jobs/' + enc(r.job_id), r.job_id, { class: 'mono' })),
        h('dt', {}, 'Status'), h('dd', { id: 'run-status' }, badge(r.status)),
        h('dt', {}, 'Trigger'), h('dd', {}, r.trigger),
        h('dt', {}, 'Attempt'), h('dd', {}, r.attempt),
        h('dt', {}, 'Fire'), h('dd', {}, time(r.fire_at)),
        h('dt', {}, 'Started'), h('dd', {}, time(r.started_at)),
        h('dt', {}, 'Ended'), h('dd', {}, time(r.ended_at)),
        h('dt', {}, 'Node'), h('dd', { class: 'mono' }, r.node),
        h('dt', {}, 'Group'), h('dd', {}, group || 'local'),
        h('dt', {}, 'Will retry'), h('dd', {}, r.will_retry ? 'yes' : 'no'))),
    r.payload != null ? h('div', { class: 'panel' }, h('h2', {}, 'Payload (given by the trigger)'), h('pre', { id: 'run-payload' }, JSON.stringify(r.payload, null, 2))) : null,
    r.error ? h('div', { class: 'panel' }, h('h2', {}, 'Error'), h('pre', { id: 'run-error' }, r.error)) : null,
    h('div', { class: 'panel' }, h('h2', {}, 'Log'), note, log));
  if (group) setTimeout(() => tailLog(id, log, note, r.status === 'running'), 0);
  else note.append('A local handler\'s log is kept by the node that ran it.');
  return view;
};

/** Polls the run's log every second while the page shows it and the run goes on. */
async function tailLog(id, log, note, running) {
  let offset = 0;
  for (let i = 0; i < 3600 && log.isConnected; i++) {
    const r = await api('GET', '/runs/' + enc(id) + '/log?offset=' + offset);
    if (r.status !== 200) { note.replaceChildren((r.body && r.body.message) || 'no log'); return; }
    const c = r.body.log;
    if (c.first_offset > offset) log.append(document.createTextNode('… ' + (c.first_offset - offset) + ' earlier lines dropped\n'));
    for (const line of c.lines) log.append(document.createTextNode(line + '\n'));
    offset = c.next_offset;
    note.replaceChildren('from ' + r.body.instance + (c.done ? ' · ended' : ' · live'));
    if (c.done || !running) return;
    await new Promise((res) => setTimeout(res, 1000));
  }
}

// ---------------------------------------------------------------- cluster
pages.executors = async () => {
  const e = ok(await api('GET', '/executors'));
  return h('div', {},
    h('div', { class: 'panel' }, h('h2', {}, 'Groups this server dispatches to'),
      e.groups.length ? h('p', {}, e.groups.join(', ')) : h('p', { class: 'muted' }, 'None configured.')),
    h('div', { class: 'panel' }, h('h2', {}, 'Registered instances'),
      table(['Group', 'Address', 'Instance', 'Handlers', 'Capacity', 'Version', 'Registered', 'Last beat'], e.items.map((x) => [
        x.info.group, h('span', { class: 'mono' }, x.info.address), x.info.instance || '', x.info.handlers.join(', '), x.info.capacity,
        x.info.version, time(x.registered_at), JW.ago(x.last_beat, e.now)]), 'No instance is registered.')));
};

pages.nodes = async () => {
  const n = ok(await api('GET', '/nodes'));
  return h('div', { class: 'panel' },
    table(['Node', 'Host', 'Pid', 'Version', 'Slots', 'Started', 'Last beat'], n.items.map((x) => [
      h('span', { class: 'mono' }, x.info.node_id), x.info.host, x.info.pid, x.info.version, x.info.capacity,
      time(x.info.started_at), JW.ago(x.last_beat, n.now)]), 'No node is registered.'));
};

pages.alarms = async (_, query) => {
  const q = new URLSearchParams(query);
  const status = h('select', { name: 'status' }, h('option', { value: '' }, 'Any status'),
    ['pending', 'sending', 'sent', 'failed', 'not_needed'].map((s) => h('option', { value: s }, s)));
  status.value = q.get('status') || '';
  status.addEventListener('change', () => { location.hash = '#/alarms' + (status.value ? '?status=' + status.value : ''); });
  const a = ok(await api('GET', '/alarms?limit=100' + (status.value ? '&status=' + enc(status.value) : '')));
  const done = () => JW.render();
  return h('div', {}, h('div', { class: 'filters' }, status),
    h('div', { class: 'panel' }, table(['Id', 'Kind', 'Job', 'Run', 'Status', 'Attempts', 'Created', 'Last error', ''], a.items.map((x) => [
      x.id, x.event.kind, link('#/jobs/' + enc(x.event.job_id), x.event.job_id, { class: 'mono' }),
      x.event.run_id ? link('#/runs/' + x.event.run_id, String(x.event.run_id)) : '—',
      badge(x.status), x.attempts, time(x.created_at), x.last_error || '',
      h('div', { class: 'actions' }, JW.can('operator') && (x.status === 'failed' || x.status === 'pending')
        ? [button('Retry', () => api('POST', '/alarms/' + x.id + '/retry').then(ok), { done }),
           button('Discard', () => api('POST', '/alarms/' + x.id + '/discard').then(ok), { done, class: 'danger' })]
        : [])]), 'No alarm event.')));
};

pages.audit = async (_, query) => {
  const q = new URLSearchParams(query);
  const p = new URLSearchParams({ limit: '100' });
  for (const k of ['actor', 'target', 'before']) if (q.get(k)) p.set(k, q.get(k));
  const a = ok(await api('GET', '/audit?' + p));
  const json = (v) => (v == null ? '' : h('details', {}, h('summary', {}, 'show'), h('pre', {}, JSON.stringify(v, null, 2))));
  return h('div', {},
    h('div', { class: 'panel' }, table(['When', 'Who', 'What', 'Target', 'Before', 'After'], a.items.map((e) => [
      time(e.at), e.actor, h('span', { class: 'mono' }, e.action), h('span', { class: 'mono' }, e.target), json(e.before), json(e.after)]), 'Nothing audited yet.')),
    a.next ? link('#/audit?' + new URLSearchParams({ ...Object.fromEntries(q), before: a.next }), 'Older entries →') : null);
};
})();
