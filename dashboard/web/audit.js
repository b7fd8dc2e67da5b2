// nofly dashboard: the audit trail (loaded after app.js; uses window.nofly's
// extension points). An admin (body[data-role=admin], set from GET /v1/me)
// gets an "Audit" button in the header that opens a panel listing
// GET /v1/audit newest first: who, role, what, target, versions, from
// where, outcome; filters (who, action, target, outcome, from, to) and
// "More" (the answer's next_cursor). Other roles get no button; the route
// answers them 403 anyway.
'use strict';
(() => {
  const nofly = window.nofly;
  if (!nofly || !nofly.api || !nofly.el) return;
  const el = nofly.el;
  const $ = (id) => document.getElementById(id);
  const ACTIONS = ['sign_in', 'sign_out', 'ack', 'zones_put', 'zone_put', 'zone_delete', 'authorization_create',
    'authorization_revoke', 'token_reload', 'feed_keys_reload', 'request'];
  const PAGE = 50;

  const button = el('button', { type: 'button', id: 'auditOpen', 'aria-controls': 'auditPanel', 'aria-expanded': 'false', hidden: true,
    title: 'Audit trail: who did what, when, from where' }, 'Audit');
  const who = $('who');
  if (who && who.parentNode) who.parentNode.insertBefore(button, who);
  else document.getElementById('top').append(button);

  const input = (name, attrs) => el('input', Object.assign({ name }, attrs || {}));
  const form = el('form', { id: 'auditForm', class: 'filters' },
    el('label', null, 'Who ', input('who', { placeholder: 'name', maxlength: 256 })),
    el('label', null, 'Action ', el('select', { name: 'action' }, el('option', { value: '' }, 'any'), ...ACTIONS.map((a) => el('option', { value: a }, a)))),
    el('label', null, 'Target ', input('target', { placeholder: 'alarm, zone or authorisation id', maxlength: 256 })),
    el('label', null, 'Outcome ', el('select', { name: 'outcome' }, ...['', 'ok', 'denied', 'failed'].map((o) => el('option', { value: o }, o || 'any')))),
    el('label', null, 'From (UTC) ', input('since', { type: 'datetime-local', step: 1 })),
    el('label', null, 'To (UTC) ', input('until', { type: 'datetime-local', step: 1 })),
    el('button', { type: 'submit' }, 'Search'));
  const list = el('ol', { id: 'auditList', class: 'audit', 'aria-live': 'polite' });
  const error = el('p', { id: 'auditError', class: 'error', role: 'alert', hidden: true });
  const more = el('button', { type: 'button', id: 'auditMore', hidden: true }, 'More');
  const panel = el('section', { id: 'auditPanel', 'aria-labelledby': 'auditTitle', hidden: true },
    el('h2', { id: 'auditTitle' }, 'Audit trail ', el('button', { type: 'button', id: 'auditClose', class: 'small', 'aria-label': 'Close the audit trail' }, 'close')),
    el('p', { class: 'hint' }, 'Every sign-in, ack, zone and authorisation change, token reload and refused write, newest first.'),
    form, error, list, more);
  (document.querySelector('main') || document.body).append(panel);

  let cursor = null;
  let seq = 0;
  const utc = (v) => (v ? new Date(v + 'Z').toISOString() : '');

  function query() {
    const q = new URLSearchParams();
    const f = new FormData(form);
    for (const k of ['who', 'action', 'target', 'outcome']) if (f.get(k)) q.set(k, f.get(k));
    for (const k of ['since', 'until']) if (f.get(k)) q.set(k, utc(f.get(k)));
    q.set('limit', String(PAGE));
    return q;
  }

  function row(e) {
    const versions = e.before_version !== undefined && e.after_version !== undefined ? ' v' + e.before_version + '→v' + e.after_version : '';
    let note = '';
    if (e.detail && typeof e.detail === 'object') {
      if (e.detail.note) note = '“' + e.detail.note + '”';
      else if (e.detail.drone) note = 'drone ' + e.detail.drone;
    }
    const li = el('li', { class: 'auditrow outcome-' + e.outcome, 'data-action': e.action, 'data-id': e.id },
      el('time', { datetime: e.ts }, nofly.fmtTime ? nofly.fmtTime(e.ts) : e.ts),
      el('span', { class: 'who' }, e.who + (e.role ? ' (' + e.role + ')' : '')),
      el('span', { class: 'what' }, e.action.replace(/_/g, ' ') + (e.target ? ' ' + e.target : '') + versions),
      e.outcome !== 'ok' ? el('span', { class: 'outcome' }, e.outcome + (e.status ? ' ' + e.status : '')) : null,
      note ? el('span', { class: 'note' }, note) : null,
      el('span', { class: 'from' }, [e.via, e.client, e.request].filter(Boolean).join(' · ')));
    return li;
  }

  async function load(next) {
    const my = ++seq;
    const q = query();
    if (next && cursor) q.set('cursor', cursor);
    error.hidden = true;
    try {
      const { body } = await nofly.api('v1/audit?' + q.toString());
      if (my !== seq) return;
      if (!next) list.replaceChildren();
      for (const e of body.entries) list.append(row(e));
      cursor = body.next_cursor;
      more.hidden = !cursor;
      if (!next && !body.entries.length && !cursor) list.append(el('li', { class: 'hint' }, 'No entry matches.'));
    } catch (e) {
      if (my !== seq) return;
      error.textContent = 'The audit trail could not be read: ' + e.message;
      error.hidden = false;
    }
  }

  function open(on) {
    panel.hidden = !on;
    button.setAttribute('aria-expanded', on ? 'true' : 'false');
    document.body.toggleAttribute('data-audit', on);
    if (on) load(false);
  }
  button.addEventListener('click', () => open(panel.hidden));
  $('auditClose').addEventListener('click', () => open(false));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); load(false); });
  more.addEventListener('click', () => load(true));
  document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape' && !panel.hidden) open(false); });

  // The role comes from GET /v1/me, which app.js writes to body[data-role].
  const admin = () => document.body.dataset.role === 'admin';
  const sync = () => { button.hidden = !admin(); if (!admin() && !panel.hidden) open(false); };
  new MutationObserver(sync).observe(document.body, { attributes: true, attributeFilter: ['data-role'] });
  sync();
  nofly.audit = { open, load };
})();
