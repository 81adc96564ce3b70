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
# The sentinels have credentials of their own, apart from the data nodes' and the agents': their
# admin password (requirepass, also what they use among themselves) and a client user,
# fsbench-client, which coordinator and agents log in as and which may only ask where the
# primary is (the rules of `fsbench agents acl --sentinel-client`, queue/acl.ts), never fail it
# over or remove it. The redis service generates both into the shared volume. The sentinels log
# in to the data nodes with the data nodes' admin password (sentinel auth-pass). Passwords reach
# Sentinel through its file, never a command line.
set -eu

die() {
  printf 'fsbench sentinel: %s\n' "$*" >&2
  exit 64
}

secrets=/run/fsbench-redis
for f in password sentinel.password sentinel-client.password; do
  i=0
  while [ ! -s "$secrets/$f" ] && [ "$i" -lt 60 ]; do
    sleep 1
    i=$((i + 1))
  done
  [ -s "$secrets/$f" ] || die "no password in $secrets/$f after 60 s: the redis service writes it when it starts (compose.yaml)"
done
password=$(cat "$secrets/password")
sentinel_password=$(cat "$secrets/sentinel.password")
client_hash=$(tr -d '\n' <"$secrets/sentinel-client.password" | sha256sum | cut -d' ' -f1)
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
# The password lines, always from the current passwords (and never twice: Sentinel rewrites its
# users into the file as `user` lines).
sed -i -e '/^requirepass /d' -e "/^sentinel auth-pass $master /d" -e '/^user default /d' -e '/^user fsbench-client /d' "$conf"
printf 'requirepass %s\nsentinel auth-pass %s %s\n' "$sentinel_password" "$master" "$password" >>"$conf"
printf 'user fsbench-client on #%s %s\n' "$client_hash" \
  'resetkeys resetchannels -@all +ping +auth +hello +client|setname +client|getname +sentinel|get-master-addr-by-name +sentinel|sentinels +sentinel|replicas +sentinel|slaves' >>"$conf"

[ "$(id -u)" = 0 ] || die "started as uid $(id -u), not root: it reads the root-owned password file (compose.sentinel.yaml runs this service with user: root)"
chown -R redis:redis /data
if command -v gosu >/dev/null 2>&1; then
  exec gosu redis redis-server "$conf" --sentinel
fi
exec setpriv --reuid=redis --regid=redis --init-groups redis-server "$conf" --sentinel
