// nofly operations dashboard: zones, drones and alarms on the alert API.
// No framework, no build step; every request goes to this page's origin
// (the Content-Security-Policy refuses any other).
'use strict';

(function () {
  const TRACK_MS = 120 * 1000;     // a drone's track: its last two minutes
  const STALE_MS = 12 * 1000;      // no frame for this long: "stale"
  const RESTYLE_MS = 30 * 1000;    // zones' active windows checked this often
  const HISTORY_PAGE = 50;

  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  };
  const fmtTime = (s) => s ? new Date(s).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '–';
  // How long ago an instant of the log's clock was, as an operator reads it.
  const fmtAgo = (s) => {
    const m = Math.floor((Date.now() - Date.parse(s)) / 60000);
    if (!(m >= 1)) return 'under a minute ago';
    return m < 60 ? m + ' min ago' : Math.floor(m / 60) + ' h ' + (m % 60) + ' min ago';
  };
  const fmtLimit = (l) => l ? `${l.m} m ${l.ref}` : 'none';

  // What tests and operators can read of the page's state.
  // frames: the time between animation frames (ms); work: the time the page
  // spent on each message of its streams (ms), its own share of a frame.
  const stats = { frames: [], work: [], events: 0, eventIds: new Set(), duplicates: 0, positions: 0, reconnects: 0 };
  window.nofly = { stats };

  // ---- the API --------------------------------------------------------
  let token = sessionStorage.getItem('nofly.token') || '';
  let me = null;
  const headers = (extra) => Object.assign(token ? { Authorization: 'Bearer ' + token } : {}, extra || {});

  class APIError extends Error {
    constructor(status, body) {
      super((body && body.error) || ('HTTP ' + status));
      this.status = status; this.body = body;
    }
  }
  async function api(path, opts) {
    const o = Object.assign({ cache: 'no-store' }, opts || {});
    o.headers = headers(o.headers);
    const res = await fetch(path, o);
    if (res.status === 304) return { status: 304 };
    const text = await res.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = { error: text }; }
    if (!res.ok) throw new APIError(res.status, body);
    return { status: res.status, body, etag: res.headers.get('ETag') };
  }

  // sse reads a text/event-stream with fetch (an EventSource cannot send
  // Authorization), calling onEvent(type, data, id) and onComment(text);
  // it resolves never: it throws when the stream ends or fails.
  async function sse(path, hdrs, signal, onOpen, onEvent, onComment) {
    const res = await fetch(path, { headers: headers(hdrs), signal, cache: 'no-store' });
    if (!res.ok) {
      let body = null;
      try { body = await res.json(); } catch (e) { /* not JSON */ }
      throw new APIError(res.status, body);
    }
    onOpen();
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ev = { type: 'message', data: [], id: null };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the server ended the stream');
      buf += value;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (ev.data.length) {
            const t0 = performance.now();
            onEvent(ev.type, ev.data.join('\n'), ev.id);
            stats.work.push(performance.now() - t0);
            if (stats.work.length > 600) stats.work.splice(0, stats.work.length - 600);
          }
          ev = { type: 'message', data: [], id: null };
          continue;
        }
        if (line[0] === ':') { onComment(line.slice(1).trim()); continue; }
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? '' : line.slice(c + 1);
        if (v[0] === ' ') v = v.slice(1);
        if (field === 'data') ev.data.push(v);
        else if (field === 'event') ev.type = v;
        else if (field === 'id') ev.id = v;
      }
    }
  }

  // ---- connection indicator -------------------------------------------
  // Two streams (alarm events, positions); live when both are open and
  // heard from within STALE_MS.
  const conn = { events: 'connecting', positions: 'connecting', heard: { events: 0, positions: 0 }, staleSince: null };
  function heard(which) { conn.heard[which] = Date.now(); conn[which] = 'live'; renderConn(); }
  function lost(which) { conn[which] = 'reconnecting'; renderConn(); }
  function renderConn() {
    const now = Date.now();
    let state = 'live';
    for (const w of ['events', 'positions']) {
      if (conn[w] === 'error') state = 'error';
      else if (conn[w] !== 'live' && state === 'live') state = conn[w];
    }
    // The events stream speaks at least every 15 s (keepalive), positions
    // every 5 s: silence past that is a dead link, whatever the socket says.
    const quiet = now - conn.heard.positions > STALE_MS || now - conn.heard.events > 20000;
    if (state !== 'live' || quiet) {
      if (conn.staleSince === null) conn.staleSince = now;
    } else conn.staleSince = null;
    let text = state === 'live' ? 'live' : state === 'error' ? 'error: ' + (conn.errText || '') : state + '…';
    let shape = state === 'live' ? '●' : state === 'error' ? '✖' : '◌';
    let cls = state;
    if (conn.staleSince !== null && now - conn.staleSince > STALE_MS && state !== 'error') {
      text = 'stale since ' + fmtTime(new Date(conn.staleSince).toISOString()) + (state !== 'live' ? ' (' + state + ')' : '');
      shape = '■'; cls = 'stale';
    }
    const c = $('conn');
    c.className = 'conn conn-' + cls;
    c.dataset.state = cls;
    c.querySelector('.shape').textContent = shape;
    c.querySelector('.text').textContent = text;
  }
  setInterval(renderConn, 1000);

  // ---- the map --------------------------------------------------------
  const map = L.map('map', { preferCanvas: true, worldCopyJump: true, zoomControl: true, attributionControl: true });
  map.attributionControl.setPrefix(false);
  map.attributionControl.addAttribution('Coastlines: Natural Earth (world-atlas) · Map: Leaflet');
  map.setView([51.5, -0.3], 6);
  // A view in the address (#map=zoom/lat/lon, as OpenStreetMap writes it)
  // wins over fitting the zones, and the address follows the map: a view
  // can be bookmarked or sent to a colleague.
  const hashView = /^#map=(\d{1,2})\/(-?\d+(?:\.\d+)?)\/(-?\d+(?:\.\d+)?)$/.exec(location.hash);
  if (hashView) map.setView([+hashView[2], +hashView[3]], +hashView[1]);
  map.on('moveend', () => {
    const c = map.getCenter();
    window.history.replaceState(null, '', '#map=' + map.getZoom() + '/' + c.lat.toFixed(4) + '/' + c.lng.toFixed(4));
  });
  window.nofly.center = () => { const c = map.getCenter(); return [c.lat, c.lng]; };
  const renderer = L.canvas({ padding: 0.3 });
  const zonePane = map.createPane('zones'); zonePane.style.zIndex = 410;
  const trackPane = map.createPane('tracks'); trackPane.style.zIndex = 420;
  const dronePane = map.createPane('drones'); dronePane.style.zIndex = 430;
  const zoneRenderer = L.canvas({ pane: 'zones', padding: 0.3 });
  const trackRenderer = L.canvas({ pane: 'tracks', padding: 0.3 });
  const droneRenderer = L.canvas({ pane: 'drones', padding: 0.3 });

  // unwrap keeps a ring continuous across the antimeridian (a step of more
  // than 180° of longitude is the short way round): Leaflet would draw
  // 179.9 → -179.9 across the whole world.
  function unwrapRing(ring) {
    let shift = 0;
    const out = ring.map((p, i) => {
      if (i > 0) {
        const d = p[0] - ring[i - 1][0];
        if (d > 180) shift -= 360; else if (d < -180) shift += 360;
      }
      return shift ? [p[0] + shift, p[1]] : p;
    });
    // Only when that makes the ring narrower (a zone across the
    // antimeridian, not one that goes round the pole), and then centred
    // on the map's world (the first point chose the frame).
    const lo = (r) => Math.min(...r.map((p) => p[0])), hi = (r) => Math.max(...r.map((p) => p[0]));
    if (hi(out) - lo(out) >= hi(ring) - lo(ring)) return ring;
    const mid = (hi(out) + lo(out)) / 2;
    const k = mid > 180 ? -360 : mid < -180 ? 360 : 0;
    return k ? out.map((p) => [p[0] + k, p[1]]) : out;
  }
  function unwrapGeometry(g) {
    if (!g) return g;
    if (g.type === 'Polygon') g.coordinates = g.coordinates.map(unwrapRing);
    else if (g.type === 'MultiPolygon') g.coordinates = g.coordinates.map((poly) => poly.map(unwrapRing));
    return g;
  }
  function unwrapFeatures(fc) {
    for (const f of fc.features || []) f.geometry = unwrapGeometry(f.geometry);
    return fc;
  }

  // Natural Earth land: 1:110m when zoomed out, 1:50m closer in.
  const land = {};
  const landStyle = { color: '#9aa79a', weight: 1, fillColor: '#eef0ea', fillOpacity: 1 };
  function landFor(scale) {
    if (!land[scale]) {
      land[scale] = fetch('vendor/world-atlas/land-' + scale + '.json').then((r) => r.json()).then((topo) =>
        L.geoJSON(unwrapFeatures(topojson.feature(topo, topo.objects.land)), { renderer, interactive: false, style: landStyle }));
    }
    return land[scale];
  }
  let landShown = null;
  function showLand() {
    const scale = map.getZoom() < 5 ? '110m' : '50m';
    if (landShown === scale) return;
    landShown = scale;
    Promise.all([landFor(scale), landFor(scale === '110m' ? '50m' : '110m').catch(() => null)]).then(([want, other]) => {
      if (landShown !== scale) return;
      if (other) other.remove();
      want.addTo(map).bringToBack();
    }).catch((e) => console.warn('land outline', e));
  }
  map.on('zoomend', showLand);
  showLand();

  // ---- zones ----------------------------------------------------------
  const zones = { version: null, etag: null, layer: null, byZone: new Map(), bounds: null, count: 0 };
  const COLORS = { restricted: '#e53935', warning: '#fb8c00' };

  // zoneActive is geofence.Zone.Active: within [active_from, active_until)
  // and, when it has windows, within one of them (weekly: seconds since
  // Monday 00:00 UTC, [start, end)).
  function zoneActive(p, t) {
    const ms = t.getTime();
    if (p.active_from && ms < Date.parse(p.active_from)) return false;
    if (p.active_until && ms >= Date.parse(p.active_until)) return false;
    if (!p.windows || !p.windows.length) return true;
    const s = Math.floor(((Math.floor(ms / 1000) + 3 * 86400) % 604800 + 604800) % 604800);
    return p.windows.some((w) => {
      if (w.from && ms < Date.parse(w.from)) return false;
      if (w.until && ms >= Date.parse(w.until)) return false;
      if (!w.weekly || !w.weekly.length) return true;
      return w.weekly.some(([a, b]) => s >= a && s < b);
    });
  }
  function zoneStyle(p, active) {
    const c = COLORS[p.category] || '#8e24aa';
    return active
      ? { color: c, weight: 2, opacity: 0.9, fillColor: c, fillOpacity: 0.18, dashArray: null }
      : { color: c, weight: 1, opacity: 0.35, fillColor: c, fillOpacity: 0.04, dashArray: '4 4' };
  }
  function windowText(p) {
    const parts = [];
    if (p.active_from || p.active_until) parts.push(fmtTime(p.active_from) + ' → ' + fmtTime(p.active_until));
    for (const w of p.windows || []) {
      let s = '';
      if (w.from || w.until) s += fmtTime(w.from) + ' → ' + fmtTime(w.until);
      if (w.weekly && w.weekly.length) {
        const days = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
        const at = (x) => days[Math.floor(x / 86400) % 7] + ' ' + new Date((x % 86400) * 1000).toISOString().slice(11, 16);
        s += (s ? ', ' : '') + w.weekly.map(([a, b]) => at(a) + '–' + at(b)).join(', ') + ' UTC';
      }
      parts.push(s || 'always');
    }
    return parts.length ? parts.join('; ') : 'always';
  }
  function zonePopup(p) {
    const active = zoneActive(p, new Date());
    return el('dl', { class: 'zonepop' },
      el('dt', { text: p.name || p.zone_id }), el('dd', { text: p.zone_id + (p.volume ? ' (volume ' + (p.volume + 1) + ')' : '') }),
      el('dt', { text: 'Category' }), el('dd', { text: p.category + (p.restriction ? ' (' + p.restriction + ')' : '') }),
      el('dt', { text: 'Floor / ceiling' }), el('dd', { text: fmtLimit(p.floor) + ' / ' + fmtLimit(p.ceiling) }),
      p.radius_m ? el('dt', { text: 'Radius' }) : null, p.radius_m ? el('dd', { text: p.radius_m + ' m' }) : null,
      el('dt', { text: 'Active window' }), el('dd', { text: windowText(p) + (active ? ' — active now' : ' — NOT active now') }),
      p.authority ? el('dt', { text: 'Authority' }) : null, p.authority ? el('dd', { text: p.authority }) : null);
  }
  async function loadZones(force) {
    let r;
    try {
      r = await api('v1/map/zones', { headers: zones.etag && !force ? { 'If-None-Match': zones.etag } : {} });
    } catch (e) { showError('zones: ' + e.message); return; }
    if (r.status === 304) return;
    const fc = unwrapFeatures(r.body);
    if (zones.layer) zones.layer.remove();
    zones.byZone.clear();
    const now = new Date();
    zones.layer = L.geoJSON(fc, {
      renderer: zoneRenderer, pane: 'zones',
      pointToLayer: (f, ll) => L.circle(ll, { radius: f.properties.radius_m, renderer: zoneRenderer, pane: 'zones' }),
      style: (f) => zoneStyle(f.properties, zoneActive(f.properties, now)),
      onEachFeature: (f, layer) => {
        const p = f.properties;
        layer._active = zoneActive(p, now);
        if (!zones.byZone.has(p.zone_id)) zones.byZone.set(p.zone_id, []);
        zones.byZone.get(p.zone_id).push(layer);
        // Text nodes, never HTML strings: names come from zone files and
        // drone ids from telemetry.
        layer.bindTooltip(() => document.createTextNode((p.name || p.zone_id) + ' · ' + p.category + (layer._active ? '' : ' (inactive)')), { sticky: true });
        layer.bindPopup(() => zonePopup(p));
      },
    }).addTo(map);
    zones.version = fc.zone_version; zones.etag = r.etag; zones.count = fc.zones;
    zones.bounds = fc.features.length ? zones.layer.getBounds() : null;
    $('zonever').textContent = 'zones: v' + fc.zone_version + ' (' + fc.zones + ')';
    $('zonever').dataset.version = fc.zone_version;
    document.body.dataset.zonesDrawn = String(fc.features.length);
    if (!zones.fitted && zones.bounds && !hashView) { map.fitBounds(zones.bounds, { padding: [20, 20] }); zones.fitted = true; }
  }
  function restyleZones() {
    if (!zones.layer) return;
    const now = new Date();
    zones.layer.eachLayer((layer) => {
      const p = layer.feature.properties;
      const a = zoneActive(p, now);
      if (a !== layer._active) { layer._active = a; layer.setStyle(zoneStyle(p, a)); }
    });
  }
  setInterval(restyleZones, RESTYLE_MS);
  $('fit').addEventListener('click', () => { if (zones.bounds) map.fitBounds(zones.bounds, { padding: [20, 20] }); });

  // ---- drones ---------------------------------------------------------
  const drones = new Map(); // id → {marker, track, points, alarms, last}
  let follow = null;
  // A drone whose signal is lost (silent past --signal-lost-after) with an
  // alarm stays where it was last heard, greyed with a dashed ring.
  const isLost = (d) => d.alarms.length > 0 && !!d.last.stale;
  function droneStyle(d) {
    const alarm = d.alarms.length > 0;
    const restricted = d.alarms.some((a) => a.category === 'restricted');
    if (isLost(d)) return { radius: 9, color: restricted ? '#d50000' : '#ff6d00', weight: 3, dashArray: '4 3', fillColor: '#9e9e9e', fillOpacity: 0.75 };
    return alarm
      ? { radius: 8, color: '#fff', weight: 3, dashArray: null, fillColor: restricted ? '#d50000' : '#ff6d00', fillOpacity: 1 }
      : { radius: 5, color: '#0d47a1', weight: 1.5, dashArray: null, fillColor: '#42a5f5', fillOpacity: 0.95 };
  }
  function dronePopup(id) {
    const d = drones.get(id);
    if (!d) return el('div', { text: id });
    const p = d.last;
    return el('div', { class: 'zonepop' },
      el('dt', { text: 'Drone ' + id }),
      isLost(d) ? el('dd', { class: 'lost', text: 'SIGNAL LOST ' + fmtAgo(p.last_seen) + ' — last heard ' + fmtTime(p.last_seen) + ', drawn where it was' }) : '',
      el('dd', { text: fmtTime(p.ts) + ' · ' + p.lat.toFixed(5) + ', ' + p.lon.toFixed(5) + (p.alt_m !== null ? ' · ' + p.alt_m + ' m ' + (p.alt_ref || '') : ' · altitude unknown') }),
      el('dd', { text: d.alarms.length ? 'IN ALARM: ' + d.alarms.map((a) => a.zone_name + ' (' + a.category + ')').join(', ') : 'no active alarm' }),
      el('button', { type: 'button', class: 'popbtn', text: follow === id ? 'Stop following' : 'Follow', onclick: () => setFollow(follow === id ? null : id) }));
  }
  // For the browser tests: how a drone is drawn and what its popup says.
  window.nofly.droneStyle = (id) => { const d = drones.get(id); return d ? JSON.stringify(droneStyle(d)) : ''; };
  window.nofly.dronePopupText = (id) => dronePopup(id).textContent;
  function setFollow(id) {
    follow = id;
    const f = $('following');
    f.hidden = !id;
    f.replaceChildren();
    if (id) {
      f.append('following ' + id + ' ', el('button', { type: 'button', text: 'stop', onclick: () => setFollow(null) }));
      const d = drones.get(id);
      if (d) map.panTo([d.last.lat, d.last.lon]);
    }
    map.closePopup();
  }
  function applyPositions(frame) {
    const now = Date.now();
    stats.positions += frame.drones.length;
    for (const p of frame.drones) {
      let d = drones.get(p.drone_id);
      const ll = [p.lat, p.lon];
      if (!d) {
        d = { points: [], alarms: p.alarms, last: p };
        d.track = L.polyline([], { renderer: trackRenderer, pane: 'tracks', color: '#1565c0', weight: 2, opacity: 0.6, interactive: false }).addTo(map);
        d.marker = L.circleMarker(ll, Object.assign({ renderer: droneRenderer, pane: 'drones' }, droneStyle(d))).addTo(map);
        const id = p.drone_id;
        d.marker.bindTooltip(() => document.createTextNode(id));
        d.marker.bindPopup(() => dronePopup(id));
        drones.set(p.drone_id, d);
      }
      const was = d.alarms.length, wasLost = isLost(d);
      d.alarms = p.alarms; d.last = p;
      const t = Date.parse(p.ts);
      if (!d.points.length || d.points[d.points.length - 1].t !== t) d.points.push({ t, ll });
      d.marker.setLatLng(ll);
      if (was !== p.alarms.length || was || wasLost !== isLost(d)) d.marker.setStyle(droneStyle(d));
      for (const a of p.alarms) noteSignal(a.alarm_id, 0, a.signal_lost_since);
      if (follow === p.drone_id) map.panTo(ll, { animate: false });
    }
    // Tracks hold the last TRACK_MS; a drone silent past it leaves the map.
    for (const [id, d] of drones) {
      const cut = Math.max(now, Date.parse(frame.at)) - TRACK_MS;
      let k = 0;
      while (k < d.points.length && d.points[k].t < cut) k++;
      if (k === d.points.length && d.alarms.length) {
        // An alarm keeps its drone on the map at its last known position,
        // however long ago: its track goes, the marker stays.
        d.points.splice(0, d.points.length - 1);
        d.track.setLatLngs([]);
        continue;
      }
      if (k === d.points.length) {
        d.marker.remove(); d.track.remove(); drones.delete(id);
        if (follow === id) setFollow(null);
        continue;
      }
      if (k) d.points.splice(0, k);
      d.track.setLatLngs(d.points.map((q) => q.ll));
    }
    $('dronecount').textContent = 'drones: ' + drones.size;
    document.body.dataset.drones = String(drones.size);
    document.body.dataset.lostDrones = String([...drones.values()].filter(isLost).length);
    if (frame.zone_version !== zones.version && zones.version !== null) loadZones(false);
  }

  // ---- alarms ---------------------------------------------------------
  const alarms = new Map(); // alarm_id → alarm (the API's Alarm shape)
  const history = { cursor: null, query: '' };
  function merge(a) {
    if (a.signal_lost_since !== undefined) noteSignal(a.alarm_id, 0, a.signal_lost_since);
    const old = alarms.get(a.alarm_id);
    if (!old) { alarms.set(a.alarm_id, a); return a; }
    // Events and lists may arrive in any order; each field only moves
    // forward: active → cleared, no ack → ack.
    if (a.state === 'cleared') { old.state = 'cleared'; old.cleared = old.cleared || a.cleared; }
    if (a.ack && !old.ack) old.ack = a.ack;
    return old;
  }
  function onList(a) { return a.state === 'active' || !a.ack; }
  // The signal of an alarm's drone: lost and regained many times, so not a
  // field that only moves forward. Each loss has a number (the n of its
  // events' ids alarm_id:signal_lost:n); what the lists and the map say
  // (n 0) only counts until an event has spoken.
  const signals = new Map(); // alarm_id → {n, since (null: heard)}
  function noteSignal(id, n, since) {
    const s = signals.get(id);
    if (s && (n < s.n || (n === 0 && s.n > 0))) return;
    if (s && n === s.n && n > 0 && s.since === null) return; // regained wins over its own loss
    signals.set(id, { n, since: since || null });
    const a = alarms.get(id);
    if (a) renderActive();
  }
  const lostSince = (a) => { const s = signals.get(a.alarm_id); return a.state === 'active' && s ? s.since : null; };
  function stateText(a) {
    return (a.state === 'active' ? 'ACTIVE' : 'CLEARED') + (lostSince(a) ? ' · SIGNAL LOST' : '') + ' · ' + (a.ack ? 'ACKED' : 'UNACKED');
  }
  function shapeOf(a) {
    // Shape as well as colour: ▲ restricted, ◆ warning; filled when
    // unacked, hollow when acked.
    const r = a.category === 'restricted';
    return a.ack ? (r ? '△' : '◇') : (r ? '▲' : '◆');
  }
  function alarmItem(a, withAck) {
    const lost = lostSince(a);
    const li = el('li', { class: ['alarm', a.category, a.state, a.ack ? 'acked' : 'unacked', lost ? 'lost' : ''].join(' '), 'data-alarm-id': a.alarm_id, 'data-state': a.state, 'data-acked': a.ack ? 'true' : 'false', 'data-lost': lost ? 'true' : 'false' });
    const where = el('button', { type: 'button', class: 'where', title: 'Show on the map', onclick: () => flyTo(a) },
      'drone ' + a.drone_id + ' in ' + (a.zone_name || a.zone_id));
    li.append(el('div', { class: 'head' },
      el('span', { class: 'shape', 'aria-hidden': 'true', text: shapeOf(a) }),
      el('span', { class: 'state', text: stateText(a) }),
      el('span', { class: 'cat', text: a.category })));
    li.append(el('div', {}, where));
    const meta = 'raised ' + fmtTime(a.raised && a.raised.ts) + (a.cleared ? ' · cleared ' + fmtTime(a.cleared.ts) + ' (' + a.cleared.reason + ')' : '') +
      (a.ack ? ' · acked by ' + a.ack.by + ' ' + fmtTime(a.ack.at) + (a.ack.note ? ': “' + a.ack.note + '”' : '') : '');
    li.append(el('div', { class: 'meta', text: meta }));
    if (lost) li.append(el('div', { class: 'lostnote', text: 'signal lost ' + fmtAgo(lost) + ' (last heard ' + fmtTime(lost) + '): the drone is drawn where it was' }));
    if (withAck && !a.ack && me && me.can_ack) {
      const note = el('input', { type: 'text', maxlength: '1024', placeholder: 'note (optional)', 'aria-label': 'Note for the ack of ' + a.alarm_id });
      const btn = el('button', { type: 'button', class: 'ack', text: 'Ack', 'aria-label': 'Acknowledge alarm of drone ' + a.drone_id + ' in ' + (a.zone_name || a.zone_id) });
      const err = el('span', { class: 'ackerr', role: 'alert' });
      const doAck = () => ack(a.alarm_id, note.value, btn, err);
      btn.addEventListener('click', doAck);
      note.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); doAck(); } });
      li.append(el('div', { class: 'ackrow' }, note, btn), err);
    }
    return li;
  }
  // The list is redrawn at most every LIST_MS, with at most LIST_MAX items:
  // a flood of events (hundreds of drones crossing zones) must not cost a
  // frame each.
  const LIST_MS = 300, LIST_MAX = 150, KEEP_MAX = 5000;
  let renderQueued = false, lastRender = 0;
  function renderActive() {
    if (renderQueued) return;
    renderQueued = true;
    setTimeout(() => requestAnimationFrame(drawActive), Math.max(0, lastRender + LIST_MS - Date.now()));
  }
  function drawActive() {
    {
      renderQueued = false;
      lastRender = Date.now();
      // Keep the focus (a keyboard user in a note field) across redraws.
      const focused = document.activeElement && document.activeElement.closest('.alarm');
      const focusId = focused && focused.dataset.alarmId;
      const focusInput = !!(document.activeElement && document.activeElement.tagName === 'INPUT');
      const list = [...alarms.values()].filter(onList);
      list.sort((x, y) => (!!x.ack - !!y.ack) || (Date.parse(y.raised.ts) - Date.parse(x.raised.ts)));
      const ul = $('active');
      const notes = {};
      ul.querySelectorAll('.alarm').forEach((li) => { const i = li.querySelector('input'); if (i && i.value) notes[li.dataset.alarmId] = i.value; });
      ul.replaceChildren(...list.slice(0, LIST_MAX).map((a) => {
        const li = alarmItem(a, true);
        const i = li.querySelector('input');
        if (i && notes[a.alarm_id]) i.value = notes[a.alarm_id];
        return li;
      }));
      if (list.length > LIST_MAX) {
        ul.append(el('li', { class: 'hint', text: (list.length - LIST_MAX) + ' more (older, or acked); the history search finds every one' }));
      }
      const unacked = list.filter((a) => !a.ack).length;
      $('activeCount').textContent = String(list.length);
      $('activeCount').title = unacked + ' unacked';
      document.title = (unacked ? '(' + unacked + ') ' : '') + 'nofly — operations';
      if (focusId) {
        const li = ul.querySelector('[data-alarm-id="' + CSS.escape(focusId) + '"]');
        const target = li && ((focusInput && li.querySelector('input')) || li.querySelector('button.ack') || li.querySelector('button'));
        if (target) target.focus();
      }
      // Bounded memory: drop what the list does not show, and past
      // KEEP_MAX the oldest acked or cleared ones (the history search
      // still finds them; the count above says how many are held).
      if (alarms.size > KEEP_MAX) {
        for (const [id, a] of alarms) if (!onList(a)) alarms.delete(id);
        for (const a of list.slice(KEEP_MAX)) if (a.ack || a.state === 'cleared') alarms.delete(a.alarm_id);
      }
    }
  }
  async function ack(id, note, btn, err) {
    btn.disabled = true; err.textContent = '';
    try {
      const r = await api('v1/alarms/' + encodeURIComponent(id) + '/ack', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ note: note || null }) });
      merge(r.body);
      renderActive();
    } catch (e) {
      btn.disabled = false;
      err.textContent = 'ack failed: ' + e.message;
    }
  }
  let pulse = null;
  function flyTo(a) {
    const p = (a.state === 'cleared' && a.cleared) || a.raised;
    if (!p) return;
    map.flyTo([p.lat, p.lon], Math.max(map.getZoom(), 11), { duration: 0.8 });
    if (pulse) pulse.remove();
    pulse = L.circleMarker([p.lat, p.lon], { radius: 18, color: '#ffeb3b', weight: 3, fill: false, renderer: droneRenderer, pane: 'drones', interactive: false }).addTo(map);
    setTimeout(() => { if (pulse) { pulse.remove(); pulse = null; } }, 6000);
  }

  // cue makes a raised restricted alarm seen (banner, title) and, when
  // asked for, heard.
  let audio = null;
  $('sound').checked = sessionStorage.getItem('nofly.sound') === '1';
  $('sound').addEventListener('change', (e) => {
    sessionStorage.setItem('nofly.sound', e.target.checked ? '1' : '0');
    if (e.target.checked && !audio) audio = new AudioContext(); // a click may start audio
  });
  function beep() {
    if (!$('sound').checked) return;
    if (!audio) audio = new AudioContext();
    const o = audio.createOscillator(), g = audio.createGain();
    o.type = 'square'; o.frequency.value = 880; g.gain.value = 0.08;
    o.connect(g).connect(audio.destination);
    o.start(); o.stop(audio.currentTime + 0.25);
  }
  let bannerTimer = null;
  function banner(text, kind) {
    const b = $('banner');
    b.hidden = false; b.textContent = text;
    b.className = kind === 'info' ? 'info' : 'flash';
    void b.offsetWidth; // restart the animation
    clearTimeout(bannerTimer);
    if (kind !== 'error') bannerTimer = setTimeout(() => { b.hidden = true; document.body.classList.remove('alerting'); }, 20000);
  }
  function showError(text) { banner(text, 'error'); }

  function onAlarmEvent(type, data) {
    const e = JSON.parse(data);
    stats.events++;
    if (stats.eventIds.has(e.event_id)) { stats.duplicates++; return; }
    stats.eventIds.add(e.event_id);
    if (stats.eventIds.size > 20000) stats.eventIds = new Set([...stats.eventIds].slice(-10000));
    const point = { event_id: e.event_id, seq: e.seq, ts: e.ts, lat: e.lat, lon: e.lon, alt_m: e.alt_m === undefined ? null : e.alt_m, alt_ref: e.alt_ref, height_assumed: e.height_assumed };
    const base = { alarm_id: e.alarm_id, drone_id: e.drone_id, zone_id: e.zone_id, zone_name: e.zone_name, category: e.category, zone_version: e.zone_version };
    if (e.type === 'raised') {
      merge(Object.assign(base, { state: 'active', raised: point, cleared: null, ack: null }));
      if (e.category === 'restricted') {
        banner('RESTRICTED ZONE INCURSION: drone ' + e.drone_id + ' in ' + (e.zone_name || e.zone_id) + ' at ' + fmtTime(e.ts));
        document.body.classList.add('alerting');
        beep();
      }
    } else if (e.type === 'cleared') {
      if (!alarms.has(e.alarm_id)) { fetchAlarm(e.alarm_id); return; }
      merge(Object.assign(base, { state: 'cleared', cleared: Object.assign(point, { reason: e.reason }) }));
    } else if (e.type === 'acked') {
      if (!alarms.has(e.alarm_id)) { fetchAlarm(e.alarm_id); return; }
      merge(Object.assign(base, { ack: { by: e.by, at: e.ts, note: e.note || '' } }));
    } else if (e.type === 'signal_lost' || e.type === 'signal_regained') {
      const n = Number(e.event_id.slice(e.event_id.lastIndexOf(':') + 1)) || 0;
      noteSignal(e.alarm_id, n, e.type === 'signal_lost' ? (e.last_seen || e.ts) : null);
      if (!alarms.has(e.alarm_id)) { fetchAlarm(e.alarm_id); return; }
    }
    renderActive();
  }
  async function fetchAlarm(id) {
    try { merge((await api('v1/alarms/' + encodeURIComponent(id))).body); renderActive(); } catch (e) { console.warn('alarm', id, e); }
  }
  async function loadList(query, max) {
    let cursor = null, n = 0;
    do {
      const r = await api('v1/alarms?' + query + '&limit=500' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
      for (const a of r.body.alarms) merge(a);
      n += r.body.alarms.length;
      cursor = r.body.next_cursor;
    } while (cursor && n < max);
  }
  async function loadAlarms() {
    await loadList('state=active', 10000);
    await loadList('state=cleared&acked=false', 2000);
    renderActive();
  }

  // ---- the streams ------------------------------------------------------
  let lastEventId = null;
  async function followEvents() {
    let backoff = 500;
    for (;;) {
      const ctl = new AbortController();
      try {
        const h = lastEventId ? { 'Last-Event-ID': lastEventId } : {};
        await sse('v1/events/stream', h, ctl.signal, () => {},
          (type, data, id) => { heard('events'); onAlarmEvent(type, data); if (id) lastEventId = id; backoff = 500; },
          (comment) => {
            heard('events');
            // The stream is open from here on: what the lists read now
            // and every later event cover everything (merge is
            // order-free). After a reconnect with Last-Event-ID, the
            // stream itself fills the gap.
            if (comment === 'connected' && !lastEventId) loadAlarms().catch((e) => showError('alarms: ' + e.message));
          });
      } catch (e) {
        if (e.status === 401) { askToken('the token was refused'); return; }
        if (e.status === 410) { lastEventId = null; alarms.clear(); } // trimmed: start over from the lists
        if (e.status === 503 || e.status === 403) { conn.errText = e.message; conn.events = 'error'; renderConn(); }
        else lost('events');
        stats.reconnects++;
      }
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 10000);
    }
  }
  let fittedDrones = false;
  async function followPositions() {
    let backoff = 500;
    for (;;) {
      try {
        await sse('v1/map/positions', {}, undefined, () => {},
          (type, data) => {
            heard('positions');
            if (type !== 'positions') return;
            const f = JSON.parse(data);
            if (f.full && f.drones.length && !fittedDrones && !hashView) {
              // First sight: where the drones are is where to look.
              fittedDrones = true;
              map.fitBounds(L.latLngBounds(f.drones.map((d) => [d.lat, d.lon])).pad(0.3), { maxZoom: 11 });
            }
            if (f.full) {
              // A (re)connected stream starts over: what it does not name
              // has left the sky.
              const keep = new Set(f.drones.map((d) => d.drone_id));
              for (const [id, d] of drones) if (!keep.has(id)) { d.marker.remove(); d.track.remove(); drones.delete(id); }
            }
            applyPositions(f);
            backoff = 500;
          },
          () => heard('positions'));
      } catch (e) {
        if (e.status === 401) return;
        if (e.status === 503 || e.status === 403) { conn.errText = e.message; conn.positions = 'error'; renderConn(); }
        else lost('positions');
      }
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 10000);
    }
  }

  // ---- history --------------------------------------------------------
  function historyQuery() {
    const f = new FormData($('historyForm'));
    const q = new URLSearchParams();
    q.set('state', f.get('state') || 'all');
    for (const k of ['zone', 'drone', 'category']) { const v = (f.get(k) || '').trim(); if (v) q.set(k, v); }
    for (const k of ['since', 'until']) {
      const v = f.get(k);
      if (v) q.set(k, new Date(v + (v.length === 16 ? ':00' : '') + 'Z').toISOString());
    }
    q.set('limit', String(HISTORY_PAGE));
    return q.toString();
  }
  async function loadHistory(more) {
    const err = $('historyError');
    err.hidden = true;
    if (!more) { history.query = historyQuery(); history.cursor = null; $('history').replaceChildren(); }
    try {
      const r = await api('v1/alarms?' + history.query + (history.cursor ? '&cursor=' + encodeURIComponent(history.cursor) : ''));
      $('history').append(...r.body.alarms.map((a) => alarmItem(a, false)));
      if (!r.body.alarms.length && !more) $('history').append(el('li', { class: 'hint', text: 'no alarm matches' }));
      history.cursor = r.body.next_cursor;
      $('historyMore').hidden = !history.cursor;
    } catch (e) {
      err.hidden = false;
      err.textContent = e.message;
    }
  }
  $('historyForm').addEventListener('submit', (e) => { e.preventDefault(); loadHistory(false); });
  $('historyMore').addEventListener('click', () => loadHistory(true));

  // ---- sign in --------------------------------------------------------
  function askToken(why) {
    $('tokenPane').hidden = false;
    $('tokenError').textContent = why || '';
    $('token').focus();
  }
  $('tokenForm').addEventListener('submit', (e) => {
    e.preventDefault();
    token = $('token').value.trim();
    sessionStorage.setItem('nofly.token', token);
    location.reload();
  });
  $('signout').addEventListener('click', () => { sessionStorage.removeItem('nofly.token'); token = ''; askToken(''); });

  // Frame times, for the browser test's smoothness check (and anyone
  // curious: nofly.stats.frames in the console).
  let lastFrame = performance.now();
  (function tick(t) {
    stats.frames.push(t - lastFrame);
    if (stats.frames.length > 600) stats.frames.splice(0, stats.frames.length - 600);
    lastFrame = t;
    requestAnimationFrame(tick);
  })(lastFrame);

  // "signal lost 3 min ago" moves on without an event.
  setInterval(() => { if ([...signals.values()].some((x) => x.since)) renderActive(); }, 15000);

  async function start() {
    try {
      me = (await api('v1/me')).body;
    } catch (e) {
      if (e.status === 401) { askToken(token ? 'the token was refused: ' + e.message : ''); return; }
      conn.errText = e.message; conn.events = conn.positions = 'error'; renderConn();
      showError('The alert API is not available: ' + e.message);
      return;
    }
    $('who').textContent = me.name + ' (' + me.role + ')';
    document.body.dataset.role = me.role;
    $('signout').hidden = !token;
    await loadZones(true);
    followEvents();
    followPositions();
    loadHistory(false);
  }
  start();
})();
