/*
 * `semantics fanotify`: the semantics workload's fanotify reader (native/semantics.c's other
 * mode). It prints the same lines as the inotify reader, so that one schema reads both:
 * {"ready":true,"watches":N}, then {"k":KIND,"p":PATH[,"f":FROM],"t":NS} per event, and on
 * SIGTERM {"done":true,"watches":N,"overflows":N,"events":N} ("watches": directories it knows).
 *
 * What `fanotify` means here: one group (FAN_CLASS_NOTIF, FAN_REPORT_DFID_NAME_TARGET: each event
 * names its directory by file handle, the entry by name, and the entry itself by handle) with one
 * FAN_MARK_FILESYSTEM mark on the tree's filesystem. A filesystem mark has no per-directory watch
 * to add, so a new directory is never deaf and there is no listing to synthesize from; it sees the
 * whole filesystem, so an event counts only when its directory's handle is one the reader knows:
 * the root and every directory below it, found by walking the tree after the mark was placed, and
 * learnt from each directory created or moved into the tree (from the event's own handle, so a
 * directory renamed again before the reader looks does not mislead it). FAN_RENAME is one
 * `renamed` with both paths; a rename that leaves the tree is `renamed-from`, one that enters it
 * `renamed` without "f". FAN_Q_OVERFLOW is an `overflow` event.
 *
 * Not reported: events without a directory to name them (fsnotify_link_count's FS_ATTRIB on the
 * inode alone when a link is made or removed: inotify does not see those on a directory watch
 * either), and FAN_CLOSE_WRITE (a write is already FAN_MODIFY).
 */
#ifndef FSBENCH_SEMANTICS_FANOTIFY_H
#define FSBENCH_SEMANTICS_FANOTIFY_H

#include <dirent.h>
#include <poll.h>

#include "fanotify.h"

#define SEMFAN_MASK (FAN_CREATE | FAN_DELETE | FAN_MODIFY | FAN_ATTRIB | FAN_RENAME | FAN_ONDIR)
/* 64 KiB: hundreds of records a read(), far above the largest one (MIN_FAN_DFID_BUFFER_BYTES). */
#define SEMFAN_READ_BUFFER (64 * 1024)

/* One known directory: its handle (the key) and its path; path NULL is a removed entry. */
struct semfan_dir {
  unsigned char *key; /* NULL: empty slot */
  uint32_t len;
  int32_t type;
  char *path;
};

struct semfan {
  int group;
  const char *root;
  struct semfan_dir *dirs;
  size_t cap, used, live; /* used counts removed entries too: they stay until the table grows */
  struct fan_ids handles; /* only its no_handle_fid: whether this kernel knows AT_HANDLE_FID */
  long overflows;
  long events;
};

static void semfan_print(struct semfan *r, const char *kind, const char *path, const char *from, long long t) {
  printf("{\"k\":\"%s\",\"p\":", kind);
  json_string(path);
  if (from) {
    printf(",\"f\":");
    json_string(from);
  }
  printf(",\"t\":%lld}\n", t);
  r->events++;
}

static struct semfan_dir *semfan_slot(struct semfan *r, int32_t type, const unsigned char *key, uint32_t len) {
  for (size_t i = (size_t)fid_hash(type, key, len) & (r->cap - 1);; i = (i + 1) & (r->cap - 1)) {
    struct semfan_dir *d = &r->dirs[i];
    if (!d->key || (d->len == len && d->type == type && memcmp(d->key, key, len) == 0)) return d;
  }
}

static void semfan_grow(struct semfan *r) {
  struct semfan_dir *old = r->dirs;
  size_t old_cap = r->cap;
  r->cap = old_cap ? old_cap * 2 : 1024;
  r->dirs = calloc(r->cap, sizeof *r->dirs);
  if (!r->dirs) fail("ENOMEM", r->events, "no memory for %zu directory handles", r->cap);
  r->used = 0;
  for (size_t i = 0; i < old_cap; i++) {
    if (old[i].key && old[i].path) {
      *semfan_slot(r, old[i].type, old[i].key, old[i].len) = old[i];
      r->used++;
    } else {
      free(old[i].key);
    }
  }
  free(old);
}

/* The path of the directory with this handle, NULL for one outside the tree (or unknown). */
static const char *semfan_dir_path(struct semfan *r, const struct fan_fid *f) {
  if (r->cap == 0) return NULL;
  return semfan_slot(r, f->type, f->handle, f->bytes)->path;
}

