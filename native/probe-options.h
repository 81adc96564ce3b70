/*
 * What a probe inotify run is asked to do (native/probe.c's head comment describes each option),
 * parsed and checked before anything is created: a bad option is error code USAGE with exit
 * status 2.
 */
#ifndef FSBENCH_PROBE_OPTIONS_H
#define FSBENCH_PROBE_OPTIONS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fanotify.h"
#include "inotify.h"
#include "output.h"

/* Upper bounds, so that every allocation a run makes (fds, the handle table, buffers) is bounded. */
#define MAX_BUFFER_BYTES (64LL * 1024 * 1024)
#define MAX_FILES 65536
#define MAX_WRITERS 1024
#define MAX_WRITE_BYTES (1024LL * 1024)
#define MAX_MS (24LL * 3600 * 1000)

#define usage(...) die(EXIT_USAGE, "USAGE", __VA_ARGS__)

enum watch_kind { WATCH_FILES, WATCH_DIR };
enum run_mode { MODE_CONCURRENT, MODE_DRAIN };
enum reader_kind { READER_FULL, READER_BARE, READER_NONE };
enum backend_kind { BACKEND_INOTIFY, BACKEND_FANOTIFY };
enum mark_kind { MARK_INODE, MARK_DIR, MARK_MOUNT, MARK_FILESYSTEM };
enum report_kind { REPORT_DFID_NAME, REPORT_FID };

struct options {
  const char *dir;
  long long files, writers, duration_ms, write_bytes, buffer_bytes;
  enum watch_kind watch;
  enum run_mode mode;
  enum reader_kind reader;
  enum backend_kind backend;
  enum mark_kind mark;
  enum report_kind report;
  bool unlimited_queue;
  bool pin;
  bool nice_set;
  int nice;
  long long drain_timeout_ms;
  long long sample_every;
};

static inline long long parse_int(const char *name, const char *v, long long lo, long long hi) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end != '\0') usage("%s must be an integer, got '%s'", name, v);
  if (x < lo || x > hi) usage("%s must be between %lld and %lld, got %lld", name, lo, hi, x);
  return x;
}

static inline int parse_enum(const char *name, const char *v, const char *const *values, const char *allowed) {
  for (int i = 0; values[i]; i++)
    if (strcmp(v, values[i]) == 0) return i;
  usage("%s must be %s, got '%s'", name, allowed, v);
}

