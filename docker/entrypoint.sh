#!/bin/sh
# The image's entry point: the fsbench CLI (`docker run fsbench:<version> --version`), with what
# the commands that measure need from their container first.
#
# Those commands (`agent`; `run`; `run-cell`, which the sandbox run containers an agent starts from
# this image run) write kernel limits and drop_caches under /proc/sys, which the engine mounts
# read-only unless told `systempaths=unconfined`. Docker Compose v2 and `docker run` can say
# that; Debian's docker-compose 1.29 cannot (the engine refuses that option from its API
# client). With CAP_SYS_ADMIN the container lifts the read-only bind itself; the other masked
# /proc paths stay masked. Every other command (the coordinator, the client commands) runs as it
# is started, by default as the image's unprivileged user (uid 10001), and touches nothing here.
set -eu

cli=/app/dist/cli/fsbench.js

case "${1:-}" in
  agent | run | run-cell)
    if [ "$(id -u)" != 0 ]; then
      # The agent cannot do its work without root, and would fail later on a directory check
      # or a mount with a message that does not say this.
      if [ "$1" = agent ]; then
        printf '%s\n' "fsbench: the agent runs as root (it mounts filesystems, attaches loop devices and writes kernel limits), not as uid $(id -u): start its container with --user 0 (docker run) or user: root (compose.yaml and compose.agent.yaml say so) [CONFIG_INVALID]" >&2
        exit 2
      fi
    elif awk '$2 == "/proc/sys" && $4 ~ /(^|,)ro(,|$)/ { found = 1 } END { exit !found }' /proc/self/mounts; then
      mount -o remount,rw,bind /proc/sys /proc/sys 2>/dev/null ||
        echo "fsbench: /proc/sys is read-only and could not be made writable (needs CAP_SYS_ADMIN): runs that change kernel limits or drop caches will fail" >&2
    fi
    ;;
esac
exec node "$cli" "$@"
