// The semantics workload's raw inotify reader (workloads/semantics/inotify.ts drives it): watches
// a tree recursively and prints every event as one JSON line, in the vocabulary of
// contract/workloads/semantics/events.ts, stamped with CLOCK_MONOTONIC when read() returned.
// `semantics fanotify` is the same for a fanotify filesystem mark (native/semantics-fanotify.h,
// driven by workloads/semantics/fanotify.ts), with the same lines.
//
//   semantics inotify|fanotify --root DIR [--parent PID]
//
// Prints {"ready":true,"watches":N} once every directory has its watch, then one line per event:
// {"k":KIND,"p":PATH[,"f":FROM],"t":NS[,"s":1]}, and on SIGTERM {"done":true,...} with its counts.
//
// What `inotify` means here: a watch per directory (IN_CREATE, IN_DELETE, IN_MODIFY, IN_ATTRIB,
// IN_MOVED_FROM, IN_MOVED_TO), and for a directory that appears (created or moved in) its watch
// added, then the directory listed: whatever was made in it before the watch existed is reported
// as created with "s":1 (synthesized), which the kernel never reports. A reader that skips the
// listing misses those files: that is the race of recursive inotify, and the "s" count shows how
// often the listing saved it. IN_MOVED_FROM followed by IN_MOVED_TO with the same cookie is one
// rename with both paths; an unpaired IN_MOVED_FROM is "renamed-from", an unpaired IN_MOVED_TO
// "renamed" without "f". A watched directory keeps the path it had when its watch was added.
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include "output.h"
#include "semantics-fanotify.h"

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW)
/* 64 KiB: hundreds of events a read(), far above the 272-byte minimum. */
#define READ_BUFFER (64 * 1024)

struct reader {
  int ifd;
  char **paths; /* indexed by watch descriptor */
  long cap;
  long watches;
  long overflows;
  long synthesized;
  long events;
  const char *root;
};

static void print_event(struct reader *r, const char *kind, const char *path, const char *from, long long t, int synthesized) {
  printf("{\"k\":\"%s\",\"p\":", kind);
  json_string(path);
  if (from) {
    printf(",\"f\":");
    json_string(from);
  }
  printf(",\"t\":%lld%s}\n", t, synthesized ? ",\"s\":1" : "");
  r->events++;
}

static void remember(struct reader *r, int wd, const char *path) {
  if (wd >= r->cap) {
    long cap = r->cap ? r->cap : 1024;
    while (cap <= wd) cap *= 2;
    char **p = realloc(r->paths, (size_t)cap * sizeof *p);
    if (!p) fail("ENOMEM", r->watches, "no memory for %ld watch paths", cap);
    memset(p + r->cap, 0, (size_t)(cap - r->cap) * sizeof *p);
    r->paths = p;
    r->cap = cap;
  }
  if (!r->paths[wd]) r->watches++;
  free(r->paths[wd]);
  r->paths[wd] = strdup(path);
  if (!r->paths[wd]) fail("ENOMEM", r->watches, "no memory for a watch path");
}

/* Adds a watch on PATH and every directory below it; with SCAN, reports each entry found as created (synthesized). */
static void watch_tree(struct reader *r, const char *path, int scan, long long t) {
  int wd = inotify_add_watch(r->ifd, path, WATCH_MASK);
  if (wd < 0) {
    /* Gone again before its watch (a subtree deleted at once): nothing left to watch. */
    if (scan && (errno == ENOENT || errno == ENOTDIR)) return;
    fail_errno("inotify_add_watch", path, r->watches);
  }
  remember(r, wd, path);
  DIR *d = opendir(path);
  if (!d) {
    if (scan && errno == ENOENT) return;
    fail_errno("opendir", path, r->watches);
  }
  struct dirent *e;
  char child[PATH_MAX];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child) fail("ENAMETOOLONG", r->watches, "%s/%s is longer than PATH_MAX", path, e->d_name);
    if (scan) {
      print_event(r, "created", child, NULL, t, 1);
      r->synthesized++;
    }
    if (e->d_type == DT_DIR) watch_tree(r, child, scan, t);
  }
  closedir(d);
}

static int readable(int fd, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int n = poll(&p, 1, timeout_ms);
  if (n < 0 && errno != EINTR) fail_errno("poll", "inotify", 0);
  return n > 0;
}

/* The half of a rename seen last, waiting for its IN_MOVED_TO. */
struct pending {
  int set;
  uint32_t cookie;
  char path[PATH_MAX];
  long long t;
};

