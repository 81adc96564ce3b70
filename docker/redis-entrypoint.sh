#!/bin/sh
# The entry point of the stack's Redis (compose.yaml mounts it into the redis service).
#
# Redis always has a password: REDIS_PASSWORD when given, else one generated on the first start
# and kept in the redis-secret volume, which the coordinator and the agents of this machine
# read (FSBENCH_REDIS_PASSWORD_FILE). Each reader has its own copy, mode 0600 and owned by the
# uid it runs as: `password` for the agents (root, but without CAP_DAC_OVERRIDE, so the owner
# must be theirs) and `coordinator.password` for the coordinator (uid 10001, the image's
# fsbench user; FSBENCH_COORDINATOR_UID). Nobody else in those containers reads it.
#
# Publishing Redis beyond this machine takes TLS as well as a password: the plain port is
# refused anywhere but loopback (its password and every job would cross the network in clear
# text), and the TLS port (FSBENCH_REDIS_TLS_DIR, compose.redis-tls.yaml) beyond loopback
# without REDIS_PASSWORD (agents elsewhere need it, and a generated one nobody was told would
# only tempt an operator to turn it off). The plain port stays for the containers of this machine.
#
# It starts as root (compose.yaml says so, for the locally built image too) to hand the password
# files to their owners, then runs redis-server as the redis user.
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
# Set only where the plain port is published (compose.redis-publish.yaml); compose.yaml publishes none.
plain=${FSBENCH_REDIS_PUBLISH:-}
if [ -n "$plain" ] && ! on_loopback "$plain"; then
  die "Redis's plain port would be published on $plain, beyond this machine, where its password and every job cross the network unencrypted: publish it on loopback only (FSBENCH_REDIS_PUBLISH=127.0.0.1:6379) and give agents on other machines the TLS port, with REDIS_PASSWORD (docker compose -f compose.yaml -f compose.redis-tls.yaml; docs/deployment.md: Two machines, with credentials and TLS)"
fi
if [ -n "${FSBENCH_REDIS_TLS_DIR:-}" ] && [ -z "$password" ] && ! on_loopback "${FSBENCH_REDIS_TLS_PUBLISH:-0.0.0.0:6380}"; then
  die "Redis's TLS port would be published on ${FSBENCH_REDIS_TLS_PUBLISH:-0.0.0.0:6380}, beyond this machine, without REDIS_PASSWORD: whoever reaches it could make every agent run jobs as root. Set REDIS_PASSWORD (export REDIS_PASSWORD=\$(openssl rand -hex 24)) and give it to the agents on other machines (docs/deployment.md: Two machines, with credentials and TLS)"
fi

[ "$(id -u)" = 0 ] ||
  die "started as uid $(id -u), not root: it must hand the password files to the uids of the coordinator and the agents (compose.yaml runs this service with user: root; redis-server itself runs as the redis user)"
# gosu in the public image; setpriv (util-linux, in every Debian image) in the locally built one.
if command -v gosu >/dev/null 2>&1; then
  as_redis='gosu redis'
else
  as_redis='setpriv --reuid=redis --regid=redis --init-groups'
fi

if [ -z "$password" ]; then
  if [ -s "$secret_dir/password" ]; then
    password=$(cat "$secret_dir/password")
  else
    password=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
  fi
