# The venv and helpers scripts/schemathesis.sh (ingest) and
# scripts/schemathesis-alerter.sh share. Sourced after common.sh, never run.
#
# schemathesis and its dependencies are pinned in
# scripts/schemathesis/requirements.txt and installed once into a venv
# under $NOFLY_CACHE, named by the file's hash and the Python version.

REQS=$SCRIPTS_DIR/schemathesis/requirements.txt

# pick_python prints a Python 3.12 or later when the machine has one:
# under CPython 3.11, Hypothesis (inside schemathesis) now and then fails a
# run with "SystemError: AST constructor recursion depth mismatch", a
# CPython bug (python/cpython#106905), not a finding.
pick_python() {
  local c v
  for c in python3.13 python3.12 python3; do
    if "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then command -v "$c"; return; fi
  done
  if command -v pyenv >/dev/null; then
    for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[2-9]' | sort -V -r); do
      c=$(pyenv root)/versions/$v/bin/python3
      if [[ -x $c ]]; then echo "$c"; return; fi
    done
  fi
  command -v python3 >/dev/null || apt_install python3 python3-venv
  log "warning: no Python 3.12+; schemathesis may fail spuriously under $(python3 --version) (python/cpython#106905)"
  command -v python3
}

install_venv() {
  [[ -f $VENV/.complete ]] && return 0
  rm -rf "$VENV"
  # Debian's python3 needs python3-venv for ensurepip.
  "$PYTHON" -m venv "$VENV" 2>/dev/null || { apt_install python3-venv; "$PYTHON" -m venv "$VENV"; }
  log "installing schemathesis into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQS" || die "pip could not install $REQS"
  touch "$VENV/.complete"
}

free_port() { "$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# delete_topics TOPIC...: a run's topics are its alone; deleting them keeps
# the broker tidy.
delete_topics() {
  local libs t
  libs=$(bash "$SCRIPTS_DIR/kafka.sh" libs 2>/dev/null) || return 0
  for t in "$@"; do
    java -cp "$libs/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "${BROKERS%%,*}" \
      --delete --topic "$t" >/dev/null 2>&1 || log "could not delete topic $t"
  done
}

PYTHON=$(pick_python)
VENV=$NOFLY_CACHE/venv-schemathesis-$(sha256sum "$REQS" | cut -c1-12)-py$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
install_venv
