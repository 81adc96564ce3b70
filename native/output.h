/*
 * What the native programs share: how they follow their driver (its death, its SIGTERM), a
 * monotonic clock, JSON strings, the one error line their Node drivers parse,
 * {"error":{"code":..,"message":..}} (with "done":N for the programs whose drivers read how far
 * the work got), exit statuses, checked integer arguments, and the /proc/sys limits that error
 * messages name.
 */
#ifndef FSBENCH_OUTPUT_H
#define FSBENCH_OUTPUT_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_RUNTIME 3
/* A longer message is cut; the line stays valid JSON. */
#define ERROR_MESSAGE_BYTES 2048

static inline long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

/* The error line; `done` (NULL: left out) is how much work was finished before the error. */
static inline void print_error(const char *code, const char *message, const long *done) {
  printf("{\"error\":{\"code\":");
  json_string(code);
  printf(",\"message\":");
  json_string(message);
  if (done) printf(",\"done\":%ld", *done);
  printf("}}\n");
  fflush(stdout);
}

static inline _Noreturn void vdie(int status, const char *code, const long *done, const char *fmt, va_list ap) {
  char msg[ERROR_MESSAGE_BYTES];
  vsnprintf(msg, sizeof msg, fmt, ap);
  print_error(code, msg, done);
  exit(status);
}

/* For the programs whose drivers read no "done": the error line, then exit with STATUS. */
static inline _Noreturn void die(int status, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline _Noreturn void die(int status, const char *code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vdie(status, code, NULL, fmt, ap);
}

/* For the programs whose drivers read "done": the error line with it, then exit status 3. */
static inline _Noreturn void fail(const char *code, long done, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline _Noreturn void fail(const char *code, long done, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vdie(EXIT_RUNTIME, code, &done, fmt, ap);
}

/* The errno's name (ENOSPC ...) is the code, which the drivers map to fsbench's error codes. */
static inline _Noreturn void fail_errno(const char *what, const char *path, long done) {
  int e = errno;
  const char *name = strerrorname_np(e);
  fail(name ? name : "EUNKNOWN", done, "%s %s: %s", what, path, strerror(e));
}

static inline long number_arg(const char *name, const char *value) {
  char *end;
  errno = 0;
  long v = strtol(value, &end, 10);
  if (errno || *end || v < 0) fail("USAGE", 0, "%s must be a non-negative integer, got '%s'", name, value);
  return v;
}

/* A number from a /proc/sys file, for a message that names the limit; -1 where it cannot be read. */
static inline long read_proc_long(const char *path) {
  FILE *f = fopen(path, "re");
  long v = -1;
  if (f) {
    if (fscanf(f, "%ld", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

/* Set by SIGINT/SIGTERM (the driver's cancellation): the loops stop between two steps and report CANCELLED. */
static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
  (void)sig;
  stop_requested = 1;
}

/*
 * Ties the program to its driver: a parent killed with SIGKILL takes it along (it must not
 * outlive the run holding a mount busy), a parent already gone (PARENT, or -1 for none) stops it
 * at once, and SIGINT/SIGTERM set stop_requested.
 */
static inline void follow_parent(long parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent >= 0 && getppid() != (pid_t)parent) fail("CANCELLED", 0, "the parent process is gone");
  struct sigaction sa = {0};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

#endif
