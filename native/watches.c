// The watch-setup workload's native side (docs/watches.md): builds the tree, and establishes
// watches over it with the kernel's own interfaces, as a recursive watcher would, timing each
// step and reading the kernel's memory accounting around the setup from inside the process
// that owns the watches (so the figures need no handshake and include nothing of the caller).
//
// Usage:
//   watches build    --root DIR --dirs N --fanout N --files N --parent PID
//   watches inotify  --root DIR --marker-dir REL --parent PID [--cgroup DIR --memcg-file F --memcg-key K]
//   watches fanotify --root DIR --marker-dir REL --parent PID --mark filesystem|mount [--cgroup ...]
// One JSON line on stdout; errors are {"error":{"code":..,"message":..,"done":N}} with exit status 3,
// a kernel refusing what the run needs (fanotify without CAP_SYS_ADMIN) uses code REFUSED.
//
// The tree: directory 0 is --root itself, directory i > 0 is "d<i>" inside directory (i-1)/fanout
// (breadth first, so the depth is log_fanout(dirs)); each directory holds --files empty files
// "f<j>". The marker directory is the last one made, at the deepest level: a watcher that has
// not reached it yet cannot see the marker file, so "first event" means "the whole tree watched".
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "output.h"
#include "safe-open.h"

struct opts {
  const char *op, *root, *marker_dir, *mark, *cgroup, *memcg_file, *memcg_key;
  long dirs, fanout, files, parent;
};

static void check_stop(long done) {
  if (stop_requested) fail("CANCELLED", done, "stopped by a signal after %ld", done);
}

/*
 * A number from a kernel accounting file: the whole file (memory.kmem.usage_in_bytes), or the
 * line starting with KEY followed by a space or a colon (memory.stat, /proc/meminfo), in bytes
 * ("kB" scaled). -1 where the file or the key is missing: the caller records "not measured".
 */
static long long read_counter(const char *file, const char *key) {
  FILE *f = fopen(file, "re");
  if (!f) return -1;
  char line[512];
  long long v = -1;
  size_t klen = key ? strlen(key) : 0;
  while (fgets(line, sizeof line, f)) {
    const char *p = line;
    if (klen > 0) {
      if (strncmp(line, key, klen) != 0 || (line[klen] != ' ' && line[klen] != ':')) continue;
      p = line + klen + 1;
    }
    char *end;
    errno = 0;
    long long n = strtoll(p, &end, 10);
    if (errno || end == p) break;
    while (*end == ' ') end++;
    v = strncmp(end, "kB", 2) == 0 ? n * 1024 : n;
    break;
  }
  fclose(f);
  return v;
}

/* VmRSS / VmHWM of this process, in bytes. */
static long long status_bytes(const char *key) { return read_counter("/proc/self/status", key); }

struct memory {
  long long memcg, sunreclaim, rss;
};

static void read_memory(const struct opts *o, struct memory *m) {
  m->memcg = o->memcg_file ? read_counter(o->memcg_file, o->memcg_key && *o->memcg_key ? o->memcg_key : NULL) : -1;
  m->sunreclaim = read_counter("/proc/meminfo", "SUnreclaim");
  m->rss = status_bytes("VmRSS");
}

/*
 * Moves this process into the run's fresh memory cgroup before it creates its inotify instance
 * or fanotify group: the kernel charges marks to the cgroup the group was created in.
 */
static void join_cgroup(const struct opts *o) {
  if (!o->cgroup) return;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/cgroup.procs", o->cgroup);
  int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) fail_errno("open", path, 0);
  char pid[32];
  int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  if (write(fd, pid, (size_t)n) != n) fail_errno("write", path, 0);
  close(fd);
}

static int open_root(const char *root) {
  // No symlink in any component, and a directory this user owns (as native/metadata.c).
  int fd = fsb_open_dir_nofollow(root);
  if (fd < 0) fail_errno("open (without following symlinks)", root, 0);
  struct stat st;
  if (fstat(fd, &st) < 0) fail_errno("stat", root, 0);
  if (st.st_uid != geteuid())
    fail("TARGET_UNUSABLE", 0, "%s is owned by uid %u, not by this process's uid %u: refusing to work in a directory someone else controls",
         root, (unsigned)st.st_uid, (unsigned)geteuid());
  return fd;
}

/* ---- build ---- */

