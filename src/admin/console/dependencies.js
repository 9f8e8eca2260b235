// jobwheel console, dependencies: a job's children, the jobs whose children it is,
// and the releases queued for it; and what a children field of the job form reads.
'use strict';
(() => {
const { h, api, ok, time, link, enc, button } = JW;

/** The panel of a job's dependencies (GET /jobs/{id}/dependencies). */
JW.dependencyPanel = async (id) => {
  const d = ok(await api('GET', '/jobs/' + enc(id) + '/dependencies'));
  const jobLink = (j) => link('#/jobs/' + enc(j), j, { class: 'mono' });
  const links = (items, none) => items.length
    ? h('ul', {}, items.map((x) => h('li', {}, jobLink(x.job), ' ', h('span', { class: 'muted' }, 'on ' + x.on))))
    : h('p', { class: 'muted' }, none);
  // Queued releases by instant, each with what an operator may do about it.
  // A release's instant: its window's start when the job joins by a window.
  const key = (q) => q.from.window || q.from.fire_at;
  const instants = [...new Set(d.queued.map(key))];
  const act = (verb, at) => button(verb === 'release' ? 'Release now' : 'Skip', async () => {
    ok(await api('POST', '/jobs/' + enc(id) + '/' + verb, { fire_at: at }));
  }, {
    name: verb + '-instant', class: verb === 'skip' ? 'danger' : '', done: () => JW.render(),
    confirm: verb === 'release'
      ? 'Run ' + id + ' once for ' + at + ' in place of the parents that have not released it?'
      : 'Drop the releases of ' + id + ' for ' + at + '? It will not run for that instant.',
  });
  const operator = JW.can('operator');
  // Whether a `waiting` alarm was raised for an instant (its wait deadline passed).
  const alarmed = (at) => {
    const q = d.queued.find((x) => key(x) === at && x.alarmed_at);
    return q ? h('span', { class: 'badge failed', title: 'waiting alarm raised ' + q.alarmed_at }, 'past its wait deadline') : null;
  };
  return h('div', { class: 'panel', id: 'job-dependencies' }, h('h2', {}, 'Dependencies'),
    d.after.length ? h('p', { id: 'job-after' }, 'Waits for ', h('span', { class: 'mono' }, d.after.join(', ')),
      d.join_window ? ' — all of them, once each ' + d.join_window.unit + ' in ' + d.join_window.zone + ', then runs once for it.'
        : ' — all of them, for one instant, then runs once.') : null,
    h('div', { class: 'grid2' },
      h('div', { id: 'job-upstream' }, h('h3', {}, 'Upstream (released by)'),
        links(d.parents, 'No job lists it as a child.'),
        d.parents_complete ? null : h('p', { class: 'muted' }, 'Only the first 10,000 jobs were searched.')),
      h('div', { id: 'job-downstream' }, h('h3', {}, 'Downstream (children)'),
        links(d.children, 'No children.'))),
    h('h3', {}, 'Queued releases'),
    instants.length
      ? h('ol', { id: 'job-queued' }, instants.map((at) => h('li', { 'data-instant': at },
        h('b', {}, time(at)), ' ',
        d.queued.filter((q) => key(q) === at).map((q) => h('span', { class: 'release' },
          jobLink(q.from.job), q.from.released_by ? ' (released by ' + q.from.released_by + ')' : [' · ', link('#/runs/' + q.from.run, 'run ' + q.from.run)],
          ' ', h('span', { class: 'muted' }, q.from.status + ', ' + JW.ago(q.released_at)), ' ')),
        alarmed(at),
        operator ? h('span', { class: 'actions' }, d.after.length ? act('release', at) : null, act('skip', at)) : null)))
      : h('p', { class: 'muted', id: 'job-queued' }, 'None: every release has run or is running.'));
};

/** The runs that released run `r`, as a panel (none for a run not released). */
JW.releasedBy = (r) => (r.upstream && r.upstream.length
  ? h('div', { class: 'panel', id: 'run-released-by' }, h('h2', {}, 'Released by'),
    h('ul', {}, r.upstream.map((u) => h('li', {},
      link('#/jobs/' + enc(u.job), u.job, { class: 'mono' }), ' fire ', time(u.fire_at), ' · ',
      u.released_by ? 'released by ' + u.released_by + ' in its place'
        : [link('#/runs/' + u.run, 'run ' + u.run), ' ', JW.badge(u.status)]))))
  : null);

/** A children field's text (`b, c on failure, d on always`) from links, and back. */
JW.childrenText = (children) => (children || []).map((c) => c.job + (c.on && c.on !== 'success' ? ' on ' + c.on : '')).join(', ');
JW.parseChildren = (text) => text.split(',').map((x) => x.trim()).filter(Boolean).map((x) => {
  const m = /^(\S+)(?:\s+on\s+(success|failure|always))?$/.exec(x);
  if (!m) throw Object.assign(new Error('not "job" or "job on success|failure|always": ' + JSON.stringify(x)), { field: 'children' });
  return { job: m[1], on: m[2] || 'success' };
});
})();
