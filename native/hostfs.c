/*
 * fsbench hostfs: the host-changing file operations the journal cannot do safely from Node,
 * which has neither openat2 nor flock.
 *
 *   hostfs remove ROOT REL
 *       Removes ROOT/REL and everything below it without following a symlink anywhere: ROOT is
 *       opened from / with RESOLVE_NO_SYMLINKS, REL's parent beneath it with RESOLVE_BENEATH |
 *       RESOLVE_NO_SYMLINKS (an O_NOFOLLOW walk, one component at a time, where the kernel has no
 *       openat2), and the tree is emptied through directory handles (fdopendir, unlinkat): a
 *       symlink met anywhere is unlinked itself, never followed, and a mount point inside the
 *       tree is not crossed (its files belong to another filesystem: unmount it first).
 *       Prints {"ok":true,"removed":N}; a missing ROOT/REL (or parent) is ok with N = 0.
 *
 *   hostfs umount ROOT REL [--detach]
 *       Unmounts ROOT/REL: the parent is opened as above, then umount2(name, UMOUNT_NOFOLLOW)
 *       runs relative to it (fchdir), so neither the parent's components nor the mount point
 *       itself can be a symlink swapped in to unmount something else. --detach adds MNT_DETACH.
 *       Prints {"ok":true,"unmounted":0|1}; a path that is not a mount point is ok with 0.
 *
 *   hostfs hold DIR ID
 *       Takes an exclusive flock on DIR/ID.lock and keeps it until stdin reaches EOF (the parent
 *       closed it, or died), then removes the file and exits. The file is created as .ID.tmp,
 *       locked, and only then renamed into place, so whoever finds ID.lock unlocked knows its
 *       holder is gone for good. PR_SET_PDEATHSIG ends the holder with its parent too.
 *       Prints {"ready":true} once the lock is held.
 *
 *   hostfs serial DIR ID
 *       Takes an exclusive flock on DIR/ID.lock (created if missing), waiting while another holder
 *       has it, and keeps it until stdin reaches EOF, as hold does. The file is never removed: a
 *       waiter may have it open already, and removing it would let a newcomer lock a new file
 *       while that waiter locks the old one. One journal recovery at a time uses it.
 *       Prints {"ready":true} once the lock is held.
 *
 *   hostfs held DIR ID...
 *       For each DIR/ID.lock, whether a holder still holds it: {"held":[true,false,...]}. A file
 *       that is missing, or whose lock this check can take, has no holder any more.
 *
 * Errors are one line {"error":{"code":...,"message":...}} with exit status 3 (2 for usage).
 * Codes: SYMLINK (a component is a symlink, or not a directory), MOUNTED (a mount point inside
 * a tree to remove), BUSY (the mount is in use), FAILED (anything else, errno in the message).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "output.h"
#include "safe-open.h"

/* Deeper trees than this are not fsbench's: its run directories are a few levels deep. */
#define MAX_DEPTH 64

/* The code for an errno met while resolving a path that must hold no symlink. */
static const char *resolve_code(int e) {
  return e == ELOOP || e == ENOTDIR || e == EXDEV ? "SYMLINK" : "FAILED";
}

/* A relative path fsbench wrote: components of a normalised path, nothing that climbs. */
static void check_relative(const char *rel) {
  if (rel[0] == '\0' || rel[0] == '/') die(EXIT_USAGE, "USAGE", "'%s' must be a relative path", rel);
  const char *p = rel;
  while (*p) {
    const char *end = strchr(p, '/');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
      die(EXIT_USAGE, "USAGE", "'%s' must be a normalised relative path without . or .. components", rel);
    p += n;
    if (*p == '/') p++;
  }
}

/* Splits REL into its parent (NULL for a top-level name) and last component, in place. */
static const char *split_last(char *rel, char **parent) {
  char *slash = strrchr(rel, '/');
  if (!slash) {
    *parent = NULL;
    return rel;
  }
  *slash = '\0';
  *parent = rel;
  return slash + 1;
}