static void op_build(const struct opts *o) {
  if (o->dirs < 1 || o->fanout < 1) fail("USAGE", 0, "--dirs and --fanout must be at least 1");
  int root = open_root(o->root);
  // Relative paths of every directory, by index: directory i is made inside (i-1)/fanout.
  char **paths = calloc((size_t)o->dirs, sizeof *paths);
  if (!paths) fail("ENOMEM", 0, "cannot hold %ld paths", o->dirs);
  paths[0] = strdup(".");
  long files = 0, depth = 0;
  long long t0 = now_ns();
  for (long i = 0; i < o->dirs; i++) {
    check_stop(i);
    if (i > 0) {
      long parent = (i - 1) / o->fanout;
      char rel[PATH_MAX];
      int n = parent == 0 ? snprintf(rel, sizeof rel, "d%ld", i) : snprintf(rel, sizeof rel, "%s/d%ld", paths[parent], i);
      if (n < 0 || (size_t)n >= sizeof rel) fail("ENAMETOOLONG", i, "directory %ld is nested too deep for PATH_MAX", i);
      if (mkdirat(root, rel, 0755) < 0) fail_errno("mkdir", rel, i);
      paths[i] = strdup(rel);
      if (!paths[i]) fail("ENOMEM", i, "out of memory at directory %ld", i);
      long d = 0;
      for (const char *c = rel; *c; c++) d += *c == '/';
      if (d + 1 > depth) depth = d + 1;
    }
    if (o->files > 0) {
      int dfd = i == 0 ? dup(root) : fsb_open_dir_beneath(root, paths[i]);
      if (dfd < 0) fail_errno("open", paths[i], i);
      for (long j = 0; j < o->files; j++) {
        char name[32];
        snprintf(name, sizeof name, "f%ld", j);
        int fd = openat(dfd, name, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0) fail_errno("create", name, i);
        close(fd);
        files++;
      }
      close(dfd);
    }
  }
  long long ns = now_ns() - t0;
  printf("{\"op\":\"build\",\"dirs\":%ld,\"files\":%ld,\"depth\":%ld,\"ns\":%lld,\"markerDir\":", o->dirs, files, depth, ns);
  json_string(paths[o->dirs - 1]);
  printf("}\n");
}

/* ---- inotify: one watch per directory, added before the directory is read ---- */

#define WATCH_MASK                                                                                                     \
  (IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | \
   IN_ONLYDIR | IN_DONT_FOLLOW)

struct walk {
  int ifd;
  long watches;
  int limit_errno;  // ENOSPC (max_user_watches) or ENOMEM: where the walk stopped
  int marker_wd;
  const char *marker_abs;
};

/* Depth-first over PATH (absolute, in BUF of PATH_MAX), adding each directory's watch before reading it. */
static void walk_dir(struct walk *w, char *buf, size_t len) {
  if (w->limit_errno) return;
  check_stop(w->watches);
  int wd = inotify_add_watch(w->ifd, buf, WATCH_MASK);
  if (wd < 0) {
    if (errno == ENOSPC || errno == ENOMEM) {
      w->limit_errno = errno;
      return;
    }
    fail_errno("inotify_add_watch", buf, w->watches);
  }
  w->watches++;
  if (strcmp(buf, w->marker_abs) == 0) w->marker_wd = wd;
  int dfd = open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) fail_errno("open", buf, w->watches);
  DIR *d = fdopendir(dfd);
  if (!d) fail_errno("fdopendir", buf, w->watches);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    size_t nl = strlen(e->d_name);
    if (len + 1 + nl + 1 > PATH_MAX) fail("ENAMETOOLONG", w->watches, "%s/%s is longer than PATH_MAX", buf, e->d_name);
    buf[len] = '/';
    memcpy(buf + len + 1, e->d_name, nl + 1);
    walk_dir(w, buf, len + 1 + nl);
    buf[len] = '\0';
    if (w->limit_errno) break;
  }
  closedir(d);
}

/* Creates (and closes) a fresh marker file in DIR, named after this process: the event every backend waits for. */
static void marker_name(char *out, size_t len) { snprintf(out, len, "fsbench-marker-%d", (int)getpid()); }

