// jobwheel console, the cluster's pages: overview, executors, nodes, alarms, audit,
// and access (accounts and tokens).
// Jobs are in jobs.js, runs in runs.js.
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

// ---------------------------------------------------------------- cluster
pages.executors = async () => {
  const e = ok(await api('GET', '/executors'));
  // Per group: live instances, their slots and the runs they report executing now.
  const groups = new Map(e.groups.map((g) => [g, { live: 0, slots: 0, running: 0, queued: 0, answered: 0 }]));
  for (const x of e.items) {
    const g = groups.get(x.info.group);
    if (!g) continue;
    if (x.live) { g.live += 1; g.slots += x.info.capacity; }
    if (x.probe && !x.probe.error) { g.answered += 1; g.running += x.probe.running; g.queued += x.probe.queued; }
  }
  const load = (running, slots) => (slots ? Math.round((100 * running) / slots) + ' %' : '—');
  const probe = (x) => {
    if (!x.probe) return [h('span', { class: 'muted', title: 'this server does not dispatch to the group' }, '—'), '—'];
    if (x.probe.error) return [badge('silent', 'asked for a beat just now, it did not answer: ' + x.probe.error), '—'];
    return [h('span', { title: 'answered a signed beat in ' + x.probe.ms + ' ms' }, x.probe.running + ' / ' + x.probe.capacity + (x.probe.queued ? ' (+' + x.probe.queued + ' queued)' : '')),
      load(x.probe.running, x.probe.capacity)];
  };
  return h('div', {},
    h('div', { class: 'panel' }, h('h2', {}, 'Groups this server dispatches to'),
      table(['Group', 'Live instances', 'Slots', 'Running', 'Queued', 'Load'], [...groups].map(([name, g]) => [
        name, g.live ? String(g.live) : badge('none', 'no live instance: this group\'s fires fail'), g.slots, g.running, g.queued, load(g.running, g.slots)]),
      'None configured.')),
    h('div', { class: 'panel' }, h('h2', {}, 'Registered instances'),
      h('p', { class: 'muted' }, 'Live: its last beat is within the group\'s dead_after, so schedulers send it runs. Running is what the instance answered to a signed beat sent as this page loaded.'),
      table(['Group', 'Instance', 'Address', 'Handlers', 'State', 'Running / slots', 'Load', 'Version', 'Registered', 'Last beat'], e.items.map((x) => [
        x.info.group, x.probe && x.probe.instance ? h('span', { class: 'mono' }, x.probe.instance) : h('span', { class: 'muted' }, '—'),
        h('span', { class: 'mono' }, x.info.address), h('span', { class: 'handler' }, x.info.handlers.join(', ')),
        x.live == null ? h('span', { class: 'muted' }, 'not dispatched to') : badge(x.live ? 'live' : 'stale'),
        ...probe(x), x.info.version, time(x.registered_at), JW.ago(x.last_beat, e.now)]), 'No instance is registered.')));
};

pages.nodes = async () => {
  const n = ok(await api('GET', '/nodes'));
  return h('div', { class: 'panel' },
    table(['Node', 'Host', 'Pid', 'Version', 'Slots', 'Started', 'Last beat'], n.items.map((x) => [
      h('span', { class: 'mono' }, x.info.node_id), x.info.host, x.info.pid, x.info.version, x.info.capacity,
      time(x.info.started_at), JW.ago(x.last_beat, n.now)]), 'No node is registered.'));
};

/** An alarm event's statuses, and what each means. */
const ALARM_STATUSES = [
  ['pending', 'Raised and waiting to be delivered (or to be tried again after a failed delivery, at its next attempt).'],
  ['sending', 'A node is delivering it now; if that node dies, another takes it over when its claim expires.'],
  ['sent', 'Delivered to every alarm channel that wants its kind.'],
  ['failed', 'Delivery failed; it is tried again at its next attempt while attempts remain. Retry sends it again now; Discard stops trying.'],
  ['not_needed', 'Recorded, but nobody had to be told: no alarm channel is configured on the node that raised it, or the channel throttled it (too many of that job\'s alarms at once). Configure [[webhook_alarms]] or [[email_alarms]] to be told.'],
];
const ALARM_MEANING = Object.fromEntries(ALARM_STATUSES);

