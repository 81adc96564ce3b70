// The metadata workload's measuring loop (seed 001): one phase per invocation over
// <root>/dir.NNN/file.NNN, timed from the first syscall of the phase to the last, and one JSON
// line on stdout. Node spawns it once per phase and drops caches in between; the loop is native
// because Node's fs API adds several microseconds per file, as much as the syscalls themselves
// on warm caches (docs/workloads.md: "Native, measured").
//
// Usage: metadata <phase> --root DIR --dirs N --files N --file-size BYTES --parent PID
//                 [--fsync none|end|file|dir]
//                 [--ag-blocks N --ag-count N --ag-ino-shift N --block-size N]   (layout)
// Phases: create readByDir readInterleaved stat layout unlink.
// Errors: {"error":{"code":..,"message":..,"done":N}} and exit status 3.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "output.h"
#include "safe-open.h"

#define MAX_BUF (1L << 20)

struct opts {
  const char *phase;
  const char *root;
  long dirs, files, file_size, parent;
  const char *fsync;
  long ag_blocks, ag_count, ag_ino_shift, block_size;
};

struct counts {
  long files, dirs;
  long long bytes;
};

static void check_stop(long done) {
  if (stop_requested) fail("CANCELLED", done, "stopped by a signal after %ld files", done);
}

static int digits(long n) {
  int d = 1;
  while (n >= 10) {
    n /= 10;
    d++;
  }
  return d < 3 ? 3 : d;
}

static int dir_width, file_width;

static void dir_name(char *out, size_t len, long d) { snprintf(out, len, "dir.%0*ld", dir_width, d); }

static void file_name(char *out, size_t len, long d, long f) {
  snprintf(out, len, "dir.%0*ld/file.%0*ld", dir_width, d, file_width, f);
}

static void write_all(int fd, const char *buf, long size, const char *path, long done) {
  long left = size;
  while (left > 0) {
    long chunk = left < MAX_BUF ? left : MAX_BUF;
    ssize_t w = write(fd, buf, (size_t)chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail_errno("write", path, done);
    }
    left -= w;
  }
}

static void phase_create(int root, const struct opts *o, char *buf, struct counts *c, long long *sync_ns) {
  char path[256];
  int per_file = !strcmp(o->fsync, "file") || !strcmp(o->fsync, "dir");
  int per_dir = !strcmp(o->fsync, "dir");
  for (long d = 0; d < o->dirs; d++) {
    dir_name(path, sizeof path, d);
    if (mkdirat(root, path, 0755) < 0) fail_errno("mkdir", path, c->files);
    c->dirs++;
    for (long f = 0; f < o->files; f++) {
      check_stop(c->files);
      file_name(path, sizeof path, d, f);
      int fd = openat(root, path, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) fail_errno("create", path, c->files);
      write_all(fd, buf, o->file_size, path, c->files);
      if (per_file && fsync(fd) < 0) fail_errno("fsync", path, c->files);
      if (close(fd) < 0) fail_errno("close", path, c->files);
      c->files++;
      c->bytes += o->file_size;
    }
    if (per_dir) {
      dir_name(path, sizeof path, d);
      int fd = openat(root, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0 || fsync(fd) < 0) fail_errno("fsync", path, c->files);
      close(fd);
    }
  }
  if (!strcmp(o->fsync, "end")) {
    long long t = now_ns();
    if (syncfs(root) < 0) fail_errno("syncfs", o->root, c->files);
    *sync_ns = now_ns() - t;
  }
}

static void read_one(int root, long d, long f, const struct opts *o, char *buf, long buf_len, struct counts *c) {
  char path[256];
  check_stop(c->files);
  file_name(path, sizeof path, d, f);
  int fd = openat(root, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno("open", path, c->files);
  // Exactly file-size bytes, like a reader that knows the size: no extra read() to see EOF.
  long got = 0;
  while (got < o->file_size) {
    long want = o->file_size - got < buf_len ? o->file_size - got : buf_len;
    ssize_t r = read(fd, buf, (size_t)want);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail_errno("read", path, c->files);
    }
    if (r == 0) fail("SHORT_READ", c->files, "read %s: %ld of %ld bytes", path, got, o->file_size);
    got += r;
  }
  close(fd);
  c->files++;
  c->bytes += got;
}

struct inode_stats {
  uint64_t min_ino, max_ino;
  long above_32_bits;
};

