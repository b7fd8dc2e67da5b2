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
  const stats = { frames: [], work: [], events: 0, eventIds: new Set(), duplicates: 0, positions: 0, reconnects: 0, beeps: 0, draw: [] };
  window.nofly = { stats };
  // Extension points for the page's other scripts (basemap.js, pilot.js,
  // wayfind.js, incident.js, loaded after this one): nofly.on(name, fn)
  // subscribes; app.js emits 'positions' (frame), 'alarm' (event type,
  // parsed event), 'alarmitem' (li, alarm) for every alarm row it draws,
  // and 'zones' (id -> layer map) after drawing a zone view.
  const hooks = Object.create(null);
  window.nofly.on = (name, fn) => { (hooks[name] || (hooks[name] = [])).push(fn); };
  function emit(name, ...args) {
    for (const fn of hooks[name] || []) {
      try { fn(...args); } catch (e) { console.error('nofly hook ' + name, e); }
    }
  }

  // ---- the API --------------------------------------------------------
  let token = sessionStorage.getItem('nofly.token') || '';
  let me = null;
  let csrf = ''; // a sign-in's session (oidc.js): its writes carry it
  const headers = (extra) => Object.assign(token ? { Authorization: 'Bearer ' + token } : (csrf ? { 'X-CSRF-Token': csrf } : {}), extra || {});

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
  window.nofly.map = map;
  window.nofly.api = api;
  window.nofly.headers = headers; // basemap.js reads its archive with them
  window.nofly.el = el;
  window.nofly.fmtTime = fmtTime;
  // The header can wrap (a longer zone count, a narrower window) and
  // change the map's height without the window resizing, which is all
  // Leaflet listens to: without being told, it draws and fits for the old
  // size and leaves a strip blank.
  if (window.ResizeObserver) new ResizeObserver(() => map.invalidateSize({ pan: false })).observe(map.getContainer());
  map.attributionControl.setPrefix(false);
  map.attributionControl.addAttribution('Coastlines: Natural Earth (world-atlas) · Map: Leaflet');
  map.setView([51.5, -0.3], 6);
  // A link to one alarm (#alarm=<alarm_id>: the "dashboard" link of
  // Alertmanager's alerts) selects it once the lists are read; read here,
  // before the map's moves rewrite the address.
  const linkedAlarm = (/^#alarm=([0-9a-f]{32})$/.exec(location.hash) || [])[1] || null;
  window.nofly.linkedAlarm = linkedAlarm; // incident.js opens its story
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
  window.nofly.inView = (lat, lon) => map.getBounds().contains([lat, lon]) && map.getZoom() >= 11;
  // The coastline's pane is under the tile pane (200): a regional base map
  // (basemap.js) draws over it where it has data.
  const landPane = map.createPane('land'); landPane.style.zIndex = 150;
  const renderer = L.canvas({ pane: 'land', padding: 0.3 });
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
  // basemap.js draws a base map of its own instead (--map-tiles, --map-pmtiles).
  let landOff = false;
  window.nofly.hideLand = () => {
    landOff = true;
    for (const scale in land) land[scale].then((l) => l.remove()).catch(() => {});
    map.attributionControl.removeAttribution('Coastlines: Natural Earth (world-atlas) · Map: Leaflet');
    map.attributionControl.addAttribution('Map: Leaflet');
  };
  function showLand() {
    const scale = map.getZoom() < 5 ? '110m' : '50m';
    if (landShown === scale || landOff) return;
    landShown = scale;
    Promise.all([landFor(scale), landFor(scale === '110m' ? '50m' : '110m').catch(() => null)]).then(([want, other]) => {
      if (landShown !== scale || landOff) return;
      if (other) other.remove();
      want.addTo(map).bringToBack();
    }).catch((e) => console.warn('land outline', e));
  }
  map.on('zoomend', showLand);
  showLand();

  // ---- zones ----------------------------------------------------------
  // The zones of the view only (GET /v1/map/zones?bbox=&zoom=, issue 29):
  // a set of 100,000 zones is 30 MB whole. The box asked is the view
  // snapped out to 256-pixel tiles, so small pans ask nothing new; each
  // answer is kept by zone version and view, and the browser revalidates
  // (ETag per version, box and zoom). Layers are kept by feature id while
  // the version and zoom hold (a zoom changes the simplification).
  const zones = { version: null, zoom: null, key: null, layer: null, clusters: null, byId: new Map(), byZone: new Map(),
    bounds: null, count: 0, cache: new Map(), loading: false, again: false, loads: 0, painted: false };
  const ZONE_CACHE = 64; // answers kept in the page
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
      // nonzero: the server orients rings so that a simplified zone
      // covers the real one under this rule (holes wound the other way).
      ? { color: c, weight: 2, opacity: 0.9, fillColor: c, fillOpacity: 0.18, dashArray: null, fillRule: 'nonzero' }
      : { color: c, weight: 1, opacity: 0.35, fillColor: c, fillOpacity: 0.04, dashArray: '4 4', fillRule: 'nonzero' };
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
  zones.layer = L.geoJSON(null, {
    renderer: zoneRenderer, pane: 'zones',
    pointToLayer: (f, ll) => L.circle(ll, { radius: f.properties.radius_m, renderer: zoneRenderer, pane: 'zones' }),
    style: (f) => zoneStyle(f.properties, zoneActive(f.properties, new Date())),
    onEachFeature: (f, layer) => {
      const p = f.properties;
      layer._active = zoneActive(p, new Date());
      zones.byId.set(f.id, layer);
      if (!zones.byZone.has(p.zone_id)) zones.byZone.set(p.zone_id, []);
      zones.byZone.get(p.zone_id).push(layer);
      // Text nodes, never HTML strings: names come from zone files and
      // drone ids from telemetry.
      layer.bindTooltip(() => document.createTextNode((p.name || p.zone_id) + ' · ' + p.category + (layer._active ? '' : ' (inactive)')), { sticky: true });
      layer.bindPopup(() => zonePopup(p));
    },
  }).addTo(map);
  // A reduced answer's clusters: boxes holding the zones too many to draw
  // one by one, each at least as large as its zones; a click zooms in.
  zones.clusters = L.layerGroup().addTo(map);
  function dropZoneLayer(id, layer) {
    zones.layer.removeLayer(layer);
    zones.byId.delete(id);
    const p = layer.feature.properties;
    const ls = (zones.byZone.get(p.zone_id) || []).filter((l) => l !== layer);
    if (ls.length) zones.byZone.set(p.zone_id, ls); else zones.byZone.delete(p.zone_id);
  }
  // zoneView is the box and zoom to ask for the map's view: the view
  // snapped outwards to 256-pixel tiles, 5 decimals rounded outwards.
  function zoneView() {
    const z = Math.max(0, Math.min(22, Math.round(map.getZoom())));
    const b = map.getBounds();
    const nw = map.project(b.getNorthWest(), z), se = map.project(b.getSouthEast(), z);
    const T = 256;
    const sw = map.unproject([Math.floor(nw.x / T) * T, Math.ceil(se.y / T) * T], z);
    const ne = map.unproject([Math.ceil(se.x / T) * T, Math.floor(nw.y / T) * T], z);
    const c = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
    const lo = (v, m) => c(Math.floor(v * 1e5) / 1e5, -m, m).toFixed(5), hi = (v, m) => c(Math.ceil(v * 1e5) / 1e5, -m, m).toFixed(5);
    const bbox = [lo(sw.lng, 180), lo(sw.lat, 90), hi(ne.lng, 180), hi(ne.lat, 90)].join(',');
    return { bbox, zoom: z, key: bbox + '/' + z };
  }
  // loadZones draws the zones of the view: from the page's cache when this
  // version's answer for the view is there, else asked. force (the start)
  // and a call for the view already drawn (a new zone version in the
  // positions stream) always ask.
  async function loadZones(force) {
    if (zones.loading) { zones.again = true; return; }
    const v = zoneView();
    const cached = zones.cache.get(zones.version + '|' + v.key);
    if (!force && v.key !== zones.key && cached) { drawZoneView(cached, v.key); return; }
    zones.loading = true;
    let r;
    try {
      r = await api('v1/map/zones?bbox=' + v.bbox + '&zoom=' + v.zoom, { cache: 'no-cache' });
    } catch (e) { showError('zones: ' + e.message); return; } finally {
      zones.loading = false;
      if (zones.again) { zones.again = false; setTimeout(() => loadZones(false), 0); }
    }
    zones.loads++;
    if (r.status === 304) return;
    zones.cache.set(r.body.zone_version + '|' + v.key, r.body);
    while (zones.cache.size > ZONE_CACHE) zones.cache.delete(zones.cache.keys().next().value);
    drawZoneView(r.body, v.key);
  }
  function drawZoneView(fc, key) {
    if (fc.zone_version !== zones.version || fc.zoom !== zones.zoom) {
      for (const [id, layer] of [...zones.byId]) dropZoneLayer(id, layer);
    }
    const keep = new Set();
    for (const f of fc.features) {
      keep.add(f.id);
      if (zones.byId.has(f.id)) continue;
      zones.layer.addData({ type: 'Feature', id: f.id, properties: f.properties, geometry: unwrapGeometry(f.geometry) });
    }
    for (const [id, layer] of [...zones.byId]) if (!keep.has(id)) dropZoneLayer(id, layer);
    zones.clusters.clearLayers();
    for (const c of fc.clusters || []) {
      const [w, s, e, n] = c.bbox;
      const rect = L.rectangle([[s, w], [n, e]], { renderer: zoneRenderer, pane: 'zones', color: c.restricted ? COLORS.restricted : COLORS.warning,
        weight: 1, opacity: 0.8, dashArray: '3 3', fillOpacity: 0.08, interactive: true });
      rect.bindTooltip(() => document.createTextNode(c.count + ' zones (' + c.restricted + ' restricted, ' + c.warning + ' warning): zoom in to see them'), { sticky: true });
      rect.on('click', () => map.fitBounds(rect.getBounds()));
      zones.clusters.addLayer(rect);
    }
    zones.version = fc.zone_version; zones.zoom = fc.zoom; zones.key = key; zones.count = fc.zones;
    const sb = fc.set_bbox;
    zones.bounds = sb ? L.latLngBounds([[sb[1], sb[0]], [sb[3], sb[2]]]) : null;
    $('zonever').textContent = 'zones: v' + fc.zone_version + ' (' + fc.zones + ')' + (fc.reduced ? ' · ' + fc.in_view + ' here: zoom in to see each' : '');
    $('zonever').dataset.version = fc.zone_version;
    const ds = document.body.dataset;
    ds.zonesDrawn = String(zones.byId.size);
    ds.zonesClusters = String((fc.clusters || []).length);
    ds.zonesReduced = String(!!fc.reduced);
    ds.zonesView = key;
    ds.zonesLoads = String(zones.loads);
    if (!zones.painted) {
      // For the browser test: when the first zones were on screen.
      zones.painted = true;
      requestAnimationFrame(() => { ds.zonesPaintMs = String(Math.round(performance.now())); });
    }
    if (!zones.fitted && zones.bounds && !hashView && !linkedAlarm) { zones.fitted = true; map.fitBounds(zones.bounds, { padding: [20, 20] }); }
    emit('zones', zones.byId);
  }
  // A new view asks for its zones once the map has settled.
  let zoneMoveTimer = null;
  map.on('moveend', () => { clearTimeout(zoneMoveTimer); zoneMoveTimer = setTimeout(() => loadZones(false), 150); });
  // For the browser tests: move the map, and the zones drawn.
  window.nofly.view = (lat, lon, z) => map.setView([lat, lon], z, { animate: false });
  window.nofly.zonesDrawn = () => [...zones.byId.keys()];
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
  // zonesAt is the zones drawn at a point. A click on the map is found
  // here rather than by the zones' canvas, which the drones' and tracks'
  // canvases lie over once they hold anything.
  function zonesAt(ll) {
    const out = [];
    if (!zones.layer) return out;
    const pt = map.latLngToLayerPoint(ll);
    zones.layer.eachLayer((layer) => {
      if (!layer.getBounds().contains(ll)) return;
      if (layer._containsPoint && !layer._containsPoint(pt)) return;
      out.push(layer.feature.properties.zone_id);
    });
    return out;
  }
  // Picking the zones of an authorisation: each click adds the zones there.
  map.on('click', (e) => {
    if (picking !== 'zone') return;
    map.closePopup();
    for (const id of zonesAt(e.latlng)) addZoneChip(id);
  });
  // For the browser tests: where a point of the map is on the page.
  window.nofly.pixelOf = (lat, lon) => {
    const p = map.latLngToContainerPoint([lat, lon]);
    const r = map.getContainer().getBoundingClientRect();
    return [r.left + p.x, r.top + p.y];
  };
  $('fit').addEventListener('click', () => { if (zones.bounds) map.fitBounds(zones.bounds, { padding: [20, 20] }); });

  // ---- drones ---------------------------------------------------------
  const drones = new Map(); // id → {marker, track, points, alarms, last}
  let follow = null;
  // A drone whose signal is lost (silent past --signal-lost-after) with an
  // alarm stays where it was last heard, greyed with a dashed ring.
  const isLost = (d) => d.alarms.length > 0 && !!d.last.stale;
  // An alarm of the positions stream is calm when the page knows an
  // authorisation covers it (the stream does not say; the alarm events and
  // lists do).
  const posAlarmCalm = (pa) => { const a = alarms.get(pa.alarm_id); return a ? !!authOf(a) : false; };
  function droneStyle(d) {
    const paging = d.alarms.filter((a) => !posAlarmCalm(a));
    const alarm = d.alarms.length > 0;
    const calm = alarm && paging.length === 0; // every alarm authorised
    const restricted = paging.some((a) => a.category === 'restricted');
    const edge = calm ? '#4db6ac' : restricted ? '#d50000' : '#ff6d00';
    if (isLost(d)) return { radius: 9, color: edge, weight: 3, dashArray: '4 3', fillColor: '#9e9e9e', fillOpacity: 0.75 };
    if (calm) return { radius: 7, color: '#e0f2f1', weight: 2, dashArray: null, fillColor: '#26a69a', fillOpacity: 1 };
    if (alarm) return { radius: 8, color: '#fff', weight: 3, dashArray: null, fillColor: restricted ? '#d50000' : '#ff6d00', fillOpacity: 1 };
    if (approachingDrone(d.last.drone_id)) return { radius: 6, color: '#ffb300', weight: 3, dashArray: null, fillColor: '#42a5f5', fillOpacity: 0.95 };
    return { radius: 5, color: '#0d47a1', weight: 1.5, dashArray: null, fillColor: '#42a5f5', fillOpacity: 0.95 };
  }
  // styleDrone restyles a drone's marker when its style changed (a
  // restyle costs a redraw of the drones' canvas).
  function styleDrone(d) {
    const st = droneStyle(d);
    const k = JSON.stringify(st);
    if (k !== d.styleKey) { d.styleKey = k; d.marker.setStyle(st); }
  }
  function restyleDrone(id) { const d = drones.get(id); if (d) styleDrone(d); }
  function dronePopup(id) {
    const d = drones.get(id);
    if (!d) return el('div', { text: id });
    const p = d.last;
    return el('div', { class: 'zonepop' },
      el('dt', { text: 'Drone ' + id }),
      isLost(d) ? el('dd', { class: 'lost', text: 'SIGNAL LOST ' + fmtAgo(p.last_seen) + ' — last heard ' + fmtTime(p.last_seen) + ', drawn where it was' }) : '',
      el('dd', { text: fmtTime(p.ts) + ' · ' + p.lat.toFixed(5) + ', ' + p.lon.toFixed(5) + (p.alt_m !== null ? ' · ' + p.alt_m + ' m ' + (p.alt_ref || '') : ' · altitude unknown') }),
      el('dd', { text: d.alarms.length ? 'IN ALARM: ' + d.alarms.map((a) => a.zone_name + ' (' + a.category + (posAlarmCalm(a) ? ', authorised' : '') + ')').join(', ') : 'no active alarm' }),
      ...[...(byDrone.get(id) || [])].map((k) => approaches.get(k)).map((x) => el('dd', { text: 'APPROACHING ' + (x.zone_name || x.zone_id) + ': ' + etaText(x) })),
      el('button', { type: 'button', class: 'popbtn', text: follow === id ? 'Stop following' : 'Follow', onclick: () => setFollow(follow === id ? null : id) }),
      canAuthorize() ? ' ' : null,
      canAuthorize() ? el('button', { type: 'button', class: 'popbtn', text: 'Authorise…', title: 'Authorise a flight of this drone',
        onclick: () => { map.closePopup(); openAuthPanel(true); setDroneField(id); } }) : null);
  }
  // For the browser tests: how a drone is drawn and what its popup says.
  window.nofly.droneStyle = (id) => { const d = drones.get(id); return d ? JSON.stringify(droneStyle(d)) : ''; };
  window.nofly.dronePopupText = (id) => dronePopup(id).textContent;
  // wayfind.js follows the drone its search box found.
  window.nofly.follow = (id) => setFollow(id);
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
    emit('positions', frame);
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
        // A click opens the drone's popup, or, while an authorisation's
        // drone is being picked, fills it in.
        d.marker.on('click', () => {
          if (picking === 'drone') { setDroneField(id); setPicking(null); return; }
          L.popup().setLatLng(d.marker.getLatLng()).setContent(dronePopup(id)).openOn(map);
        });
        drones.set(p.drone_id, d);
      }
      const was = d.alarms.length, wasLost = isLost(d);
      d.alarms = p.alarms; d.last = p;
      const t = Date.parse(p.ts);
      if (!d.points.length || d.points[d.points.length - 1].t !== t) d.points.push({ t, ll });
      d.marker.setLatLng(ll);
      if (was !== p.alarms.length || was || wasLost !== isLost(d)) styleDrone(d);
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
    moveApproaches(frame);
    const inView = frame.in_view === undefined ? drones.size : frame.in_view;
    if (frame.full || frame.in_view) $('dronecount').textContent = 'drones: ' + (frame.clustered ? inView + ' in view, clustered' : drones.size);
    document.body.dataset.drones = String(drones.size);
    document.body.dataset.inView = String(inView);
    document.body.dataset.lostDrones = String([...drones.values()].filter(isLost).length);
    if (frame.zone_version !== zones.version && zones.version !== null) loadZones(false);
  }

  // ---- alarms ---------------------------------------------------------
  const alarms = new Map(); // alarm_id → alarm (the API's Alarm shape)
  const history = { cursor: null, query: '' };
  function merge(a) {
    if (a.signal_lost_since !== undefined) noteSignal(a.alarm_id, 0, a.signal_lost_since);
    if (a.authorization !== undefined) noteAuth(a.alarm_id, 0, a.authorization);
    const old = alarms.get(a.alarm_id);
    if (!old) {
      alarms.set(a.alarm_id, a);
      if (authOf(a)) restyleDrone(a.drone_id);
      return a;
    }
    // Events and lists may arrive in any order; each field only moves
    // forward: active → cleared, no ack → ack.
    if (a.state === 'cleared') { old.state = 'cleared'; old.cleared = old.cleared || a.cleared; }
    if (a.ack && !old.ack) old.ack = a.ack;
    return old;
  }
  // An alarm's authorisation goes back and forth (authorized, then
  // unauthorized, ...), so like the signal it is ordered: by the n of its
  // events' ids (alarm_id:authorized:n / :unauthorized:n). The raise and
  // the lists (n 0) only count until such an event has spoken.
  const authz = new Map(); // alarm_id → {n, auth (null: none, it pages)}
  function noteAuth(id, n, auth) {
    const s = authz.get(id);
    if (s && (n < s.n || (n === 0 && s.n > 0))) return false;
    authz.set(id, { n, auth: auth || null });
    // A drone's colour follows its alarms' authorisation.
    const a = alarms.get(id);
    if (a && !!(s && s.auth) !== !!auth) restyleDrone(a.drone_id);
    return true;
  }
  const authOf = (a) => { const s = authz.get(a.alarm_id); return s ? s.auth : (a.authorization || null); };
  // The paging list holds active alarms and cleared ones until acked; an
  // authorised alarm is in the calm section while active, and nowhere once
  // cleared (it never paged).
  function onList(a) { return authOf(a) ? a.state === 'active' : (a.state === 'active' || !a.ack); }
  const paging = (a) => onList(a) && !authOf(a);
  const calm = (a) => a.state === 'active' && !!authOf(a);
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
    return (authOf(a) ? 'AUTHORISED · ' : '') + (a.state === 'active' ? 'ACTIVE' : 'CLEARED') + (lostSince(a) ? ' · SIGNAL LOST' : '') +
      (authOf(a) && !a.ack ? '' : ' · ' + (a.ack ? 'ACKED' : 'UNACKED'));
  }
  function shapeOf(a) {
    // Shape as well as colour: ▲ restricted, ◆ warning; filled when
    // unacked, hollow when acked; ✓ authorised (it does not page).
    if (authOf(a)) return '✓';
    const r = a.category === 'restricted';
    return a.ack ? (r ? '△' : '◇') : (r ? '▲' : '◆');
  }
  const authText = (au) => 'authorised' + (au.reference ? ' by permit ' + au.reference : '') + ' until ' + fmtTime(au.until) + ' (authorisation ' + au.id + ')';
  function alarmItem(a, withAck) {
    const lost = lostSince(a);
    const au = authOf(a);
    const li = el('li', { class: ['alarm', a.category, a.state, a.ack ? 'acked' : 'unacked', lost ? 'lost' : '', au ? 'authorised' : ''].join(' '), 'data-alarm-id': a.alarm_id, 'data-state': a.state, 'data-acked': a.ack ? 'true' : 'false', 'data-lost': lost ? 'true' : 'false', 'data-authorised': au ? 'true' : 'false' });
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
    if (au) li.append(el('div', { class: 'authnote', text: authText(au) }));
    if (lost) li.append(el('div', { class: 'lostnote', text: 'signal lost ' + fmtAgo(lost) + ' (last heard ' + fmtTime(lost) + '): the drone is drawn where it was' }));
    if (withAck && !au && !a.ack && me && me.can_ack) {
      const note = el('input', { type: 'text', maxlength: '1024', placeholder: 'note (optional)', 'aria-label': 'Note for the ack of ' + a.alarm_id });
      const btn = el('button', { type: 'button', class: 'ack', text: 'Ack', 'aria-label': 'Acknowledge alarm of drone ' + a.drone_id + ' in ' + (a.zone_name || a.zone_id) });
      const err = el('span', { class: 'ackerr', role: 'alert' });
      const doAck = () => ack(a.alarm_id, note.value, btn, err);
      btn.addEventListener('click', doAck);
      note.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); doAck(); } });
      li.append(el('div', { class: 'ackrow' }, note, btn), err);
    }
    emit('alarmitem', li, a);
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
    const t0 = performance.now();
    drawLists();
    stats.draw.push(performance.now() - t0);
    if (stats.draw.length > 600) stats.draw.splice(0, stats.draw.length - 600);
  }
  function drawLists() {
    {
      renderQueued = false;
      lastRender = Date.now();
      // Keep the focus (a keyboard user in a note field) across redraws.
      const focused = document.activeElement && document.activeElement.closest('.alarm');
      const focusId = focused && focused.dataset.alarmId;
      const focusInput = !!(document.activeElement && document.activeElement.tagName === 'INPUT');
      const all = [...alarms.values()];
      const list = all.filter(paging);
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
      // The calm section: authorised alarms, newest first. They count
      // for nothing in the unacked count or the title.
      const quiet = all.filter(calm);
      quiet.sort((x, y) => Date.parse(y.raised.ts) - Date.parse(x.raised.ts));
      $('authorised').replaceChildren(...quiet.slice(0, LIST_MAX).map((a) => alarmItem(a, false)));
      if (quiet.length > LIST_MAX) $('authorised').append(el('li', { class: 'hint', text: (quiet.length - LIST_MAX) + ' more' }));
      $('authorisedCount').textContent = String(quiet.length);
      drawApproaches();
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
        for (const [id, a] of alarms) if (!onList(a)) { alarms.delete(id); authz.delete(id); }
        for (const a of list.slice(KEEP_MAX)) if (a.ack || a.state === 'cleared') { alarms.delete(a.alarm_id); authz.delete(a.alarm_id); }
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
    flyToPoint(p.lat, p.lon);
  }
  function flyToPoint(lat, lon) {
    map.flyTo([lat, lon], Math.max(map.getZoom(), 11), { duration: 0.8 });
    if (pulse) pulse.remove();
    pulse = L.circleMarker([lat, lon], { radius: 18, color: '#ffeb3b', weight: 3, fill: false, renderer: droneRenderer, pane: 'drones', interactive: false }).addTo(map);
    setTimeout(() => { if (pulse) { pulse.remove(); pulse = null; } }, 6000);
  }

  // cue makes a paging restricted alarm seen (banner, title) and, when
  // asked for, heard: at its raise, or when its authorisation ends while
  // the drone is inside. An authorised alarm gets none of it.
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
    stats.beeps++;
  }
  function cue(a, ts, why) {
    if (!a || a.state !== 'active' || authOf(a) || a.category !== 'restricted') return;
    banner('RESTRICTED ZONE INCURSION: drone ' + a.drone_id + ' in ' + (a.zone_name || a.zone_id) + ' at ' + fmtTime(ts) + (why ? ' — ' + why : ''));
    document.body.classList.add('alerting');
    beep();
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

  const nOf = (eventId) => Number(eventId.slice(eventId.lastIndexOf(':') + 1)) || 0;
  function onAlarmEvent(type, data) {
    const e = JSON.parse(data);
    stats.events++;
    if (stats.eventIds.has(e.event_id)) { stats.duplicates++; return; }
    stats.eventIds.add(e.event_id);
    if (stats.eventIds.size > 20000) stats.eventIds = new Set([...stats.eventIds].slice(-10000));
    emit('alarm', type, e);
    const point = { event_id: e.event_id, seq: e.seq, ts: e.ts, lat: e.lat, lon: e.lon, alt_m: e.alt_m === undefined ? null : e.alt_m, alt_ref: e.alt_ref, height_assumed: e.height_assumed };
    const base = { alarm_id: e.alarm_id, drone_id: e.drone_id, zone_id: e.zone_id, zone_name: e.zone_name, category: e.category, zone_version: e.zone_version };
    if (e.type === 'raised') {
      // The raise ends the drone's approach to that zone.
      endApproachesOf(e.drone_id, e.zone_id);
      const a = merge(Object.assign(base, { state: 'active', raised: point, cleared: null, ack: null, authorization: e.authorization || null }));
      cue(a, e.ts);
    } else if (e.type === 'cleared') {
      if (!alarms.has(e.alarm_id)) { fetchAlarm(e.alarm_id); return; }
      merge(Object.assign(base, { state: 'cleared', cleared: Object.assign(point, { reason: e.reason }) }));
    } else if (e.type === 'acked') {
      if (!alarms.has(e.alarm_id)) { fetchAlarm(e.alarm_id); return; }
      merge(Object.assign(base, { ack: { by: e.by, at: e.ts, note: e.note || '' } }));
    } else if (e.type === 'signal_lost' || e.type === 'signal_regained') {
      noteSignal(e.alarm_id, nOf(e.event_id), e.type === 'signal_lost' ? (e.last_seen || e.ts) : null);
      if (!alarms.has(e.alarm_id)) { fetchAlarm(e.alarm_id); return; }
    } else if (e.type === 'authorized' || e.type === 'unauthorized') {
      // authorized: into the calm section, quietly; unauthorized: the
      // alarm pages from now on, cued as a raise is.
      const moved = noteAuth(e.alarm_id, nOf(e.event_id), e.type === 'authorized' ? e.authorization : null);
      const why = e.type === 'unauthorized' && moved
        ? 'its authorisation' + (e.authorization && e.authorization.reference ? ' ' + e.authorization.reference : '') + (e.reason === 'expired' ? ' expired' : ' was revoked')
        : null;
      if (!alarms.has(e.alarm_id)) { fetchAlarm(e.alarm_id, why ? (a) => cue(a, e.ts, why) : null); return; }
      if (why) cue(alarms.get(e.alarm_id), e.ts, why);
      if (auth.open) loadAuthorizations();
    } else if (e.type === 'approaching') {
      addApproach({ approach_id: e.alarm_id, drone_id: e.drone_id, zone_id: e.zone_id, zone_name: e.zone_name, category: e.category,
        eta_s: e.eta_s === undefined ? null : e.eta_s, distance_m: e.distance_m === undefined ? null : e.distance_m,
        entry: e.entry || null, ts: e.ts, lat: e.lat, lon: e.lon });
      return;
    } else if (e.type === 'approach_ended') {
      endApproach(e.alarm_id);
      return;
    }
    renderActive();
  }
  async function fetchAlarm(id, then) {
    try {
      const a = merge((await api('v1/alarms/' + encodeURIComponent(id))).body);
      renderActive();
      if (then) then(a);
    } catch (e) { console.warn('alarm', id, e); }
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
    await loadList('state=cleared&acked=false&authorized=false', 2000);
    renderActive();
    if (linkedAlarm) showLinked(linkedAlarm).catch((e) => showError('alarm ' + linkedAlarm + ': ' + e.message));
  }
  // showLinked reads the linked alarm (it may be cleared and acked, off the
  // lists), flies the map to it and marks its row, or shows it in the
  // history when no list holds it.
  async function showLinked(id) {
    const r = await api('/v1/alarms/' + encodeURIComponent(id));
    const a = merge(r.body);
    renderActive();
    flyTo(a);
    // The lists are drawn on a later frame (renderActive batches): wait for
    // the row up to a second.
    const find = () => document.querySelector('#active [data-alarm-id="' + CSS.escape(id) + '"], #authorised [data-alarm-id="' + CSS.escape(id) + '"]');
    let li = find();
    for (let i = 0; !li && i < 20; i++) {
      await new Promise((res) => setTimeout(res, 50));
      li = find();
    }
    if (li && li.closest('details')) li.closest('details').open = true;
    if (!li) {
      $('history').replaceChildren(alarmItem(a, false));
      li = $('history').firstChild;
    }
    li.classList.add('linked');
    li.scrollIntoView({ block: 'center' });
  }

  // ---- approaching drones ---------------------------------------------
  // One approach episode per (drone, zone): opened by an approaching
  // event, gone at its approach_ended or at the drone's raise for that
  // zone. Drawn as a dashed line from the drone to the predicted entry
  // point, with the ETA counting down from eta_s at the event's ts (or a
  // dashed ring round the drone when it is only near and closing).
  const approaches = new Map(); // approach_id → episode
  const byDrone = new Map(); // drone_id → Set of its open episodes' ids
  const endedApproaches = new Set(); // ids ended: a list read late does not bring them back
  // The map draws at most APPROACH_MAP episodes (the list says how many
  // there are), APPROACH_LABELS of them with their ETA: a flood of
  // warnings must not stall the page.
  const APPROACH_COLOR = '#ffb300', APPROACH_MAP = 50, APPROACH_LABELS = 20, APPROACH_ROWS = 25;
  const approachingDrone = (id) => byDrone.has(id);
  // due: when the drone is predicted to enter (ms; for one only near and
  // closing, when it was warned of): the episodes' order.
  const hasEta = (x) => x.eta_s !== null && x.eta_s !== undefined;
  function etaLeft(x) {
    return hasEta(x) ? Math.max(0, (x.due - Date.now()) / 1000) : null;
  }
  function etaText(x) {
    const t = etaLeft(x);
    return t === null ? 'near, closing' : 'ETA ' + Math.round(t) + ' s';
  }
  function zoneProps(id) {
    const ls = zones.byZone.get(id);
    return ls && ls.length ? ls[0].feature.properties : null;
  }
  function addApproach(x) {
    if (endedApproaches.has(x.approach_id) || approaches.has(x.approach_id)) return;
    const zp = zoneProps(x.zone_id);
    if (!x.zone_name) x.zone_name = zp ? zp.name : '';
    if (!x.category) x.category = zp ? zp.category : '';
    x.due = Date.parse(x.ts) + (hasEta(x) ? x.eta_s * 1000 : 0);
    approaches.set(x.approach_id, x);
    if (!byDrone.has(x.drone_id)) byDrone.set(x.drone_id, new Set());
    byDrone.get(x.drone_id).add(x.approach_id);
    restyleDrone(x.drone_id);
    renderActive(); // drawn with the list (drawApproaches)
  }
  // onMap draws an episode on the map (on), with its ETA as a label
  // (label), or takes it off. The label is a marker's element whose text
  // is set (nothing from the stream is HTML), placed without measuring
  // (no layout forced per label).
  let onMapCount = 0, labelCount = 0;
  function onMap(x, on, label) {
    if (on && !x.mark) {
      const d = drones.get(x.drone_id);
      const from = d ? [d.last.lat, d.last.lon] : [x.lat, x.lon];
      if (x.entry) {
        x.line = L.polyline([from, [x.entry.lat, x.entry.lon]], { renderer: trackRenderer, pane: 'tracks', color: APPROACH_COLOR, weight: 3, opacity: 0.95, dashArray: '8 6', interactive: false }).addTo(map);
        x.mark = L.circleMarker([x.entry.lat, x.entry.lon], { renderer: droneRenderer, pane: 'drones', radius: 5, color: APPROACH_COLOR, weight: 2, fillColor: '#2b2614', fillOpacity: 1, interactive: false }).addTo(map);
      } else {
        x.mark = L.circleMarker(from, { renderer: droneRenderer, pane: 'drones', radius: 14, color: APPROACH_COLOR, weight: 2, dashArray: '5 4', fill: false, interactive: false }).addTo(map);
      }
      onMapCount++;
    }
    if ((!on || !label) && x.tag) {
      x.tag.remove();
      x.tag = x.label = null;
      labelCount--;
    }
    if (!on && x.mark) {
      if (x.line) x.line.remove();
      x.mark.remove();
      x.line = x.mark = null;
      onMapCount--;
    }
    if (on && label && !x.tag) {
      x.tag = L.marker(x.mark.getLatLng(), { icon: L.divIcon({ className: 'eta-label', html: '', iconSize: null, iconAnchor: [-10, 11] }),
        interactive: false, keyboard: false }).addTo(map);
      x.label = x.tag.getElement();
      x.label.textContent = etaText(x);
      labelCount++;
    }
  }
  function endApproach(id) {
    endedApproaches.add(id);
    if (endedApproaches.size > 5000) { const keep = [...endedApproaches].slice(-2500); endedApproaches.clear(); keep.forEach((k) => endedApproaches.add(k)); }
    const x = approaches.get(id);
    if (!x) return;
    approaches.delete(id);
    const mine = byDrone.get(x.drone_id);
    if (mine) { mine.delete(id); if (!mine.size) byDrone.delete(x.drone_id); }
    onMap(x, false, false);
    restyleDrone(x.drone_id);
    renderActive();
  }
  function endApproachesOf(drone, zone) {
    const mine = byDrone.get(drone);
    if (!mine) return;
    for (const id of [...mine]) if (approaches.get(id).zone_id === zone) endApproach(id);
  }
  function clearApproaches() {
    for (const id of [...approaches.keys()]) endApproach(id);
    endedApproaches.clear();
  }
  // The line starts where the drone is now: moved with the drones of a
  // positions frame.
  function moveApproaches(frame) {
    if (!approaches.size) return;
    for (const p of frame.drones) {
      const mine = byDrone.get(p.drone_id);
      if (!mine) continue;
      for (const id of mine) {
        const x = approaches.get(id);
        if (x.line) x.line.setLatLngs([[p.lat, p.lon], [x.entry.lat, x.entry.lon]]);
        else if (x.mark) { x.mark.setLatLng([p.lat, p.lon]); if (x.tag) x.tag.setLatLng([p.lat, p.lon]); }
      }
    }
  }
  function approachItem(x) {
    const li = el('li', { class: ['alarm', 'approach', x.category].join(' '), 'data-approach-id': x.approach_id, 'data-drone-id': x.drone_id, 'data-zone-id': x.zone_id });
    li.append(el('div', { class: 'head' },
      el('span', { class: 'shape', 'aria-hidden': 'true', text: '➤' }),
      el('span', { class: 'state', text: 'APPROACHING' }),
      el('span', { class: 'cat', text: x.category })));
    li.append(el('div', {}, el('button', { type: 'button', class: 'where', title: 'Show on the map', onclick: () => {
      const d = drones.get(x.drone_id);
      flyToPoint(d ? d.last.lat : x.lat, d ? d.last.lon : x.lon);
    } }, 'drone ' + x.drone_id + ' → ' + (x.zone_name || x.zone_id))));
    li.append(el('div', { class: 'meta' }, el('span', { class: 'eta', text: etaText(x) }),
      (x.distance_m !== null && x.distance_m !== undefined ? ' · ' + Math.round(x.distance_m) + ' m from its edge' : '') + ' · warned at ' + fmtTime(x.ts) +
      (x.entry ? ' · entry predicted at ' + x.entry.lat.toFixed(5) + ', ' + x.entry.lon.toFixed(5) : '')));
    return li;
  }
  // mostUrgent is the k episodes due first, in order, without sorting
  // them all (a flood holds thousands).
  function mostUrgent(k) {
    const top = [];
    for (const x of approaches.values()) {
      if (top.length === k && x.due >= top[k - 1].due) continue;
      let i = top.length;
      while (i > 0 && top[i - 1].due > x.due) i--;
      top.splice(i, 0, x);
      if (top.length > k) top.pop();
    }
    return top;
  }
  let drawnRows = '';
  function drawApproaches() {
    const list = mostUrgent(APPROACH_MAP);
    document.body.dataset.approaching = String(approaches.size);
    // The most urgent first, and what is drawn stays drawn until it ends:
    // a flood of new warnings does not redraw the map's warnings.
    for (const x of list) {
      if (onMapCount >= APPROACH_MAP && labelCount >= APPROACH_LABELS) break;
      if (!x.mark && onMapCount < APPROACH_MAP) onMap(x, true, false);
      if (x.mark && !x.tag && labelCount < APPROACH_LABELS) onMap(x, true, true);
    }
    // At most APPROACH_ROWS rows: a flood of warnings must not push the
    // alarms themselves out of sight.
    // Rebuilt only when the rows or their count change; the countdown
    // below moves the ETAs.
    const rows = list.slice(0, APPROACH_ROWS);
    const key = rows.map((x) => x.approach_id).join() + ' ' + approaches.size;
    if (key === drawnRows) return;
    drawnRows = key;
    $('approaching').replaceChildren(...rows.map(approachItem));
    if (approaches.size > APPROACH_ROWS) $('approaching').append(el('li', { class: 'hint', text: (approaches.size - APPROACH_ROWS) + ' more approaching' + (approaches.size > APPROACH_MAP ? ' (the map draws ' + APPROACH_MAP + ')' : '') }));
  }
  // The countdown: each second, the labels and the rows' ETA.
  setInterval(() => {
    for (const x of approaches.values()) if (x.label) x.label.textContent = etaText(x);
    for (const s of $('approaching').querySelectorAll('li[data-approach-id] .eta')) {
      const x = approaches.get(s.closest('li').dataset.approachId);
      if (x) s.textContent = etaText(x);
    }
  }, 1000);
  // The open episodes when the page opens (or starts over): GET
  // /v1/drones says each drone's, eta_s from its last position.
  async function loadApproaches() {
    let cursor = null, pages = 0;
    do {
      const r = await api('v1/drones?limit=1000' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
      for (const d of r.body.drones) {
        for (const ap of d.approaching || []) {
          addApproach({ approach_id: ap.approach_id, drone_id: d.drone_id, zone_id: ap.zone_id, eta_s: ap.eta_s, entry: ap.entry,
            distance_m: null, ts: d.ts, lat: d.lat, lon: d.lon });
        }
      }
      cursor = r.body.next_cursor;
    } while (cursor && ++pages < 20);
  }
  // For the browser tests: what the map draws of each approach.
  window.nofly.approaches = () => [...approaches.values()].map((x) => ({
    approach_id: x.approach_id, drone_id: x.drone_id, zone_id: x.zone_id, eta: etaText(x),
    line: x.line && map.hasLayer(x.line) ? { latlngs: x.line.getLatLngs().map((p) => [p.lat, p.lng]), dashArray: x.line.options.dashArray, color: x.line.options.color } : null,
    marker: x.mark && map.hasLayer(x.mark) ? [x.mark.getLatLng().lat, x.mark.getLatLng().lng] : null,
    label: x.label ? x.label.textContent : null,
  }));

  // ---- authorisations ---------------------------------------------------
  // Everyone sees the list; an admin (the role /v1/me names) creates and
  // revokes. Polled while the panel is open, and read again after a change.
  const auth = { open: false, timer: null, confirming: null, zoneIds: new Set(), loading: false };
  const AUTH_POLL_MS = 5000;
  function canAuthorize() {
    if (!me) return false;
    return me.can_authorize !== undefined ? !!me.can_authorize : me.role === 'admin';
  }
  function openAuthPanel(open) {
    auth.open = open;
    $('authPanel').hidden = !open;
    $('authOpen').setAttribute('aria-expanded', open ? 'true' : 'false');
    $('authForm').hidden = !canAuthorize();
    sessionStorage.setItem('nofly.authPanel', open ? '1' : '0');
    clearInterval(auth.timer);
    auth.confirming = null;
    if (!open) { setPicking(null); return; }
    fillLists();
    loadAuthorizations();
    auth.timer = setInterval(loadAuthorizations, AUTH_POLL_MS);
    (canAuthorize() ? $('authForm').drone : $('authClose')).focus({ preventScroll: true });
  }
  $('authOpen').addEventListener('click', () => openAuthPanel(!auth.open));
  $('authClose').addEventListener('click', () => openAuthPanel(false));
  // The drones and zones to pick from, as the form's suggestions.
  function fillLists() {
    const ds = [...drones.keys()].sort().slice(0, 1000);
    $('droneIds').replaceChildren(...ds.map((id) => el('option', { value: id })));
    const zs = [...zones.byZone.entries()].slice(0, 5000);
    $('zoneIds').replaceChildren(...zs.map(([id, ls]) => el('option', { value: id, label: (ls[0].feature.properties.name || id) + ' · ' + ls[0].feature.properties.category })));
  }
  $('authForm').drone.addEventListener('focus', fillLists);
  $('authForm').zoneId.addEventListener('focus', fillLists);
  let picking = null; // 'drone' | 'zone' | null: what a click on the map picks
  function setPicking(kind) {
    picking = kind;
    document.body.classList.toggle('picking', !!kind);
    for (const b of $('authForm').querySelectorAll('button.pick')) b.setAttribute('aria-pressed', b.dataset.pick === kind ? 'true' : 'false');
    $('authMsg').textContent = kind === 'drone' ? 'Click a drone on the map.' : kind === 'zone' ? 'Click zones on the map to add them; click “Pick on map” again when done.' : '';
  }
  for (const b of $('authForm').querySelectorAll('button.pick')) b.addEventListener('click', () => setPicking(picking === b.dataset.pick ? null : b.dataset.pick));
  function setDroneField(id) {
    $('authForm').drone.value = id;
    fieldError('drone', '');
  }
  function addZoneChip(id) {
    id = (id || '').trim();
    if (!id) return;
    auth.zoneIds.add(id);
    $('authForm').querySelector('input[name="zonesMode"][value="some"]').checked = true;
    drawChips();
    fieldError('zones', '');
  }
  function drawChips() {
    $('zoneChips').replaceChildren(...[...auth.zoneIds].map((id) => {
      const zp = zoneProps(id);
      return el('span', { class: 'chip', 'data-zone-id': id }, (zp && zp.name ? zp.name + ' (' + id + ')' : id),
        el('button', { type: 'button', 'aria-label': 'Remove zone ' + id, text: '×', onclick: () => { auth.zoneIds.delete(id); drawChips(); } }));
    }));
  }
  $('zoneAdd').addEventListener('click', () => { addZoneChip($('authForm').zoneId.value); $('authForm').zoneId.value = ''; });
  $('authForm').zoneId.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') { e.preventDefault(); addZoneChip(e.target.value); e.target.value = ''; }
  });
  // datetime-local fields are read and written as UTC, as in the history.
  const fromLocal = (v) => new Date(v + (v.length === 16 ? ':00' : '') + 'Z');
  const toLocal = (d) => d.toISOString().slice(0, 19);
  for (const b of $('authForm').querySelectorAll('.quick button')) {
    b.addEventListener('click', () => {
      const f = $('authForm').from.value;
      const start = f ? fromLocal(f) : new Date();
      $('authForm').until.value = toLocal(new Date(start.getTime() + Number(b.dataset.hours) * 3600e3));
      fieldError('until', '');
    });
  }
  function fieldError(field, text) {
    const f = $('authForm');
    const key = field.startsWith('zones') ? 'zones' : ['drone', 'from', 'until', 'reason', 'reference'].includes(field) ? field : 'body';
    const span = f.querySelector('.fielderr[data-for="' + key + '"]');
    span.textContent = text;
    const input = key === 'zones' ? f.querySelector('.zonesfield') : f.elements[key];
    if (input && input.classList) input.classList.toggle('field-bad', !!text);
    if (input && input.setAttribute && input.tagName === 'INPUT') input.setAttribute('aria-invalid', text ? 'true' : 'false');
  }
  $('authForm').addEventListener('submit', async (e) => {
    e.preventDefault();
    const f = $('authForm');
    for (const k of ['drone', 'zones', 'from', 'until', 'reason', 'reference', 'body']) fieldError(k, '');
    $('authMsg').textContent = '';
    const mode = f.querySelector('input[name="zonesMode"]:checked').value;
    const cats = [...f.querySelectorAll('input[name="cat"]:checked')].map((c) => c.value);
    if (f.until.value === '') { fieldError('until', 'until: required (no open-ended authorisation)'); f.until.focus(); return; }
    const body = {
      drone: f.drone.value.trim(),
      zones: mode === 'all' ? 'all' : { ids: [...auth.zoneIds], categories: cats },
      from: (f.from.value ? fromLocal(f.from.value) : new Date()).toISOString(),
      until: fromLocal(f.until.value).toISOString(),
      reason: f.reason.value,
      reference: f.reference.value.trim() || null,
    };
    const btn = f.querySelector('button[type="submit"]');
    btn.disabled = true;
    try {
      const r = await api('v1/authorizations', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      $('authMsg').textContent = 'Authorised ' + r.body.drone + ' until ' + fmtTime(r.body.until) + ' (authorisation ' + r.body.id + '); in force on every alerter within 5 s.';
      f.reset(); auth.zoneIds.clear(); drawChips(); setPicking(null);
      loadAuthorizations();
    } catch (err) {
      const field = (err.body && err.body.details && err.body.details.field) || 'body';
      fieldError(field, err.message);
      const bad = f.elements[field.startsWith('zones') ? 'zoneId' : field];
      if (bad && bad.focus) bad.focus();
    } finally {
      btn.disabled = false;
    }
  });
  function zonesText(z) {
    if (z === 'all') return 'all zones';
    const parts = [];
    for (const id of (z && z.ids) || []) { const zp = zoneProps(id); parts.push(zp && zp.name ? zp.name + ' (' + id + ')' : id); }
    for (const c of (z && z.categories) || []) parts.push('every ' + c + ' zone');
    return parts.join(', ') || 'no zone';
  }
  function authItem(au) {
    const revoked = !!au.revoked_at;
    const word = au.state === 'ended' ? (revoked ? 'REVOKED' : 'ENDED') : au.state.toUpperCase();
    const li = el('li', { class: 'authz', 'data-auth-id': au.id, 'data-state': au.state, 'data-drone': au.drone });
    const head = el('div', { class: 'head' },
      el('strong', { text: au.drone }), el('span', { class: 'state', text: word }),
      au.reference ? el('span', { class: 'ref', text: 'permit ' + au.reference }) : null);
    li.append(head);
    li.append(el('div', { text: zonesText(au.zones) }));
    li.append(el('div', { class: 'meta', text: fmtTime(au.from) + ' → ' + fmtTime(au.until) }));
    li.append(el('div', { class: 'meta', text: '“' + au.reason + '” · by ' + au.by +
      (revoked ? ' · revoked ' + fmtTime(au.revoked_at) + ' by ' + au.revoked_by : '') }));
    if (canAuthorize() && au.state !== 'ended') {
      const err = el('span', { class: 'error', role: 'alert' });
      const btn = el('button', { type: 'button', class: 'revoke', text: 'Revoke', 'aria-label': 'Revoke the authorisation of ' + au.drone + (au.reference ? ' (' + au.reference + ')' : '') });
      head.append(btn);
      const confirmRow = (yes) => el('div', { class: 'confirm', role: 'group', 'aria-label': 'Confirm the revocation' },
        'End it now? Its drone’s alarms will page.',
        el('button', { type: 'button', class: 'yes', text: 'Revoke now', onclick: yes }),
        el('button', { type: 'button', class: 'no', text: 'Keep', onclick: () => { auth.confirming = null; loadAuthorizations(); } }));
      btn.addEventListener('click', () => {
        auth.confirming = au.id;
        btn.disabled = true;
        const row = confirmRow(async () => {
          row.querySelectorAll('button').forEach((b) => { b.disabled = true; });
          try {
            await api('v1/authorizations/' + encodeURIComponent(au.id), { method: 'DELETE' });
            $('authMsg').textContent = 'Revoked ' + au.drone + (au.reference ? ' (' + au.reference + ')' : '') + '; a drone inside pages within a few seconds.';
          } catch (e) {
            err.textContent = 'revoke failed: ' + e.message;
          }
          auth.confirming = null;
          loadAuthorizations();
        });
        li.append(row);
        row.querySelector('.no').focus();
      });
      li.append(err);
    }
    return li;
  }
  async function loadAuthorizations() {
    if (!auth.open || auth.loading) return;
    auth.loading = true;
    try {
      const r = await api('v1/authorizations?limit=1000');
      $('authError').hidden = true;
      if (auth.confirming) return; // not under the operator's cursor
      const groups = { active: [], upcoming: [], ended: [] };
      for (const au of r.body.authorizations) (groups[au.state] || groups.ended).push(au);
      const out = [];
      for (const [k, title] of [['active', 'Active'], ['upcoming', 'Upcoming'], ['ended', 'Ended and revoked']]) {
        out.push(el('h3', { text: title + ' (' + groups[k].length + ')' }));
        const ul = el('ul', { class: 'authgroup', id: 'auth-' + k });
        ul.append(...groups[k].map(authItem));
        if (!groups[k].length) ul.append(el('li', { class: 'hint', text: 'none' }));
        out.push(ul);
      }
      $('authLists').replaceChildren(...out);
      $('authLists').dataset.version = String(r.body.version);
    } catch (e) {
      $('authError').hidden = false;
      $('authError').textContent = 'authorisations: ' + e.message;
    } finally {
      auth.loading = false;
    }
  }
  // The calm section's collapsed state is remembered.
  $('authorisedBox').open = localStorage.getItem('nofly.authorisedOpen') !== '0';
  $('authorisedBox').addEventListener('toggle', () => localStorage.setItem('nofly.authorisedOpen', $('authorisedBox').open ? '1' : '0'));

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
            if (comment === 'connected' && !lastEventId) {
              loadAlarms().catch((e) => showError('alarms: ' + e.message));
              loadApproaches().catch((e) => console.warn('approaching drones', e));
            }
          });
      } catch (e) {
        if (e.status === 401) { askToken('the token was refused'); return; }
        if (e.status === 410) { lastEventId = null; alarms.clear(); authz.clear(); clearApproaches(); } // trimmed: start over from the lists
        if (e.status === 503 || e.status === 403) { conn.errText = e.message; conn.events = 'error'; renderConn(); }
        else lost('events');
        stats.reconnects++;
      }
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 10000);
    }
  }
  let fittedDrones = false;
  // The positions stream is the view's (issue 29): the page sends its
  // viewport (with a margin, so a small pan needs no new stream) and its
  // zoom, and gets the drones inside it, or clusters when the view holds
  // more than the server draws one by one. Panning past the margin or
  // zooming opens a new stream for the new view.
  const posView = { bbox: null, zoom: null, ctl: null };
  const clusterLayer = L.layerGroup().addTo(map);
  function viewQuery() {
    const b = map.getBounds().pad(0.25);
    const c = (v, lo, hi) => Math.min(hi, Math.max(lo, v)).toFixed(4);
    const bbox = [c(b.getWest(), -180, 180), c(b.getSouth(), -90, 90), c(b.getEast(), -180, 180), c(b.getNorth(), -90, 90)];
    return { bbox, zoom: Math.max(0, Math.min(22, Math.round(map.getZoom()))) };
  }
  function viewCovered() {
    if (!posView.bbox) return false;
    const b = map.getBounds();
    const [w, s, e, n] = posView.bbox.map(Number);
    return Math.round(map.getZoom()) === posView.zoom && b.getWest() >= w && b.getSouth() >= s && b.getEast() <= e && b.getNorth() <= n;
  }
  let viewTimer = null;
  map.on('moveend', () => {
    clearTimeout(viewTimer);
    viewTimer = setTimeout(() => { if (!viewCovered() && posView.ctl) posView.ctl.abort(); }, 300);
  });
  function drawClusters(list) {
    clusterLayer.clearLayers();
    for (const c of list) {
      const big = c.n >= 1000 ? 'l' : c.n >= 100 ? 'm' : 's';
      const icon = L.divIcon({ className: 'dcluster ' + big + (c.alarmed ? ' alarmed' : ''), html: '<span>' + c.n + '</span>', iconSize: null });
      const title = c.n + ' drones' + (c.alarmed ? ', ' + c.alarmed + ' in alarm' : '') + (c.stale ? ', ' + c.stale + ' silent' : '') + ' — click to zoom in';
      L.marker([c.lat, c.lon], { icon, title, keyboard: false })
        .on('click', () => map.setView([c.lat, c.lon], Math.min(map.getZoom() + 3, 18)))
        .addTo(clusterLayer);
    }
    document.body.dataset.clusters = String(list.length);
    document.body.dataset.clusteredDrones = String(list.reduce((n, c) => n + c.n, 0));
  }
  // For the browser tests: the drones drawn one by one, and the view the
  // positions stream was opened with.
  window.nofly.droneIds = () => [...drones.keys()].sort();
  window.nofly.posView = () => ({ bbox: posView.bbox, zoom: posView.zoom });
  function removeDrone(id) {
    const d = drones.get(id);
    if (!d) return;
    d.marker.remove(); d.track.remove(); drones.delete(id);
    if (follow === id) setFollow(null);
  }
  async function followPositions() {
    let backoff = 500;
    for (;;) {
      const v = viewQuery();
      posView.bbox = v.bbox; posView.zoom = v.zoom; posView.ctl = new AbortController();
      const path = 'v1/map/positions?bbox=' + v.bbox.join(',') + '&zoom=' + v.zoom;
      try {
        await sse(path, {}, posView.ctl.signal, () => {},
          (type, data) => {
            heard('positions');
            if (type !== 'positions') return;
            const f = JSON.parse(data);
            const seen = f.drones.map((d) => [d.lat, d.lon]).concat((f.clusters || []).map((c) => [c.lat, c.lon]));
            if (f.full && seen.length && !fittedDrones && !hashView && !linkedAlarm) {
              // First sight: where the drones are is where to look.
              fittedDrones = true;
              map.fitBounds(L.latLngBounds(seen).pad(0.3), { maxZoom: 11 });
            }
            if (f.full) {
              // A (re)connected stream starts over: what it does not name
              // has left the view.
              const keep = new Set(f.drones.map((d) => d.drone_id));
              for (const id of [...drones.keys()]) if (!keep.has(id)) removeDrone(id);
              drawClusters(f.clusters || []);
            }
            for (const id of f.gone || []) removeDrone(id);
            applyPositions(f);
            backoff = 500;
          },
          () => heard('positions'));
      } catch (e) {
        if (e.name === 'AbortError') continue; // a new view: a new stream, at once
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
      // A filtered page may come back short, even empty, with a cursor:
      // the server examines a bounded number of alarms per request
      // (issue 29). Follow it a few times before saying nothing matched.
      let shown = 0;
      for (let i = 0; i < 8; i++) {
        const r = await api('v1/alarms?' + history.query + (history.cursor ? '&cursor=' + encodeURIComponent(history.cursor) : ''));
        $('history').append(...r.body.alarms.map((a) => alarmItem(a, false)));
        shown += r.body.alarms.length;
        history.cursor = r.body.next_cursor;
        if (shown >= 20 || !history.cursor) break;
      }
      if (!shown && !more) $('history').append(el('li', { class: 'hint', text: history.cursor ? 'no alarm matches so far — More searches older alarms' : 'no alarm matches' }));
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
    csrf = (!token && me.csrf_token) || '';
    $('who').textContent = me.name + ' (' + me.role + ')';
    document.body.dataset.role = me.role;
    $('signout').hidden = !token;
    window.nofly.me = () => me;
    emit('me', me); // oidc.js: a signed-in person's "Sign out"
    $('authOpen').title = canAuthorize() ? 'Authorised flights: list, create, revoke' : 'Authorised flights (your role may read them)';
    await loadZones(true);
    if (sessionStorage.getItem('nofly.authPanel') === '1') openAuthPanel(true);
    followEvents();
    followPositions();
    loadHistory(false);
  }
  start();
})();
