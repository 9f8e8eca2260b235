// jobwheel console, core: the API client, DOM helpers and formatting.
// Every piece of text from the server is put into the page with text nodes
// (never parsed as HTML): job ids, payloads and error messages are shown as text.
'use strict';

const JW = (window.JW = {});

JW.session = null; // {name, role, groups, csrf, read_only}

const RANK = { viewer: 0, operator: 1, admin: 2 };
/** Whether the logged-in account may do what `role` may (and the server is writable). */
JW.can = (role) =>
  !!JW.session && !JW.session.read_only && RANK[JW.session.role] >= RANK[role];

/** Calls the API; resolves to {status, body}. A 401 sends the browser to the login page. */
JW.api = async (method, path, body) => {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && JW.session && JW.session.csrf) headers['X-CSRF-Token'] = JW.session.csrf;
  const resp = await fetch('/api/v1' + path, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  const text = await resp.text();
  if (text) {
    try { data = JSON.parse(text); } catch (e) { data = { error: 'bad_answer', message: text }; }
  }
  if (resp.status === 401 && path !== '/session') {
    JW.session = null;
    location.hash = '#/login';
  }
  return { status: resp.status, body: data };
};

/** Throws the API's message unless the answer is a success. */
JW.ok = (r) => {
  if (r.status >= 200 && r.status < 300) return r.body;
  const b = r.body || {};
  const err = new Error(b.message || 'request failed (' + r.status + ')');
  err.field = b.field;
  err.status = r.status;
  throw err;
};

/** Creates an element: h('td', {class: 'mono'}, 'text', child, …). */
JW.h = (tag, attrs, ...children) => {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else if (k === 'style') el.style.cssText = v; // CSSOM: allowed by the page's CSP
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
};
const h = JW.h;

/** A table of `rows` (arrays of cells) under `head`, or a line saying `empty`. */
JW.table = (head, rows, empty) =>
  rows.length === 0
    ? h('p', { class: 'muted' }, empty || 'Nothing here yet.')
    : h('table', {}, h('thead', {}, h('tr', {}, head.map((c) => h('th', {}, c)))),
        h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => (c instanceof Node && c.tagName === 'TD' ? c : h('td', {}, c)))))));

/** What each status means, shown as the badge's tooltip. */
JW.MEANING = {
  running: 'started and not finished',
  succeeded: 'the handler returned success',
  failed: 'the handler returned an error or panicked',
  timed_out: 'the handler ran past the job\'s timeout and was cancelled',
  cancelled: 'killed by an operator, or cancelled when its node shut down',
  lost: 'its node died or lost its lease while it ran; recorded by another node',
  misfired: 'the fire was late past the misfire threshold; the policy skipped or folded it',
  returned: 'started, then given back unexecuted because every slot stayed busy; the fire runs again',
  pending: 'waiting to be delivered (or to be retried after a failed delivery)',
  sending: 'a node is delivering it now',
  sent: 'delivered to every alarm channel',
  not_needed: 'raised, but no alarm channel is configured for it, or it was throttled: nobody was told',
  enabled: 'fires on its schedule',
  paused: 'does not fire until resumed',
  unserved: 'no live executor instance of its group serves its handler: its fires will fail',
  live: 'its last beat is within its group\'s dead_after',
  stale: 'its beats stopped: schedulers send it no runs',
};
JW.badge = (text, meaning) => h('span', { class: 'badge ' + String(text).replace(/[^a-z_]/g, ''), title: meaning || JW.MEANING[text] || null }, text);

/** Where times are shown: the browser's zone ('local') or 'UTC'; kept in the
 * browser. Every instant on every page is written the same way in that zone
 * (YYYY-MM-DD HH:MM:SS), and the page's header names the zone. */
JW.zone = () => (localStorage.getItem('jw.zone') === 'UTC' ? 'UTC' : 'local');
JW.setZone = (z) => localStorage.setItem('jw.zone', z);
/** The zone's name and its offset now, for the header: `Europe/Berlin (UTC+01:00)`. */
JW.zoneName = () => {
  if (JW.zone() === 'UTC') return 'UTC';
  const name = Intl.DateTimeFormat().resolvedOptions().timeZone || 'local';
  const off = -new Date().getTimezoneOffset();
  const pad = (n) => String(Math.floor(Math.abs(n))).padStart(2, '0');
  return name + ' (UTC' + (off < 0 ? '-' : '+') + pad(off / 60) + ':' + pad(off % 60) + ')';
};
const two = (n) => String(n).padStart(2, '0');
/** An instant as text in the console's zone. */
JW.timeText = (t) => {
  const d = new Date(t);
  if (JW.zone() === 'UTC') return d.toISOString().slice(0, 19).replace('T', ' ');
  return d.getFullYear() + '-' + two(d.getMonth() + 1) + '-' + two(d.getDate()) + ' ' +
    two(d.getHours()) + ':' + two(d.getMinutes()) + ':' + two(d.getSeconds());
};
/** An instant in the console's zone, the RFC 3339 UTC instant in its tooltip. */
JW.time = (t) => {
  if (!t) return h('span', { class: 'muted' }, '—');
  return h('span', { class: 'time', title: t }, JW.timeText(t));
};
/** An instant of a job: in the console's zone, and — for a cron job whose zone is not
 * the console's — on the job's own wall clock beside it, with the zone named. */
