// nofly dashboard: pilot (loaded after app.js; uses window.nofly's extension points).
// Where each drone's pilot stands, as the drone's feed reported it: a
// square marker (not a drone's circle) linked to its drone by a dashed
// line, with the location type and age; and in each alarm row the pilot's
// range and bearing from the drone. The pilot never decides an alarm: it
// is what a patrol is sent to.
'use strict';
(() => {
  const nofly = window.nofly;
  if (!nofly || !nofly.on || !nofly.map) return;
  const map = nofly.map;
  const el = nofly.el;
  const pane = map.createPane('pilots');
  pane.style.zIndex = 425; // above the tracks, below the drones
  // Its own SVG renderer: few lines (at most one per drone drawn), and each
  // a DOM path the tests can find.
  const lines = L.svg({ pane: 'pilots' });
  const TYPES = { takeoff: 'take-off point', live: 'pilot (live GNSS)', fixed: 'fixed location' };
  const SHORT = { takeoff: 'take-off', live: 'live', fixed: 'fixed' };
  const typeText = (t) => TYPES[t] || 'pilot (location type unknown)';

  // drone id → {op, drone: [lat, lon], marker, line}; at most one per
  // drone the page draws one by one.
  const pilots = new Map();
  // alarm id → the pilot as known at the raise (from its raised event).
  const atRaise = new Map();
  const RAISE_MAX = 5000;

  const rad = Math.PI / 180;
  // Great-circle distance (m) and initial bearing (°) from a to b.
  function rangeBearing(aLat, aLon, bLat, bLon) {
    const p1 = aLat * rad, p2 = bLat * rad, dp = (bLat - aLat) * rad, dl = (bLon - aLon) * rad;
    const h = Math.sin(dp / 2) ** 2 + Math.cos(p1) * Math.cos(p2) * Math.sin(dl / 2) ** 2;
    const m = 2 * 6371008.8 * Math.asin(Math.min(1, Math.sqrt(h)));
    const y = Math.sin(dl) * Math.cos(p2), x = Math.cos(p1) * Math.sin(p2) - Math.sin(p1) * Math.cos(p2) * Math.cos(dl);
    return [m, (Math.atan2(y, x) / rad + 360) % 360];
  }
  const fmtRange = (m) => m >= 1000 ? (m / 1000).toFixed(1) + ' km' : Math.round(m) + ' m';
  const fmtAge = (ts) => {
    const s = Math.max(0, Math.round((Date.now() - Date.parse(ts)) / 1000));
    if (s < 120) return s + ' s ago';
    const m = Math.floor(s / 60);
    return m < 120 ? m + ' min ago' : Math.floor(m / 60) + ' h ago';
  };
  // "1.2 km at 245° (live, 8 s ago)": from the drone at (lat, lon).
  function pilotText(op, lat, lon) {
    const [m, b] = rangeBearing(lat, lon, op.lat, op.lon);
    return fmtRange(m) + ' at ' + (Math.round(b) % 360) + '° (' + (SHORT[op.type] || 'type unknown') + ', ' + fmtAge(op.ts) + ')';
  }
  function tooltip(id) {
    const p = pilots.get(id);
    if (!p) return '';
    return typeText(p.op.type) + ' of ' + id + ' · reported ' + fmtAge(p.op.ts) + ' · ' + pilotText(p.op, p.drone[0], p.drone[1]) + ' from the drone';
  }

  function drop(id) {
    const p = pilots.get(id);
    if (!p) return;
    p.marker.remove(); p.line.remove();
    pilots.delete(id);
  }
  function place(d) {
    const op = d.operator;
    const ll = [op.lat, op.lon], dl = [d.lat, d.lon];
    let p = pilots.get(d.drone_id);
    if (!p) {
      const icon = L.divIcon({ className: 'pilot-icon pilot-' + (op.type || 'unknown'), iconSize: [14, 14], iconAnchor: [7, 7] });
      p = { marker: L.marker(ll, { icon, pane: 'pilots', keyboard: false, title: '' }) };
      p.line = L.polyline([dl, ll], { renderer: lines, pane: 'pilots', color: '#6a1b9a', weight: 2.5, opacity: 0.9, dashArray: '8 6', interactive: false, className: 'pilot-line' });
      const id = d.drone_id;
      p.marker.bindTooltip(() => document.createTextNode(tooltip(id)));
      p.line.addTo(map); p.marker.addTo(map);
      p.marker.getElement().setAttribute('data-drone-id', id);
      pilots.set(id, p);
    } else {
      p.marker.setLatLng(ll);
      p.line.setLatLngs([dl, ll]);
      if (p.op.type !== op.type) p.marker.getElement().className = p.marker.getElement().className.replace(/pilot-(takeoff|live|fixed|unknown)/, 'pilot-' + (op.type || 'unknown'));
    }
    p.op = op; p.drone = dl;
  }

  nofly.on('positions', (frame) => {
    // A clustered view draws no pilots: its drones are counted, not drawn.
    if (frame.clustered) {
      for (const id of [...pilots.keys()]) drop(id);
    }
    for (const id of frame.gone || []) drop(id);
    for (const d of frame.drones) {
      if (d.operator && !frame.clustered) place(d);
    }
    // After app.js applied the frame: a drone it no longer draws loses its
    // pilot, so there are never more pilots than drones drawn.
    if (pilots.size) setTimeout(() => {
      const drawn = new Set(nofly.droneIds());
      for (const id of [...pilots.keys()]) if (!drawn.has(id)) drop(id);
    }, 0);
  });

  nofly.on('alarm', (type, e) => {
    if (type !== 'raised' || !e.operator) return;
    atRaise.set(e.alarm_id, e.operator);
    if (atRaise.size > RAISE_MAX) atRaise.delete(atRaise.keys().next().value);
  });

  // The alarm row: the pilot as known now (the map's, else the API's
  // latest, else the raise's), range and bearing from the drone as drawn
  // now (else from where it raised).
  nofly.on('alarmitem', (li, a) => {
    const p = pilots.get(a.drone_id);
    const op = (p && p.op) || a.operator_latest || a.operator || atRaise.get(a.alarm_id);
    if (!op) return;
    let m, b;
    if (p) [m, b] = rangeBearing(p.drone[0], p.drone[1], op.lat, op.lon);
    else if (op.range_m !== undefined && op.range_m !== null) [m, b] = [op.range_m, op.bearing_deg]; // the API's, from the drone now
    else [m, b] = rangeBearing(a.raised.lat, a.raised.lon, op.lat, op.lon);
    li.append(el('div', { class: 'pilot', title: typeText(op.type) + ' at ' + op.lat.toFixed(5) + ', ' + op.lon.toFixed(5) + ', reported ' + nofly.fmtTime(op.ts) },
      el('span', { class: 'pilot-glyph', 'aria-hidden': 'true' }),
      'pilot ' + fmtRange(m) + ' at ' + (Math.round(b) % 360) + '° (' + (SHORT[op.type] || 'type unknown') + ', ',
      el('span', { class: 'pilot-age', 'data-ts': op.ts, text: fmtAge(op.ts) }), ')'));
  });
  // The rows' ages move on without a redraw of the lists.
  setInterval(() => {
    for (const s of document.querySelectorAll('.alarm .pilot-age')) s.textContent = fmtAge(s.dataset.ts);
  }, 5000);

  // For the browser tests: the pilots drawn, with their marker's centre and
  // their line's box on the page.
  nofly.pilots = () => [...pilots.entries()].map(([id, p]) => {
    const r = p.marker.getElement().getBoundingClientRect();
    const lr = p.line.getElement() ? p.line.getElement().getBoundingClientRect() : null;
    return { drone_id: id, lat: p.op.lat, lon: p.op.lon, type: p.op.type, ts: p.op.ts, tooltip: tooltip(id),
      px: [r.left + r.width / 2, r.top + r.height / 2],
      line: lr ? { left: lr.left, top: lr.top, right: lr.right, bottom: lr.bottom, dash: p.line.getElement().getAttribute('stroke-dasharray') } : null };
  });
  nofly.pilotText = pilotText;
})();
