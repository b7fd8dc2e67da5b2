// nofly dashboard: the base map under the zones (loaded after app.js).
// GET /v1/map/basemap says which: "tiles" (--map-tiles, an XYZ raster
// layer from the tile server the page's CSP admits), "pmtiles"
// (--map-pmtiles, vector tiles the alerter serves by range requests, drawn
// on canvas by protomaps-leaflet, loaded only then; a regional archive
// over the coastline, which stays around it) or "coastline" (the Natural
// Earth land app.js draws; nothing to do here).
'use strict';
(function () {
  const nofly = window.nofly;
  const state = { kind: null, drawn: 0, errors: 0 };
  nofly.basemap = state; // tests and the curious read it

  // Leaflet writes attributions as HTML; the alerter's is plain text.
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = src;
      s.onload = resolve;
      s.onerror = () => reject(new Error('could not load ' + src));
      document.head.appendChild(s);
    });
  }

  // The archive read as protomaps-leaflet's PMTiles reader asks (a byte
  // range at a time), with the page's token: /v1 needs it.
  function archiveSource(url) {
    return {
      getKey: () => url,
      getBytes: async (offset, length, signal) => {
        const res = await fetch(url, { signal, headers: nofly.headers({ Range: 'bytes=' + offset + '-' + (offset + length - 1) }) });
        if (res.status !== 206 && res.status !== 200) throw new Error('base map archive: HTTP ' + res.status);
        let data = await res.arrayBuffer();
        if (res.status === 200) data = data.slice(offset, offset + length); // the whole file: take the range
        return { data, etag: res.headers.get('ETag') || undefined };
      },
    };
  }

  // Colours: muted, so the zones (red, amber) and drones stay what the eye
  // finds first; runways dark, as an operator looks for them.
  const C = {
    earth: '#f2efe9', water: '#a9cbe6', park: '#d5e6c8', wood: '#c5dcb5', aerodrome: '#e6e4ee',
    industrial: '#e9e4de', residential: '#eeeae5', building: '#d8cfc6', buildingLine: '#c4b9ae',
    casing: '#cfc7bd', highway: '#f0b26e', major: '#f8d98e', minor: '#ffffff', path: '#b3a999', rail: '#a8a39c',
    runway: '#7d828c', taxiway: '#a9adb6', label: '#3c3a37', halo: '#ffffff', water_label: '#3f6c96',
  };
  let P = null; // protomaps-leaflet, once loaded
  const kind = (f) => f.props.kind;
  const detail = (f) => f.props.kind_detail;
  // Widths grow with the zoom: pixels at z, doubling each zoom from base.
  const grow = (px, base) => (z) => Math.max(0.5, px * Math.pow(1.6, z - base));

  function paintRules() {
    const isRoad = (k) => (z, f) => kind(f) === k && detail(f) !== 'runway' && detail(f) !== 'taxiway';
    return [
      { dataLayer: 'earth', symbolizer: new P.PolygonSymbolizer({ fill: C.earth }) },
      { dataLayer: 'landuse', symbolizer: new P.PolygonSymbolizer({ fill: C.aerodrome }), filter: (z, f) => kind(f) === 'aerodrome' },
      { dataLayer: 'landuse', symbolizer: new P.PolygonSymbolizer({ fill: C.park }), filter: (z, f) => ['park', 'grass', 'meadow', 'recreation_ground', 'golf_course', 'cemetery', 'farmland'].includes(kind(f)) },
      { dataLayer: 'landuse', symbolizer: new P.PolygonSymbolizer({ fill: C.wood }), filter: (z, f) => ['wood', 'forest', 'nature_reserve', 'scrub'].includes(kind(f)) },
      { dataLayer: 'landuse', symbolizer: new P.PolygonSymbolizer({ fill: C.industrial }), filter: (z, f) => ['industrial', 'commercial', 'retail', 'military', 'railway'].includes(kind(f)) },
      { dataLayer: 'landuse', symbolizer: new P.PolygonSymbolizer({ fill: C.residential }), filter: (z, f) => kind(f) === 'residential' },
      { dataLayer: 'water', symbolizer: new P.PolygonSymbolizer({ fill: C.water }) },
      { dataLayer: 'water', symbolizer: new P.LineSymbolizer({ color: C.water, width: grow(1.5, 13) }), filter: (z, f) => f.geomType === 2 },
      { dataLayer: 'buildings', symbolizer: new P.PolygonSymbolizer({ fill: C.building, stroke: C.buildingLine, width: 0.5 }), minzoom: 14 },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.taxiway, width: grow(2, 13) }), filter: (z, f) => detail(f) === 'taxiway', minzoom: 12 },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.runway, width: grow(5, 13) }), filter: (z, f) => detail(f) === 'runway' },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.rail, width: 1, dash: [3, 3] }), filter: (z, f) => kind(f) === 'rail' },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.path, width: 1, dash: [2, 2] }), filter: isRoad('path'), minzoom: 14 },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.casing, width: grow(2.2, 13) }), filter: isRoad('minor_road'), minzoom: 13 },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.minor, width: grow(1.4, 13) }), filter: isRoad('minor_road'), minzoom: 13 },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.casing, width: grow(3.4, 13) }), filter: isRoad('major_road') },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.major, width: grow(2.4, 13) }), filter: isRoad('major_road') },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.casing, width: grow(4.2, 13) }), filter: isRoad('highway') },
      { dataLayer: 'roads', symbolizer: new P.LineSymbolizer({ color: C.highway, width: grow(3, 13) }), filter: isRoad('highway') },
    ];
  }

  function labelRules() {
    const font = (w, px) => w + ' ' + px + 'px system-ui, sans-serif';
    return [
      { dataLayer: 'places', symbolizer: new P.CenteredTextSymbolizer({ labelProps: ['name'], font: font(600, 14), fill: C.label, stroke: C.halo, width: 3 }) },
      { dataLayer: 'pois', symbolizer: new P.CenteredTextSymbolizer({ labelProps: ['name'], font: font(600, 13), fill: C.label, stroke: C.halo, width: 3 }), filter: (z, f) => kind(f) === 'aerodrome' },
      { dataLayer: 'roads', symbolizer: new P.LineLabelSymbolizer({ labelProps: ['ref', 'name'], font: font(600, 12), fill: '#222222', stroke: C.halo, width: 3 }), filter: (z, f) => detail(f) === 'runway' },
      { dataLayer: 'roads', symbolizer: new P.LineLabelSymbolizer({ labelProps: ['ref', 'name'], font: font(400, 11), fill: C.label, stroke: C.halo, width: 2 }), filter: (z, f) => detail(f) === 'taxiway', minzoom: 15 },
      { dataLayer: 'roads', symbolizer: new P.LineLabelSymbolizer({ labelProps: ['name', 'ref'], font: font(400, 12), fill: C.label, stroke: C.halo, width: 2.5 }), filter: (z, f) => detail(f) !== 'runway' && detail(f) !== 'taxiway', minzoom: 14 },
      { dataLayer: 'water', symbolizer: new P.CenteredTextSymbolizer({ labelProps: ['name'], font: 'italic ' + font(400, 12), fill: C.water_label, stroke: C.halo, width: 2 }), minzoom: 13 },
    ];
  }

  async function drawPMTiles(info) {
    await loadScript('vendor/protomaps-leaflet/protomaps-leaflet.js');
    if (!window.protomapsL) throw new Error('protomaps-leaflet did not load');
    // The reader class the bundle uses (it exports no name for it): a
    // source built from a name holds one, which reads ours.
    const PMTiles = new window.protomapsL.PmtilesSource('unused.pmtiles', false).p.constructor;
    const archive = new PMTiles(archiveSource(info.url));
    return drawVector(archive, info);
  }

  // A regional archive (a city, an airport) is drawn only inside its
  // bounds and from the zoom its data starts at (the layer reads data one
  // zoom below the map's): around it, and zoomed out, the coastline stays.
  const regional = (info) => Array.isArray(info.bounds) && info.bounds.length === 4 &&
    (info.bounds[2] - info.bounds[0] < 350 || info.bounds[3] - info.bounds[1] < 160);

  function drawVector(archive, info) {
    P = window.protomapsL;
    const opts = {
      url: archive, paintRules: paintRules(), labelRules: labelRules(), backgroundColor: C.earth,
      maxDataZoom: info.max_zoom || 15, attribution: esc(info.attribution || ''),
    };
    if (regional(info)) {
      const [w, s, e, n] = info.bounds;
      opts.bounds = [[s, w], [n, e]];
      opts.minZoom = (info.min_zoom || 0) + 1;
    }
    const layer = P.leafletLayer(opts);
    layer.on('tileload', () => { state.drawn++; });
    layer.on('tileerror', () => { state.errors++; });
    layer.addTo(nofly.map);
    return layer;
  }

  function drawTiles(info) {
    const layer = L.tileLayer(info.url, { attribution: esc(info.attribution || ''), maxZoom: 19, crossOrigin: false });
    layer.on('tileload', () => { state.drawn++; });
    layer.on('tileerror', () => { state.errors++; });
    layer.addTo(nofly.map);
    return layer;
  }

  let asked = false;
  async function start() {
    if (asked) return;
    asked = true;
    let info;
    try {
      info = (await nofly.api('v1/map/basemap')).body;
    } catch (e) {
      asked = false; // signed out or not yet: the next zone view asks again
      return;
    }
    state.kind = info.kind;
    try {
      if (info.kind === 'tiles') drawTiles(info);
      else if (info.kind === 'pmtiles') await drawPMTiles(info);
      else { document.body.dataset.basemap = 'coastline'; return; }
      if (info.kind === 'tiles' || !regional(info)) nofly.hideLand();
      document.body.dataset.basemap = info.kind;
    } catch (e) {
      state.errors++;
      console.warn('base map', e); // the coastline stays
    }
  }
  // After the first zone view: the page is signed in then.
  nofly.on('zones', start);
})();
