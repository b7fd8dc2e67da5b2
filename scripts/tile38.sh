#!/usr/bin/env bash
# Builds a pinned Tile38 release from a source directory you provide, and
# starts, checks and stops it on 127.0.0.1 by PID — for cmd/benchcompare,
# which runs nofly and Tile38 side by side. Tile38 is not part of nofly and
# not in this repository; this script never downloads it (only `go build`
# fetches its Go modules, through the Go module proxy).
#
#   scripts/tile38.sh build|start|stop|restart|status|logs
#
# TILE38_SRC      Tile38's source: a git clone or bare mirror (the pinned tag
#                 is exported from it), or a tree of the pinned release.
#                 Default: $NOFLY_CACHE/src/tile38.
# TILE38_VERSION  the pinned release tag (1.37.0).
# TILE38_PORT     listening port (9851); TILE38_DIR its state (data, log, pid).
set -euo pipefail
source "$(dirname "$0")/common.sh"

TILE38_VERSION=${TILE38_VERSION:-1.37.0}
TILE38_SRC=${TILE38_SRC:-"$NOFLY_CACHE/src/tile38"}
TILE38_PORT=${TILE38_PORT:-9851}
TILE38_DIR=${TILE38_DIR:-"$NOFLY_CACHE/run/tile38-$TILE38_PORT"}
BUILD_DIR="$NOFLY_CACHE/tile38-$TILE38_VERSION"
BIN="$BUILD_DIR/tile38-server"
PIDFILE=$TILE38_DIR/tile38.pid
LOGFILE=$TILE38_DIR/tile38.log
PATTERN="tile38-server -h 127.0.0.1 -p $TILE38_PORT"

how_to_get() {
  cat >&2 <<EOF
Tile38's source is not at $TILE38_SRC. Get release $TILE38_VERSION yourself, e.g.
  git clone --branch $TILE38_VERSION --depth 1 https://github.com/tidwall/tile38 "$TILE38_SRC"
or unpack its release source archive (tile38-$TILE38_VERSION.tar.gz) there,
then run: TILE38_SRC="$TILE38_SRC" $0 build
EOF
  exit 1
}

ping() { redis-cli -h 127.0.0.1 -p "$TILE38_PORT" PING 2>/dev/null | grep -q PONG; }

# export_source DEST: the pinned release's tree in DEST.
export_source() {
  local dest=$1 gitdir=""
  if [[ -d $TILE38_SRC/.git ]]; then gitdir=$TILE38_SRC/.git
  elif [[ -f $TILE38_SRC/HEAD && -d $TILE38_SRC/objects ]]; then gitdir=$TILE38_SRC # a bare mirror
  fi
  if [[ -n $gitdir ]]; then
    git --git-dir="$gitdir" rev-parse -q --verify "refs/tags/$TILE38_VERSION" >/dev/null ||
      die "$TILE38_SRC has no tag $TILE38_VERSION"
    git --git-dir="$gitdir" archive "refs/tags/$TILE38_VERSION" | tar -x -C "$dest"
    log "source: tag $TILE38_VERSION ($(git --git-dir="$gitdir" rev-parse "refs/tags/$TILE38_VERSION^{commit}")) of $TILE38_SRC"
    return 0
  fi
  [[ -f $TILE38_SRC/go.mod && -d $TILE38_SRC/cmd/tile38-server ]] || how_to_get
  grep -q '^module github.com/tidwall/tile38$' "$TILE38_SRC/go.mod" || die "$TILE38_SRC is not Tile38's source"
  # A release tree carries no tag: its change log's newest entry names it.
  grep -m1 '^## \[' "$TILE38_SRC/CHANGELOG.md" | grep -qF "[$TILE38_VERSION]" ||
    die "$TILE38_SRC is not release $TILE38_VERSION (CHANGELOG.md's newest entry: $(grep -m1 '^## \[' "$TILE38_SRC/CHANGELOG.md"))"
  cp -R "$TILE38_SRC/." "$dest"
  log "source: release tree $TILE38_SRC ($TILE38_VERSION)"
}

build() {
  [[ -x $BIN ]] && { log "tile38-server $TILE38_VERSION already built: $BIN"; return 0; }
  [[ -e $TILE38_SRC ]] || how_to_get
  command -v go >/dev/null || die "go is not installed"
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"; trap - RETURN' RETURN
  export_source "$tmp"
  mkdir -p "$BUILD_DIR"
  log "building tile38-server $TILE38_VERSION with $(go version | cut -d' ' -f3) (its modules come through the Go module proxy)"
  # What its scripts/build.sh does, minus the git metadata a plain tree lacks.
  (cd "$tmp" && CGO_ENABLED=0 go build \
    -ldflags "-X github.com/tidwall/tile38/core.Version=$TILE38_VERSION" \
    -o "$BIN.tmp" ./cmd/tile38-server) || die "go build failed"
  mv "$BIN.tmp" "$BIN"
  log "built $BIN"
}

start() {
  build
  if pid_alive "$PIDFILE" "$PATTERN" && ping; then
    log "tile38 already running on 127.0.0.1:$TILE38_PORT (pid $(<"$PIDFILE"))"
    return 0
  fi
  ping && die "something else answers on 127.0.0.1:$TILE38_PORT; stop it or set TILE38_PORT"
  mkdir -p "$TILE38_DIR/data"
  rm -f "$PIDFILE"
  # Defaults otherwise: AOF on (written per command, fsynced once a second).
  nohup "$BIN" -h 127.0.0.1 -p "$TILE38_PORT" -d "$TILE38_DIR/data" --nohup >>"$LOGFILE" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  local i
  for ((i = 0; i < 300; i++)); do
    if ping; then
      log "tile38 $TILE38_VERSION ready on 127.0.0.1:$TILE38_PORT (pid $(<"$PIDFILE"), dir $TILE38_DIR)"
      return 0
    fi
    pid_alive "$PIDFILE" "$PATTERN" || break
    sleep 0.2
  done
  log "tile38 did not answer PING; last log lines:"
  tail -n 30 "$LOGFILE" >&2 || true
  exit 1
}

stop() { stop_pid "$PIDFILE" "$PATTERN" 20; log "tile38 on $TILE38_PORT stopped"; }

status() {
  if pid_alive "$PIDFILE" "$PATTERN" && ping; then
    echo "tile38: $TILE38_VERSION running on 127.0.0.1:$TILE38_PORT (pid $(<"$PIDFILE"))"
  else
    echo "tile38: not running on 127.0.0.1:$TILE38_PORT"
    return 1
  fi
}

case ${1:-} in
  build) build ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  logs) tail -n "${LINES:-50}" "$LOGFILE" ;;
  *) echo "usage: $0 build|start|stop|restart|status|logs" >&2; exit 2 ;;
esac