static void semfan_remember(struct semfan *r, int32_t type, const unsigned char *key, uint32_t len, const char *path) {
  if (2 * (r->used + 1) > r->cap) semfan_grow(r);
  struct semfan_dir *d = semfan_slot(r, type, key, len);
  if (!d->key) {
    d->key = malloc(len ? len : 1);
    if (!d->key) fail("ENOMEM", r->events, "no memory for a directory handle");
    memcpy(d->key, key, len);
    d->len = len;
    d->type = type;
    r->used++;
  }
  if (!d->path) r->live++;
  free(d->path);
  d->path = strdup(path);
  if (!d->path) fail("ENOMEM", r->events, "no memory for a directory path");
}

/* Whether PATH is PREFIX or lies below it. */
static int semfan_under(const char *path, const char *prefix, size_t plen) {
  return strncmp(path, prefix, plen) == 0 && (path[plen] == '\0' || path[plen] == '/');
}

/* A directory moved from FROM to TO (NULL: out of the tree): every known path at or below FROM follows. */
static void semfan_move_dirs(struct semfan *r, const char *from, const char *to) {
  size_t flen = strlen(from);
  for (size_t i = 0; i < r->cap; i++) {
    struct semfan_dir *d = &r->dirs[i];
    if (!d->path || !semfan_under(d->path, from, flen)) continue;
    char *moved = NULL;
    if (to && asprintf(&moved, "%s%s", to, d->path + flen) < 0) fail("ENOMEM", r->events, "no memory for a directory path");
    free(d->path);
    d->path = moved;
    if (!moved) r->live--;
  }
}

/* Learns PATH and every directory below it by their handles (the tree at start, a directory moved in). */
static void semfan_walk(struct semfan *r, const char *path, int at_start) {
  union fan_handle_buf b;
  if (at_start) {
    /* Fails the run with its message; learns whether this kernel knows AT_HANDLE_FID (Linux 6.5). */
    fan_handle_of(&r->handles, path, &b);
  } else {
    int mount_id;
    b.fh.handle_bytes = MAX_HANDLE_SZ;
    /* Gone again (moved on, removed) before the reader came to it: its events say where it went. */
    if (name_to_handle_at(AT_FDCWD, path, &b.fh, &mount_id, r->handles.no_handle_fid ? 0 : AT_HANDLE_FID) != 0) return;
  }
  semfan_remember(r, b.fh.handle_type, b.fh.f_handle, b.fh.handle_bytes, path);
  DIR *d = opendir(path);
  if (!d) {
    if (!at_start) return;
    fail_errno("opendir", path, 0);
  }
  struct dirent *e;
  char child[PATH_MAX];
  while ((e = readdir(d)) != NULL) {
    if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child) fail("ENAMETOOLONG", 0, "%s/%s is longer than PATH_MAX", path, e->d_name);
    semfan_walk(r, child, at_start);
  }
  closedir(d);
}

/* The path an info record of type WANT names (its directory's path and the entry's name), or
 * false when the record is missing or its directory is not in the tree. "." names the directory itself. */
static int semfan_path_of(struct semfan *r, const char *p, const struct fanotify_event_metadata *m, uint8_t want, char *out) {
  struct fan_fid f;
  if (!fan_fid_of(p, m, want, &f)) return 0;
  const char *dir = semfan_dir_path(r, &f);
  if (!dir) return 0;
  const char *name = f.rest;
  if (f.rest_len == 0 || memchr(name, '\0', f.rest_len) == NULL || !strcmp(name, ".") || name[0] == '\0') {
    snprintf(out, PATH_MAX, "%s", dir);
    return 1;
  }
  return snprintf(out, PATH_MAX, "%s/%s", dir, name) < PATH_MAX;
}

static void semfan_handle(struct semfan *r, const char *p, const struct fanotify_event_metadata *m, long long t) {
  if (m->mask & FAN_Q_OVERFLOW) {
    r->overflows++;
    semfan_print(r, "overflow", r->root, NULL, t);
    return;
  }
  int ondir = (m->mask & FAN_ONDIR) != 0;
  struct fan_fid self = {0};
  int has_self = fan_fid_of(p, m, FAN_EVENT_INFO_TYPE_FID, &self);
  char path[PATH_MAX];
  if (m->mask & FAN_RENAME) {
    char from[PATH_MAX];
    int had = semfan_path_of(r, p, m, FAN_EVENT_INFO_TYPE_OLD_DFID_NAME, from);
    int has = semfan_path_of(r, p, m, FAN_EVENT_INFO_TYPE_NEW_DFID_NAME, path);
    if (had && has) semfan_print(r, "renamed", path, from, t);
    else if (had) semfan_print(r, "renamed-from", from, NULL, t);
    else if (has) semfan_print(r, "renamed", path, NULL, t);
    if (ondir && had) semfan_move_dirs(r, from, has ? path : NULL);
    else if (ondir && has) semfan_walk(r, path, 0);
    return;
  }
  if (!semfan_path_of(r, p, m, FAN_EVENT_INFO_TYPE_DFID_NAME, path)) return;
  /* A merged record holds several changes of one entry; told in the order they can happen. */
  if (m->mask & FAN_CREATE) {
    semfan_print(r, "created", path, NULL, t);
    /* Without the directory's own handle in the record (it could not be encoded), by its path. */
    if (ondir && has_self) semfan_remember(r, self.type, self.handle, self.bytes, path);
    else if (ondir) semfan_walk(r, path, 0);
  }
  if (m->mask & FAN_MODIFY) semfan_print(r, "modified", path, NULL, t);
  if (m->mask & FAN_ATTRIB) semfan_print(r, "attrib", path, NULL, t);
  if (m->mask & FAN_DELETE) {
    semfan_print(r, "deleted", path, NULL, t);
    if (ondir) semfan_move_dirs(r, path, NULL);
  }
}

