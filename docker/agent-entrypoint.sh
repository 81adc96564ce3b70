#!/bin/sh
# The agent's entry point (and that of the sandbox run containers started from its image).
#
# Kernel limits and drop_caches are written under /proc/sys, which the engine mounts read-only
# unless told `systempaths=unconfined`. Docker Compose v2 and `docker run` can say that;
# Debian's docker-compose 1.29 cannot (the engine refuses that option from its API client). With
# CAP_SYS_ADMIN the container lifts the read-only bind itself; the other masked /proc paths stay
# masked.
set -eu
if awk '$2 == "/proc/sys" && $4 ~ /(^|,)ro(,|$)/ { found = 1 } END { exit !found }' /proc/self/mounts; then
  mount -o remount,rw,bind /proc/sys /proc/sys 2>/dev/null ||
    echo "fsbench: /proc/sys is read-only and could not be made writable (needs CAP_SYS_ADMIN): runs that change kernel limits or drop caches will fail" >&2
fi
exec node /app/dist/cli/fsbench.js "$@"