static void phase_stat(int root, const struct opts *o, struct counts *c, struct inode_stats *s) {
  char path[256];
  struct stat st;
  s->min_ino = UINT64_MAX;
  for (long d = 0; d < o->dirs; d++) {
    for (long f = 0; f < o->files; f++) {
      check_stop(c->files);
      file_name(path, sizeof path, d, f);
      if (fstatat(root, path, &st, AT_SYMLINK_NOFOLLOW) < 0) fail_errno("stat", path, c->files);
      uint64_t ino = (uint64_t)st.st_ino;
      if (ino < s->min_ino) s->min_ino = ino;
      if (ino > s->max_ino) s->max_ino = ino;
      if (ino > UINT32_MAX) s->above_32_bits++;
      c->files++;
    }
  }
}

struct layout {
  long inode_ags, data_ags, with_data, away;
};

// Which allocation group holds each inode and each file's first data block (XFS): the seed's
// explanation of the 256-byte-inode slowdown is exactly that these drift apart under inode32.
static void phase_layout(int root, const struct opts *o, struct counts *c, struct layout *l) {
  if (o->ag_blocks <= 0 || o->ag_count <= 0 || o->block_size <= 0 || o->ag_ino_shift <= 0)
    fail("USAGE", 0, "layout needs --ag-blocks, --ag-count, --ag-ino-shift and --block-size");
  char *inode_seen = calloc((size_t)o->ag_count, 1), *data_seen = calloc((size_t)o->ag_count, 1);
  struct {
    struct fiemap map;
    struct fiemap_extent extent;
  } req;
  char path[256];
  struct stat st;
  if (!inode_seen || !data_seen) fail("ENOMEM", 0, "layout: out of memory");
  for (long d = 0; d < o->dirs; d++) {
    for (long f = 0; f < o->files; f++) {
      check_stop(c->files);
      file_name(path, sizeof path, d, f);
      int fd = openat(root, path, O_RDONLY | O_CLOEXEC);
      if (fd < 0 || fstat(fd, &st) < 0) fail_errno("open", path, c->files);
      uint64_t inode_ag = (uint64_t)st.st_ino >> o->ag_ino_shift;
      if (inode_ag < (uint64_t)o->ag_count) inode_seen[inode_ag] = 1;
      memset(&req, 0, sizeof req);
      req.map.fm_length = FIEMAP_MAX_OFFSET;
      // No FIEMAP_FLAG_SYNC: forcing writeback here would change what the unlink phase finds.
      req.map.fm_extent_count = 1;
      if (ioctl(fd, FS_IOC_FIEMAP, &req.map) < 0) fail_errno("fiemap", path, c->files);
      if (req.map.fm_mapped_extents > 0 && !(req.extent.fe_flags & (FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_UNKNOWN))) {
        uint64_t data_ag = req.extent.fe_physical / (uint64_t)o->block_size / (uint64_t)o->ag_blocks;
        if (data_ag < (uint64_t)o->ag_count) data_seen[data_ag] = 1;
        l->with_data++;
        if (data_ag != inode_ag) l->away++;
      }
      close(fd);
      c->files++;
    }
  }
  for (long i = 0; i < o->ag_count; i++) {
    l->inode_ags += inode_seen[i];
    l->data_ags += data_seen[i];
  }
  free(inode_seen);
  free(data_seen);
}

static void phase_unlink(int root, const struct opts *o, struct counts *c) {
  char path[256];
  for (long d = 0; d < o->dirs; d++) {
    for (long f = 0; f < o->files; f++) {
      check_stop(c->files);
      file_name(path, sizeof path, d, f);
      if (unlinkat(root, path, 0) < 0) fail_errno("unlink", path, c->files);
      c->files++;
    }
    dir_name(path, sizeof path, d);
    if (unlinkat(root, path, AT_REMOVEDIR) < 0) fail_errno("rmdir", path, c->files);
    c->dirs++;
  }
}

