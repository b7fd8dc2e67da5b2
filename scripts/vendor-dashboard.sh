#!/usr/bin/env bash
# Vendors the dashboard's third-party assets into dashboard/web/vendor from
# pinned npm packages, each tarball checked against its SHA-256 before a
# byte of it is used, and writes dashboard/web/vendor/SHA256SUMS, which
# dashboard's TestVendoredAssets checks the embedded files against (so an
# edited vendored file fails the tests, not a control room).
#
#   scripts/vendor-dashboard.sh          fetch with `npm pack` (npm's configured registry)
#
# The files are committed: the build and the tests need no network. Run this
# only to change a pin (and then update the table below and docs/dashboard.md).
set -euo pipefail
source "$(dirname "$0")/common.sh"
cd "$(dirname "$0")/.."

# package@version  SHA-256 of the npm tarball  files to keep (from package/)
PINS=(
  "leaflet@1.9.4 84c65a256e50657896f54c33bd857b6849ebe94c817803be818bf32a3dde0b77 LICENSE dist/leaflet.js dist/leaflet.css"
  "topojson-client@3.1.0 889fadb422f6236d0f8337a236ce6499f258b75e44b81733b13bd971067322bf LICENSE dist/topojson-client.min.js"
  "world-atlas@2.0.2 032e7765f2ce00edaeafec23ff22bc3b77e42987c257da944cc585b452c05b97 LICENSE land-110m.json land-50m.json"
  # The --map-pmtiles base map: vector tiles drawn on canvas (its UMD build
  # bundles the pmtiles reader; no worker, nothing fetched but the archive).
  "protomaps-leaflet@5.1.0 0b45b08d0e6f7d39816415dbe6821d0556e7997ec716ed0123305cc1fe5a3fd8 LICENSE dist/protomaps-leaflet.js"
)

command -v npm >/dev/null || die "npm is needed to fetch the pinned packages"
out=dashboard/web/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$out"
for pin in "${PINS[@]}"; do
  read -r spec sum files <<<"$pin"
  name=${spec%@*}
  log "fetching $spec"
  (cd "$work" && npm pack --silent "$spec" >/dev/null) || die "npm pack $spec failed"
  tgz=$(ls "$work"/"$name"-*.tgz)
  got=$(sha256sum "$tgz" | cut -d' ' -f1)
  [[ $got == "$sum" ]] || die "$spec: tarball SHA-256 is $got, pinned $sum: refusing it"
  mkdir -p "$work/$name" "$out/$name"
  tar -xzf "$tgz" -C "$work/$name"
  for f in $files; do
    cp "$work/$name/package/$f" "$out/$name/$(basename "$f")"
  done
  rm -f "$tgz"
done
(cd "$out" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum) > "$out/SHA256SUMS"
log "vendored into $out:"
cat "$out/SHA256SUMS"