fi
# Rewritten on every start, so a changed REDIS_PASSWORD reaches this machine's coordinator and
# agents; created 0600 (umask) and handed to its owner before it is renamed into place.
umask 077
write_secret() { # FILE UID [VALUE, default the password]
  rm -f "$1.new"
  printf '%s\n' "${3:-$password}" >"$1.new"
  chown "$2:$2" "$1.new"
  chmod 0600 "$1.new"
  mv -f "$1.new" "$1"
}
write_secret "$secret_dir/password" 0
write_secret "$secret_dir/coordinator.password" "${FSBENCH_COORDINATOR_UID:-10001}"
# The sentinels' own secrets (compose.sentinel.yaml), generated once and kept: their admin
# password (requirepass, also what they use among themselves) and the password of the client
# user that coordinator and agents log in to them as, which may only ask where the primary is.
kept() { # FILE
  if [ -s "$1" ]; then cat "$1"; else od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; fi
}
sentinel_password=$(kept "$secret_dir/sentinel.password")
sentinel_client_password=$(kept "$secret_dir/sentinel-client.password")
write_secret "$secret_dir/sentinel.password" 0 "$sentinel_password"
write_secret "$secret_dir/sentinel-client.password" 0 "$sentinel_client_password"
write_secret "$secret_dir/sentinel-client.coordinator.password" "${FSBENCH_COORDINATOR_UID:-10001}" "$sentinel_client_password"
# The directory only lists them: its readers must reach their own file.
chown 0:0 "$secret_dir"
chmod 0755 "$secret_dir"

# ACL users (compose.redis-acl.yaml): each `*.acl` file of FSBENCH_REDIS_USERS_DIR is one `user`
# line as `fsbench agents acl` writes it, its password only as a hash; the default user keeps the
# admin password above. Each `<user>.password` there is copied beside the admin's for this
# machine's readers: the coordinator's (fsbench-coordinator) owned by its uid, the others root's.
users=''
if [ -n "${FSBENCH_REDIS_USERS_DIR:-}" ]; then
  [ -d "$FSBENCH_REDIS_USERS_DIR" ] || die "FSBENCH_REDIS_USERS_DIR $FSBENCH_REDIS_USERS_DIR is not a directory: make the users with fsbench agents acl --out (docs/operating.md, Redis ACL users)"
  for f in "$FSBENCH_REDIS_USERS_DIR"/*.acl; do
    [ -e "$f" ] || continue
    [ "$(wc -l <"$f")" -le 1 ] || die "$f holds more than one line: write it with fsbench agents acl"
    line=$(cat "$f")
    case "$line" in
      'user '*) ;;
      *) die "$f is not a user line as fsbench agents acl writes it (user NAME on #HASH ...)" ;;
    esac
    # A clear-text password (>pass) would sit in Redis's configuration and in this volume's files.
    case "$line" in
      *' >'* | *' <'*) die "$f gives a password in clear text: write it with fsbench agents acl, which keeps only its hash" ;;
    esac
    users="$users$line
"
  done
  for f in "$FSBENCH_REDIS_USERS_DIR"/*.password; do
    [ -e "$f" ] || continue
    name=$(basename "$f")
    owner=0
    [ "$name" = fsbench-coordinator.password ] && owner=${FSBENCH_COORDINATOR_UID:-10001}
    rm -f "$secret_dir/$name.new"
    cat "$f" >"$secret_dir/$name.new"
    chown "$owner:$owner" "$secret_dir/$name.new"
    chmod 0600 "$secret_dir/$name.new"
    mv -f "$secret_dir/$name.new" "$secret_dir/$name"
  done
fi

tls=''
if [ -n "${FSBENCH_REDIS_TLS_DIR:-}" ]; then
  for f in ca.crt redis.crt redis.key; do
    # shellcheck disable=SC2086
    $as_redis test -r "$FSBENCH_REDIS_TLS_DIR/$f" || die "$FSBENCH_REDIS_TLS_DIR/$f is missing or unreadable for the redis user (uid $(id -u redis)): see docs/deployment.md, Two machines"
  done
  tls="--tls-port 6380 --tls-cert-file $FSBENCH_REDIS_TLS_DIR/redis.crt --tls-key-file $FSBENCH_REDIS_TLS_DIR/redis.key --tls-ca-cert-file $FSBENCH_REDIS_TLS_DIR/ca.crt --tls-auth-clients optional"
fi

chown redis:redis /data
# The password reaches Redis on stdin, as its configuration, never on a command line that `ps` shows.
# shellcheck disable=SC2086
# masterauth too: with Sentinel (compose.sentinel.yaml) any node may be made a replica of another.
exec $as_redis redis-server - $tls "$@" <<EOF
requirepass $password
masterauth $password
$users
EOF
