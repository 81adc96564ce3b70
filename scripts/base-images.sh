#!/usr/bin/env bash
# Creates, on a machine that cannot reach a container registry, the public base images that
# docker/Dockerfile and compose.yaml name, so that `docker compose build` works unchanged there.
# Users with a registry never run this: they pull the real images.
#
#   node:20-bookworm-slim  Debian bookworm (debootstrap minbase) + this host's Node 20 and npm,
#                          laid out as the official image lays them out (/usr/local), because
#                          Debian's own nodejs is 18.
#   redis:7-bookworm       the same Debian + Debian's redis-server (7.0), with the directory of
#                          compose.yaml's redis-secret volume owned by redis (the public image
#                          starts as root and needs none: it creates it).
#
# Idempotent: an image that already exists is left alone (FSBENCH_REBUILD_BASE=1 rebuilds).
# Needs root, debootstrap, a running Docker engine, and node >= 20 on PATH.
set -euo pipefail

NODE_TAG=node:20-bookworm-slim
REDIS_TAG=redis:7-bookworm
# An intermediate image both are made from; kept so a second run needs no debootstrap.
DEBIAN_TAG=fsbench-local/debian:bookworm-minbase
SUITE=bookworm

log() { printf 'base-images: %s\n' "$*" >&2; }

have_image() { [ "${FSBENCH_REBUILD_BASE:-0}" != 1 ] && docker image inspect "$1" >/dev/null 2>&1; }

# Raised when the locally made redis image changes, so machines with an older one remake it.
REDIS_REVISION=2
have_redis_image() {
  have_image "$REDIS_TAG" &&
    [ "$(docker image inspect -f '{{ index .Config.Labels "fsbench.base-revision" }}' "$REDIS_TAG" 2>/dev/null)" = "$REDIS_REVISION" ]
}

if have_image "$NODE_TAG" && have_redis_image; then
  log "$NODE_TAG and $REDIS_TAG exist"
  exit 0
fi

work=$(mktemp -d /var/tmp/fsbench-base.XXXXXX)
trap 'rm -rf "$work"' EXIT

debian_rootfs() {
  local dir=$work/rootfs
  if [ ! -d "$dir" ]; then
    log "debootstrap --variant=minbase $SUITE (about a minute)"
    debootstrap --variant=minbase "$SUITE" "$dir" >"$work/debootstrap.log" 2>&1 || {
      tail -n 30 "$work/debootstrap.log" >&2
      exit 1
    }
    # The official images keep no package lists or caches; neither should these.
    rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb
    # Builds reach the registries through this host's TLS setup, so the images trust what the
    # host trusts (also after a build stage installs ca-certificates and regenerates the bundle).
    mkdir -p "$dir/etc/ssl/certs" "$dir/usr/local/share/ca-certificates"
    cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
    cp -a /usr/local/share/ca-certificates/. "$dir/usr/local/share/ca-certificates/" 2>/dev/null || true
  fi
  printf '%s' "$dir"
}

import_rootfs() { # DIR TAG CHANGE...
  local dir=$1 tag=$2
  shift 2
  local changes=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin')
  for c in "$@"; do changes+=(--change "$c"); done
  tar --numeric-owner -C "$dir" -c . | docker import "${changes[@]}" - "$tag" >/dev/null
}

debian_image() {
  if have_image "$DEBIAN_TAG"; then return; fi
  local dir
  dir=$(debian_rootfs)
  import_rootfs "$dir" "$DEBIAN_TAG" 'CMD ["bash"]'
  log "created $DEBIAN_TAG"
}

node_image() {
  local node npm_dir headers version
  node=$(command -v node)
  version=$("$node" -p 'process.versions.node')
  case "$version" in
    20.*) ;;
    *) log "this host's node is $version; $NODE_TAG needs Node 20"; exit 1 ;;
  esac
  node=$(readlink -f "$node")
  npm_dir=$(readlink -f "$(dirname "$node")/../lib/node_modules/npm")
  headers=$(readlink -f "$(dirname "$node")/../include/node")
  [ -f "$npm_dir/bin/npm-cli.js" ] || { log "npm not found beside $node"; exit 1; }

  local dir=$work/node root
  root=$(debian_rootfs)
  rm -rf "$dir"
  cp -a "$root" "$dir"
  install -D -m 0755 "$node" "$dir/usr/local/bin/node"
  mkdir -p "$dir/usr/local/lib/node_modules" "$dir/usr/local/include" "$dir/usr/local/etc"
  cp -a "$npm_dir" "$dir/usr/local/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$dir/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$dir/usr/local/bin/npx"
  # The official image ships Node's headers too; node-gyp builds native addons against them.
  if [ -d "$headers" ]; then cp -a "$headers" "$dir/usr/local/include/node"; fi
  printf 'cafile=/etc/ssl/certs/ca-certificates.crt\n' >"$dir/usr/local/etc/npmrc"
  chroot "$dir" groupadd --gid 1000 node
  chroot "$dir" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
  import_rootfs "$dir" "$NODE_TAG" "ENV NODE_VERSION=$version" 'CMD ["node"]'
  log "created $NODE_TAG (Node $version, npm $("$node" "$npm_dir/bin/npm-cli.js" --version))"
}

redis_image() {
  debian_image
  # The official image's CMD and data directory; its entrypoint drops to the redis user, here
  # the image runs as that user directly.
  docker build --quiet -t "$REDIS_TAG" - >/dev/null <<EOF
FROM $DEBIAN_TAG
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data /run/fsbench-redis && chown redis:redis /data /run/fsbench-redis
LABEL fsbench.base-revision=$REDIS_REVISION
WORKDIR /data
VOLUME /data
USER redis
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
EOF
  log "created $REDIS_TAG ($(docker run --rm "$REDIS_TAG" redis-server --version | sed 's/ sha=.*//'))"
}

have_image "$NODE_TAG" || node_image
have_redis_image || redis_image