static void semfan_open(struct semfan *r) {
  const char *call = "fanotify_init(FAN_CLASS_NOTIF|FAN_REPORT_DFID_NAME_TARGET)";
  r->group = fanotify_init(FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_DFID_NAME_TARGET, (unsigned)(O_RDONLY | O_CLOEXEC | O_LARGEFILE));
  if (r->group < 0) {
    int e = errno;
    if (e == EPERM) die(EXIT_RUNTIME, "PRIVILEGE_MISSING", "%s: %s; fanotify with a filesystem mark needs CAP_SYS_ADMIN: run as root", call, strerror(e));
    if (e == EMFILE)
      die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; fs.fanotify.max_user_groups (%ld) or the open-files limit is reached", call, strerror(e),
          read_proc_long("/proc/sys/fs/fanotify/max_user_groups"));
    if (fan_refusal(e)) fan_refused(call, e);
    die(EXIT_RUNTIME, "PROBE_FAILED", "%s failed: %s", call, strerror(e));
  }
  if (fanotify_mark(r->group, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, SEMFAN_MASK, AT_FDCWD, r->root) != 0) {
    int e = errno;
    char mark[PATH_MAX + 160];
    snprintf(mark, sizeof mark, "fanotify_mark(FAN_MARK_ADD|FAN_MARK_FILESYSTEM, FAN_CREATE|FAN_DELETE|FAN_MODIFY|FAN_ATTRIB|FAN_RENAME|FAN_ONDIR) on %s", r->root);
    if (e == EPERM || e == EACCES) die(EXIT_RUNTIME, "PRIVILEGE_MISSING", "%s: %s; a filesystem mark needs CAP_SYS_ADMIN: run as root", mark, strerror(e));
    if (e == ENOSPC) die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; fs.fanotify.max_user_marks (%ld) is reached", mark, strerror(e), read_proc_long("/proc/sys/fs/fanotify/max_user_marks"));
    if (fan_refusal(e)) fan_refused(mark, e);
    die(EXIT_RUNTIME, "PROBE_FAILED", "%s failed: %s", mark, strerror(e));
  }
}

static int semfan_main(const char *root) {
  struct semfan r = {.root = root, .group = -1};
  /* The mark first, then the walk: a directory made meanwhile is learnt from its event, or by the walk, or both. */
  semfan_open(&r);
  semfan_walk(&r, root, 1);
  printf("{\"ready\":true,\"watches\":%zu}\n", r.live);
  fflush(stdout);

  static char buf[SEMFAN_READ_BUFFER] __attribute__((aligned(8)));
  while (!stop_requested) {
    struct pollfd pfd = {.fd = r.group, .events = POLLIN};
    int ready = poll(&pfd, 1, 50);
    if (ready < 0 && errno != EINTR) fail_errno("poll", "fanotify", r.events);
    if (ready <= 0) continue;
    ssize_t n = read(r.group, buf, sizeof buf);
    long long t = now_ns();
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      fail_errno("read", "fanotify", r.events);
    }
    const char *end = buf + n;
    for (const char *p = buf; p < end;) {
      struct fanotify_event_metadata m;
      bool malformed = false;
      if (!fan_record(p, end, &m, &malformed)) fail("PROBE_FAILED", r.events, "fanotify returned a record that does not parse");
      semfan_handle(&r, p, &m, t);
      p += m.event_len;
    }
    fflush(stdout);
  }
  printf("{\"done\":true,\"watches\":%zu,\"overflows\":%ld,\"events\":%ld}\n", r.live, r.overflows, r.events);
  fflush(stdout);
  return 0;
}

#endif
