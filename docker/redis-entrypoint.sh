#!/bin/sh
# The entry point of the stack's Redis (compose.yaml mounts it into the redis service).
#
# Redis always has a password: REDIS_PASSWORD when given, else one generated on the first start
# and kept in the redis-secret volume, which the coordinator and the agents of this machine
# read (FSBENCH_REDIS_PASSWORD_FILE). Agents on other machines need the password in their
# REDIS_URL, so publishing Redis beyond loopback without REDIS_PASSWORD is refused: a generated
# password nobody was told would only tempt an operator to turn it off.
#
# With FSBENCH_REDIS_TLS_DIR (compose.redis-tls.yaml) Redis also serves TLS on port 6380, for
# agents on other machines; the plain port stays for the containers of this machine.
set -eu

secret_dir=/run/fsbench-redis
die() {
  printf 'fsbench redis: %s\n' "$*" >&2
  exit 64
}

# Loopback only when the published address says so: `6379` alone, or 0.0.0.0, is every interface.
on_loopback() {
  case "$1" in
    127.*:* | localhost:* | '[::1]':* | ::1:*) return 0 ;;
    *) return 1 ;;
  esac
}

password=${REDIS_PASSWORD:-}
if [ -n "$password" ]; then
  # It goes into REDIS_URL as it is, so it must need no percent-encoding.
  printf '%s' "$password" | grep -Eq '^[A-Za-z0-9._~-]{16,}$' ||
    die 'REDIS_PASSWORD must be at least 16 letters, digits, dots, dashes, underscores or tildes (it goes into REDIS_URL unencoded): try `openssl rand -hex 24`'
fi
for published in "${FSBENCH_REDIS_PUBLISH:-127.0.0.1:6379}" ${FSBENCH_REDIS_TLS_DIR:+"${FSBENCH_REDIS_TLS_PUBLISH:-0.0.0.0:6380}"}; do
  if [ -z "$password" ] && ! on_loopback "$published"; then
    die "Redis would be published on $published, beyond this machine, without REDIS_PASSWORD: whoever reaches it could make every agent run jobs as root. Set REDIS_PASSWORD (export REDIS_PASSWORD=\$(openssl rand -hex 24)) and give it to the agents on other machines in REDIS_URL, with TLS (README: Two machines, with credentials and TLS)"
  fi
done

umask 022
if [ -z "$password" ]; then
  if [ -s "$secret_dir/password" ]; then
    password=$(cat "$secret_dir/password")
  else
    password=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
  fi
fi
# Rewritten on every start, so a changed REDIS_PASSWORD reaches this machine's coordinator and agents.
printf '%s\n' "$password" >"$secret_dir/password.new"
mv "$secret_dir/password.new" "$secret_dir/password"

tls=''
if [ -n "${FSBENCH_REDIS_TLS_DIR:-}" ]; then
  for f in ca.crt redis.crt redis.key; do
    [ -r "$FSBENCH_REDIS_TLS_DIR/$f" ] || die "$FSBENCH_REDIS_TLS_DIR/$f is missing or unreadable for the redis user (uid $(id -u)): see README, Two machines"
  done
  tls="--tls-port 6380 --tls-cert-file $FSBENCH_REDIS_TLS_DIR/redis.crt --tls-key-file $FSBENCH_REDIS_TLS_DIR/redis.key --tls-ca-cert-file $FSBENCH_REDIS_TLS_DIR/ca.crt --tls-auth-clients optional"
fi

# The public image starts as root and drops to its redis user with gosu; the locally built one
# (scripts/base-images.sh) already runs as redis.
drop=''
if [ "$(id -u)" = 0 ] && command -v gosu >/dev/null 2>&1; then
  chown redis:redis /data
  drop='gosu redis'
fi
# The password reaches Redis on stdin, as its configuration, never on a command line that `ps` shows.
# shellcheck disable=SC2086
exec $drop redis-server - $tls "$@" <<EOF
requirepass $password
EOF