static void touch_marker(const char *dir, struct stat *st) {
  int dfd = fsb_open_dir_nofollow(dir);
  if (dfd < 0) fail_errno("open", dir, 0);
  char name[64];
  marker_name(name, sizeof name);
  int fd = openat(dfd, name, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno("create marker in", dir, 0);
  if (write(fd, "x", 1) != 1) fail_errno("write marker in", dir, 0);
  if (st && fstat(fd, st) < 0) fail_errno("stat marker in", dir, 0);
  close(fd);
  close(dfd);
}

static void print_memory(const char *prefix, const struct memory *m) {
  printf(",\"%sMemcg\":", prefix);
  if (m->memcg >= 0) printf("%lld", m->memcg);
  else printf("null");
  printf(",\"%sSUnreclaim\":", prefix);
  if (m->sunreclaim >= 0) printf("%lld", m->sunreclaim);
  else printf("null");
  printf(",\"%sRss\":%lld", prefix, m->rss);
}

static void marker_path(const struct opts *o, char *out) {
  int n = strcmp(o->marker_dir, ".") == 0 ? snprintf(out, PATH_MAX, "%s", o->root) : snprintf(out, PATH_MAX, "%s/%s", o->root, o->marker_dir);
  if (n < 0 || n >= PATH_MAX) fail("ENAMETOOLONG", 0, "the marker directory's path is longer than PATH_MAX");
}

#define FIRST_EVENT_TIMEOUT_MS 30000

static void op_inotify(const struct opts *o) {
  char marker[PATH_MAX];
  marker_path(o, marker);
  close(open_root(o->root));
  join_cgroup(o);
  struct memory before, after;
  read_memory(o, &before);
  long long t0 = now_ns();
  struct walk w = {.ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK), .marker_wd = -1, .marker_abs = marker};
  if (w.ifd < 0) {
    // EMFILE here is max_user_instances: a limit too, recorded rather than a failure.
    if (errno == EMFILE) fail("EMFILE", 0, "inotify_init1: fs.inotify.max_user_instances reached");
    fail_errno("inotify_init1", "", 0);
  }
  char buf[PATH_MAX];
  snprintf(buf, sizeof buf, "%s", o->root);
  walk_dir(&w, buf, strlen(buf));
  long long setup_ns = now_ns() - t0;
  read_memory(o, &after);
  long long rss_peak = status_bytes("VmHWM");

  long long first_ns = -1;
  if (!w.limit_errno && w.marker_wd >= 0) {
    char mname[64];
    marker_name(mname, sizeof mname);
    touch_marker(marker, NULL);
    char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    long long deadline = now_ns() + (long long)FIRST_EVENT_TIMEOUT_MS * 1000000LL;
    while (first_ns < 0 && now_ns() < deadline) {
      check_stop(w.watches);
      struct pollfd p = {.fd = w.ifd, .events = POLLIN};
      if (poll(&p, 1, 100) < 0 && errno != EINTR) fail_errno("poll", "inotify", w.watches);
      ssize_t n = read(w.ifd, ev, sizeof ev);
      if (n < 0 && errno != EAGAIN && errno != EINTR) fail_errno("read", "inotify", w.watches);
      for (ssize_t off = 0; n > 0 && off < n;) {
        const struct inotify_event *e = (const struct inotify_event *)(ev + off);
        if (e->wd == w.marker_wd && (e->mask & IN_CREATE) && e->len > 0 && !strcmp(e->name, mname)) {
          first_ns = now_ns() - t0;
          break;
        }
        off += (ssize_t)(sizeof *e + e->len);
      }
    }
    if (first_ns < 0) fail("NO_EVENT", w.watches, "no event for the marker file in %s within %d ms", marker, FIRST_EVENT_TIMEOUT_MS);
  }
  long long t1 = now_ns();
  close(w.ifd);
  long long teardown_ns = now_ns() - t1;

  printf("{\"op\":\"inotify\",\"watches\":%ld,\"limitErrno\":", w.watches);
  if (w.limit_errno) json_string(strerrorname_np(w.limit_errno));
  else printf("null");
  printf(",\"setupNs\":%lld,\"firstEventNs\":", setup_ns);
  if (first_ns >= 0) printf("%lld", first_ns);
  else printf("null");
  printf(",\"teardownNs\":%lld,\"peakRss\":%lld", teardown_ns, rss_peak);
  print_memory("before", &before);
  print_memory("after", &after);
  printf("}\n");
}

/* ---- fanotify: one mark on the tree's filesystem or mount ---- */