/* The parent directory of ROOT/REL, or -1 when it does not exist (nothing to do there). */
static int open_parent(const char *root, char *rel, const char **name) {
  int rootfd = fsb_open_dir_nofollow(root);
  if (rootfd < 0) {
    int e = errno;
    if (e == ENOENT) return -1;
    die(EXIT_RUNTIME, resolve_code(e), "cannot open %s without following symlinks: %s", root, strerror(e));
  }
  char *parent;
  *name = split_last(rel, &parent);
  if (!parent) return rootfd;
  int fd = fsb_open_dir_beneath(rootfd, parent);
  int e = errno;
  close(rootfd);
  if (fd >= 0) return fd;
  if (e == ENOENT) return -1;
  die(EXIT_RUNTIME, resolve_code(e), "cannot open %s/%s beneath %s without following symlinks: %s", root, parent, root, strerror(e));
}

struct removal {
  const char *root;
  const char *rel;
  long long removed;
};

static void remove_at(int dirfd, const char *name, int depth, struct removal *r);

/* Opens the subdirectory NAME of DIRFD on the same mount, or -1 with errno (ELOOP/ENOTDIR: not a directory any more). */
static int open_subdir(int dirfd, const char *name, const struct stat *parent, struct removal *r) {
  int fd = fsb_openat2(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
  if (fd < 0 && fsb_no_openat2(errno)) fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EXDEV) die(EXIT_RUNTIME, "MOUNTED", "%s (under %s/%s) is a mount point: unmount it first", name, r->root, r->rel);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) < 0) die(EXIT_RUNTIME, "FAILED", "fstat %s: %s", name, strerror(errno));
  /* What RESOLVE_NO_XDEV says where openat2 exists; a bind mount of the same filesystem slips through only without it. */
  if (st.st_dev != parent->st_dev)
    die(EXIT_RUNTIME, "MOUNTED", "%s (under %s/%s) is a mount point: unmount it first", name, r->root, r->rel);
  return fd;
}

/* Removes every entry of the open directory FD. */
static void empty_dir(int fd, int depth, struct removal *r) {
  if (depth > MAX_DEPTH) die(EXIT_RUNTIME, "FAILED", "%s/%s is more than %d directories deep", r->root, r->rel, MAX_DEPTH);
  /* Deleting while reading may make readdir skip an entry: read again until a pass finds nothing. */
  for (int pass = 0; pass < 1000; pass++) {
    int dfd = dup(fd);
    if (dfd < 0) die(EXIT_RUNTIME, "FAILED", "dup: %s", strerror(errno));
    DIR *d = fdopendir(dfd);
    if (!d) die(EXIT_RUNTIME, "FAILED", "fdopendir under %s/%s: %s", r->root, r->rel, strerror(errno));
    bool found = false;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      found = true;
      remove_at(fd, e->d_name, depth + 1, r);
      errno = 0;
    }
    if (errno != 0) die(EXIT_RUNTIME, "FAILED", "readdir under %s/%s: %s", r->root, r->rel, strerror(errno));
    closedir(d);
    if (!found) return;
  }
  die(EXIT_RUNTIME, "FAILED", "%s/%s keeps getting new entries while it is removed", r->root, r->rel);
}

/* Removes NAME in DIRFD: a directory with its contents, anything else (a symlink included) by unlinking it. */
static void remove_at(int dirfd, const char *name, int depth, struct removal *r) {
  struct stat parent;
  if (fstat(dirfd, &parent) < 0) die(EXIT_RUNTIME, "FAILED", "fstat: %s", strerror(errno));
  for (int attempt = 0; attempt < 100; attempt++) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      if (errno == ENOENT) return;
      die(EXIT_RUNTIME, "FAILED", "stat %s under %s/%s: %s", name, r->root, r->rel, strerror(errno));
    }
    if (S_ISDIR(st.st_mode)) {
      int fd = open_subdir(dirfd, name, &parent, r);
      if (fd < 0) {
        /* Replaced by something else since the stat: look again, and never follow it. */
        if (errno == ELOOP || errno == ENOTDIR || errno == ENOENT) continue;
        die(EXIT_RUNTIME, "FAILED", "open %s under %s/%s: %s", name, r->root, r->rel, strerror(errno));
      }
      empty_dir(fd, depth, r);
      close(fd);
      if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0) {
        r->removed++;
        return;
      }
      if (errno == ENOENT) return;
      if (errno == ENOTEMPTY || errno == EEXIST || errno == ENOTDIR) continue;
      if (errno == EBUSY) die(EXIT_RUNTIME, "MOUNTED", "%s under %s/%s is a mount point: unmount it first", name, r->root, r->rel);
      die(EXIT_RUNTIME, "FAILED", "rmdir %s under %s/%s: %s", name, r->root, r->rel, strerror(errno));
    }
    /* unlinkat never follows a symlink: the link itself goes, whatever it points at. */
    if (unlinkat(dirfd, name, 0) == 0) {
      r->removed++;
      return;
    }
    if (errno == ENOENT) return;
    if (errno == EISDIR) continue;
    die(EXIT_RUNTIME, "FAILED", "unlink %s under %s/%s: %s", name, r->root, r->rel, strerror(errno));
  }
  die(EXIT_RUNTIME, "FAILED", "%s under %s/%s keeps changing while it is removed", name, r->root, r->rel);
}

