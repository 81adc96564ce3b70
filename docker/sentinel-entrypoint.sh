#!/bin/sh
# The entry point of the sentinels of compose.sentinel.yaml: Redis Sentinel in the stack's own
# Redis image (`redis-server FILE --sentinel`), watching the primary `redis` and its replica.
#
# Sentinel rewrites its configuration file as it learns (which node is the primary after a
# failover, the other sentinels, the replicas), so the file is written once, into the
# container's /data, and kept: a sentinel restarted after a failover must not go back to
# watching the old primary. Only the password lines are rewritten on every start, so a changed
# REDIS_PASSWORD reaches the sentinels as it reaches the coordinator and the agents.
#
# One password serves the data nodes and the sentinels here (the redis service's generated or
# given REDIS_PASSWORD); it reaches Sentinel through its file, never a command line.
set -eu

die() {
  printf 'fsbench sentinel: %s\n' "$*" >&2
  exit 64
}

secret=/run/fsbench-redis/password
i=0
while [ ! -s "$secret" ] && [ "$i" -lt 60 ]; do
  sleep 1
  i=$((i + 1))
done
[ -s "$secret" ] || die "no password in $secret after 60 s: the redis service writes it when it starts (compose.yaml)"
password=$(cat "$secret")
master=${FSBENCH_REDIS_MASTER:-fsbench}
conf=/data/sentinel.conf
umask 077
if [ ! -s "$conf" ]; then
  cat >"$conf" <<CONF
port 26379
# Names, not addresses: containers get new addresses when they are recreated.
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel monitor $master redis 6379 2
sentinel down-after-milliseconds $master ${FSBENCH_SENTINEL_DOWN_AFTER:-5000}
sentinel failover-timeout $master 60000
sentinel parallel-syncs $master 1
CONF
fi
# The password lines, always from the current password (and never twice).
sed -i -e '/^requirepass /d' -e "/^sentinel auth-pass $master /d" "$conf"
printf 'requirepass %s\nsentinel auth-pass %s %s\n' "$password" "$master" "$password" >>"$conf"

[ "$(id -u)" = 0 ] || die "started as uid $(id -u), not root: it reads the root-owned password file (compose.sentinel.yaml runs this service with user: root)"
chown -R redis:redis /data
if command -v gosu >/dev/null 2>&1; then
  exec gosu redis redis-server "$conf" --sentinel
fi
exec setpriv --reuid=redis --regid=redis --init-groups redis-server "$conf" --sentinel
