/*
 * The probe's fanotify side, apart from its read loop: the group and its marks (with what each
 * refusal means), the records of one read(), and the table that tells the workload's files apart
 * in them.
 *
 * fanotify identifies objects by file handle, and a mount or filesystem mark reports every file
 * of the filesystem. With FAN_REPORT_FID, the handle of each workload file and marker (from
 * name_to_handle_at at setup) is looked up in an open-addressing table; with FAN_REPORT_DFID_NAME
 * the directory's handle is compared, and the name then says which file it is.
 * All marks lie on one filesystem (inode and dir marks on the run's own objects, mount and
 * filesystem marks on DIR's), so the handle alone names a file: the fsid is not compared.
 */
#ifndef FSBENCH_FANOTIFY_H
#define FSBENCH_FANOTIFY_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#if __has_include(<sys/fanotify.h>)
#include <sys/fanotify.h>
#else
/* glibc has exported both since 2.13; some distributions ship the header in a separate package.
 * The libc wrappers rather than syscall(2): fanotify_mark's 64-bit mask is split differently on
 * 32-bit ABIs. */
#include <linux/fanotify.h>
extern int fanotify_init(unsigned int flags, unsigned int event_f_flags);
extern int fanotify_mark(int fanotify_fd, unsigned int flags, uint64_t mask, int dirfd, const char *pathname);
#endif

#include "output.h"

/* name_to_handle_at flag (Linux 6.5) for a handle that only identifies, as fanotify reports it;
 * it also works on filesystems that cannot decode handles. Older kernels say EINVAL. */
#ifndef AT_HANDLE_FID
#define AT_HANDLE_FID 0x200
#endif

/* The largest FAN_REPORT_DFID_NAME record: metadata, then one info record (header and fsid, a
 * struct file_handle with up to MAX_HANDLE_SZ bytes, a name of up to NAME_MAX bytes and its NUL),
 * padded to 4 bytes. A read() buffer smaller than the next record fails with EINVAL. */
#define MIN_FAN_DFID_BUFFER_BYTES                                                                                        \
  ((long long)FAN_EVENT_METADATA_LEN +                                                                                  \
   (((long long)sizeof(struct fanotify_event_info_fid) + (long long)sizeof(struct file_handle) + MAX_HANDLE_SZ +        \
     NAME_MAX + 1 + 3) / 4 * 4))
/* FIONREAD on a fanotify group walks its whole queue under the lock the writers take to queue,
 * so it is sampled, at most this often. */
#define FAN_QUEUE_SAMPLE_NS 10000000u

/* ---- the records of one read() ---- */

/* Records are only 4-byte aligned (the kernel's FANOTIFY_EVENT_ALIGN) and the metadata holds a
 * u64, so it is copied out rather than cast. False for a record that does not parse. */
static inline bool fan_meta(const char *p, const char *end, struct fanotify_event_metadata *m) {
  if ((size_t)(end - p) < FAN_EVENT_METADATA_LEN) return false;
  memcpy(m, p, FAN_EVENT_METADATA_LEN);
  return m->vers == FANOTIFY_METADATA_VERSION && m->event_len >= FAN_EVENT_METADATA_LEN &&
         m->event_len <= (size_t)(end - p) && m->metadata_len >= FAN_EVENT_METADATA_LEN && m->metadata_len <= m->event_len;
}

/* The metadata of the record at P (before END), and false with *MALFORMED set for one that does
 * not parse. A group reporting file handles sends FAN_NOFD; an fd would otherwise leak, so one
 * that comes anyway is closed. */
static inline __attribute__((always_inline)) bool fan_record(const char *p, const char *end, struct fanotify_event_metadata *m,
                                                             bool *malformed) {
  if (!fan_meta(p, end, m)) {
    *malformed = true;
    return false;
  }
  if (__builtin_expect(m->fd >= 0, 0)) close(m->fd);
  return true;
}

/* A file handle in a record, and what follows it in the info record (DFID_NAME: the name, its
 * NUL and padding). */
struct fan_fid {
  int32_t type;
  uint32_t bytes;
  const unsigned char *handle;
  const char *rest;
  size_t rest_len;
};