pages.alarms = async (_, query) => {
  const q = new URLSearchParams(query);
  const status = h('select', { name: 'status' }, h('option', { value: '' }, 'Any status'),
    ['pending', 'sending', 'sent', 'failed', 'not_needed'].map((s) => h('option', { value: s }, s)));
  status.value = q.get('status') || '';
  status.addEventListener('change', () => { location.hash = '#/alarms' + (status.value ? '?status=' + status.value : ''); });
  const a = ok(await api('GET', '/alarms?limit=100' + (status.value ? '&status=' + enc(status.value) : '')));
  const done = () => JW.render();
  const legend = h('details', { class: 'panel legend', id: 'alarm-legend' }, h('summary', {}, 'What the statuses mean'),
    h('dl', { class: 'kv' }, ALARM_STATUSES.map(([k, text]) => [h('dt', {}, badge(k, text)), h('dd', {}, text)])));
  return h('div', {}, h('div', { class: 'filters' }, status), legend,
    h('div', { class: 'panel' }, table(['Id', 'Kind', 'Job', 'Run', 'Status', 'Attempts', 'Created', 'Last error', ''], a.items.map((x) => [
      x.id, x.event.kind, link('#/jobs/' + enc(x.event.job_id), x.event.job_id, { class: 'mono' }),
      x.event.run_id ? link('#/runs/' + x.event.run_id, String(x.event.run_id)) : '—',
      badge(x.status, ALARM_MEANING[x.status]), x.attempts, time(x.created_at), x.last_error || '',
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

// ---------------------------------------------------------------- access
pages.access = async () => {
  const a = ok(await api('GET', '/access'));
  const done = () => JW.render();
  const remove = (v) => button('Remove', async () => {
    ok(await api('DELETE', '/access/' + (v.kind === 'account' ? 'accounts/' : 'tokens/') + enc(v.name)));
    JW.note(v.kind + ' ' + v.name + ' removed.', 'ok');
  }, { class: 'danger', name: 'remove-' + v.kind, done, confirm: 'Remove ' + v.kind + ' ' + v.name + '? It is refused from now on.' });
  const rows = a.items.map((v) => [v.kind, h('span', { class: 'mono' }, v.name), v.role, v.groups ? v.groups.join(', ') : h('span', { class: 'muted' }, 'every job'),
    v.source === 'store' ? 'added ' + JW.timeText(v.created_at) : h('span', { class: 'muted', title: 'edit the configuration file and restart to change it' }, 'configuration file'),
    h('div', { class: 'actions' }, v.source === 'store' && JW.can('admin') ? remove(v) : null)]);
  const role = (name) => h('select', { name }, ['viewer', 'operator', 'admin'].map((r) => h('option', { value: r }, r)));
  const groups = (value) => (value.trim() ? value.split(',').map((x) => x.trim()).filter(Boolean) : undefined);
  const acc = { name: h('input', { name: 'account-name', placeholder: 'name' }), password: h('input', { name: 'account-password', type: 'password', placeholder: 'password, 12 characters or more', autocomplete: 'new-password' }), role: role('account-role'), groups: h('input', { name: 'account-groups', placeholder: 'groups (all when empty)' }) };
  const tok = { name: h('input', { name: 'token-name', placeholder: 'name' }), role: role('token-role'), groups: h('input', { name: 'token-groups', placeholder: 'groups (all when empty)' }) };
  const shown = h('div', { id: 'new-token' });
  const addAccount = button('Add account', async () => {
    ok(await api('POST', '/access/accounts', { name: acc.name.value.trim(), password: acc.password.value, role: acc.role.value, groups: groups(acc.groups.value) }));
    JW.note('Account ' + acc.name.value.trim() + ' added: it can log in now.', 'ok');
  }, { name: 'add-account', done });
  const addToken = button('Add token', async () => {
    const t = ok(await api('POST', '/access/tokens', { name: tok.name.value.trim(), role: tok.role.value, groups: groups(tok.groups.value) }));
    // Shown once, here: the server keeps only its SHA-256.
    shown.replaceChildren(h('div', { class: 'notice' }, 'Token ' + t.name + ' (copy it now, it is not shown again): ',
      h('code', { class: 'mono', id: 'token-value' }, t.token)));
  }, { name: 'add-token' });
  return h('div', {},
    h('div', { class: 'panel' }, h('h2', {}, 'Accounts and tokens'),
      h('p', { class: 'muted' }, 'Those of the configuration file change with the file and a restart. Those added here are kept hashed in the store: every server admits them within a quarter of a second, and refuses them within 2 s once removed.'),
      table(['Kind', 'Name', 'Role', 'Groups', 'Source', ''], rows, 'None.')),
    h('div', { class: 'grid2' },
      h('div', { class: 'panel' }, h('h2', {}, 'Add an account'), h('div', { class: 'stack' }, acc.name, acc.password, acc.role, acc.groups, addAccount)),
      h('div', { class: 'panel' }, h('h2', {}, 'Add an API token'), h('div', { class: 'stack' }, tok.name, tok.role, tok.groups, addToken), shown)));
};
})();
