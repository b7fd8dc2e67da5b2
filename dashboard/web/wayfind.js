// nofly dashboard: finding one's way on the map (issue 31), loaded after
// app.js: zone names as labels where they fit, a scale bar, the
// coordinates of a click (with Copy), a search box for drones and zones,
// and keyboard shortcuts listed under "?".
'use strict';
(function () {
  const nofly = window.nofly;
  if (!nofly || !nofly.map) return;
  const map = nofly.map, el = nofly.el;
  const $ = (id) => document.getElementById(id);
  const typing = (t) => !!t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));

  // ---- the scale bar ----------------------------------------------------
  L.control.scale({ position: 'bottomleft', metric: true, imperial: true, maxWidth: 140 }).addTo(map);

  // ---- zone labels --------------------------------------------------------
  // A zone's name where it fits: inside the zone's box on screen, not over
  // another label, at most LABEL_MAX of them. Restricted zones are placed
  // first, then the larger ones (greedy). Text is measured on a canvas (no
  // layout per label); the labels are elements of one pane, rebuilt when
  // the map settles or the zones drawn change, hidden while a zoom animates.
  const LABEL_MAX = 200, LABEL_CHARS = 60, LABEL_H = 16, LABEL_GAP = 2;
  const LABEL_FONT = '600 12px system-ui, sans-serif'; // as .zlabel in wayfind.css
  const labelPane = map.createPane('zonelabels');
  labelPane.style.zIndex = 415; // over the zones (410), under tracks and drones
  labelPane.style.pointerEvents = 'none';
  const labelBox = L.DomUtil.create('div', 'zlabels leaflet-zoom-hide', labelPane);
  const measure = document.createElement('canvas').getContext('2d');
  measure.font = LABEL_FONT;
  const widths = new Map(); // text → px; bounded below
  function textWidth(s) {
    let w = widths.get(s);
    if (w === undefined) {
      if (widths.size > 5000) widths.clear();
      w = Math.ceil(measure.measureText(s).width);
      widths.set(s, w);
    }
    return w;
  }
  let zoneLayers = new Map(); // app.js's feature id → layer, from its 'zones' event
  const labelStats = { drawn: 0, candidates: 0, ms: 0, maxMs: 0, runs: 0 };
  let labelQueued = false;
  function queueLabels() {
    if (labelQueued) return;
    labelQueued = true;
    requestAnimationFrame(() => { labelQueued = false; drawLabels(); });
  }
  function drawLabels() {
    const t0 = performance.now();
    const size = map.getSize();
    const origin = map.containerPointToLayerPoint([0, 0]);
    const vx0 = origin.x, vy0 = origin.y, vx1 = origin.x + size.x, vy1 = origin.y + size.y;
    const view = map.getBounds();
    // One candidate per zone: its largest volume on screen.
    const best = new Map();
    for (const layer of zoneLayers.values()) {
      if (!layer.feature || !map.hasLayer(layer)) continue;
      const b = layer.getBounds();
      if (!view.intersects(b)) continue;
      const nw = map.latLngToLayerPoint(b.getNorthWest()), se = map.latLngToLayerPoint(b.getSouthEast());
      const w = se.x - nw.x, h = se.y - nw.y;
      if (h < LABEL_H + 4 || w < 24) continue; // nothing fits
      const p = layer.feature.properties;
      const prev = best.get(p.zone_id);
      if (prev && prev.w * prev.h >= w * h) continue;
      best.set(p.zone_id, { layer, p, x0: nw.x, y0: nw.y, x1: se.x, y1: se.y, w, h });
    }
    // Zones whole on screen first (one that fills the view is the one the
    // operator knows they are in), restricted first, then the larger.
    for (const c of best.values()) c.clipped = c.x0 < vx0 || c.y0 < vy0 || c.x1 > vx1 || c.y1 > vy1;
    const cands = [...best.values()];
    cands.sort((a, b) => (a.clipped - b.clipped) || ((b.p.category === 'restricted') - (a.p.category === 'restricted')) || (b.w * b.h - a.w * a.h));
    // The map's controls (zoom, scale, attribution) are in the way too.
    const cr = map.getContainer().getBoundingClientRect();
    const taken = [...map.getContainer().querySelectorAll('.leaflet-control')].map((e) => {
      const r = e.getBoundingClientRect();
      return { x: vx0 + r.left - cr.left, y: vy0 + r.top - cr.top, w: r.width, h: r.height };
    });
    const free = (box) => !taken.some((q) => box.x < q.x + q.w + LABEL_GAP && q.x < box.x + box.w + LABEL_GAP && box.y < q.y + q.h + LABEL_GAP && q.y < box.y + box.h + LABEL_GAP);
    const placed = [];
    for (const c of cands) {
      if (placed.length >= LABEL_MAX) break;
      let text = c.p.name || c.p.zone_id;
      if (text.length > LABEL_CHARS) text = text.slice(0, LABEL_CHARS - 1) + '…';
      const tw = textWidth(text) + 8;
      // The part of the zone's box on screen: a zone larger than the view
      // is labelled in what shows of it.
      const x0 = Math.max(c.x0, vx0), y0 = Math.max(c.y0, vy0), x1 = Math.min(c.x1, vx1), y1 = Math.min(c.y1, vy1);
      if (tw > x1 - x0 || LABEL_H > (y1 - y0) * 0.8) continue;
      // At the zone's centre (a polygon's centroid) when that shows, else
      // the middle of what shows; taken, near the top or the bottom of
      // what shows.
      let cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
      try {
        const ctr = map.latLngToLayerPoint(c.layer.getCenter ? c.layer.getCenter() : c.layer.getLatLng());
        if (ctr.x - tw / 2 >= x0 && ctr.x + tw / 2 <= x1 && ctr.y - LABEL_H / 2 >= y0 && ctr.y + LABEL_H / 2 <= y1) { cx = ctr.x; cy = ctr.y; }
      } catch (e) { /* an empty ring: the box's middle */ }
      const at = (y) => ({ x: Math.round(cx - tw / 2), y: Math.round(y - LABEL_H / 2), w: tw, h: LABEL_H });
      const tries = [at(cy)];
      if (y1 - y0 >= 3 * LABEL_H) tries.push(at(y0 + LABEL_H), at(y1 - LABEL_H));
      const box = tries.find((b) => free(b) && !placed.some((q) => b.x < q.x + q.w + LABEL_GAP && q.x < b.x + b.w + LABEL_GAP && b.y < q.y + q.h + LABEL_GAP && q.y < b.y + b.h + LABEL_GAP));
      if (!box) continue;
      box.text = text; box.zone_id = c.p.zone_id; box.category = c.p.category; box.active = c.layer._active !== false;
      placed.push(box);
    }
    // Reuse the elements: text set, never HTML (names come from zone files).
    const kids = labelBox.children;
    for (let i = 0; i < placed.length; i++) {
      const b = placed[i];
      let d = kids[i];
      if (!d) { d = document.createElement('div'); labelBox.appendChild(d); }
      d.className = 'zlabel ' + (b.category === 'restricted' ? 'restricted' : 'warning') + (b.active ? '' : ' inactive');
      if (d.textContent !== b.text) d.textContent = b.text;
      d.dataset.zoneId = b.zone_id;
      d.style.width = b.w + 'px';
      L.DomUtil.setPosition(d, L.point(b.x, b.y));
    }
    while (kids.length > placed.length) labelBox.lastChild.remove();
    const ms = performance.now() - t0;
    labelStats.drawn = placed.length; labelStats.candidates = cands.length;
    labelStats.ms = ms; labelStats.maxMs = Math.max(labelStats.maxMs, ms); labelStats.runs++;
    labelStats.zoom = map.getZoom(); labelStats.zonesView = document.body.dataset.zonesView || '';
    document.body.dataset.zoneLabels = String(placed.length);
  }
  map.on('moveend resize', queueLabels);
  // The controls' corners change size (an attribution arriving, the
  // scale's text) and the map's box with the page's layout: placed again.
  if (window.ResizeObserver) {
    const ro = new ResizeObserver(queueLabels);
    ro.observe(map.getContainer());
    for (const c of map.getContainer().querySelectorAll('.leaflet-control-container > div')) ro.observe(c);
  }
  nofly.on('zones', (byId) => { zoneLayers = byId; queueLabels(); });
  // For the browser tests (and the curious): the labels drawn, their cost.
  nofly.zoneLabels = () => [...labelBox.children].map((d) => ({ zone_id: d.dataset.zoneId, text: d.textContent }));
  nofly.labelStats = () => Object.assign({}, labelStats);

  // ---- the coordinates of a click ----------------------------------------
  // A click on the map where nothing of its own answers (a zone's or a
  // drone's popup, a cluster, picking an authorisation's zones) shows the
  // point's latitude and longitude with a Copy button, and the zones drawn
  // there. A click that only closes a popup does just that.
  const dms = (v, pos, neg) => {
    const a = Math.abs(v), d = Math.floor(a), mf = (a - d) * 60, m = Math.floor(mf), s = (mf - m) * 60;
    return d + '°' + String(m).padStart(2, '0') + '′' + s.toFixed(1).padStart(4, '0') + '″' + (v < 0 ? neg : pos);
  };
  async function copyText(text, input, status) {
    try {
      if (!navigator.clipboard || !window.isSecureContext) throw new Error('no clipboard API');
      await navigator.clipboard.writeText(text);
      status.textContent = 'copied';
      status.dataset.how = 'clipboard';
    } catch (e) {
      // Plain http off localhost has no clipboard API: select the text for
      // Ctrl+C (and try the old copy command, which a click may still run).
      input.focus(); input.select();
      let ok = false;
      try { ok = document.execCommand('copy'); } catch (e2) { ok = false; }
      status.textContent = ok ? 'copied' : 'selected: press Ctrl+C';
      status.dataset.how = ok ? 'execCommand' : 'selected';
    }
  }
  // zonesAt is the zones' layers drawn at a point (a click the zones'
  // canvas does not get once a drone's canvas lies over it), restricted
  // first.
  function zonesAt(ll) {
    const pt = map.latLngToLayerPoint(ll);
    const seen = new Set(), out = [];
    for (const layer of zoneLayers.values()) {
      if (!layer.feature || !map.hasLayer(layer)) continue;
      const p = layer.feature.properties;
      if (seen.has(p.zone_id) || !layer.getBounds().contains(ll)) continue;
      if (layer._containsPoint && !layer._containsPoint(pt)) continue;
      seen.add(p.zone_id);
      out.push(layer);
    }
    const restricted = (l) => l.feature.properties.category === 'restricted';
    return out.sort((a, b) => restricted(b) - restricted(a));
  }
  // zonesLine says which zones a point is in, each name a button that
  // opens the zone's own popup (its limits, active window, authority):
  // where drones are drawn this is the way to it, since their canvas gets
  // the click.
  function zonesLine(ll) {
    const zs = zonesAt(ll);
    // Never "in no zone" where the view draws clusters instead of zones.
    if (!zs.length) return document.body.dataset.zonesReduced === 'true' ? 'zones here are grouped: zoom in to see them' : 'in no zone drawn here';
    const kids = ['in '];
    zs.slice(0, 5).forEach((layer, i) => {
      const p = layer.feature.properties;
      if (i > 0) kids.push(', ');
      kids.push(el('button', { type: 'button', class: 'zonelink', text: (p.name || p.zone_id) + ' (' + p.category + ')',
        title: 'Show the zone', onclick: () => layer.openPopup(ll) }));
    });
    if (zs.length > 5) kids.push(' and ' + (zs.length - 5) + ' more');
    return el('span', {}, ...kids);
  }
  function showCoords(ll) {
    const zones = zonesLine(ll);
    ll = ll.wrap();
    const text = ll.lat.toFixed(5) + ', ' + ll.lng.toFixed(5);
    const input = el('input', { type: 'text', class: 'coordtext', readonly: true, value: text, 'aria-label': 'Coordinates (latitude, longitude)', size: '20' });
    const status = el('span', { class: 'coordstatus', role: 'status' });
    const btn = el('button', { type: 'button', class: 'popbtn coordcopy', text: 'Copy', onclick: () => copyText(text, input, status) });
    const box = el('div', { class: 'coordpop', 'data-lat': String(ll.lat), 'data-lon': String(ll.lng) },
      el('div', {}, input, ' ', btn), el('div', { class: 'dms', text: dms(ll.lat, 'N', 'S') + ' ' + dms(ll.lng, 'E', 'W') }),
      el('div', { class: 'zonesat' }, zones), status);
    L.popup({ className: 'coordpopup', autoPanPadding: [20, 20] }).setLatLng(ll).setContent(box).openOn(map);
  }
  // Leaflet hands a click on a zone or a drone to the map as well, after
  // the layer's own handler: a popup opened or closed, or a move started,
  // by that same DOM event means the click was the layer's (or only
  // closed a popup). The event, not a time: a busy page may take long.
  // Picking an authorisation's drone or zones is read before the layers
  // answer (a picked drone ends the picking).
  let actedOn = null, picking = false;
  map.on('popupopen popupclose movestart', () => { actedOn = window.event || null; });
  map.on('preclick', () => { picking = document.body.classList.contains('picking'); });
  map.on('click', (e) => {
    if (picking || document.body.classList.contains('picking')) return;
    if (e.originalEvent && e.originalEvent === actedOn) return;
    showCoords(e.latlng);
  });
  nofly.showCoords = (lat, lon) => showCoords(L.latLng(lat, lon));

  // ---- the search box -----------------------------------------------------
  // Drones by id: those the page draws, and any other by its exact id (GET
  // /v1/drones/{id}); zones by id or name (GET /v1/map/zones/search, the
  // server's index of the set in force: the page holds only its view's
  // zones). At most SEARCH_ROWS rows; arrows, Enter and Escape work.
  const SEARCH_ROWS = 10, DRONE_ROWS = 5, SEARCH_DEBOUNCE_MS = 200;
  const DRONE_ID = /^[A-Za-z0-9._:-]{1,64}$/;
  const wrap = el('div', { class: 'searchbox', role: 'search' });
  const input = el('input', { id: 'search', type: 'search', placeholder: 'Drone or zone (/)', autocomplete: 'off', spellcheck: 'false',
    maxlength: '100', role: 'combobox', 'aria-autocomplete': 'list', 'aria-expanded': 'false', 'aria-controls': 'searchList', 'aria-label': 'Find a drone or zone by id or name' });
  const list = el('ul', { id: 'searchList', role: 'listbox', 'aria-label': 'Matches', hidden: true });
  wrap.append(input, list);
  const header = $('top');
  header.insertBefore(wrap, header.querySelector('.spacer'));
  const zoneCache = new Map(); // zone version|query → matches; bounded below
  const search = { seq: 0, items: [], active: -1, timer: null, pending: false };
  const zoneVersion = () => ($('zonever').dataset.version || '');
  async function findZones(q) {
    const key = zoneVersion() + '|' + q.toLowerCase();
    if (zoneCache.has(key)) return zoneCache.get(key);
    const r = await nofly.api('v1/map/zones/search?q=' + encodeURIComponent(q) + '&limit=' + SEARCH_ROWS);
    if (zoneCache.size > 200) zoneCache.delete(zoneCache.keys().next().value);
    zoneCache.set(key, r.body.zones);
    return r.body.zones;
  }
  async function findDrones(q) {
    const lq = q.toLowerCase();
    const ids = nofly.droneIds ? nofly.droneIds() : [];
    const hits = ids.filter((id) => id.toLowerCase().includes(lq));
    hits.sort((a, b) => (b.toLowerCase().startsWith(lq) - a.toLowerCase().startsWith(lq)) || a.localeCompare(b));
    const out = hits.slice(0, DRONE_ROWS).map((id) => ({ kind: 'drone', id, label: id, note: 'drone on the map' }));
    // One not drawn here (out of view): by its exact id.
    if (!hits.some((id) => id === q) && DRONE_ID.test(q)) {
      try {
        const r = await nofly.api('v1/drones/' + encodeURIComponent(q));
        if (r.body && r.body.lat !== null && r.body.lat !== undefined) {
          out.unshift({ kind: 'drone', id: r.body.drone_id, label: r.body.drone_id, note: 'drone, last seen ' + nofly.fmtTime(r.body.ts), lat: r.body.lat, lon: r.body.lon });
        }
      } catch (e) { /* 404: no such drone */ }
    }
    return out.slice(0, DRONE_ROWS);
  }
  async function runSearch() {
    const q = input.value.trim();
    const seq = ++search.seq;
    if (!q) { search.pending = false; showList([], ''); return; }
    let drones = [], zones = [], err = '';
    await Promise.all([
      findDrones(q).then((d) => { drones = d; }),
      findZones(q).then((z) => { zones = z; }).catch((e) => { err = 'zones: ' + e.message; }),
    ]);
    if (seq !== search.seq) return; // typed on meanwhile
    search.pending = false;
    const items = drones.concat(zones.map((z) => ({ kind: 'zone', id: z.zone_id, label: z.name || z.zone_id,
      note: (z.name ? z.zone_id + ' · ' : '') + z.category + ' zone', category: z.category, bbox: z.bbox }))).slice(0, SEARCH_ROWS);
    showList(items, err || (items.length ? '' : 'nothing matches “' + q + '”'));
  }
  function showList(items, message) {
    search.items = items;
    search.active = items.length ? 0 : -1;
    const rows = items.map((it, i) => el('li', { id: 'searchOpt' + i, role: 'option', class: 'searchopt ' + it.kind + (it.category ? ' ' + it.category : ''),
      'aria-selected': 'false', 'data-kind': it.kind, 'data-id': it.id,
      onmousedown: (e) => { e.preventDefault(); pick(i); } },
    el('span', { class: 'kind', text: it.kind === 'drone' ? '✈' : '▢', 'aria-hidden': 'true' }), ' ',
    el('strong', { text: it.label }), ' ', el('span', { class: 'note', text: it.note })));
    if (message) rows.push(el('li', { class: 'searchmsg', role: 'presentation', text: message }));
    list.replaceChildren(...rows);
    const open = rows.length > 0 && document.activeElement === input;
    list.hidden = !open;
    input.setAttribute('aria-expanded', open ? 'true' : 'false');
    markActive();
  }
  function markActive() {
    [...list.querySelectorAll('[role="option"]')].forEach((li, i) => li.setAttribute('aria-selected', i === search.active ? 'true' : 'false'));
    if (search.active >= 0) input.setAttribute('aria-activedescendant', 'searchOpt' + search.active);
    else input.removeAttribute('aria-activedescendant');
  }
  function closeList() {
    list.hidden = true;
    input.setAttribute('aria-expanded', 'false');
  }
  let mark = null;
  async function pick(i) {
    const it = search.items[i];
    if (!it) return;
    closeList();
    input.blur();
    if (mark) { mark.remove(); mark = null; }
    if (it.kind === 'zone') {
      const [w, s, e, n] = it.bbox;
      const b = L.latLngBounds([[s, w], [n, e]]);
      map.fitBounds(b, { padding: [30, 30], maxZoom: 16, animate: false });
      // Where it is, for a few seconds (over the zones, under the drones).
      mark = L.rectangle(b, { pane: 'tracks', color: '#ffd54f', weight: 3, dashArray: '6 4', fill: false, interactive: false }).addTo(map);
    } else {
      let lat = it.lat, lon = it.lon;
      if (lat === undefined) {
        try {
          const r = await nofly.api('v1/drones/' + encodeURIComponent(it.id));
          lat = r.body.lat; lon = r.body.lon;
        } catch (e) { input.value = it.id + ': ' + e.message; return; }
      }
      if (lat === null || lat === undefined) return;
      map.setView([lat, lon], Math.max(15, map.getZoom()), { animate: false });
      mark = L.circleMarker([lat, lon], { pane: 'tracks', radius: 20, color: '#ffd54f', weight: 3, fill: false, interactive: false }).addTo(map);
      // Followed from here on, as its popup's Follow does.
      if (nofly.follow) nofly.follow(it.id);
    }
    const m = mark;
    setTimeout(() => { if (mark === m && m) { m.remove(); mark = null; } }, 6000);
    document.body.dataset.searchPicked = it.kind + ':' + it.id;
  }
  input.addEventListener('input', () => {
    search.pending = true; // typed since the last answer
    clearTimeout(search.timer);
    search.timer = setTimeout(runSearch, SEARCH_DEBOUNCE_MS);
  });
  input.addEventListener('focus', () => { if (search.items.length || list.children.length) { list.hidden = false; input.setAttribute('aria-expanded', 'true'); } });
  input.addEventListener('blur', () => setTimeout(closeList, 0));
  input.addEventListener('keydown', (e) => {
    const n = search.items.length;
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      if (list.hidden && n) { list.hidden = false; input.setAttribute('aria-expanded', 'true'); }
      if (n) search.active = (search.active + (e.key === 'ArrowDown' ? 1 : n - 1)) % n;
      markActive();
    } else if (e.key === 'Enter') {
      e.preventDefault();
      clearTimeout(search.timer);
      // Enter before the answer came: search now, then take the first.
      if (!n || search.pending) { runSearch().then(() => pick(0)); return; }
      pick(search.active < 0 ? 0 : search.active);
    } else if (e.key === 'Escape') {
      e.preventDefault();
      if (!list.hidden) closeList(); else { input.value = ''; input.blur(); }
    }
  });

  // ---- keyboard shortcuts ---------------------------------------------------
  const SHORTCUTS = [
    ['/', 'find a drone or zone (the search box)'],
    ['f', 'fit the map to the zones'],
    ['+ / −', 'zoom in / out'],
    ['← ↑ → ↓', 'pan the map (when the map has the focus)'],
    ['Esc', 'close this list, the search matches or a popup'],
    ['?', 'this list'],
  ];
  const helpBtn = el('button', { type: 'button', id: 'helpOpen', class: 'helpbtn', text: '?', 'aria-haspopup': 'dialog', title: 'Keyboard shortcuts (?)', 'aria-label': 'Keyboard shortcuts' });
  header.insertBefore(helpBtn, $('signout').nextSibling);
  const closeBtn = el('button', { type: 'button', id: 'helpClose', text: 'Close' });
  const help = el('div', { id: 'helpPane', class: 'modal', hidden: true },
    el('div', { class: 'card help', role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'helpTitle' },
      el('h2', { id: 'helpTitle', text: 'Keyboard shortcuts' }),
      el('dl', { class: 'keys' }, ...SHORTCUTS.flatMap(([k, what]) => [el('dt', {}, el('kbd', { text: k })), el('dd', { text: what })])),
      el('p', { class: 'hint', text: 'Not while typing in a field. Click the map for a point’s coordinates.' }),
      closeBtn));
  document.body.appendChild(help);
  let helpReturn = null;
  function openHelp() {
    helpReturn = document.activeElement;
    help.hidden = false;
    closeBtn.focus();
  }
  function closeHelp() {
    help.hidden = true;
    if (helpReturn && helpReturn.focus) helpReturn.focus();
    helpReturn = null;
  }
  helpBtn.addEventListener('click', openHelp);
  closeBtn.addEventListener('click', closeHelp);
  help.addEventListener('click', (e) => { if (e.target === help) closeHelp(); });
  help.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') { e.preventDefault(); e.stopPropagation(); closeHelp(); }
    if (e.key === 'Tab') { e.preventDefault(); closeBtn.focus(); } // the one control: focus stays in
  });
  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) return;
    if (!help.hidden) return; // the dialog's own keys
    if (e.key === 'Escape') {
      if (!list.hidden) closeList();
      else map.closePopup();
      return;
    }
    if (typing(e.target) || !$('tokenPane').hidden) return;
    switch (e.key) {
      case '/': e.preventDefault(); input.focus(); input.select(); break;
      case '?': e.preventDefault(); openHelp(); break;
      case 'f': $('fit').click(); break;
      case '+': case '=': map.zoomIn(); break;
      case '-': case '_': map.zoomOut(); break;
      default: return;
    }
  });
})();