static int cmd_remove(int argc, char **argv) {
  if (argc != 4) die(EXIT_USAGE, "USAGE", "usage: hostfs remove ROOT REL");
  const char *root = argv[2];
  check_relative(argv[3]);
  char rel[PATH_MAX];
  if (strlen(argv[3]) >= sizeof rel) die(EXIT_USAGE, "USAGE", "path too long");
  strcpy(rel, argv[3]);
  struct removal r = {.root = root, .rel = argv[3], .removed = 0};
  const char *name;
  int parent = open_parent(root, rel, &name);
  if (parent >= 0) {
    remove_at(parent, name, 0, &r);
    close(parent);
  }
  printf("{\"ok\":true,\"removed\":%lld}\n", r.removed);
  return 0;
}

static int cmd_umount(int argc, char **argv) {
  if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "--detach"))) die(EXIT_USAGE, "USAGE", "usage: hostfs umount ROOT REL [--detach]");
  check_relative(argv[3]);
  char rel[PATH_MAX];
  if (strlen(argv[3]) >= sizeof rel) die(EXIT_USAGE, "USAGE", "path too long");
  strcpy(rel, argv[3]);
  const char *name;
  int parent = open_parent(argv[2], rel, &name);
  if (parent < 0) {
    printf("{\"ok\":true,\"unmounted\":0}\n");
    return 0;
  }
  /* Relative to the parent's handle: only the last component is looked up, and not followed. */
  if (fchdir(parent) < 0) die(EXIT_RUNTIME, "FAILED", "fchdir to the parent of %s/%s: %s", argv[2], argv[3], strerror(errno));
  int flags = UMOUNT_NOFOLLOW | (argc == 5 ? MNT_DETACH : 0);
  if (umount2(name, flags) == 0) {
    printf("{\"ok\":true,\"unmounted\":1}\n");
    return 0;
  }
  int e = errno;
  if (e == EINVAL || e == ENOENT) {
    printf("{\"ok\":true,\"unmounted\":0}\n");
    return 0;
  }
  die(EXIT_RUNTIME, e == EBUSY ? "BUSY" : "FAILED", "umount %s/%s: %s", argv[2], argv[3], strerror(e));
}

/* Lock names are fsbench's own ids: letters, digits, dashes, never a path. */
static void check_id(const char *id) {
  size_t n = strlen(id);
  if (n == 0 || n > 64) die(EXIT_USAGE, "USAGE", "a lock id must be 1-64 characters");
  for (const char *p = id; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
      die(EXIT_USAGE, "USAGE", "a lock id must be letters, digits and dashes: '%s'", id);
}

/*
 * What hold and serial start with: their arguments checked, death with the parent arranged, and
 * DIR opened without following symlinks. Returns DIR's descriptor.
 */
static int holder_dir(int argc, char **argv, const char *usage) {
  if (argc != 4) die(EXIT_USAGE, "USAGE", "usage: %s", usage);
  check_id(argv[3]);
  /* First: a parent that died before this line ends the holder, as does one that dies later. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) die(EXIT_RUNTIME, "FAILED", "prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
  int dfd = fsb_open_dir_nofollow(argv[2]);
  if (dfd < 0) die(EXIT_RUNTIME, resolve_code(errno), "cannot open %s without following symlinks: %s", argv[2], strerror(errno));
  return dfd;
}

/* Says the lock is held, then keeps it until stdin reaches EOF: the parent closed it, or died. */
static void held_until_eof(void) {
  printf("{\"ready\":true}\n");
  fflush(stdout);
  char buf[256];
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0 && errno != EINTR) break;
  }
}

