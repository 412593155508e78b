#!/usr/bin/env bash
# Makes sure PostgreSQL, Redis and NATS (with JetStream) answer on their standard loopback ports, and that
# Debian's Chromium is installed, as the integration and browser tests need. A server that is down is
# started; one that is not installed is installed from Debian's packages first. Exits non-zero, naming the server, when one still can't be reached:
# tests never skip because a server is missing.
set -uo pipefail

PG_PORT=5432 REDIS_PORT=6379 NATS_PORT=4222

reachable() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name port seconds
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    reachable "$2" && return 0
    sleep 0.1
  done
  return 1
}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

apt_updated=0
apt_install() {
  if ! command -v apt-get >/dev/null; then
    echo "ensure-servers: $* missing and apt-get is not available: install it by hand" >&2
    return 1
  fi
  if [ "$apt_updated" = 0 ]; then
    as_root apt-get update -qq || return 1
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

start_postgres() {
  if ! command -v pg_ctlcluster >/dev/null; then
    apt_install postgresql || return 1
    # A freshly installed cluster only trusts local socket peers; the tests connect over TCP as
    # `postgres` without a password, as on the reference machines.
    local hba
    for hba in /etc/postgresql/*/main/pg_hba.conf; do
      as_root sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)\S+/\1trust/' "$hba"
    done
  fi
  local v
  for v in $(ls /etc/postgresql); do
    as_root pg_ctlcluster --skip-systemctl-redirect "$v" main start 2>/dev/null || as_root pg_ctlcluster "$v" main start || true
  done
}

start_redis() {
  command -v redis-server >/dev/null || apt_install redis-server || return 1
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
}

start_nats() {
  command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || apt_install nats-server || return 1
  local bin
  bin=$(command -v nats-server || echo /usr/sbin/nats-server)
  as_root mkdir -p /var/lib/nats-server
  as_root start-stop-daemon --start --oknodo --background --exec "$bin" -- \
    -a 127.0.0.1 -p "$NATS_PORT" -js -sd /var/lib/nats-server -l /var/log/nats-server.log
}

failed=0
ensure() { # name port starter
  if reachable "$2"; then
    echo "ensure-servers: $1 is up on 127.0.0.1:$2"
    return
  fi
  echo "ensure-servers: $1 is not answering on 127.0.0.1:$2, starting it"
  "$3"
  if wait_for "$1" "$2" 30; then
    echo "ensure-servers: $1 is up on 127.0.0.1:$2"
  else
    echo "ensure-servers: FAILED: $1 can't be reached on 127.0.0.1:$2" >&2
    failed=1
  fi
}

ensure PostgreSQL "$PG_PORT" start_postgres
ensure Redis "$REDIS_PORT" start_redis
ensure NATS "$NATS_PORT" start_nats

# The browser tests drive Debian's Chromium (playwright-core never downloads a browser).
if [ ! -x /usr/bin/chromium ]; then
  echo "ensure-servers: installing Debian's chromium for the browser tests"
  if ! apt_install chromium; then
    echo "ensure-servers: FAILED: chromium could not be installed" >&2
    failed=1
  fi
fi

# NATS must have JetStream on, not just answer.
if [ "$failed" = 0 ] && ! node -e "
  const { connect } = require('nats');
  connect({ servers: '127.0.0.1:$NATS_PORT', timeout: 3000 })
    .then(async (nc) => { await nc.jetstreamManager(); await nc.close(); })
    .catch((e) => { console.error(e.message); process.exit(1); });
"; then
  echo "ensure-servers: FAILED: NATS on 127.0.0.1:$NATS_PORT has no JetStream (start it with -js)" >&2
  failed=1
fi
exit "$failed"
