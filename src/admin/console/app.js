// jobwheel console, shell: routing by the URL's hash, the layout, logging in
// and out. The pages are in pages.js, the helpers in core.js.
'use strict';
(() => {
const { h, api, ok } = JW;

const NAV = [
  ['overview', 'Overview', 'viewer'], ['jobs', 'Jobs', 'viewer'], ['runs', 'Runs', 'viewer'],
  ['executors', 'Executors', 'viewer'], ['nodes', 'Nodes', 'viewer'], ['alarms', 'Alarms', 'viewer'],
  ['audit', 'Audit', 'admin'], ['access', 'Access', 'admin'],
];

/** `#/jobs/a.b/edit?x=1` → the page, its title, its arguments and query. */
function route() {
  const [path, query] = (location.hash.replace(/^#/, '') || '/overview').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  const [top, id, sub] = parts;
  if (top === 'login') return { page: 'login' };
  if (top === 'jobs' && id === 'new') return { page: 'jobForm', title: 'New job', nav: 'jobs', args: [], query };
  if (top === 'jobs' && id && sub === 'edit') return { page: 'jobForm', title: 'Edit ' + id, nav: 'jobs', args: [id], query };
  if (top === 'jobs' && id) return { page: 'job', title: 'Job ' + id, nav: 'jobs', args: [id], query, live: true };
  if (top === 'runs' && id) return { page: 'run', title: 'Run ' + id, nav: 'runs', args: [id], query };
  const n = NAV.find((x) => x[0] === top) || NAV[0];
  return { page: n[0], title: n[1], nav: n[0], args: [], query, live: n[0] !== 'audit' && n[0] !== 'access' };
}

/** Auto-refresh: every REFRESH_MS the page shown again with fresh figures, on the
 * pages that list state (not forms, not a run's page, which follows its own log),
 * unless the tab is hidden, a field has the focus, or an action is under way. */
const REFRESH_MS = 5000;
const auto = () => localStorage.getItem('jw.auto') !== 'off';
const busy = () => {
  const a = document.activeElement;
  return document.hidden || JW.acting > 0 ||
    (a && a.matches && a.matches('input:not([type=checkbox]), textarea, select'));
};
setInterval(() => {
  if (auto() && JW.session && route().live && !busy()) JW.render();
}, REFRESH_MS);

async function loadSession() {
  const r = await api('GET', '/session');
  JW.session = r.status === 200 ? r.body : null;
}

function loginPage() {
  const name = h('input', { name: 'name', autocomplete: 'username', required: true });
  const password = h('input', { name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const errors = h('div', { id: 'login-errors' });
  const submit = async (ev) => {
    ev.preventDefault();
    const r = await api('POST', '/session', { name: name.value, password: password.value });
    if (r.status !== 200) {
      errors.replaceChildren(h('div', { class: 'error', role: 'alert' }, (r.body && r.body.message) || 'cannot log in'));
      return;
    }
    JW.session = r.body;
    location.hash = '#/overview';
  };
  return h('form', { class: 'login', id: 'login', onsubmit: submit },
    h('h1', {}, 'jobwheel'), errors,
    h('label', {}, 'Account'), name,
    h('label', {}, 'Password'), password,
    h('button', { class: 'primary', type: 'submit' }, 'Log in'));
}

function layout(r, content) {
  const s = JW.session;
  const logout = h('button', { 'data-action': 'logout' }, 'Log out');
  logout.addEventListener('click', async () => {
    await api('DELETE', '/session');
    JW.session = null;
    location.hash = '#/login';
  });
  return h('div', { class: 'shell' },
    h('aside', { class: 'side' },
      h('div', { class: 'logo' }, 'job', h('span', {}, 'wheel')),
      h('nav', {}, NAV.filter((n) => ({ viewer: 0, operator: 1, admin: 2 })[s.role] >= ({ viewer: 0, operator: 1, admin: 2 })[n[2]])
        .map((n) => h('a', { href: '#/' + n[0], class: r.nav === n[0] ? 'active' : null }, n[1]))),
      h('div', { class: 'who' }, 'Signed in as ', h('b', { id: 'who' }, s.name), h('br'), s.role,
        s.groups ? ' · ' + s.groups.join(', ') : '', h('div', { style: 'margin-top:.5rem' }, logout))),
    h('main', { class: 'main' },
      s.read_only ? h('div', { class: 'banner' }, 'This server is read-only: nothing can be changed here.') : null,
      h('div', { id: 'flash' }, JW.pending ? h('div', { class: JW.pending.kind === 'ok' ? 'notice' : 'error', role: JW.pending.kind === 'ok' ? 'status' : 'alert' }, JW.pending.message) : null),
      h('div', { class: 'head' }, h('h1', {}, r.title), headTools(r)),
      content));
}

/** The header's switches: the zone times are shown in, and auto-refresh. */
function headTools(r) {
  const zone = h('select', { name: 'zone', 'data-action': 'zone', title: 'The zone every time is shown in' },
    h('option', { value: 'local' }, 'Times: ' + (Intl.DateTimeFormat().resolvedOptions().timeZone || 'local')),
    h('option', { value: 'UTC' }, 'Times: UTC'));
  zone.value = JW.zone();
  zone.addEventListener('change', () => { JW.setZone(zone.value); JW.render(); });
  const refresh = h('input', { type: 'checkbox', name: 'auto-refresh', checked: auto() });
  refresh.addEventListener('change', () => localStorage.setItem('jw.auto', refresh.checked ? 'on' : 'off'));
  return h('div', { class: 'tools' },
    h('span', { class: 'muted', id: 'zone-name' }, JW.zoneName()), zone,
    r.live ? h('label', { class: 'muted', title: 'Shows this page again every ' + REFRESH_MS / 1000 + ' s' }, refresh, ' Auto-refresh') : null);
}

let rendering = 0;
/** Renders the page the hash names. */
JW.render = async () => {
  const mine = ++rendering;
  const app = document.getElementById('app');
  const r = route();
  if (r.page === 'login') {
    app.replaceChildren(loginPage());
    return;
  }
  if (!JW.session) await loadSession();
  if (!JW.session) {
    location.hash = '#/login';
    return;
  }
  let content;
  try {
    content = await JW.pages[r.page](r.args || [], r.query || '');
  } catch (e) {
    content = h('div', { class: 'error', role: 'alert' }, e.message);
  }
  if (mine !== rendering) return;
  // A refresh keeps the reader where they were.
  const y = window.scrollY;
  app.replaceChildren(layout(r, content));
  JW.pending = null;
  if (r.page === JW.lastPage && location.hash === JW.lastHash) window.scrollTo(0, y);
  JW.lastPage = r.page;
  JW.lastHash = location.hash;
  document.title = r.title + ' · jobwheel';
};

window.addEventListener('hashchange', JW.render);
JW.render();
})();