static int cmd_hold(int argc, char **argv) {
  int dfd = holder_dir(argc, argv, "hostfs hold DIR ID");
  char tmp[96], lock[96];
  snprintf(tmp, sizeof tmp, ".%s.tmp", argv[3]);
  snprintf(lock, sizeof lock, "%s.lock", argv[3]);
  int fd = openat(dfd, tmp, O_CREAT | O_EXCL | O_NOFOLLOW | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) die(EXIT_RUNTIME, "FAILED", "cannot create %s/%s: %s", argv[2], tmp, strerror(errno));
  if (flock(fd, LOCK_EX) < 0) die(EXIT_RUNTIME, "FAILED", "flock %s/%s: %s", argv[2], tmp, strerror(errno));
  if (renameat2(dfd, tmp, dfd, lock, RENAME_NOREPLACE) < 0) {
    int e = errno;
    /* Filesystems without RENAME_NOREPLACE: a hard link never replaces an existing name either. */
    if (e != EINVAL && e != ENOSYS) die(EXIT_RUNTIME, "FAILED", "rename %s/%s to %s: %s", argv[2], tmp, lock, strerror(e));
    if (linkat(dfd, tmp, dfd, lock, 0) < 0) die(EXIT_RUNTIME, "FAILED", "link %s/%s to %s: %s", argv[2], tmp, lock, strerror(errno));
    unlinkat(dfd, tmp, 0);
  }
  held_until_eof();
  /* Still holding the lock: whoever opened the file before this sees it free only once it is gone. */
  unlinkat(dfd, lock, 0);
  return 0;
}

static int cmd_serial(int argc, char **argv) {
  int dfd = holder_dir(argc, argv, "hostfs serial DIR ID");
  char lock[96];
  snprintf(lock, sizeof lock, "%s.lock", argv[3]);
  int fd = openat(dfd, lock, O_CREAT | O_NOFOLLOW | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) die(EXIT_RUNTIME, resolve_code(errno), "cannot open %s/%s: %s", argv[2], lock, strerror(errno));
  while (flock(fd, LOCK_EX) < 0)
    if (errno != EINTR) die(EXIT_RUNTIME, "FAILED", "flock %s/%s: %s", argv[2], lock, strerror(errno));
  held_until_eof();
  return 0;
}

static int cmd_held(int argc, char **argv) {
  if (argc < 4) die(EXIT_USAGE, "USAGE", "usage: hostfs held DIR ID...");
  for (int i = 3; i < argc; i++) check_id(argv[i]);
  int dfd = fsb_open_dir_nofollow(argv[2]);
  if (dfd < 0 && errno != ENOENT) die(EXIT_RUNTIME, resolve_code(errno), "cannot open %s without following symlinks: %s", argv[2], strerror(errno));
  bool *held = calloc((size_t)argc, sizeof *held);
  if (!held) die(EXIT_RUNTIME, "FAILED", "out of memory");
  for (int i = 3; i < argc && dfd >= 0; i++) {
    char lock[96];
    snprintf(lock, sizeof lock, "%s.lock", argv[i]);
    int fd = openat(dfd, lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;
      die(EXIT_RUNTIME, resolve_code(errno), "cannot open %s/%s: %s", argv[2], lock, strerror(errno));
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
      if (errno != EWOULDBLOCK) die(EXIT_RUNTIME, "FAILED", "flock %s/%s: %s", argv[2], lock, strerror(errno));
      held[i] = true;
    }
    close(fd);
  }
  printf("{\"held\":[");
  for (int i = 3; i < argc; i++) printf("%s%s", i > 3 ? "," : "", held[i] ? "true" : "false");
  printf("]}\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "remove")) return cmd_remove(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "umount")) return cmd_umount(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "hold")) return cmd_hold(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "serial")) return cmd_serial(argc, argv);
  if (argc >= 2 && !strcmp(argv[1], "held")) return cmd_held(argc, argv);
  die(EXIT_USAGE, "USAGE", "usage: hostfs remove ROOT REL | umount ROOT REL [--detach] | hold DIR ID | serial DIR ID | held DIR ID...");
}
