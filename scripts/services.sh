#!/usr/bin/env bash
# Installs and starts (or stops, or reports) everything the tests and the
# pipeline need on this machine: Redis and one Apache Kafka KRaft node, both
# on 127.0.0.1. Idempotent: a second start reuses what already runs.
#
#   scripts/services.sh start|stop|restart|status
set -euo pipefail
here=$(dirname "$0")
case ${1:-} in
  start)   bash "$here/redis.sh" start && bash "$here/kafka.sh" start ;;
  stop)    bash "$here/kafka.sh" stop; bash "$here/redis.sh" stop ;;
  restart) "$0" stop; "$0" start ;;
  status)  rc=0; bash "$here/redis.sh" status || rc=1; bash "$here/kafka.sh" status || rc=1; exit $rc ;;
  *) echo "usage: $0 start|stop|restart|status" >&2; exit 2 ;;
esac
