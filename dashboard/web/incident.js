// nofly dashboard: incident (loaded after app.js; uses window.nofly's extension points).
// An alarm's story: its "Incident" button (or the #alarm=<id> link) reads
// the alarm's report as GeoJSON (GET /v1/alarms/{id}/report?format=geojson,
// the same story the police get) and draws the drone's track from before
// the entry to after the clear, the raise and the clear, the pilot where
// the feed reported one, and the timeline (raise, ack who/when/note,
// signal lost, authorisation, clear) in a panel with the report's
// downloads. The downloads are fetched with the token and saved as a blob:
// a plain link could not carry it.
'use strict';
(() => {
  const nofly = window.nofly;
  if (!nofly || !nofly.on || !nofly.map) return;
  const map = nofly.map;
  const el = nofly.el;
  const pane = map.createPane('incident');
  pane.style.zIndex = 430; // above the zones and tracks, under the drones' markers
  // Its own SVG renderer: one track and a few markers, each a DOM element
  // the tests can find.
  const svg = L.svg({ pane: 'incident' });
  const FORMATS = [['html', 'HTML (print / PDF)'], ['geojson', 'GeoJSON'], ['kml', 'KML'], ['csv', 'CSV']];
  const KINDS = { raised: 'raised', acked: 'acknowledged', cleared: 'cleared', signal_lost: 'signal lost', authorized: 'authorised' };

  let layer = null; // the drawn story
  let panel = null;
  let shown = null; // {id, report}
  let seq = 0; // the latest open(): an older answer arriving late is dropped

  function close() {
    if (layer) { layer.remove(); layer = null; }
    if (panel) { panel.remove(); panel = null; }
    shown = null;
    document.body.removeAttribute('data-incident');
  }

  const fmtTime = (s) => nofly.fmtTime(s);
  const hhmmss = (s) => (s ? new Date(s).toISOString().slice(11, 19) + 'Z' : '–');

  function draw(rep, fit) {
    if (layer) layer.remove();
    layer = L.featureGroup();
    let raise = null;
    for (const f of rep.features) {
      const p = f.properties || {};
      const g = f.geometry;
      if (p.kind === 'zone') {
        L.geoJSON(f, { pane: 'incident', renderer: svg, interactive: false,
          style: { className: 'incident-zone', color: '#d33', weight: 2, dashArray: '6 4', fill: false } }).addTo(layer);
      } else if (p.kind === 'track') {
        L.polyline(g.coordinates.map((c) => [c[1], c[0]]), { pane: 'incident', renderer: svg, className: 'incident-track',
          color: '#0078ff', weight: 3, opacity: 0.9 }).addTo(layer);
      } else if (p.kind === 'track_point') {
        // Each sample, so the pace of the track (10 s, 1 s while alarmed)
        // shows.
        L.circleMarker([g.coordinates[1], g.coordinates[0]], { pane: 'incident', renderer: svg, className: 'incident-point',
          radius: 2.5, weight: 0, fillColor: '#0050c0', fillOpacity: 0.9 }).bindTooltip(fmtTime(p.ts)).addTo(layer);
      } else if (p.kind === 'raised' || p.kind === 'cleared') {
        const ll = [g.coordinates[1], g.coordinates[0]];
        if (p.kind === 'raised') raise = ll;
        L.circleMarker(ll, { pane: 'incident', renderer: svg, className: 'incident-' + p.kind, radius: 7, weight: 2,
          color: '#fff', fillColor: p.kind === 'raised' ? '#d00' : '#0a0', fillOpacity: 1 })
          .bindTooltip(KINDS[p.kind] + ' ' + fmtTime(p.ts)).addTo(layer);
      }
    }
    for (const f of rep.features) {
      const p = f.properties || {};
      if (p.kind !== 'pilot' && p.kind !== 'pilot_latest') continue;
      const ll = [f.geometry.coordinates[1], f.geometry.coordinates[0]];
      if (p.kind === 'pilot' && raise) {
        L.polyline([raise, ll], { pane: 'incident', renderer: svg, className: 'incident-pilotline', color: '#06c', weight: 1.5,
          dashArray: '5 4', interactive: false }).addTo(layer);
      }
      L.marker(ll, { pane: 'incident', icon: L.divIcon({ className: 'incident-pilot', iconSize: [12, 12] }), keyboard: false })
        .bindTooltip((p.kind === 'pilot' ? 'pilot at the raise' : 'pilot, latest') + ' (' + p.type + ') ' + fmtTime(p.ts)).addTo(layer);
    }
    layer.addTo(map);
    const b = layer.getBounds();
    // The panel stands over the map's right: the story fits left of it.
    if (!fit) return;
    // The story's view wins over a flight under way (the alarm link's):
    // a renderer moved mid-animation would draw at the old scale.
    map.stop();
    if (b.isValid()) map.fitBounds(b, { paddingTopLeft: [60, 40], paddingBottomRight: [450, 40], maxZoom: 16, animate: false });
  }

  function renderPanel(id, rep) {
    if (panel) panel.remove();
    const a = rep.alarm || {};
    const close_ = el('button', { type: 'button', class: 'small', 'aria-label': 'Close the incident', onclick: close }, '×');
    const tl = el('ol', { class: 'incident-timeline' });
    for (const e of rep.timeline || []) {
      const li = el('li', { 'data-kind': e.kind },
        el('span', { class: 'when', text: fmtTime(e.ts) }), ' ',
        el('b', { text: KINDS[e.kind] || e.kind }), ' ', el('span', { text: e.text }));
      if (e.note) li.append(el('div', { class: 'note', text: '“' + e.note + '”' }));
      tl.append(li);
    }
    const track = rep.features.find((f) => f.properties && f.properties.kind === 'track');
    const n = track ? track.geometry.coordinates.length : 0;
    const src = { raise: 'as at the raise', current: 'current version: the raise\'s is no longer kept', none: 'zone not found' }[rep.zone_source] || '';
    const facts = el('p', { class: 'meta' },
      'track ' + hhmmss(rep.window.from) + ' – ' + hhmmss(rep.window.to) + ' · ' + n + ' points · zone set v' + rep.zone_version + ' (' + src + ')');
    const pilots = rep.features.filter((f) => f.properties && (f.properties.kind === 'pilot' || f.properties.kind === 'pilot_latest'));
    const pilotLine = el('p', { class: 'meta pilotline' });
    if (pilots.length) {
      const p = pilots[0].properties;
      pilotLine.textContent = 'pilot (' + p.type + ')' + (p.range_m != null ? ' ' + (p.range_m >= 1000 ? (p.range_m / 1000).toFixed(1) + ' km' : Math.round(p.range_m) + ' m') + ' at ' + Math.round(p.bearing_deg) + '° from the drone at the raise' : '') + ', reported ' + fmtTime(p.ts);
    } else pilotLine.textContent = 'pilot: not reported by the feed';
    const err = el('span', { class: 'incident-err', role: 'alert' });
    const dl = el('p', { class: 'downloads' }, 'Report: ');
    for (const [fmt, label] of FORMATS) {
      const btn = el('button', { type: 'button', class: 'small', 'data-format': fmt, text: label });
      btn.addEventListener('click', () => download(id, fmt, btn, err));
      dl.append(btn, ' ');
    }
    dl.append(err);
    panel = el('section', { id: 'incident', class: 'incident', 'aria-label': 'Incident of alarm ' + id, 'data-alarm-id': id },
      el('h2', {}, 'Incident: drone ' + a.drone_id + ' in ' + (a.zone_name || a.zone_id) + ' ', close_),
      el('p', { class: 'meta', text: 'alarm ' + id + ' · ' + a.category + ' · ' + (a.state || '') }),
      facts, tl, pilotLine, dl);
    document.querySelector('main').append(panel);
    document.body.setAttribute('data-incident', id);
  }

  async function download(id, fmt, btn, err) {
    btn.disabled = true;
    err.textContent = '';
    try {
      const res = await fetch('v1/alarms/' + encodeURIComponent(id) + '/report?format=' + fmt, { headers: nofly.headers(), cache: 'no-store' });
      if (!res.ok) {
        let msg = 'HTTP ' + res.status;
        try { msg = (await res.json()).error || msg; } catch (e) { /* not JSON */ }
        throw new Error(msg);
      }
      const blob = await res.blob();
      const name = (/filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') || '') || [])[1] || 'nofly-alarm-' + id + '.' + fmt;
      const url = URL.createObjectURL(blob);
      const a = el('a', { href: url, download: name, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 30000);
      api.lastDownload = { name, size: blob.size, type: blob.type };
    } catch (e) {
      err.textContent = fmt + ': ' + e.message;
    } finally {
      btn.disabled = false;
    }
  }

  // open reads and draws alarm id's story; refresh (an event of the
  // alarm shown: its ack, its clear) redraws it where the map is.
  async function open(id, refresh) {
    const my = ++seq;
    const r = await nofly.api('v1/alarms/' + encodeURIComponent(id) + '/report?format=geojson');
    if (my !== seq || (refresh && (!shown || shown.id !== id))) return;
    shown = { id, report: r.body };
    draw(r.body, !refresh);
    renderPanel(id, r.body);
  }
  let refreshTimer = null;
  nofly.on('alarm', (type, e) => {
    if (!shown || !e || e.alarm_id !== shown.id) return;
    clearTimeout(refreshTimer);
    const id = shown.id;
    refreshTimer = setTimeout(() => open(id, true).catch((err) => console.warn('incident refresh', id, err)), 500);
  });

  function openShowingErrors(id) {
    open(id).catch((e) => {
      close();
      const p = el('section', { id: 'incident', class: 'incident', role: 'alert' },
        el('h2', {}, 'Incident ', el('button', { type: 'button', class: 'small', 'aria-label': 'Close', onclick: close }, '×')),
        el('p', { class: 'incident-err', text: 'alarm ' + id + ': ' + e.message }));
      panel = p;
      document.querySelector('main').append(p);
    });
  }

  // The alarm link (#alarm=<id>: app.js reads it before the map rewrites
  // the address) opens the story once its row is drawn (signed in, read).
  let linkPending = nofly.linkedAlarm || null;
  nofly.on('alarmitem', (li, a) => {
    if (linkPending && a.alarm_id === linkPending) {
      linkPending = null;
      // app.js flies to the linked alarm (0.8 s): the story's view comes
      // after that flight, not in the middle of it.
      let done = false;
      const go = () => { if (!done) { done = true; openShowingErrors(a.alarm_id); } };
      map.once('movestart', () => map.once('moveend', () => setTimeout(go, 50)));
      setTimeout(go, 2500);
    }
    const head = li.querySelector('.head') || li;
    head.append(el('button', { type: 'button', class: 'incident-open small', title: 'The story of this alarm: track, timeline, report',
      'aria-label': 'Incident of drone ' + a.drone_id + ' in ' + (a.zone_name || a.zone_id), onclick: () => openShowingErrors(a.alarm_id) }, 'Incident'));
  });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && panel) close(); });

  // For the tests and the curious: what is drawn.
  const api = {
    open, close,
    shown: () => (shown ? shown.id : null),
    drawn: () => {
      const q = (sel) => [...pane.querySelectorAll(sel)];
      const track = q('path.incident-track')[0];
      const box = track ? track.getBoundingClientRect() : null;
      return {
        trackPoints: shown ? (shown.report.features.find((f) => f.properties.kind === 'track') || { geometry: { coordinates: [] } }).geometry.coordinates.length : 0,
        trackBox: box ? [box.left, box.top, box.width, box.height] : null,
        trackD: track ? track.getAttribute('d').length : 0,
        raised: q('path.incident-raised').length, cleared: q('path.incident-cleared').length,
        points: q('path.incident-point').length,
        pilots: pane.querySelectorAll('.incident-pilot').length,
        timeline: [...document.querySelectorAll('#incident .incident-timeline li')].map((li) => li.textContent),
      };
    },
    lastDownload: null,
  };
  nofly.incident = api;
})();