/* The handle of the record's info record of type WANT (FAN_EVENT_INFO_TYPE_FID or _DFID_NAME).
 * False when there is none or it does not parse. `p` is the record, `m` its metadata (validated). */
static inline __attribute__((always_inline)) bool fan_fid_of(const char *p, const struct fanotify_event_metadata *m,
                                                             uint8_t want, struct fan_fid *f) {
  const size_t fixed = sizeof(struct fanotify_event_info_fid) + sizeof(struct file_handle);
  const char *q = p + m->metadata_len, *end = p + m->event_len;
  while ((size_t)(end - q) >= sizeof(struct fanotify_event_info_header)) {
    struct fanotify_event_info_header h;
    memcpy(&h, q, sizeof h);
    if (h.len < sizeof h || h.len > (size_t)(end - q)) return false;
    if (h.info_type == want) {
      if (h.len < fixed) return false;
      struct file_handle fh;
      memcpy(&fh, q + sizeof(struct fanotify_event_info_fid), sizeof fh);
      if (fh.handle_bytes > h.len - fixed) return false;
      f->type = fh.handle_type;
      f->bytes = fh.handle_bytes;
      f->handle = (const unsigned char *)q + fixed;
      f->rest = (const char *)f->handle + fh.handle_bytes;
      f->rest_len = h.len - fixed - fh.handle_bytes;
      return true;
    }
    q += h.len;
  }
  return false;
}

/* ---- which file a handle belongs to ---- */

/* What the table answers for a handle it does not hold; no caller's value may equal it. */
#define FAN_WHO_UNKNOWN (-1)

struct fid_slot {
  uint32_t off; /* into pool */
  uint32_t len;
  int32_t type;
  int32_t who; /* FAN_WHO_UNKNOWN: empty */
};

/* The handles of the files that events are told apart by (FAN_REPORT_FID), or of their
 * directory (FAN_REPORT_DFID_NAME). */
struct fan_ids {
  unsigned char *pool; /* n * MAX_HANDLE_SZ: bounded by the caller's count */
  size_t pool_len, pool_cap;
  struct fid_slot *slots;
  size_t mask;
  unsigned char dir_handle[MAX_HANDLE_SZ];
  uint32_t dir_len;
  int32_t dir_type;
  bool no_handle_fid; /* this kernel refused AT_HANDLE_FID */
};

static inline uint64_t fid_hash(int32_t type, const unsigned char *b, size_t len) {
  uint64_t h = 1469598103934665603u ^ (uint32_t)type; /* FNV-1a */
  h *= 1099511628211u;
  for (size_t i = 0; i < len; i++) {
    h ^= b[i];
    h *= 1099511628211u;
  }
  return h;
}

/* Runs once per FAN_MODIFY record in the measuring walk, so it is inlined there. */
static inline __attribute__((always_inline)) int32_t fid_lookup(const struct fan_ids *ids, int32_t type, const unsigned char *b,
                                                                size_t len) {
  for (size_t i = (size_t)fid_hash(type, b, len) & ids->mask;; i = (i + 1) & ids->mask) {
    const struct fid_slot *e = &ids->slots[i];
    if (e->who == FAN_WHO_UNKNOWN) return FAN_WHO_UNKNOWN;
    if (e->len == len && e->type == type && memcmp(ids->pool + e->off, b, len) == 0) return e->who;
  }
}

/* Whether F is the handle of the directory fan_ids_dir recorded. */
static inline bool fan_is_dir(const struct fan_ids *ids, const struct fan_fid *f) {
  return f->bytes == ids->dir_len && f->type == ids->dir_type && memcmp(f->handle, ids->dir_handle, f->bytes) == 0;
}

/* ---- setup: every failure ends the program with its error line ---- */