JW.jobTime = (t, sched) => {
  const shown = JW.time(t);
  if (!t || !sched || sched.kind !== 'cron') return shown;
  const mine = JW.zone() === 'UTC' ? 'UTC' : Intl.DateTimeFormat().resolvedOptions().timeZone;
  if (sched.zone === mine) return shown;
  let wall;
  try {
    const p = Object.fromEntries(new Intl.DateTimeFormat('en-CA', {
      timeZone: sched.zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit',
    }).formatToParts(new Date(t)).map((x) => [x.type, x.value]));
    wall = p.year + '-' + p.month + '-' + p.day + ' ' + p.hour + ':' + p.minute + ':' + p.second;
  } catch (_) {
    return shown; // a zone this browser does not know
  }
  return h('span', {}, shown, ' ', h('span', { class: 'muted job-zone' }, '(' + wall + ' ' + sched.zone + ')'));
};
/** A `datetime-local` input's value as an RFC 3339 instant, read in the console's zone. */
JW.instantOf = (v) => {
  if (!v) return '';
  const d = JW.zone() === 'UTC' ? new Date(v + 'Z') : new Date(v);
  return isNaN(d) ? '' : d.toISOString();
};
/** An RFC 3339 instant as a `datetime-local` input's value in the console's zone. */
JW.inputOf = (t) => (t ? JW.timeText(t).replace(' ', 'T') : '');

/** How long before `now` (the server's, when given) `t` was, with `t` in the tooltip. */
JW.ago = (t, now) => {
  const s = Math.round((Date.parse(now || new Date().toISOString()) - Date.parse(t)) / 1000);
  const text = s < 60 ? s + ' s ago' : s < 3600 ? Math.round(s / 60) + ' min ago'
    : s < 172800 ? Math.round(s / 3600) + ' h ago' : Math.round(s / 86400) + ' days ago';
  return h('span', { title: JW.timeText(t) + ' ' + JW.zoneName() }, text);
};

JW.ms = (ms) => (ms < 1000 ? ms + ' ms' : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s');

/** How a schedule reads. */
JW.schedule = (s) => {
  if (!s) return '';
  if (s.kind === 'cron') return s.expr + ' (' + s.zone + ')';
  if (s.kind === 'interval') return 'every ' + s.every;
  if (s.kind === 'once') return 'once at ' + s.at;
  if (s.kind === 'never') return 'never (fires when triggered)';
  return JSON.stringify(s);
};

JW.link = (href, text, attrs) => h('a', Object.assign({ href }, attrs || {}), text);

/** A button that runs `action`, shows its error in `errors`, then calls `done`. */
JW.button = (label, action, opts) => {
  const o = opts || {};
  const b = h('button', { class: o.class, 'data-action': o.name || label.toLowerCase() }, label);
  b.addEventListener('click', async (ev) => {
    ev.preventDefault();
    if (o.confirm && !window.confirm(typeof o.confirm === 'function' ? o.confirm() : o.confirm)) return;
    b.disabled = true;
    JW.acting = (JW.acting || 0) + 1;
    try {
      await action();
      if (o.done) await o.done();
    } catch (e) {
      JW.flash(e.message);
    } finally {
      b.disabled = false;
      JW.acting -= 1;
    }
  });
  return b;
};

/** Shows an error at the top of the page. */
JW.flash = (message) => {
  const box = document.getElementById('flash');
  if (!box) return;
  box.replaceChildren(h('div', { class: 'error', role: 'alert' }, message));
};

/** Shows a message at the top of the page, kept over the next render (an action
 * that re-renders its page tells what it did). */
JW.note = (message, kind) => {
  JW.pending = null;
  const box = document.getElementById('flash');
  const el = h('div', { class: kind === 'ok' ? 'notice' : 'error', role: kind === 'ok' ? 'status' : 'alert' }, message);
  if (box) box.replaceChildren(el);
  JW.pending = { message, kind };
};

JW.enc = encodeURIComponent;