static void op_fanotify(const struct opts *o) {
  char marker[PATH_MAX];
  marker_path(o, marker);
  close(open_root(o->root));
  int filesystem = !strcmp(o->mark, "filesystem");
  if (!filesystem && strcmp(o->mark, "mount")) fail("USAGE", 0, "--mark must be filesystem or mount");
  join_cgroup(o);
  struct memory before, after;
  read_memory(o, &before);
  long long t0 = now_ns();
  // Events carry an open fd (no FID mode): the marker is recognised by its inode, because a
  // filesystem or mount mark also sees every other process's writes on it.
  int fd = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK, O_RDONLY | O_CLOEXEC | O_LARGEFILE);
  if (fd < 0) {
    if (errno == EPERM) fail("REFUSED", 0, "fanotify_init: %s (a filesystem or mount mark needs CAP_SYS_ADMIN)", strerror(errno));
    fail_errno("fanotify_init", "", 0);
  }
  unsigned int flags = FAN_MARK_ADD | (filesystem ? FAN_MARK_FILESYSTEM : FAN_MARK_MOUNT);
  if (fanotify_mark(fd, flags, FAN_CLOSE_WRITE, AT_FDCWD, o->root) < 0) {
    int e = errno;
    if (e == EPERM || e == EINVAL || e == EXDEV || e == ENODEV || e == EOPNOTSUPP)
      fail("REFUSED", 0, "fanotify_mark(%s) on %s: %s", o->mark, o->root, strerror(e));
    errno = e;
    fail_errno("fanotify_mark", o->root, 0);
  }
  long long setup_ns = now_ns() - t0;
  read_memory(o, &after);
  long long rss_peak = status_bytes("VmHWM");

  struct stat mst;
  touch_marker(marker, &mst);
  long long first_ns = -1;
  long foreign = 0;
  char ev[8192] __attribute__((aligned(__alignof__(struct fanotify_event_metadata))));
  long long deadline = now_ns() + (long long)FIRST_EVENT_TIMEOUT_MS * 1000000LL;
  while (first_ns < 0 && now_ns() < deadline) {
    check_stop(0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) < 0 && errno != EINTR) fail_errno("poll", "fanotify", 0);
    ssize_t n = read(fd, ev, sizeof ev);
    if (n < 0 && errno != EAGAIN && errno != EINTR) fail_errno("read", "fanotify", 0);
    const struct fanotify_event_metadata *m = (const struct fanotify_event_metadata *)ev;
    for (; n > 0 && FAN_EVENT_OK(m, n); m = FAN_EVENT_NEXT(m, n)) {
      if (m->fd < 0) continue;
      struct stat st;
      int mine = fstat(m->fd, &st) == 0 && st.st_ino == mst.st_ino && st.st_dev == mst.st_dev;
      close(m->fd);
      if (mine && first_ns < 0) first_ns = now_ns() - t0;
      else if (!mine) foreign++;
    }
  }
  if (first_ns < 0) fail("NO_EVENT", 1, "no event for the marker file in %s within %d ms", marker, FIRST_EVENT_TIMEOUT_MS);
  long long t1 = now_ns();
  close(fd);
  long long teardown_ns = now_ns() - t1;

  printf("{\"op\":\"fanotify\",\"watches\":1,\"limitErrno\":null,\"setupNs\":%lld,\"firstEventNs\":%lld,\"teardownNs\":%lld,\"peakRss\":%lld,\"foreignEvents\":%ld",
         setup_ns, first_ns, teardown_ns, rss_peak, foreign);
  print_memory("before", &before);
  print_memory("after", &after);
  printf("}\n");
}

static void parse(int argc, char **argv, struct opts *o) {
  if (argc < 2) fail("USAGE", 0, "usage: watches build|inotify|fanotify --root DIR ...");
  o->op = argv[1];
  o->parent = -1;
  o->marker_dir = ".";
  o->mark = "filesystem";
  for (int i = 2; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--root")) o->root = v;
    else if (!strcmp(k, "--dirs")) o->dirs = number_arg(k, v);
    else if (!strcmp(k, "--fanout")) o->fanout = number_arg(k, v);
    else if (!strcmp(k, "--files")) o->files = number_arg(k, v);
    else if (!strcmp(k, "--parent")) o->parent = number_arg(k, v);
    else if (!strcmp(k, "--marker-dir")) o->marker_dir = v;
    else if (!strcmp(k, "--mark")) o->mark = v;
    else if (!strcmp(k, "--cgroup")) o->cgroup = v;
    else if (!strcmp(k, "--memcg-file")) o->memcg_file = v;
    else if (!strcmp(k, "--memcg-key")) o->memcg_key = v;
    else fail("USAGE", 0, "unknown option %s", k);
  }
  if (argc % 2 != 0) fail("USAGE", 0, "option %s has no value", argv[argc - 1]);
  if (!o->root) fail("USAGE", 0, "--root is required");
  if (o->marker_dir[0] == '/' || strstr(o->marker_dir, "..")) fail("USAGE", 0, "--marker-dir must be relative, without ..");
}

int main(int argc, char **argv) {
  struct opts o = {0};
  parse(argc, argv, &o);
  follow_parent(o.parent);
  if (!strcmp(o.op, "build")) op_build(&o);
  else if (!strcmp(o.op, "inotify")) op_inotify(&o);
  else if (!strcmp(o.op, "fanotify")) op_fanotify(&o);
  else fail("USAGE", 0, "unknown operation '%s'", o.op);
  return 0;
}
