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
  for (const c of children.flat()) {
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

JW.badge = (text) => h('span', { class: 'badge ' + String(text).replace(/[^a-z_]/g, '') }, text);

/** An instant as local time of the browser, with the UTC instant in the tooltip. */
JW.time = (t) => {
  if (!t) return h('span', { class: 'muted' }, '—');
  const d = new Date(t);
  return h('span', { title: t }, d.toLocaleString(undefined, { hour12: false }));
};

JW.ago = (t, now) => {
  const s = Math.round((Date.parse(now || new Date().toISOString()) - Date.parse(t)) / 1000);
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.round(s / 60) + ' min ago';
  return Math.round(s / 3600) + ' h ago';
};

JW.ms = (ms) => (ms < 1000 ? ms + ' ms' : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s');

/** How a schedule reads. */
JW.schedule = (s) => {
  if (!s) return '';
  if (s.kind === 'cron') return s.expr + ' (' + s.zone + ')';
  if (s.kind === 'interval') return 'every ' + s.every;
  if (s.kind === 'once') return 'once at ' + s.at;
  return JSON.stringify(s);
};

JW.link = (href, text, attrs) => h('a', Object.assign({ href }, attrs || {}), text);

/** A button that runs `action`, shows its error in `errors`, then calls `done`. */
JW.button = (label, action, opts) => {
  const o = opts || {};
  const b = h('button', { class: o.class, 'data-action': o.name || label.toLowerCase() }, label);
  b.addEventListener('click', async (ev) => {
    ev.preventDefault();
    if (o.confirm && !window.confirm(o.confirm)) return;
    b.disabled = true;
    try {
      await action();
      if (o.done) await o.done();
    } catch (e) {
      JW.flash(e.message);
    } finally {
      b.disabled = false;
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

JW.enc = encodeURIComponent;