static inline void parse_inotify_options(int argc, char **argv, struct options *o) {
  static const char *const names[] = {"--dir", "--files", "--writers", "--duration-ms", "--write-bytes",
                                      "--buffer-bytes", "--watch", "--mode", "--reader", "--pin",
                                      "--reader-nice", "--drain-timeout-ms", "--sample-every", "--backend", "--mark",
                                      "--report", "--unlimited-queue", NULL};
  enum { N_REQUIRED = 9, N_OPTIONS = 17, OPT_MARK = 14, OPT_REPORT = 15, OPT_UNLIMITED = 16 };
  bool seen[N_OPTIONS] = {false};
  static const char *const watch_v[] = {"files", "dir", NULL};
  static const char *const mode_v[] = {"concurrent", "drain", NULL};
  static const char *const reader_v[] = {"full", "bare", "none", NULL};
  static const char *const backend_v[] = {"inotify", "fanotify", NULL};
  static const char *const mark_v[] = {"inode", "dir", "mount", "filesystem", NULL};
  static const char *const report_v[] = {"dfid-name", "fid", NULL};

  *o = (struct options){.drain_timeout_ms = 10000, .sample_every = 256};
  for (int i = 0; i < argc; i += 2) {
    int k = -1;
    for (int j = 0; names[j]; j++)
      if (strcmp(argv[i], names[j]) == 0) k = j;
    if (k < 0) usage("unknown option '%s'; options are --dir --files --writers --duration-ms --write-bytes "
                     "--buffer-bytes --watch --mode --reader --pin --reader-nice --drain-timeout-ms --sample-every "
                     "--backend --mark --report --unlimited-queue", argv[i]);
    if (i + 1 >= argc) usage("%s needs a value", argv[i]);
    if (seen[k]) usage("%s is given twice", argv[i]);
    seen[k] = true;
    const char *v = argv[i + 1];
    switch (k) {
      case 0:
        if (!*v) usage("--dir must not be empty");
        o->dir = v;
        break;
      case 1: o->files = parse_int("--files", v, 1, MAX_FILES); break;
      case 2: o->writers = parse_int("--writers", v, 1, MAX_WRITERS); break;
      case 3: o->duration_ms = parse_int("--duration-ms", v, 1, MAX_MS); break;
      case 4: o->write_bytes = parse_int("--write-bytes", v, 1, MAX_WRITE_BYTES); break;
      case 5: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) usage("--buffer-bytes must be an integer, got '%s'", v);
        if (x < MIN_INOTIFY_BUFFER_BYTES)
          usage("--buffer-bytes %lld is smaller than %lld, the smallest read() buffer the kernel accepts for inotify "
                "(sizeof(struct inotify_event) + NAME_MAX + 1); use at least %lld", x, MIN_INOTIFY_BUFFER_BYTES, MIN_INOTIFY_BUFFER_BYTES);
        if (x > MAX_BUFFER_BYTES) usage("--buffer-bytes must be at most %lld, got %lld", MAX_BUFFER_BYTES, x);
        o->buffer_bytes = x;
        break;
      }
      case 6: o->watch = (enum watch_kind)parse_enum("--watch", v, watch_v, "files or dir"); break;
      case 7: o->mode = (enum run_mode)parse_enum("--mode", v, mode_v, "concurrent or drain"); break;
      case 8: o->reader = (enum reader_kind)parse_enum("--reader", v, reader_v, "full, bare or none"); break;
      case 9: o->pin = parse_int("--pin", v, 0, 1) == 1; break;
      case 10:
        o->nice = (int)parse_int("--reader-nice", v, -20, 19);
        o->nice_set = true;
        break;
      case 11: o->drain_timeout_ms = parse_int("--drain-timeout-ms", v, 1, MAX_MS); break;
      case 12: o->sample_every = parse_int("--sample-every", v, 0, INT32_MAX); break;
      case 13: o->backend = (enum backend_kind)parse_enum("--backend", v, backend_v, "inotify or fanotify"); break;
      case OPT_MARK: o->mark = (enum mark_kind)parse_enum("--mark", v, mark_v, "inode, dir, mount or filesystem"); break;
      case OPT_REPORT: o->report = (enum report_kind)parse_enum("--report", v, report_v, "dfid-name or fid"); break;
      case OPT_UNLIMITED: o->unlimited_queue = parse_int("--unlimited-queue", v, 0, 1) == 1; break;
    }
  }
  for (int j = 0; j < N_REQUIRED; j++)
    if (!seen[j]) usage("%s is required", names[j]);
  if (o->reader == READER_NONE && o->mode == MODE_DRAIN)
    usage("--mode drain measures the raw read path and needs --reader full or bare, not none");
  if (o->backend != BACKEND_FANOTIFY && (seen[OPT_MARK] || seen[OPT_REPORT] || seen[OPT_UNLIMITED]))
    usage("--mark, --report and --unlimited-queue configure the fanotify group: they need --backend fanotify");
  if (o->backend == BACKEND_FANOTIFY && o->reader == READER_NONE)
    usage("--backend fanotify is read by the probe's own reader: use --reader full or bare, not none");
  if (o->backend == BACKEND_FANOTIFY && o->report == REPORT_DFID_NAME && o->buffer_bytes < MIN_FAN_DFID_BUFFER_BYTES)
    usage("--buffer-bytes %lld is smaller than %lld, the largest FAN_REPORT_DFID_NAME record (metadata, a %d-byte file "
          "handle and a NAME_MAX name): read() would fail with EINVAL on such a record; use at least %lld",
          o->buffer_bytes, MIN_FAN_DFID_BUFFER_BYTES, MAX_HANDLE_SZ, MIN_FAN_DFID_BUFFER_BYTES);
}

#endif