/* Why the kernel may have said no, for the message of an UNSUPPORTED refusal. */
static inline const char *fan_refusal_hint(int e) {
  switch (e) {
    case EOPNOTSUPP:
      return "the filesystem cannot encode file handles, or (for mount and filesystem marks) cannot decode them";
    case ENODEV: return "the filesystem has no fsid to report events with";
    case EXDEV: return "the directory lies in a subvolume whose fsid differs from its filesystem's";
    case ENOSYS: return "this kernel is built without fanotify (CONFIG_FANOTIFY)";
    default: return "this kernel does not accept this combination of fanotify flags";
  }
}

static inline bool fan_refusal(int e) { return e == EINVAL || e == EOPNOTSUPP || e == EXDEV || e == ENODEV || e == ENOSYS || e == ENOTDIR; }

static inline _Noreturn void fan_refused(const char *call, int e) {
  const char *name = strerrorname_np(e);
  die(EXIT_RUNTIME, "UNSUPPORTED", "the kernel refused %s: %s (%s): %s", call, strerror(e), name ? name : "errno",
      fan_refusal_hint(e));
}

/*
 * A group of FAN_CLASS_NOTIF reporting file handles (FID, or DFID_NAME when !fid). The queue
 * limit (fs.fanotify.max_queued_events) is read by fanotify_init, so the caller sets it before the
 * program starts. NOFILE and OPEN_FDS tell the open-files limit from max_user_groups in a message.
 */
static inline int fan_group_open(bool fid, bool unlimited_queue, rlim_t nofile, long long open_fds, long long files) {
  unsigned flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | (fid ? FAN_REPORT_FID : FAN_REPORT_DFID_NAME) |
                   (unlimited_queue ? FAN_UNLIMITED_QUEUE : 0u);
  char call[160];
  snprintf(call, sizeof call, "fanotify_init(FAN_CLASS_NOTIF|FAN_CLOEXEC|%s%s)", fid ? "FAN_REPORT_FID" : "FAN_REPORT_DFID_NAME",
           unlimited_queue ? "|FAN_UNLIMITED_QUEUE" : "");
  /* event_f_flags only matter for groups that open an fd per event; these report handles. */
  int fd = fanotify_init(flags, (unsigned)(O_RDONLY | O_CLOEXEC | O_LARGEFILE));
  if (fd >= 0) return fd;
  int e = errno;
  if (e == EPERM)
    die(EXIT_RUNTIME, "PRIVILEGE_MISSING", "%s: %s; fanotify with an unlimited queue, or with mount and filesystem marks, "
        "needs CAP_SYS_ADMIN: run as root", call, strerror(e));
  if (e == EMFILE && nofile != 0 && (unsigned long long)open_fds + 1 >= (unsigned long long)nofile)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; the open-files limit (RLIMIT_NOFILE, %llu) is too small for %lld files: "
        "raise 'ulimit -Hn' or use fewer files", call, strerror(e), (unsigned long long)nofile, files);
  if (e == EMFILE)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; fs.fanotify.max_user_groups (%ld) is reached for this user: raise it or "
        "stop other fanotify users", call, strerror(e), read_proc_long("/proc/sys/fs/fanotify/max_user_groups"));
  if (e == ENFILE) die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; the system-wide limit fs.file-max is reached", call, strerror(e));
  if (fan_refusal(e)) fan_refused(call, e);
  die(EXIT_RUNTIME, "PROBE_FAILED", "%s failed: %s", call, strerror(e));
}

/* A FAN_MODIFY mark (with MASK's other bits) on PATH; FLAG_NAME spells FLAGS for the message,
 * NMARKS is how many marks the run places. */
static inline void fan_mark_add(int group, unsigned flags, const char *flag_name, uint64_t mask, const char *path,
                                long long nmarks) {
  if (fanotify_mark(group, FAN_MARK_ADD | flags, mask, AT_FDCWD, path) == 0) return;
  int e = errno;
  char call[PATH_MAX + 160];
  snprintf(call, sizeof call, "fanotify_mark(FAN_MARK_ADD|%s, FAN_MODIFY%s) on %s", flag_name,
           mask & FAN_EVENT_ON_CHILD ? "|FAN_EVENT_ON_CHILD" : "", path);
  if (e == EPERM || e == EACCES)
    die(EXIT_RUNTIME, "PRIVILEGE_MISSING", "%s: %s; mount and filesystem marks need CAP_SYS_ADMIN (run as root), inode "
        "and dir marks read access to the file", call, strerror(e));
  if (e == ENOSPC)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; fs.fanotify.max_user_marks (%ld) is too small for this run's %lld marks on "
        "top of those the user already holds: raise it, use fewer files, or use mark: dir", call, strerror(e),
        read_proc_long("/proc/sys/fs/fanotify/max_user_marks"), nmarks);
  if (fan_refusal(e)) fan_refused(call, e);
  die(EXIT_RUNTIME, "PROBE_FAILED", "%s failed: %s", call, strerror(e));
}

