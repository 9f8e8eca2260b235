// jobwheel console, runs: the run log (filters, a time range) and a run's page
// (its live log, kill with confirmation, run again).
'use strict';
(() => {
const { h, api, ok, table, badge, time, link, button, enc } = JW;
const pages = JW.pages;

const STATUSES = ['running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'lost', 'misfired', 'returned'];

/** A table of runs. */
JW.runsTable = (items) =>
  table(['Run', 'Job', 'Status', 'Trigger', 'Attempt', 'Started', 'Took', 'Node', 'Executor', 'Error'], items.map((r) => [
    link('#/runs/' + r.id, String(r.id)),
    link('#/jobs/' + enc(r.job_id), r.job_id, { class: 'mono' }),
    badge(r.status), r.trigger, r.attempt, time(r.started_at),
    r.ended_at ? JW.ms(Date.parse(r.ended_at) - Date.parse(r.started_at)) : '—',
    h('span', { class: 'mono' }, r.node),
    h('span', { class: 'mono executor', title: 'The executor instance that ran it (written with its end)' }, r.executor || '—'),
    h('span', { class: 'run-error' }, r.error ? r.error.slice(0, 120) : ''),
  ]), 'No run matches.');

/** Quick time ranges of the runs page: name → seconds back from now. */
const RANGES = [['', 'Any time'], ['3600', 'Last hour'], ['86400', 'Last 24 hours'], ['604800', 'Last 7 days'], ['custom', 'Between…']];

pages.runs = async (_, query) => {
  const q = new URLSearchParams(query);
  const p = new URLSearchParams({ limit: '50' });
  for (const k of ['job', 'status', 'trigger', 'node', 'before', 'since', 'until']) if (q.get(k)) p.set(k, q.get(k));
  if (q.get('last')) p.set('since', new Date(Date.now() - Number(q.get('last')) * 1000).toISOString());
  const page = ok(await api('GET', '/runs?' + p));
  const job = h('input', { name: 'job', placeholder: 'Job id', value: q.get('job') || '' });
  const status = h('select', { name: 'status' }, h('option', { value: '' }, 'Any status'),
    STATUSES.map((s) => h('option', { value: s, title: JW.MEANING[s] }, s)));
  status.value = q.get('status') || '';
  const range = h('select', { name: 'range' }, RANGES.map(([k, t]) => h('option', { value: k }, t)));
  range.value = q.get('last') || (q.get('since') || q.get('until') ? 'custom' : '');
  const since = h('input', { type: 'datetime-local', step: 1, name: 'since', value: JW.inputOf(q.get('since')), title: 'From (' + JW.zoneName() + ')' });
  const until = h('input', { type: 'datetime-local', step: 1, name: 'until', value: JW.inputOf(q.get('until')), title: 'Until (' + JW.zoneName() + ')' });
  const between = h('span', { class: 'between' }, since, ' – ', until);
  const showBetween = () => { between.style.display = range.value === 'custom' ? '' : 'none'; };
  const go = () => {
    const n = new URLSearchParams();
    if (job.value) n.set('job', job.value);
    if (status.value) n.set('status', status.value);
    if (range.value === 'custom') {
      if (JW.instantOf(since.value)) n.set('since', JW.instantOf(since.value));
      if (JW.instantOf(until.value)) n.set('until', JW.instantOf(until.value));
    } else if (range.value) n.set('last', range.value);
    location.hash = '#/runs?' + n;
  };
  status.addEventListener('change', go);
  range.addEventListener('change', () => { showBetween(); if (range.value !== 'custom') go(); });
  job.addEventListener('keydown', (e) => { if (e.key === 'Enter') go(); });
  showBetween();
  return h('div', {},
    h('div', { class: 'filters' }, job, status, range, between, button('Filter', async () => go(), { name: 'filter' })),
    h('div', { class: 'panel' }, JW.runsTable(page.items)),
    page.next ? link('#/runs?' + new URLSearchParams({ ...Object.fromEntries(q), before: page.next }), 'Older runs →') : null);
};

pages.run = async ([id]) => {
  const { run: r, group } = ok(await api('GET', '/runs/' + enc(id)));
  const log = h('pre', { id: 'run-log' });
  const note = h('p', { class: 'muted', id: 'log-note' });
  const operator = JW.can('operator');
  const view = h('div', {},
    h('div', { class: 'actions', style: 'margin-bottom:1rem' },
      r.status === 'running' && operator
        ? button('Kill', () => api('POST', '/runs/' + enc(id) + '/kill').then(ok), {
          class: 'danger', name: 'kill', done: () => JW.render(),
          confirm: 'Kill run ' + r.id + ' of ' + r.job_id + '? It is cancelled where it executes and recorded cancelled; it is not retried.',
        })
        : null,
      r.status !== 'running' && operator
        ? button('Run again', async () => {
          // The same job, now, with the payload this run was given (its override, or the job's own).
          const body = r.payload != null ? { payload: r.payload } : undefined;
          ok(await api('POST', '/jobs/' + enc(r.job_id) + '/trigger', body));
          JW.note('Job ' + r.job_id + ' triggered' + (body ? ' with this run\'s payload' : '') + '.', 'ok');
          location.hash = '#/runs?job=' + enc(r.job_id);
        }, { name: 'rerun' })
        : null),
    h('div', { class: 'panel' }, h('h2', {}, 'Run ' + r.id),
      h('dl', { class: 'kv' },
        h('dt', {}, 'Job'), h('dd', {}, link('#/jobs/' + enc(r.job_id), r.job_id, { class: 'mono' })),
        h('dt', {}, 'Status'), h('dd', {}, h('span', { id: 'run-status' }, badge(r.status)), ' ', h('span', { class: 'muted' }, JW.MEANING[r.status] || '')),
        h('dt', {}, 'Trigger'), h('dd', {}, r.trigger),
        h('dt', {}, 'Attempt'), h('dd', {}, r.attempt),
        h('dt', {}, 'Fire'), h('dd', {}, time(r.fire_at)),
        h('dt', {}, 'Started'), h('dd', {}, time(r.started_at)),
        h('dt', {}, 'Ended'), h('dd', {}, time(r.ended_at)),
        h('dt', {}, 'Node'), h('dd', { class: 'mono' }, r.node),
        h('dt', {}, 'Group'), h('dd', {}, group || 'local'),
        h('dt', {}, 'Will retry'), h('dd', {}, r.will_retry ? 'yes' : 'no'))),
    JW.releasedBy(r),
    r.payload != null ? h('div', { class: 'panel' }, h('h2', {}, 'Payload (given by the trigger)'), h('pre', { id: 'run-payload' }, JSON.stringify(r.payload, null, 2))) : null,
    r.error ? h('div', { class: 'panel' }, h('h2', {}, 'Error'), h('pre', { id: 'run-error' }, r.error)) : null,
    h('div', { class: 'panel' }, h('h2', {}, 'Log'), note, log));
  // A run's lines come from the store: a local run's written by the node that runs
  // it (every second and at its end), a remote run's by the node that dispatched it
  // (with each result poll and at its end).
  setTimeout(() => tailLog(id, log, note, r.status === 'running', group), 0);
  return view;
};

/** Polls the run's log every second while the page shows it and the run goes on. */
async function tailLog(id, log, note, running, group) {
  let offset = 0;
  for (let i = 0; i < 3600 && log.isConnected; i++) {
    const r = await api('GET', '/runs/' + enc(id) + '/log?offset=' + offset);
    if (r.status !== 200) { note.replaceChildren((r.body && r.body.message) || 'no log'); return; }
    const c = r.body.log;
    if (c.first_offset > offset) log.append(document.createTextNode('… ' + (c.first_offset - offset) + ' earlier lines dropped\n'));
    for (const line of c.lines) log.append(document.createTextNode(line + '\n'));
    offset = c.next_offset;
    note.replaceChildren('stored by node ' + r.body.instance + (group ? ' (from group ' + group + ')' : '') + (c.done ? ' · ended' : ' · live'));
    // A full page: ask for the next at once; else wait for more while it runs.
    if (c.lines.length >= 1000) continue;
    if (c.done || !running) return;
    await new Promise((res) => setTimeout(res, 1000));
  }
}
})();
