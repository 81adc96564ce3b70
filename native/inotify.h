/*
 * The probe's inotify side, apart from its read loop: the instance and its watches (with the
 * limit each failure meets), and the map from watch descriptor to the caller's files.
 */
#ifndef FSBENCH_INOTIFY_H
#define FSBENCH_INOTIFY_H

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>

#include "output.h"

/* sizeof(struct inotify_event) + NAME_MAX + 1: the kernel refuses smaller read() buffers (EINVAL). */
#define MIN_INOTIFY_BUFFER_BYTES ((long long)sizeof(struct inotify_event) + NAME_MAX + 1)

/* What the map answers for a watch descriptor it does not hold; no caller's value may equal it. */
#define INOTIFY_WHO_UNKNOWN (-1)

/* Indexed by watch descriptor (the kernel hands them out from 1 upwards). */
struct wd_map {
  int32_t *who;
  size_t len;
};

static inline void wd_map_set(struct wd_map *m, int wd, int32_t who) {
  if ((size_t)wd >= m->len) {
    size_t n = m->len ? m->len : 1024;
    while (n <= (size_t)wd) n *= 2;
    int32_t *grown = realloc(m->who, n * sizeof *grown);
    if (!grown) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory for the watch map");
    for (size_t i = m->len; i < n; i++) grown[i] = INOTIFY_WHO_UNKNOWN;
    m->who = grown;
    m->len = n;
  }
  m->who[wd] = who;
}

/* An instance; NOFILE and OPEN_FDS tell the open-files limit from max_user_instances in a message. */
static inline int inotify_open(rlim_t nofile, long long open_fds, long long files) {
  int fd = inotify_init1(IN_CLOEXEC);
  if (fd >= 0) return fd;
  int e = errno;
  if (e == EMFILE && nofile != 0 && (unsigned long long)open_fds + 1 >= (unsigned long long)nofile)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_init1: %s; the open-files limit (RLIMIT_NOFILE, %llu) is too small for %lld files: "
        "raise 'ulimit -Hn' or use fewer files", strerror(e), (unsigned long long)nofile, files);
  if (e == EMFILE)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_init1: %s; fs.inotify.max_user_instances (%ld) is reached for this user: "
        "raise fs.inotify.max_user_instances or stop other inotify users",
        strerror(e), read_proc_long("/proc/sys/fs/inotify/max_user_instances"));
  if (e == ENFILE)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_init1: %s; the system-wide limit fs.file-max is reached", strerror(e));
  die(EXIT_RUNTIME, "PROBE_FAILED", "inotify_init1 failed: %s", strerror(e));
}

/* One IN_MODIFY watch on DIR, whose events name the file. */
static inline void inotify_watch_dir(int fd, const char *dir) {
  if (inotify_add_watch(fd, dir, IN_MODIFY) >= 0) return;
  int e = errno;
  if (e == ENOSPC)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_add_watch(%s): %s; fs.inotify.max_user_watches (%ld) has no room left for "
        "one more watch: raise fs.inotify.max_user_watches", dir, strerror(e),
        read_proc_long("/proc/sys/fs/inotify/max_user_watches"));
  die(EXIT_RUNTIME, "TARGET_UNUSABLE", "cannot watch %s: %s", dir, strerror(e));
}

/* An IN_MODIFY watch on the file PATH, whose events MAP answers with WHO; the run watches FILES
 * files with NWATCHES watches in all. */
static inline void inotify_watch_file(int fd, struct wd_map *map, const char *path, int32_t who, long long files,
                                      long long nwatches) {
  int wd = inotify_add_watch(fd, path, IN_MODIFY);
  if (wd >= 0) {
    wd_map_set(map, wd, who);
    return;
  }
  int e = errno;
  if (e == ENOSPC) {
    long max = read_proc_long("/proc/sys/fs/inotify/max_user_watches");
    die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_add_watch(%s): %s; fs.inotify.max_user_watches (%ld) is too small for %lld files "
        "(this run needs %lld watches on top of those the user already holds): raise fs.inotify.max_user_watches, "
        "use fewer files, or watch the directory",
        path, strerror(e), max, files, nwatches);
  }
  die(EXIT_RUNTIME, "PROBE_FAILED", "inotify_add_watch(%s) failed: %s", path, strerror(e));
}

#endif