static void flush_pending(struct reader *r, struct pending *m) {
  if (m->set) print_event(r, "renamed-from", m->path, NULL, m->t, 0);
  m->set = 0;
}

static void handle(struct reader *r, const struct inotify_event *e, long long t, struct pending *m) {
  if (e->mask & IN_Q_OVERFLOW) {
    flush_pending(r, m);
    r->overflows++;
    print_event(r, "overflow", r->root, NULL, t, 0);
    return;
  }
  if (e->mask & IN_IGNORED) {
    if (e->wd >= 0 && e->wd < r->cap && r->paths[e->wd]) {
      free(r->paths[e->wd]);
      r->paths[e->wd] = NULL;
      r->watches--;
    }
    return;
  }
  /* Events about a watched directory itself (no name) are reported by its parent's watch too. */
  if (e->len == 0 || e->wd < 0 || e->wd >= r->cap || !r->paths[e->wd]) return;
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/%s", r->paths[e->wd], e->name) >= (int)sizeof path) return;
  if (e->mask & IN_MOVED_TO) {
    /* A waiting half of another rename (a move out, then a move in) is reported first, on its own. */
    if (m->set && m->cookie != e->cookie) flush_pending(r, m);
    print_event(r, "renamed", path, m->set ? m->path : NULL, t, 0);
    m->set = 0;
  } else {
    flush_pending(r, m);
    if (e->mask & IN_MOVED_FROM) {
      m->set = 1;
      m->cookie = e->cookie;
      m->t = t;
      memcpy(m->path, path, sizeof path);
      return;
    }
    if (e->mask & IN_CREATE) print_event(r, "created", path, NULL, t, 0);
    else if (e->mask & IN_DELETE) print_event(r, "deleted", path, NULL, t, 0);
    else if (e->mask & IN_MODIFY) print_event(r, "modified", path, NULL, t, 0);
    else if (e->mask & IN_ATTRIB) print_event(r, "attrib", path, NULL, t, 0);
  }
  if ((e->mask & IN_ISDIR) && (e->mask & (IN_CREATE | IN_MOVED_TO))) watch_tree(r, path, 1, t);
}

int main(int argc, char **argv) {
  const char *root = NULL;
  long parent = -1;
  if (argc < 2 || (strcmp(argv[1], "inotify") != 0 && strcmp(argv[1], "fanotify") != 0)) die(EXIT_USAGE, "USAGE", "usage: semantics inotify|fanotify --root DIR [--parent PID]");
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--root")) root = argv[i + 1];
    else if (!strcmp(argv[i], "--parent")) parent = number_arg("--parent", argv[i + 1]);
    else die(EXIT_USAGE, "USAGE", "unknown option %s", argv[i]);
  }
  if (!root || root[0] != '/') die(EXIT_USAGE, "USAGE", "--root must be an absolute directory");
  follow_parent(parent);
  if (!strcmp(argv[1], "fanotify")) return semfan_main(root);
  struct reader r = {.root = root};
  r.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (r.ifd < 0) fail_errno("inotify_init1", root, 0);
  watch_tree(&r, root, 0, 0);
  printf("{\"ready\":true,\"watches\":%ld}\n", r.watches);
  fflush(stdout);

  static char buf[READ_BUFFER] __attribute__((aligned(__alignof__(struct inotify_event))));
  struct pending m = {0};
  while (!stop_requested) {
    if (!readable(r.ifd, 50)) {
      /* Nothing came within 50 ms: a lone IN_MOVED_FROM will not be paired any more. */
      flush_pending(&r, &m);
      fflush(stdout);
      continue;
    }
    ssize_t n = read(r.ifd, buf, sizeof buf);
    long long t = now_ns();
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      fail_errno("read", "inotify", r.events);
    }
    for (char *p = buf; p < buf + n;) {
      const struct inotify_event *e = (const struct inotify_event *)p;
      handle(&r, e, t, &m);
      p += sizeof *e + e->len;
    }
    /* Its IN_MOVED_TO may come with the next read: keep the half a moment longer. */
    if (!m.set) fflush(stdout);
  }
  flush_pending(&r, &m);
  printf("{\"done\":true,\"watches\":%ld,\"overflows\":%ld,\"synthesized\":%ld,\"events\":%ld}\n", r.watches, r.overflows, r.synthesized, r.events);
  fflush(stdout);
  return 0;
}
