/*
 * Opening directories without following symlinks, shared by the native programs: openat2 with
 * RESOLVE_NO_SYMLINKS where the kernel has it (Linux 5.6), else an O_NOFOLLOW walk one component
 * at a time, which refuses the same paths. FSBENCH_NO_OPENAT2=1 takes the walk even where
 * openat2 exists, so that the tests exercise it too.
 */
#ifndef FSBENCH_SAFE_OPEN_H
#define FSBENCH_SAFE_OPEN_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline int fsb_openat2(int dirfd, const char *path, int flags, unsigned long long resolve) {
  const char *off = getenv("FSBENCH_NO_OPENAT2");
  if (off && !strcmp(off, "1")) {
    errno = ENOSYS;
    return -1;
  }
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = (unsigned long long)flags;
  how.resolve = resolve;
  return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

/* openat2 missing (an old kernel) or refused by a seccomp profile that does not know it. */
static inline bool fsb_no_openat2(int e) { return e == ENOSYS || e == EPERM; }

/*
 * Opens REL (relative: no leading /, no "." or ".." components) beneath DIRFD as a directory,
 * following no symlink in any component. -1 with errno on failure (ELOOP or ENOTDIR for a
 * symlink met on the way).
 */
static inline int fsb_open_dir_beneath(int dirfd, const char *rel) {
  int fd = fsb_openat2(dirfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (fd >= 0 || !fsb_no_openat2(errno)) return fd;
  char buf[PATH_MAX];
  if (strlen(rel) >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(buf, rel);
  int cur = dup(dirfd);
  if (cur < 0) return -1;
  char *save = NULL;
  for (char *part = strtok_r(buf, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
    if (!strcmp(part, ".") || !strcmp(part, "..")) {
      close(cur);
      errno = EXDEV;
      return -1;
    }
    int next = openat(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(cur);
    if (next < 0) {
      errno = e;
      return -1;
    }
    cur = next;
  }
  return cur;
}

/* Opens the absolute directory PATH from /, following no symlink in any component. */
static inline int fsb_open_dir_nofollow(const char *path) {
  if (path[0] != '/') {
    errno = EINVAL;
    return -1;
  }
  int fd = fsb_openat2(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
  if (fd >= 0 || !fsb_no_openat2(errno)) return fd;
  int slash = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (slash < 0) return -1;
  const char *rel = path;
  while (*rel == '/') rel++;
  if (*rel == '\0') return slash;
  fd = fsb_open_dir_beneath(slash, rel);
  int e = errno;
  close(slash);
  errno = e;
  return fd;
}

#endif