static void parse(int argc, char **argv, struct opts *o) {
  if (argc < 2) fail("USAGE", 0, "usage: metadata <phase> --root DIR --dirs N --files N --file-size BYTES --parent PID");
  o->phase = argv[1];
  o->fsync = "none";
  o->parent = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--root")) o->root = v;
    else if (!strcmp(k, "--dirs")) o->dirs = number_arg(k, v);
    else if (!strcmp(k, "--files")) o->files = number_arg(k, v);
    else if (!strcmp(k, "--file-size")) o->file_size = number_arg(k, v);
    else if (!strcmp(k, "--parent")) o->parent = number_arg(k, v);
    else if (!strcmp(k, "--fsync")) o->fsync = v;
    else if (!strcmp(k, "--ag-blocks")) o->ag_blocks = number_arg(k, v);
    else if (!strcmp(k, "--ag-count")) o->ag_count = number_arg(k, v);
    else if (!strcmp(k, "--ag-ino-shift")) o->ag_ino_shift = number_arg(k, v);
    else if (!strcmp(k, "--block-size")) o->block_size = number_arg(k, v);
    else fail("USAGE", 0, "unknown option %s", k);
  }
  if (argc % 2 != 0) fail("USAGE", 0, "option %s has no value", argv[argc - 1]);
  if (!o->root || o->dirs < 1 || o->files < 1) fail("USAGE", 0, "--root, --dirs >= 1 and --files >= 1 are required");
  if (strcmp(o->fsync, "none") && strcmp(o->fsync, "end") && strcmp(o->fsync, "file") && strcmp(o->fsync, "dir"))
    fail("USAGE", 0, "--fsync must be none, end, file or dir");
}

int main(int argc, char **argv) {
  struct opts o = {0};
  parse(argc, argv, &o);
  follow_parent(o.parent);

  dir_width = digits(o.dirs - 1);
  file_width = digits(o.files - 1);
  long buf_len = o.file_size < MAX_BUF ? (o.file_size > 0 ? o.file_size : 1) : MAX_BUF;
  char *buf = malloc((size_t)buf_len);
  if (!buf) fail("ENOMEM", 0, "cannot allocate %ld bytes", buf_len);
  // Non-zero bytes, so no filesystem can store the files as holes.
  memset(buf, 'x', (size_t)buf_len);
  // No symlink in any component, and a directory this user owns: a run directory swapped for a
  // symlink after fsbench made it is refused, never written in or unlinked from.
  int root = fsb_open_dir_nofollow(o.root);
  if (root < 0) fail_errno("open (without following symlinks)", o.root, 0);
  struct stat rst;
  if (fstat(root, &rst) < 0) fail_errno("stat", o.root, 0);
  if (rst.st_uid != geteuid())
    fail("TARGET_UNUSABLE", 0, "%s is owned by uid %u, not by this process's uid %u: refusing to work in a directory someone else controls",
         o.root, (unsigned)rst.st_uid, (unsigned)geteuid());

  struct counts c = {0};
  long long sync_ns = 0;
  struct inode_stats s = {0};
  struct layout l = {0};
  long long t0 = now_ns();
  if (!strcmp(o.phase, "create")) {
    phase_create(root, &o, buf, &c, &sync_ns);
  } else if (!strcmp(o.phase, "readByDir")) {
    for (long d = 0; d < o.dirs; d++)
      for (long f = 0; f < o.files; f++) read_one(root, d, f, &o, buf, buf_len, &c);
  } else if (!strcmp(o.phase, "readInterleaved")) {
    for (long f = 0; f < o.files; f++)
      for (long d = 0; d < o.dirs; d++) read_one(root, d, f, &o, buf, buf_len, &c);
  } else if (!strcmp(o.phase, "stat")) {
    phase_stat(root, &o, &c, &s);
  } else if (!strcmp(o.phase, "layout")) {
    phase_layout(root, &o, &c, &l);
  } else if (!strcmp(o.phase, "unlink")) {
    phase_unlink(root, &o, &c);
  } else {
    fail("USAGE", 0, "unknown phase '%s'", o.phase);
  }
  long long ns = now_ns() - t0;

  printf("{\"phase\":");
  json_string(o.phase);
  printf(",\"files\":%ld,\"dirs\":%ld,\"bytes\":%lld,\"ns\":%lld", c.files, c.dirs, c.bytes, ns);
  if (!strcmp(o.phase, "create")) printf(",\"syncNs\":%lld", sync_ns);
  if (!strcmp(o.phase, "stat"))
    printf(",\"minIno\":%llu,\"maxIno\":%llu,\"inodesAbove32Bits\":%ld", (unsigned long long)s.min_ino,
           (unsigned long long)s.max_ino, s.above_32_bits);
  if (!strcmp(o.phase, "layout"))
    printf(",\"inodeAgs\":%ld,\"dataAgs\":%ld,\"filesWithData\":%ld,\"dataAwayFromInode\":%ld", l.inode_ags, l.data_ags,
           l.with_data, l.away);
  printf("}\n");
  return 0;
}