/* Room for the largest handle. */
union fan_handle_buf {
  struct file_handle fh;
  unsigned char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
};

/* The handle fanotify reports for PATH. */
static inline void fan_handle_of(struct fan_ids *ids, const char *path, union fan_handle_buf *b) {
  for (;;) {
    int mount_id;
    b->fh.handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(AT_FDCWD, path, &b->fh, &mount_id, ids->no_handle_fid ? 0 : AT_HANDLE_FID) == 0) return;
    int e = errno;
    /* Before Linux 6.5 there is no AT_HANDLE_FID; fanotify's handles are then the plain ones. */
    if (e == EINVAL && !ids->no_handle_fid) {
      ids->no_handle_fid = true;
      continue;
    }
    char call[PATH_MAX + 64];
    snprintf(call, sizeof call, "name_to_handle_at(%s)", path);
    if (e == EOPNOTSUPP) fan_refused(call, e);
    die(EXIT_RUNTIME, "PROBE_FAILED", "%s failed: %s", call, strerror(e));
  }
}

/* An empty table for N handles (the caller bounds N), at a load factor of at most 1/2. */
static inline void fan_ids_init(struct fan_ids *ids, size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  ids->slots = malloc(cap * sizeof *ids->slots);
  ids->pool_cap = n * MAX_HANDLE_SZ;
  ids->pool = malloc(ids->pool_cap);
  if (!ids->slots || !ids->pool) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory for the file handle table");
  ids->mask = cap - 1;
  for (size_t i = 0; i < cap; i++) ids->slots[i].who = FAN_WHO_UNKNOWN;
}

/* PATH's handle, answered with WHO from then on. */
static inline void fan_ids_add(struct fan_ids *ids, const char *path, int32_t who) {
  union fan_handle_buf b;
  fan_handle_of(ids, path, &b);
  const struct file_handle *fh = &b.fh;
  if (ids->pool_len + fh->handle_bytes > ids->pool_cap)
    die(EXIT_RUNTIME, "PROBE_FAILED", "the file handle table is full (a handle above MAX_HANDLE_SZ?)");
  size_t i = (size_t)fid_hash(fh->handle_type, fh->f_handle, fh->handle_bytes) & ids->mask;
  for (;; i = (i + 1) & ids->mask) {
    struct fid_slot *e = &ids->slots[i];
    if (e->who == FAN_WHO_UNKNOWN) break;
    if (e->len == fh->handle_bytes && e->type == fh->handle_type && memcmp(ids->pool + e->off, fh->f_handle, e->len) == 0)
      die(EXIT_RUNTIME, "PROBE_FAILED", "two workload files have the same file handle; events cannot be told apart");
  }
  memcpy(ids->pool + ids->pool_len, fh->f_handle, fh->handle_bytes);
  ids->slots[i] = (struct fid_slot){.off = (uint32_t)ids->pool_len, .len = fh->handle_bytes, .type = fh->handle_type, .who = who};
  ids->pool_len += fh->handle_bytes;
}

/* DIR's handle, for fan_is_dir. */
static inline void fan_ids_dir(struct fan_ids *ids, const char *dir) {
  union fan_handle_buf b;
  fan_handle_of(ids, dir, &b);
  memcpy(ids->dir_handle, b.fh.f_handle, b.fh.handle_bytes);
  ids->dir_len = b.fh.handle_bytes;
  ids->dir_type = b.fh.handle_type;
}

#endif
