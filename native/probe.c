/*
 * fsbench native probe: the measuring side of the inotify workload, and a little system info.
 *
 *   probe sysinfo
 *       One JSON line: cache sizes, page size, online and allowed CPUs.
 *
 *   probe inotify --dir DIR --files F --writers W --duration-ms MS --write-bytes B
 *                 --buffer-bytes N --watch files|dir --mode concurrent|drain
 *                 --reader full|bare|none [--pin 0|1] [--reader-nice N]
 *                 [--drain-timeout-ms MS] [--sample-every K]
 *                 [--backend inotify|fanotify] [--mark inode|dir|mount|filesystem]
 *                 [--report dfid-name|fid] [--unlimited-queue 0|1]
 *       W writer threads pwrite() B bytes at offset 0 of F files in DIR for MS milliseconds while
 *       (or, with --mode drain, after which) one reader thread drains an inotify instance with a
 *       read() buffer of N bytes. Prints one JSON line with counts, times, rusage and a
 *       write-to-event latency histogram (see print_result for the fields).
 *       --reader none creates the files, prints {"ready":true}, and starts writing after a line
 *       arrives on stdin, so that another program (fs.watch, @parcel/watcher) can do the watching.
 *       --backend fanotify reads a fanotify group instead (FAN_CLASS_NOTIF, FAN_MODIFY, events
 *       identified by file handle: --report fid is FAN_REPORT_FID, dfid-name FAN_REPORT_DFID_NAME)
 *       marked per --mark: each file and marker (inode), DIR with FAN_EVENT_ON_CHILD (dir), the
 *       mount of DIR (mount) or its filesystem (filesystem); --watch is then ignored, and
 *       --unlimited-queue 1 asks for FAN_UNLIMITED_QUEUE. Events are attributed to the workload's
 *       files by comparing file handles (name_to_handle_at at setup) or, with dfid-name, the
 *       directory's handle and the name; FAN_MODIFY records of any other file are foreignEvents.
 *       A kernel or filesystem that refuses the group or a mark is error code UNSUPPORTED, with
 *       the call and errno in the message.
 *
 * Times (CLOCK_MONOTONIC, ns): t0 is taken just before the writers are released; writeNs ends when
 * the last writer finished its last write; drainNs starts there in concurrent mode and when the
 * reader starts emptying the queue in drain mode, and ends when read() says EAGAIN (or at
 * --drain-timeout-ms, drainTimedOut 1); elapsedNs ends with the drain. firstEventNs/lastEventNs
 * are when the first/last read() with records returned, relative to t0.
 * Counts: records are all structs read; events the IN_MODIFY records of workload files (the bare
 * reader does not classify: its events are records minus overflows); markerEvents those of marker
 * files; overflows the IN_Q_OVERFLOW records. Latency percentiles are the upper end of their
 * histogram bucket, never above the exact maximum. readerNice/readerCpu are null when nothing was
 * applied (no --reader-nice, no --pin, or --reader none).
 * fanotify only: foreignEvents counts FAN_MODIFY records of files that are neither workload files
 * nor markers (a mount or filesystem mark sees the whole filesystem); maxQueueDepth is the largest
 * queue length seen by FIONREAD, sampled before a read at most every QUEUE_SAMPLE_NS (and so
 * before the drain's first read), null without samples (inotify: its FIONREAD walks the queue too
 * and the raw inotify path is left exactly as it was); queueSamples how many were taken.
 *
 * stdout carries JSON only: the optional ready line, then exactly one result or error line.
 * Errors are {"error":{"code":...,"message":...}}; exit status 2 for usage errors, 3 for runtime
 * errors, 0 on success.
 *
 * Memory does not grow with the number of events: the read buffer (malloc'd, never memset, so
 * peak RSS shows what reading actually touches), one fd per file, and small per-writer arrays.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
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

#include "safe-open.h"

/* name_to_handle_at flag (Linux 6.5) for a handle that only identifies, as fanotify reports it;
 * it also works on filesystems that cannot decode handles. Older kernels say EINVAL. */
#ifndef AT_HANDLE_FID
#define AT_HANDLE_FID 0x200
#endif

#define EXIT_USAGE 2
#define EXIT_RUNTIME 3

/* sizeof(struct inotify_event) + NAME_MAX + 1: the kernel refuses smaller read() buffers (EINVAL). */
#define MIN_BUFFER_BYTES ((long long)sizeof(struct inotify_event) + NAME_MAX + 1)
/* The largest FAN_REPORT_DFID_NAME record: metadata, then one info record (header and fsid, a
 * struct file_handle with up to MAX_HANDLE_SZ bytes, a name of up to NAME_MAX bytes and its NUL),
 * padded to 4 bytes. A read() buffer smaller than the next record fails with EINVAL. */
#define MIN_FAN_DFID_BUFFER_BYTES                                                                                        \
  ((long long)FAN_EVENT_METADATA_LEN +                                                                                  \
   (((long long)sizeof(struct fanotify_event_info_fid) + (long long)sizeof(struct file_handle) + MAX_HANDLE_SZ +        \
     NAME_MAX + 1 + 3) / 4 * 4))
/* FIONREAD on a fanotify group walks its whole queue under the lock the writers take to queue,
 * so it is sampled, at most this often. */
#define QUEUE_SAMPLE_NS 10000000u
#define MAX_BUFFER_BYTES (64LL * 1024 * 1024)
#define MAX_FILES 65536
#define MAX_WRITERS 1024
#define MAX_WRITE_BYTES (1024LL * 1024)
#define MAX_MS (24LL * 3600 * 1000)
#define THREAD_STACK_BYTES (256 * 1024)
#define CACHE_LINE 64

/* ------------------------------------------------------------------------------------------ */
/* Output helpers                                                                               */

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': fputs("\\\"", f); break;
      case '\\': fputs("\\\\", f); break;
      case '\n': fputs("\\n", f); break;
      case '\r': fputs("\\r", f); break;
      case '\t': fputs("\\t", f); break;
      default:
        if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
  }
  fputc('"', f);
}

static void print_error(const char *code, const char *message) {
  fputs("{\"error\":{\"code\":", stdout);
  json_string(stdout, code);
  fputs(",\"message\":", stdout);
  json_string(stdout, message);
  fputs("}}\n", stdout);
  fflush(stdout);
}

__attribute__((format(printf, 3, 4), noreturn)) static void die(int status, const char *code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  print_error(code, msg);
  exit(status);
}

#define usage(...) die(EXIT_USAGE, "USAGE", __VA_ARGS__)

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t tv_ns(struct timeval tv) { return (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u; }

/* The allowed CPU set of this thread, grown until the kernel accepts its size. */
static cpu_set_t *allowed_cpus(size_t *setsize, int *count) {
  for (int n = 1024; n <= (1 << 22); n *= 2) {
    cpu_set_t *set = CPU_ALLOC(n);
    size_t size = CPU_ALLOC_SIZE(n);
    if (!set) return NULL;
    if (sched_getaffinity(0, size, set) == 0) {
      *setsize = size;
      *count = CPU_COUNT_S(size, set);
      return set;
    }
    CPU_FREE(set);
    if (errno != EINVAL) return NULL;
  }
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* sysinfo                                                                                      */

static void print_cache(const char *name, long v) {
  if (v > 0) printf("\"%s\":%ld,", name, v);
  else printf("\"%s\":null,", name);
}

static int cmd_sysinfo(int argc, char **argv) {
  (void)argv;
  if (argc != 0) usage("'probe sysinfo' takes no arguments");
  size_t setsize = 0;
  int allowed = 0;
  cpu_set_t *set = allowed_cpus(&setsize, &allowed);
  if (!set) die(EXIT_RUNTIME, "PROBE_FAILED", "sched_getaffinity failed: %s", strerror(errno));
  CPU_FREE(set);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  fputc('{', stdout);
  print_cache("l1dBytes", sysconf(_SC_LEVEL1_DCACHE_SIZE));
  print_cache("l2Bytes", sysconf(_SC_LEVEL2_CACHE_SIZE));
  print_cache("l3Bytes", sysconf(_SC_LEVEL3_CACHE_SIZE));
  printf("\"pageSize\":%ld,\"onlineCpus\":%ld,\"allowedCpus\":%d}\n", sysconf(_SC_PAGESIZE), online > 0 ? online : 0, allowed);
  fflush(stdout);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Latency histogram: log-linear, exact below 64 ns, then 32 linear sub-buckets per power of two */
/* (relative bucket width <= 1/32), up to 2^48 ns; larger values land in the last bucket (the   */
/* maximum is kept exactly anyway).                                                             */

#define HIST_EXACT 64
#define HIST_SUB_BITS 5
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_MIN_EXP 6  /* log2(HIST_EXACT) */
#define HIST_MAX_EXP 47 /* values < 2^48 ns (~78 h) are bucketed exactly */
#define HIST_BUCKETS (HIST_EXACT + (HIST_MAX_EXP - HIST_MIN_EXP + 1) * HIST_SUB)

static inline unsigned hist_index(uint64_t v) {
  if (v < HIST_EXACT) return (unsigned)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v);
  if (e > HIST_MAX_EXP) return HIST_BUCKETS - 1;
  unsigned sub = (unsigned)(v >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1);
  return HIST_EXACT + (e - HIST_MIN_EXP) * HIST_SUB + sub;
}

static void hist_bounds(unsigned i, uint64_t *lo, uint64_t *hi) {
  if (i < HIST_EXACT) {
    *lo = i;
    *hi = (uint64_t)i + 1;
    return;
  }
  unsigned e = (i - HIST_EXACT) / HIST_SUB + HIST_MIN_EXP;
  uint64_t sub = (i - HIST_EXACT) % HIST_SUB;
  *lo = (HIST_SUB + sub) << (e - HIST_SUB_BITS);
  *hi = (HIST_SUB + sub + 1) << (e - HIST_SUB_BITS);
}

struct histogram {
  uint64_t count[HIST_BUCKETS];
  uint64_t samples;
  uint64_t max;
};

static inline void hist_add(struct histogram *h, uint64_t v) {
  h->count[hist_index(v)]++;
  h->samples++;
  if (v > h->max) h->max = v;
}

/* HDR-style value at a percentile: the highest value equivalent to the bucket where the
 * cumulative count first reaches ceil(p/100 * samples); clamped to the exact maximum. */
static uint64_t hist_percentile(const struct histogram *h, unsigned p) {
  uint64_t rank = (h->samples * p + 99) / 100;
  if (rank == 0) rank = 1;
  uint64_t cum = 0;
  for (unsigned i = 0; i < HIST_BUCKETS; i++) {
    cum += h->count[i];
    if (cum >= rank) {
      uint64_t lo, hi;
      hist_bounds(i, &lo, &hi);
      return hi - 1 < h->max ? hi - 1 : h->max;
    }
  }
  return h->max;
}

/* ------------------------------------------------------------------------------------------ */
/* inotify run state                                                                            */

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

/* One per writer, each on its own cache line: the writer's outstanding marker timestamp. */
struct slot {
  _Alignas(CACHE_LINE) _Atomic uint64_t stamp;
};

struct writer {
  _Alignas(CACHE_LINE) pthread_t thread;
  unsigned index;
  int cpu; /* -1: not pinned */
  uint64_t writes, marker_writes;
  uint64_t stopped_at; /* CLOCK_MONOTONIC ns after the last write */
  uint64_t user_ns, sys_ns;
};

struct reader_result {
  uint64_t records, events, marker_events, overflows, reads, bytes_read, max_records_per_read;
  uint64_t foreign_events, queue_samples, queue_max; /* fanotify */
  uint64_t first_event, last_event; /* absolute CLOCK_MONOTONIC ns, 0 = none */
  uint64_t drain_start, end;
  int drain_timed_out;
  uint64_t user_ns, sys_ns, nvcsw, nivcsw;
};

/* Values in the wd map: >= 0 a workload file index, MARK_BASE - w the marker of writer w. */
#define WD_UNKNOWN (-1)
#define MARK_BASE (-2)

static struct {
  struct options o;
  int *fds;         /* F workload files */
  int *mark_fds;    /* W marker files, or NULL */
  int ifd;          /* inotify instance or fanotify group, -1 without a reader */
  int32_t *wd_map;  /* indexed by wd (watch files) */
  size_t wd_map_len;
  char *rbuf;       /* read buffer, buffer_bytes */
  const char *wbuf; /* what writers write */
  struct slot *slots;
  struct writer *writers;
  struct histogram hist;
  struct reader_result rr;
  int reader_cpu;   /* -1: not pinned */
  uint64_t t0, t_w;

  /* Start gate on raw futexes, so that all threads leave it at once (a mutex-based gate hands the
   * lock from thread to thread, and with busy writers the last one out, maybe the reader, can wait
   * for hundreds of scheduling rounds). */
  _Atomic int ready; /* threads that finished their setup */
  _Atomic int gate;  /* 0 closed, 1 go, 2 abort */
  _Atomic int running; /* writers still writing; the last one out wakes main (a futex too: joining
                        * busy threads one by one would again cost a scheduling round each) */

  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC; broadcast on errors, drain and drain_acked */
  bool drain_acked;
  _Atomic int stop;  /* writers: stop writing */
  _Atomic int drain; /* reader: writers are joined, empty the queue */

  bool failed; /* first runtime error wins */
  char err_code[32];
  char err_msg[1024];
} g = {.ifd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

__attribute__((format(printf, 2, 3))) static void fail(const char *code, const char *fmt, ...) {
  pthread_mutex_lock(&g.mu);
  if (!g.failed) {
    g.failed = true;
    snprintf(g.err_code, sizeof g.err_code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g.err_msg, sizeof g.err_msg, fmt, ap);
    va_end(ap);
  }
  atomic_store(&g.stop, 1);
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
}

static void futex_wait(_Atomic int *addr, int val) { syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0); }
static void futex_wake_all(_Atomic int *addr) { syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }

/* Each thread: report ready, then wait for the start (or an abort). Returns false on abort. */
static bool start_gate(void) {
  atomic_fetch_add(&g.ready, 1);
  futex_wake_all(&g.ready);
  int s;
  while ((s = atomic_load(&g.gate)) == 0) futex_wait(&g.gate, 0);
  return s == 1;
}

static bool pin_self(int cpu) {
  if (cpu < 0) return true;
  cpu_set_t *set = CPU_ALLOC((size_t)cpu + 1);
  if (!set) return false;
  size_t size = CPU_ALLOC_SIZE((size_t)cpu + 1);
  CPU_ZERO_S(size, set);
  CPU_SET_S((size_t)cpu, size, set);
  int rc = pthread_setaffinity_np(pthread_self(), size, set);
  CPU_FREE(set);
  if (rc != 0) {
    fail("PIN_UNAVAILABLE", "cannot pin a thread to CPU %d: %s; run with pin off", cpu, strerror(rc));
    return false;
  }
  return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Writers                                                                                      */

static void *writer_main(void *arg) {
  struct writer *w = arg;
  const unsigned W = (unsigned)g.o.writers, F = (unsigned)g.o.files;
  const size_t B = (size_t)g.o.write_bytes;
  const char *buf = g.wbuf;
  const int *fds = g.fds;
  /* F >= W: files w, w+W, w+2W, ...; W > F: file w % F alone. */
  const unsigned first = w->index % F, stride = F >= W ? W : F;
  const bool sampling = g.mark_fds != NULL;
  const uint64_t K = sampling ? (uint64_t)g.o.sample_every : 0;
  _Atomic uint64_t *stamp = sampling ? &g.slots[w->index].stamp : NULL;
  const int mark_fd = sampling ? g.mark_fds[w->index] : -1;
  uint64_t writes = 0, marker_writes = 0, until = K;

  bool ok = pin_self(w->cpu);
  bool started = start_gate();
  if (started && ok) {
    for (;;) {
      for (unsigned f = first; f < F; f += stride) {
        if (atomic_load_explicit(&g.stop, memory_order_relaxed)) goto done;
        if (pwrite(fds[f], buf, B, 0) < 0) {
          fail("PROBE_FAILED", "pwrite to file.%05u failed: %s", f, strerror(errno));
          goto done;
        }
        writes++;
        if (sampling && --until == 0) {
          until = K;
          if (atomic_load_explicit(stamp, memory_order_acquire) == 0) {
            atomic_store_explicit(stamp, now_ns(), memory_order_release);
            if (pwrite(mark_fd, buf, 1, 0) < 0) {
              fail("PROBE_FAILED", "pwrite to mark.%04u failed: %s", w->index, strerror(errno));
              goto done;
            }
            marker_writes++;
          }
        }
      }
    }
  }
done:
  w->stopped_at = now_ns();
  w->writes = writes;
  w->marker_writes = marker_writes;
  if (started && atomic_fetch_sub(&g.running, 1) == 1) futex_wake_all(&g.running);
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) {
    w->user_ns = tv_ns(ru.ru_utime);
    w->sys_ns = tv_ns(ru.ru_stime);
  }
  return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Reader                                                                                       */

struct rcount {
  uint64_t records, events, marker_events, overflows;
  uint64_t foreign;   /* fanotify: FAN_MODIFY records of other files */
  bool malformed;     /* fanotify: a record that does not parse; the read fails */
};

/* "file.NNNNN" -> index, "mark.NNNN" -> MARK_BASE - index, anything else WD_UNKNOWN. `n` holds
 * `avail` bytes: the name, its NUL and padding. */
static inline int32_t classify_chars(const char *n, size_t avail) {
  if (avail >= 11 && memcmp(n, "file.", 5) == 0) {
    unsigned v = 0;
    for (int i = 5; i < 10; i++) {
      unsigned d = (unsigned)(n[i] - '0');
      if (d > 9) return WD_UNKNOWN;
      v = v * 10 + d;
    }
    return n[10] == '\0' && v < (unsigned)g.o.files ? (int32_t)v : WD_UNKNOWN;
  }
  if (avail >= 10 && memcmp(n, "mark.", 5) == 0 && g.mark_fds) {
    unsigned v = 0;
    for (int i = 5; i < 9; i++) {
      unsigned d = (unsigned)(n[i] - '0');
      if (d > 9) return WD_UNKNOWN;
      v = v * 10 + d;
    }
    return n[9] == '\0' && v < (unsigned)g.o.writers ? MARK_BASE - (int32_t)v : WD_UNKNOWN;
  }
  return WD_UNKNOWN;
}

/* inotify pads names with NULs to a multiple of 16 bytes, so len is 0 or at least 16. */
static inline int32_t classify_name(const struct inotify_event *ev) { return classify_chars(ev->name, ev->len); }

/* The measuring walk: classify every record; returns the number of records. */
static inline __attribute__((always_inline)) uint64_t walk_full(const char *p, const char *end, struct rcount *c,
                                                                 bool dir_watch, bool sampling) {
  uint64_t records = 0;
  const int32_t *map = g.wd_map;
  const size_t map_len = g.wd_map_len;
  while (p < end) {
    const struct inotify_event *ev = (const struct inotify_event *)(const void *)p;
    p += sizeof *ev + ev->len;
    records++;
    const uint32_t mask = ev->mask;
    if (__builtin_expect(mask & IN_Q_OVERFLOW, 0)) {
      c->overflows++;
      /* The markers' events may be among the lost ones: let every writer stamp afresh. */
      if (sampling)
        for (unsigned w = 0; w < (unsigned)g.o.writers; w++) atomic_store_explicit(&g.slots[w].stamp, 0, memory_order_relaxed);
      continue;
    }
    if (!(mask & IN_MODIFY)) continue;
    int32_t who;
    if (dir_watch) who = classify_name(ev);
    else who = (size_t)(uint32_t)ev->wd < map_len ? map[ev->wd] : WD_UNKNOWN;
    if (who >= 0) {
      c->events++;
    } else if (sampling && who <= MARK_BASE) {
      c->marker_events++;
      uint64_t t = atomic_exchange_explicit(&g.slots[MARK_BASE - who].stamp, 0, memory_order_acq_rel);
      if (t != 0) {
        uint64_t now = now_ns();
        hist_add(&g.hist, now > t ? now - t : 0);
      }
    }
  }
  c->records += records;
  return records;
}

/* The overhead baseline: step over the records, count them (and overflows, from the same line). */
static inline __attribute__((always_inline)) uint64_t walk_bare(const char *p, const char *end, struct rcount *c) {
  uint64_t records = 0, overflows = 0;
  while (p < end) {
    const struct inotify_event *ev = (const struct inotify_event *)(const void *)p;
    p += sizeof *ev + ev->len;
    records++;
    overflows += (ev->mask & IN_Q_OVERFLOW) != 0;
  }
  c->records += records;
  c->overflows += overflows;
  c->events += records - overflows;
  return records;
}

/* ------------------------------------------------------------------------------------------ */
/* fanotify: which file an event belongs to                                                     */

/* fanotify identifies objects by file handle, and a mount or filesystem mark reports every file
 * of the filesystem. With FAN_REPORT_FID, the handle of each workload file and marker (from
 * name_to_handle_at at setup) is looked up in an open-addressing table; with FAN_REPORT_DFID_NAME
 * the directory's handle is compared and the name classified as with an inotify directory watch.
 * All marks lie on one filesystem (inode and dir marks on the run's own objects, mount and
 * filesystem marks on DIR's), so the handle alone names a file: the fsid is not compared. */
struct fid_slot {
  uint32_t off; /* into fan.pool */
  uint32_t len;
  int32_t type;
  int32_t who; /* WD_UNKNOWN: empty */
};

static struct {
  unsigned char *pool; /* (files + markers) * MAX_HANDLE_SZ: bounded by the option limits */
  size_t pool_len, pool_cap;
  struct fid_slot *slots;
  size_t mask;
  unsigned char dir_handle[MAX_HANDLE_SZ];
  uint32_t dir_len;
  int32_t dir_type;
  int handle_flags;
} fan;

static inline uint64_t fid_hash(int32_t type, const unsigned char *b, size_t len) {
  uint64_t h = 1469598103934665603u ^ (uint32_t)type; /* FNV-1a */
  h *= 1099511628211u;
  for (size_t i = 0; i < len; i++) {
    h ^= b[i];
    h *= 1099511628211u;
  }
  return h;
}

static inline int32_t fid_lookup(int32_t type, const unsigned char *b, size_t len) {
  for (size_t i = (size_t)fid_hash(type, b, len) & fan.mask;; i = (i + 1) & fan.mask) {
    const struct fid_slot *e = &fan.slots[i];
    if (e->who == WD_UNKNOWN) return WD_UNKNOWN;
    if (e->len == len && e->type == type && memcmp(fan.pool + e->off, b, len) == 0) return e->who;
  }
}

/* FAN_REPORT_FID: the FID record's handle. FAN_REPORT_DFID_NAME: the DFID_NAME record's directory
 * handle must be DIR's, and its name says which file. Anything else, or a record that does not
 * parse, is WD_UNKNOWN (foreign). `p` is the record, `m` its metadata (validated). */
static inline __attribute__((always_inline)) int32_t fan_who(const char *p, const struct fanotify_event_metadata *m,
                                                             bool named) {
  const size_t fixed = sizeof(struct fanotify_event_info_fid) + sizeof(struct file_handle);
  const uint8_t want = named ? FAN_EVENT_INFO_TYPE_DFID_NAME : FAN_EVENT_INFO_TYPE_FID;
  const char *q = p + m->metadata_len, *end = p + m->event_len;
  while ((size_t)(end - q) >= sizeof(struct fanotify_event_info_header)) {
    struct fanotify_event_info_header h;
    memcpy(&h, q, sizeof h);
    if (h.len < sizeof h || h.len > (size_t)(end - q)) return WD_UNKNOWN;
    if (h.info_type == want) {
      if (h.len < fixed) return WD_UNKNOWN;
      struct file_handle fh;
      memcpy(&fh, q + sizeof(struct fanotify_event_info_fid), sizeof fh);
      if (fh.handle_bytes > h.len - fixed) return WD_UNKNOWN;
      const unsigned char *hb = (const unsigned char *)q + fixed;
      if (!named) return fid_lookup(fh.handle_type, hb, fh.handle_bytes);
      if (fh.handle_bytes != fan.dir_len || fh.handle_type != fan.dir_type || memcmp(hb, fan.dir_handle, fh.handle_bytes) != 0)
        return WD_UNKNOWN;
      return classify_chars((const char *)hb + fh.handle_bytes, h.len - fixed - fh.handle_bytes);
    }
    q += h.len;
  }
  return WD_UNKNOWN;
}

/* Records are only 4-byte aligned (the kernel's FANOTIFY_EVENT_ALIGN) and the metadata holds a
 * u64, so it is copied out rather than cast. False for a record that does not parse. */
static inline bool fan_meta(const char *p, const char *end, struct fanotify_event_metadata *m) {
  if ((size_t)(end - p) < FAN_EVENT_METADATA_LEN) return false;
  memcpy(m, p, FAN_EVENT_METADATA_LEN);
  return m->vers == FANOTIFY_METADATA_VERSION && m->event_len >= FAN_EVENT_METADATA_LEN &&
         m->event_len <= (size_t)(end - p) && m->metadata_len >= FAN_EVENT_METADATA_LEN && m->metadata_len <= m->event_len;
}

/* The measuring walk for fanotify: attribute every FAN_MODIFY record, count overflows. */
static inline __attribute__((always_inline)) uint64_t walk_fan_full(const char *p, const char *end, struct rcount *c,
                                                                     bool named, bool sampling) {
  uint64_t records = 0;
  while (p < end) {
    struct fanotify_event_metadata m;
    if (!fan_meta(p, end, &m)) {
      c->malformed = true;
      break;
    }
    records++;
    /* A group reporting file handles sends FAN_NOFD; an fd would otherwise leak. */
    if (__builtin_expect(m.fd >= 0, 0)) close(m.fd);
    if (__builtin_expect(m.mask & FAN_Q_OVERFLOW, 0)) {
      c->overflows++;
      if (sampling)
        for (unsigned w = 0; w < (unsigned)g.o.writers; w++) atomic_store_explicit(&g.slots[w].stamp, 0, memory_order_relaxed);
    } else if (m.mask & FAN_MODIFY) {
      int32_t who = fan_who(p, &m, named);
      if (who >= 0) {
        c->events++;
      } else if (who <= MARK_BASE) {
        c->marker_events++;
        if (sampling) {
          uint64_t t = atomic_exchange_explicit(&g.slots[MARK_BASE - who].stamp, 0, memory_order_acq_rel);
          if (t != 0) {
            uint64_t now = now_ns();
            hist_add(&g.hist, now > t ? now - t : 0);
          }
        }
      } else {
        c->foreign++;
      }
    }
    p += m.event_len;
  }
  c->records += records;
  return records;
}

/* The overhead baseline for fanotify: step over the records, count them and the overflows. */
static inline __attribute__((always_inline)) uint64_t walk_fan_bare(const char *p, const char *end, struct rcount *c) {
  uint64_t records = 0, overflows = 0;
  while (p < end) {
    struct fanotify_event_metadata m;
    if (!fan_meta(p, end, &m)) {
      c->malformed = true;
      break;
    }
    records++;
    if (__builtin_expect(m.fd >= 0, 0)) close(m.fd);
    overflows += (m.mask & FAN_Q_OVERFLOW) != 0;
    p += m.event_len;
  }
  c->records += records;
  c->overflows += overflows;
  c->events += records - overflows;
  return records;
}

struct rstate {
  struct rcount c;
  uint64_t reads, bytes, max_recs, first, last;
  uint64_t queue_due, queue_samples, queue_max; /* fanotify FIONREAD samples (bytes) */
};

/* One read(); returns 1 with data, 0 when the caller should re-check (EINTR), -1 at EAGAIN, -2 on error.
 * `fan`: a fanotify group; `named`: an inotify directory watch, or fanotify's FAN_REPORT_DFID_NAME. */
static inline __attribute__((always_inline)) int read_once(struct rstate *s, enum reader_kind kind, bool fan, bool named,
                                                           bool sampling, uint64_t *when) {
  /* Queue depth before the read, paced by the last read's clock (no extra clock_gettime). */
  if (fan && kind == READER_FULL && s->last >= s->queue_due) {
    int queued = 0;
    if (ioctl(g.ifd, FIONREAD, &queued) != 0) {
      fail("PROBE_FAILED", "ioctl(FIONREAD) on the fanotify descriptor failed: %s", strerror(errno));
      return -2;
    }
    s->queue_samples++;
    if (queued > 0 && (uint64_t)queued > s->queue_max) s->queue_max = (uint64_t)queued;
    s->queue_due = s->last + QUEUE_SAMPLE_NS;
  }
  ssize_t n = read(g.ifd, g.rbuf, (size_t)g.o.buffer_bytes);
  if (n <= 0) {
    if (n < 0 && errno == EINTR) return 0;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -1;
    if (fan && n < 0 && errno == EINVAL)
      fail("PROBE_FAILED", "read() of %lld bytes from the fanotify descriptor failed: %s; the next queued event is larger "
           "than the read buffer: use a larger bufferBytes", g.o.buffer_bytes, strerror(errno));
    else
      fail("PROBE_FAILED", "read from the %s descriptor %s", fan ? "fanotify" : "inotify", n == 0 ? "returned 0 bytes" : strerror(errno));
    return -2;
  }
  uint64_t t = now_ns();
  *when = t;
  if (s->first == 0) s->first = t;
  s->last = t;
  s->reads++;
  s->bytes += (uint64_t)n;
  uint64_t recs;
  if (fan) {
    recs = kind == READER_FULL ? walk_fan_full(g.rbuf, g.rbuf + n, &s->c, named, sampling)
                               : walk_fan_bare(g.rbuf, g.rbuf + n, &s->c);
    if (s->c.malformed) {
      fail("PROBE_FAILED", "read() returned a fanotify record that does not parse (metadata version %d expected)",
           FANOTIFY_METADATA_VERSION);
      return -2;
    }
  } else {
    recs = kind == READER_FULL ? walk_full(g.rbuf, g.rbuf + n, &s->c, named, sampling)
                               : walk_bare(g.rbuf, g.rbuf + n, &s->c);
  }
  if (recs > s->max_recs) s->max_recs = recs;
  return 1;
}

static void reader_loop(struct rstate *s, enum reader_kind kind, bool fan, bool named, bool sampling) {
  uint64_t when = 0;
  if (g.o.mode == MODE_CONCURRENT) {
    for (;;) {
      if (atomic_load_explicit(&g.drain, memory_order_acquire)) break;
      int r = read_once(s, kind, fan, named, sampling, &when);
      if (r == -2) return;
      if (r == -1) { /* cannot happen on a blocking fd */
        fail("PROBE_FAILED", "read from the blocking %s descriptor returned EAGAIN", fan ? "fanotify" : "inotify");
        return;
      }
    }
    g.rr.drain_start = g.t_w;
  } else {
    pthread_mutex_lock(&g.mu);
    while (!atomic_load(&g.drain)) pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    g.rr.drain_start = now_ns();
  }

  /* Writers are joined: everything they caused is queued already (fsnotify queues inside
   * write()), so read until the queue is empty. */
  int fl = fcntl(g.ifd, F_GETFL);
  if (fl < 0 || fcntl(g.ifd, F_SETFL, fl | O_NONBLOCK) < 0) {
    fail("PROBE_FAILED", "cannot make the %s descriptor non-blocking: %s", fan ? "fanotify" : "inotify", strerror(errno));
    return;
  }
  pthread_mutex_lock(&g.mu);
  g.drain_acked = true;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);

  const uint64_t limit = (uint64_t)g.o.drain_timeout_ms * 1000000u;
  for (;;) {
    int r = read_once(s, kind, fan, named, sampling, &when);
    if (r == -1 || r == -2) break;
    if (r == 1 && when - g.rr.drain_start >= limit && when > g.rr.drain_start) {
      g.rr.drain_timed_out = 1;
      break;
    }
  }
}

static void *reader_main(void *arg) {
  (void)arg;
  bool ok = pin_self(g.reader_cpu);
  if (ok && g.o.nice_set && setpriority(PRIO_PROCESS, (id_t)gettid(), g.o.nice) != 0) {
    int e = errno;
    if (e == EACCES || e == EPERM)
      fail("PRIVILEGE_MISSING", "cannot set the reader's nice value to %d: %s; a negative nice value needs CAP_SYS_NICE "
           "(run as root or raise RLIMIT_NICE), or use a reader nice value >= 0", g.o.nice, strerror(e));
    else fail("PROBE_FAILED", "setpriority(%d) for the reader failed: %s", g.o.nice, strerror(e));
    ok = false;
  }
  struct rstate s = {0};
  if (start_gate() && ok) {
    const bool dir_watch = g.o.watch == WATCH_DIR, sampling = g.mark_fds != NULL;
    const bool dfid = g.o.report == REPORT_DFID_NAME;
    /* Separate instantiations so the per-record loop carries no run-time mode checks. */
    if (g.o.backend == BACKEND_FANOTIFY) {
      if (g.o.reader == READER_BARE) reader_loop(&s, READER_BARE, true, dfid, false);
      else if (dfid && sampling) reader_loop(&s, READER_FULL, true, true, true);
      else if (dfid) reader_loop(&s, READER_FULL, true, true, false);
      else if (sampling) reader_loop(&s, READER_FULL, true, false, true);
      else reader_loop(&s, READER_FULL, true, false, false);
    } else if (g.o.reader == READER_BARE) reader_loop(&s, READER_BARE, false, dir_watch, false);
    else if (dir_watch && sampling) reader_loop(&s, READER_FULL, false, true, true);
    else if (dir_watch) reader_loop(&s, READER_FULL, false, true, false);
    else if (sampling) reader_loop(&s, READER_FULL, false, false, true);
    else reader_loop(&s, READER_FULL, false, false, false);
  }
  g.rr.end = now_ns();
  g.rr.records = s.c.records;
  g.rr.events = s.c.events;
  g.rr.marker_events = s.c.marker_events;
  g.rr.overflows = s.c.overflows;
  g.rr.foreign_events = s.c.foreign;
  g.rr.queue_samples = s.queue_samples;
  g.rr.queue_max = s.queue_max;
  g.rr.reads = s.reads;
  g.rr.bytes_read = s.bytes;
  g.rr.max_records_per_read = s.max_recs;
  g.rr.first_event = s.first;
  g.rr.last_event = s.last;
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) {
    g.rr.user_ns = tv_ns(ru.ru_utime);
    g.rr.sys_ns = tv_ns(ru.ru_stime);
    g.rr.nvcsw = (uint64_t)ru.ru_nvcsw;
    g.rr.nivcsw = (uint64_t)ru.ru_nivcsw;
  }
  pthread_mutex_lock(&g.mu);
  g.drain_acked = true; /* also on errors, so main stops signalling */
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  return NULL;
}

static void on_sigusr1(int sig) { (void)sig; }

/* ------------------------------------------------------------------------------------------ */
/* Option parsing                                                                               */

static long long parse_int(const char *name, const char *v, long long lo, long long hi) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end != '\0') usage("%s must be an integer, got '%s'", name, v);
  if (x < lo || x > hi) usage("%s must be between %lld and %lld, got %lld", name, lo, hi, x);
  return x;
}

static int parse_enum(const char *name, const char *v, const char *const *values, const char *allowed) {
  for (int i = 0; values[i]; i++)
    if (strcmp(v, values[i]) == 0) return i;
  usage("%s must be %s, got '%s'", name, allowed, v);
}

static void parse_inotify_options(int argc, char **argv, struct options *o) {
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
        if (x < MIN_BUFFER_BYTES)
          usage("--buffer-bytes %lld is smaller than %lld, the smallest read() buffer the kernel accepts for inotify "
                "(sizeof(struct inotify_event) + NAME_MAX + 1); use at least %lld", x, MIN_BUFFER_BYTES, MIN_BUFFER_BYTES);
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

/* ------------------------------------------------------------------------------------------ */
/* Setup                                                                                        */

static long read_proc_long(const char *path) {
  FILE *f = fopen(path, "re");
  long v = -1;
  if (f) {
    if (fscanf(f, "%ld", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

static rlim_t raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur != rl.rlim_max) {
    struct rlimit want = {rl.rlim_max, rl.rlim_max};
    if (want.rlim_max == RLIM_INFINITY) {
      long nr_open = read_proc_long("/proc/sys/fs/nr_open");
      if (nr_open > 0) want.rlim_cur = (rlim_t)nr_open;
    }
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl.rlim_cur = want.rlim_cur;
  }
  return rl.rlim_cur;
}

/*
 * Creates NAME in DFD, never through a symlink: O_EXCL|O_NOFOLLOW, so a `file.00000 -> /etc/passwd`
 * left in the directory is refused rather than truncated. A file that exists already (a probe run
 * again in the same directory) is reused only when it is a regular file of this user with one
 * link, so neither a symlink nor a hard link to someone else's file is ever written.
 */
static int create_file(int dfd, const char *name, rlim_t nofile) {
  int fd = openat(dfd, name, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) return fd;
  int e = errno;
  if (e == EEXIST) {
    fd = openat(dfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1 && ftruncate(fd, 0) == 0)
      return fd;
    die(EXIT_RUNTIME, "TARGET_UNUSABLE", "%s in %s exists and is not a regular file of this user with a single link "
        "(a symlink or a hard link planted there?): refusing to write to it; give the probe a fresh directory", name, g.o.dir);
  }
  if (e == EMFILE)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "cannot open %s in %s: %s; the open-files limit (RLIMIT_NOFILE, %llu after "
        "raising the soft limit to the hard one) is too small for %lld files and %lld writers: raise 'ulimit -Hn' or use fewer files",
        name, g.o.dir, strerror(e), (unsigned long long)nofile, g.o.files, g.o.writers);
  if (e == ENFILE)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "cannot open %s in %s: %s; the system-wide limit fs.file-max is reached: raise it or use fewer files",
        name, g.o.dir, strerror(e));
  die(EXIT_RUNTIME, "TARGET_UNUSABLE", "cannot create %s in %s: %s; use a writable directory with free space and inodes",
      name, g.o.dir, strerror(e));
}

static void map_wd(int wd, int32_t who) {
  if (wd < 0) return;
  if ((size_t)wd >= g.wd_map_len) {
    size_t n = g.wd_map_len ? g.wd_map_len : 1024;
    while (n <= (size_t)wd) n *= 2;
    int32_t *m = realloc(g.wd_map, n * sizeof *m);
    if (!m) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory for the watch map");
    for (size_t i = g.wd_map_len; i < n; i++) m[i] = WD_UNKNOWN;
    g.wd_map = m;
    g.wd_map_len = n;
  }
  g.wd_map[wd] = who;
}

static void add_watch(const char *path, int32_t who, long long nwatches) {
  int wd = inotify_add_watch(g.ifd, path, IN_MODIFY);
  if (wd >= 0) {
    map_wd(wd, who);
    return;
  }
  int e = errno;
  if (e == ENOSPC) {
    long max = read_proc_long("/proc/sys/fs/inotify/max_user_watches");
    die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_add_watch(%s): %s; fs.inotify.max_user_watches (%ld) is too small for %lld files "
        "(this run needs %lld watches on top of those the user already holds): raise fs.inotify.max_user_watches, "
        "use fewer files, or watch the directory",
        path, strerror(e), max, g.o.files, nwatches);
  }
  die(EXIT_RUNTIME, "PROBE_FAILED", "inotify_add_watch(%s) failed: %s", path, strerror(e));
}

static void setup_inotify(rlim_t nofile, long long open_fds) {
  g.ifd = inotify_init1(IN_CLOEXEC);
  if (g.ifd < 0) {
    int e = errno;
    if (e == EMFILE && nofile != 0 && (unsigned long long)open_fds + 1 >= (unsigned long long)nofile)
      die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_init1: %s; the open-files limit (RLIMIT_NOFILE, %llu) is too small for %lld files: "
          "raise 'ulimit -Hn' or use fewer files", strerror(e), (unsigned long long)nofile, g.o.files);
    if (e == EMFILE)
      die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_init1: %s; fs.inotify.max_user_instances (%ld) is reached for this user: "
          "raise fs.inotify.max_user_instances or stop other inotify users",
          strerror(e), read_proc_long("/proc/sys/fs/inotify/max_user_instances"));
    if (e == ENFILE)
      die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_init1: %s; the system-wide limit fs.file-max is reached", strerror(e));
    die(EXIT_RUNTIME, "PROBE_FAILED", "inotify_init1 failed: %s", strerror(e));
  }
  size_t dlen = strlen(g.o.dir);
  char *path = malloc(dlen + 32);
  if (!path) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory");
  if (g.o.watch == WATCH_DIR) {
    int wd = inotify_add_watch(g.ifd, g.o.dir, IN_MODIFY);
    if (wd < 0) {
      int e = errno;
      if (e == ENOSPC)
        die(EXIT_RUNTIME, "LIMIT_REACHED", "inotify_add_watch(%s): %s; fs.inotify.max_user_watches (%ld) has no room left for "
            "one more watch: raise fs.inotify.max_user_watches", g.o.dir, strerror(e),
            read_proc_long("/proc/sys/fs/inotify/max_user_watches"));
      die(EXIT_RUNTIME, "TARGET_UNUSABLE", "cannot watch %s: %s", g.o.dir, strerror(e));
    }
  } else {
    long long nwatches = g.o.files + (g.mark_fds ? g.o.writers : 0);
    for (long long i = 0; i < g.o.files; i++) {
      snprintf(path, dlen + 32, "%s/file.%05lld", g.o.dir, i);
      add_watch(path, (int32_t)i, nwatches);
    }
    if (g.mark_fds)
      for (long long w = 0; w < g.o.writers; w++) {
        snprintf(path, dlen + 32, "%s/mark.%04lld", g.o.dir, w);
        add_watch(path, MARK_BASE - (int32_t)w, nwatches);
      }
  }
  free(path);
}

/* fanotify setup ----------------------------------------------------------------------------- */

static const char *errno_name(int e) {
  switch (e) {
    case EINVAL: return "EINVAL";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EXDEV: return "EXDEV";
    case ENODEV: return "ENODEV";
    case ENOSYS: return "ENOSYS";
    case ENOTDIR: return "ENOTDIR";
    case EPERM: return "EPERM";
    case ENOSPC: return "ENOSPC";
    case EMFILE: return "EMFILE";
    default: return "errno";
  }
}

/* Why the kernel may have said no, for the message of an UNSUPPORTED refusal. */
static const char *refusal_hint(int e) {
  switch (e) {
    case EOPNOTSUPP:
      return "the filesystem cannot encode file handles, or (for mount and filesystem marks) cannot decode them";
    case ENODEV: return "the filesystem has no fsid to report events with";
    case EXDEV: return "the directory lies in a subvolume whose fsid differs from its filesystem's";
    case ENOSYS: return "this kernel is built without fanotify (CONFIG_FANOTIFY)";
    default: return "this kernel does not accept this combination of fanotify flags";
  }
}

static bool refusal(int e) { return e == EINVAL || e == EOPNOTSUPP || e == EXDEV || e == ENODEV || e == ENOSYS || e == ENOTDIR; }

__attribute__((noreturn)) static void refused(const char *call, int e) {
  die(EXIT_RUNTIME, "UNSUPPORTED", "the kernel refused %s: %s (%s): %s", call, strerror(e), errno_name(e), refusal_hint(e));
}

static const char *const MARK_FLAG_NAMES[] = {"FAN_MARK_INODE", "FAN_MARK_INODE|FAN_MARK_ONLYDIR", "FAN_MARK_MOUNT",
                                               "FAN_MARK_FILESYSTEM"};

static void fan_mark(unsigned flags, uint64_t mask, const char *path, long long nmarks) {
  if (fanotify_mark(g.ifd, FAN_MARK_ADD | flags, mask, AT_FDCWD, path) == 0) return;
  int e = errno;
  char call[PATH_MAX + 160];
  snprintf(call, sizeof call, "fanotify_mark(FAN_MARK_ADD|%s, FAN_MODIFY%s) on %s", MARK_FLAG_NAMES[g.o.mark],
           mask & FAN_EVENT_ON_CHILD ? "|FAN_EVENT_ON_CHILD" : "", path);
  if (e == EPERM || e == EACCES)
    die(EXIT_RUNTIME, "PRIVILEGE_MISSING", "%s: %s; mount and filesystem marks need CAP_SYS_ADMIN (run as root), inode "
        "and dir marks read access to the file", call, strerror(e));
  if (e == ENOSPC)
    die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; fs.fanotify.max_user_marks (%ld) is too small for this run's %lld marks on "
        "top of those the user already holds: raise it, use fewer files, or use mark: dir", call, strerror(e),
        read_proc_long("/proc/sys/fs/fanotify/max_user_marks"), nmarks);
  if (refusal(e)) refused(call, e);
  die(EXIT_RUNTIME, "PROBE_FAILED", "%s failed: %s", call, strerror(e));
}

/* The handle fanotify reports for `path`, into fh (room for MAX_HANDLE_SZ bytes). */
static void handle_of(const char *path, struct file_handle *fh) {
  for (;;) {
    int mount_id;
    fh->handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(AT_FDCWD, path, fh, &mount_id, fan.handle_flags) == 0) return;
    int e = errno;
    /* Before Linux 6.5 there is no AT_HANDLE_FID; fanotify's handles are then the plain ones. */
    if (e == EINVAL && (fan.handle_flags & AT_HANDLE_FID)) {
      fan.handle_flags &= ~AT_HANDLE_FID;
      continue;
    }
    char call[PATH_MAX + 64];
    snprintf(call, sizeof call, "name_to_handle_at(%s)", path);
    if (e == EOPNOTSUPP) refused(call, e);
    die(EXIT_RUNTIME, "PROBE_FAILED", "%s failed: %s", call, strerror(e));
  }
}

static void fid_insert(const struct file_handle *fh, int32_t who) {
  if (fan.pool_len + fh->handle_bytes > fan.pool_cap)
    die(EXIT_RUNTIME, "PROBE_FAILED", "the file handle table is full (a handle above MAX_HANDLE_SZ?)");
  size_t i = (size_t)fid_hash(fh->handle_type, fh->f_handle, fh->handle_bytes) & fan.mask;
  for (;; i = (i + 1) & fan.mask) {
    struct fid_slot *e = &fan.slots[i];
    if (e->who == WD_UNKNOWN) break;
    if (e->len == fh->handle_bytes && e->type == fh->handle_type && memcmp(fan.pool + e->off, fh->f_handle, e->len) == 0)
      die(EXIT_RUNTIME, "PROBE_FAILED", "two workload files have the same file handle; events cannot be told apart");
  }
  memcpy(fan.pool + fan.pool_len, fh->f_handle, fh->handle_bytes);
  fan.slots[i] = (struct fid_slot){.off = (uint32_t)fan.pool_len, .len = fh->handle_bytes, .type = fh->handle_type, .who = who};
  fan.pool_len += fh->handle_bytes;
}

/* The fanotify group, its marks, and what identifies the workload's files in its events. The
 * queue limit (fs.fanotify.max_queued_events) is read by fanotify_init, so the caller sets it
 * before the probe starts. */
static void setup_fanotify(rlim_t nofile, long long open_fds) {
  const struct options *o = &g.o;
  const bool fid = o->report == REPORT_FID;
  unsigned flags = FAN_CLASS_NOTIF | FAN_CLOEXEC | (fid ? FAN_REPORT_FID : FAN_REPORT_DFID_NAME) |
                   (o->unlimited_queue ? FAN_UNLIMITED_QUEUE : 0u);
  char call[160];
  snprintf(call, sizeof call, "fanotify_init(FAN_CLASS_NOTIF|FAN_CLOEXEC|%s%s)", fid ? "FAN_REPORT_FID" : "FAN_REPORT_DFID_NAME",
           o->unlimited_queue ? "|FAN_UNLIMITED_QUEUE" : "");
  /* event_f_flags only matter for groups that open an fd per event; these report handles. */
  g.ifd = fanotify_init(flags, (unsigned)(O_RDONLY | O_CLOEXEC | O_LARGEFILE));
  if (g.ifd < 0) {
    int e = errno;
    if (e == EPERM)
      die(EXIT_RUNTIME, "PRIVILEGE_MISSING", "%s: %s; fanotify with an unlimited queue, or with mount and filesystem marks, "
          "needs CAP_SYS_ADMIN: run as root", call, strerror(e));
    if (e == EMFILE && nofile != 0 && (unsigned long long)open_fds + 1 >= (unsigned long long)nofile)
      die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; the open-files limit (RLIMIT_NOFILE, %llu) is too small for %lld files: "
          "raise 'ulimit -Hn' or use fewer files", call, strerror(e), (unsigned long long)nofile, o->files);
    if (e == EMFILE)
      die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; fs.fanotify.max_user_groups (%ld) is reached for this user: raise it or "
          "stop other fanotify users", call, strerror(e), read_proc_long("/proc/sys/fs/fanotify/max_user_groups"));
    if (e == ENFILE) die(EXIT_RUNTIME, "LIMIT_REACHED", "%s: %s; the system-wide limit fs.file-max is reached", call, strerror(e));
    if (refusal(e)) refused(call, e);
    die(EXIT_RUNTIME, "PROBE_FAILED", "%s failed: %s", call, strerror(e));
  }

  const long long markers = g.mark_fds ? o->writers : 0;
  size_t dlen = strlen(o->dir);
  char *path = malloc(dlen + 32);
  struct file_handle *fh = malloc(sizeof *fh + MAX_HANDLE_SZ);
  if (!path || !fh) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory");
  switch (o->mark) {
    case MARK_INODE:
      for (long long i = 0; i < o->files + markers; i++) {
        if (i < o->files) snprintf(path, dlen + 32, "%s/file.%05lld", o->dir, i);
        else snprintf(path, dlen + 32, "%s/mark.%04lld", o->dir, i - o->files);
        fan_mark(FAN_MARK_INODE, FAN_MODIFY, path, o->files + markers);
      }
      break;
    case MARK_DIR: fan_mark(FAN_MARK_INODE | FAN_MARK_ONLYDIR, FAN_MODIFY | FAN_EVENT_ON_CHILD, o->dir, 1); break;
    case MARK_MOUNT: fan_mark(FAN_MARK_MOUNT, FAN_MODIFY, o->dir, 1); break;
    case MARK_FILESYSTEM: fan_mark(FAN_MARK_FILESYSTEM, FAN_MODIFY, o->dir, 1); break;
  }

  fan.handle_flags = AT_HANDLE_FID;
  if (fid) {
    const size_t n = (size_t)(o->files + markers);
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2; /* load factor <= 1/2; n <= MAX_FILES + MAX_WRITERS */
    fan.slots = malloc(cap * sizeof *fan.slots);
    fan.pool_cap = n * MAX_HANDLE_SZ;
    fan.pool = malloc(fan.pool_cap);
    if (!fan.slots || !fan.pool) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory for the file handle table");
    fan.mask = cap - 1;
    for (size_t i = 0; i < cap; i++) fan.slots[i].who = WD_UNKNOWN;
    for (long long i = 0; i < o->files + markers; i++) {
      if (i < o->files) snprintf(path, dlen + 32, "%s/file.%05lld", o->dir, i);
      else snprintf(path, dlen + 32, "%s/mark.%04lld", o->dir, i - o->files);
      handle_of(path, fh);
      fid_insert(fh, i < o->files ? (int32_t)i : MARK_BASE - (int32_t)(i - o->files));
    }
  } else {
    handle_of(o->dir, fh);
    memcpy(fan.dir_handle, fh->f_handle, fh->handle_bytes);
    fan.dir_len = fh->handle_bytes;
    fan.dir_type = fh->handle_type;
  }
  free(fh);
  free(path);
}

/* ------------------------------------------------------------------------------------------ */
/* Result                                                                                       */

static void print_opt_ns(const char *name, uint64_t abs, uint64_t t0) {
  if (abs == 0) printf("\"%s\":null,", name);
  else printf("\"%s\":%" PRIu64 ",", name, abs > t0 ? abs - t0 : 0);
}

static void print_result(uint64_t t_end) {
  const struct reader_result *r = &g.rr;
  uint64_t writes = 0, marker_writes = 0, wuser = 0, wsys = 0;
  for (long long i = 0; i < g.o.writers; i++) {
    writes += g.writers[i].writes;
    marker_writes += g.writers[i].marker_writes;
    wuser += g.writers[i].user_ns;
    wsys += g.writers[i].sys_ns;
  }
  struct rusage self;
  uint64_t max_rss = getrusage(RUSAGE_SELF, &self) == 0 ? (uint64_t)self.ru_maxrss * 1024u : 0;
  uint64_t drain_ns = r->drain_start && t_end > r->drain_start ? t_end - r->drain_start : 0;

  printf("{\"writes\":%" PRIu64 ",\"markerWrites\":%" PRIu64 ",\"records\":%" PRIu64 ",\"events\":%" PRIu64
         ",\"markerEvents\":%" PRIu64 ",\"overflows\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"bytesRead\":%" PRIu64
         ",\"maxRecordsPerRead\":%" PRIu64 ",",
         writes, marker_writes, r->records, r->events, r->marker_events, r->overflows, r->reads, r->bytes_read,
         r->max_records_per_read);
  printf("\"writeNs\":%" PRIu64 ",\"elapsedNs\":%" PRIu64 ",\"drainNs\":%" PRIu64 ",\"drainTimedOut\":%d,", g.t_w - g.t0,
         t_end - g.t0, drain_ns, r->drain_timed_out);
  /* The kernel's fanotify FIONREAD counts FAN_EVENT_METADATA_LEN per queued event, whatever info
   * records the event carries: bytes / FAN_EVENT_METADATA_LEN is the number of queued events. */
  printf("\"foreignEvents\":%" PRIu64 ",\"queueSamples\":%" PRIu64 ",", r->foreign_events, r->queue_samples);
  if (r->queue_samples) printf("\"maxQueueDepth\":%" PRIu64 ",", r->queue_max / FAN_EVENT_METADATA_LEN);
  else fputs("\"maxQueueDepth\":null,", stdout);
  print_opt_ns("firstEventNs", r->first_event, g.t0);
  print_opt_ns("lastEventNs", r->last_event, g.t0);
  printf("\"reader\":{\"userNs\":%" PRIu64 ",\"sysNs\":%" PRIu64 ",\"voluntaryCtxSwitches\":%" PRIu64
         ",\"involuntaryCtxSwitches\":%" PRIu64 "},",
         r->user_ns, r->sys_ns, r->nvcsw, r->nivcsw);
  printf("\"writers\":{\"userNs\":%" PRIu64 ",\"sysNs\":%" PRIu64 "},", wuser, wsys);

  const struct histogram *h = &g.hist;
  printf("\"latency\":{\"samples\":%" PRIu64 ",", h->samples);
  if (h->samples) {
    printf("\"p50Ns\":%" PRIu64 ",\"p90Ns\":%" PRIu64 ",\"p99Ns\":%" PRIu64 ",\"maxNs\":%" PRIu64 ",", hist_percentile(h, 50),
           hist_percentile(h, 90), hist_percentile(h, 99), h->max);
  } else {
    fputs("\"p50Ns\":null,\"p90Ns\":null,\"p99Ns\":null,\"maxNs\":null,", stdout);
  }
  fputs("\"buckets\":[", stdout);
  bool first = true;
  for (unsigned i = 0; i < HIST_BUCKETS; i++) {
    if (!h->count[i]) continue;
    uint64_t lo, hi;
    hist_bounds(i, &lo, &hi);
    printf("%s[%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", lo, hi, h->count[i]);
    first = false;
  }
  fputs("]},", stdout);
  printf("\"maxRssBytes\":%" PRIu64 ",\"pinned\":%s,", max_rss, g.o.pin ? "true" : "false");
  if (g.o.reader != READER_NONE && g.o.nice_set) printf("\"readerNice\":%d,", g.o.nice);
  else fputs("\"readerNice\":null,", stdout);
  if (g.o.reader != READER_NONE && g.reader_cpu >= 0) printf("\"readerCpu\":%d}\n", g.reader_cpu);
  else fputs("\"readerCpu\":null}\n", stdout);
  fflush(stdout);
}

/* ------------------------------------------------------------------------------------------ */
/* inotify command                                                                              */

static void wait_ready_line(void) {
  fputs("{\"ready\":true}\n", stdout);
  fflush(stdout);
  char line[256];
  if (!fgets(line, sizeof line, stdin))
    die(EXIT_RUNTIME, "PROBE_FAILED", "stdin closed before the start line; with --reader none the probe writes only after "
        "a line arrives on stdin");
}

static int cmd_inotify(int argc, char **argv) {
  parse_inotify_options(argc, argv, &g.o);
  struct options *o = &g.o;
  const bool has_reader = o->reader != READER_NONE;
  const bool sampling = o->reader == READER_FULL && o->sample_every > 0;

  rlim_t nofile = raise_nofile();

  /*
   * No symlink in any component, and a directory this user owns: a run directory swapped for a
   * symlink (or for someone else's directory) after fsbench made it is refused, never written in.
   */
  int dfd = fsb_open_dir_nofollow(o->dir);
  if (dfd < 0) {
    int e = errno;
    if (e == ELOOP || e == ENOTDIR)
      die(EXIT_RUNTIME, "TARGET_UNUSABLE", "cannot open the directory %s: %s; --dir must name an existing directory reached "
          "without symlinks (is it, or a directory on its path, a symlink?)", o->dir, strerror(e));
    die(EXIT_RUNTIME, "TARGET_UNUSABLE", "cannot open the directory %s: %s; --dir must name an existing directory",
        o->dir, strerror(e));
  }
  struct stat dst;
  if (fstat(dfd, &dst) < 0) die(EXIT_RUNTIME, "TARGET_UNUSABLE", "cannot stat the directory %s: %s", o->dir, strerror(errno));
  if (dst.st_uid != geteuid())
    die(EXIT_RUNTIME, "TARGET_UNUSABLE", "the directory %s is owned by uid %u, not by this process's uid %u: refusing to create "
        "files in a directory someone else controls", o->dir, (unsigned)dst.st_uid, (unsigned)geteuid());

  /* CPU placement. */
  g.reader_cpu = -1;
  int *writer_cpu = calloc((size_t)o->writers, sizeof *writer_cpu);
  if (!writer_cpu) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory");
  for (long long w = 0; w < o->writers; w++) writer_cpu[w] = -1;
  if (o->pin) {
    size_t setsize;
    int count;
    cpu_set_t *set = allowed_cpus(&setsize, &count);
    if (!set) die(EXIT_RUNTIME, "PROBE_FAILED", "sched_getaffinity failed: %s", strerror(errno));
    if (count < 2)
      die(EXIT_RUNTIME, "PIN_UNAVAILABLE", "pinning needs at least 2 allowed CPUs (one for the reader, the rest for the "
          "writers) but this process may run on %d; run with pin off or allow more CPUs", count);
    int *cpus = malloc((size_t)count * sizeof *cpus);
    if (!cpus) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory");
    int n = 0;
    for (size_t c = 0; c < setsize * 8 && n < count; c++)
      if (CPU_ISSET_S(c, setsize, set)) cpus[n++] = (int)c;
    CPU_FREE(set);
    g.reader_cpu = cpus[0];
    for (long long w = 0; w < o->writers; w++) writer_cpu[w] = cpus[1 + w % (n - 1)];
    free(cpus);
  }

  /* Files (kept open) and markers. */
  g.fds = malloc((size_t)o->files * sizeof *g.fds);
  if (!g.fds) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory");
  char name[32];
  for (long long i = 0; i < o->files; i++) {
    snprintf(name, sizeof name, "file.%05lld", i);
    g.fds[i] = create_file(dfd, name, nofile);
  }
  if (sampling) {
    g.mark_fds = malloc((size_t)o->writers * sizeof *g.mark_fds);
    g.slots = aligned_alloc(CACHE_LINE, (size_t)o->writers * sizeof *g.slots);
    if (!g.mark_fds || !g.slots) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory");
    for (long long w = 0; w < o->writers; w++) {
      snprintf(name, sizeof name, "mark.%04lld", w);
      g.mark_fds[w] = create_file(dfd, name, nofile);
      atomic_init(&g.slots[w].stamp, 0);
    }
  }
  close(dfd);

  if (has_reader && o->backend == BACKEND_FANOTIFY) {
    setup_fanotify(nofile, o->files + (sampling ? o->writers : 0) + 3);
    g.rbuf = malloc((size_t)o->buffer_bytes); /* not touched here: RSS shows what read() fills */
    if (!g.rbuf) die(EXIT_RUNTIME, "PROBE_FAILED", "cannot allocate a %lld-byte read buffer", o->buffer_bytes);
  } else if (has_reader) {
    setup_inotify(nofile, o->files + (sampling ? o->writers : 0) + 3);
    g.rbuf = malloc((size_t)o->buffer_bytes); /* not touched here: RSS shows what read() fills */
    if (!g.rbuf) die(EXIT_RUNTIME, "PROBE_FAILED", "cannot allocate a %lld-byte read buffer", o->buffer_bytes);
  }
  char *wbuf = malloc((size_t)o->write_bytes);
  if (!wbuf) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory for a %lld-byte write buffer", o->write_bytes);
  memset(wbuf, 'x', (size_t)o->write_bytes);
  g.wbuf = wbuf;

  g.writers = aligned_alloc(CACHE_LINE, (size_t)o->writers * sizeof *g.writers);
  if (!g.writers) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory");
  memset(g.writers, 0, (size_t)o->writers * sizeof *g.writers);

  /* A SIGUSR1 that interrupts the reader's blocking read(): no SA_RESTART. */
  struct sigaction sa = {0};
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, NULL) != 0) die(EXIT_RUNTIME, "PROBE_FAILED", "sigaction failed: %s", strerror(errno));

  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g.cv, &ca);
  pthread_condattr_destroy(&ca);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, THREAD_STACK_BYTES);

  /* Threads: they set themselves up and wait at the start gate. */
  pthread_t reader;
  int created = 0, rc = 0;
  bool reader_created = false;
  if (has_reader) {
    rc = pthread_create(&reader, &attr, reader_main, NULL);
    if (rc == 0) reader_created = true;
  }
  for (long long w = 0; rc == 0 && w < o->writers; w++) {
    g.writers[w].index = (unsigned)w;
    g.writers[w].cpu = writer_cpu[w];
    rc = pthread_create(&g.writers[w].thread, &attr, writer_main, &g.writers[w]);
    if (rc == 0) created++;
  }
  pthread_attr_destroy(&attr);
  free(writer_cpu);
  const int nthreads = created + (reader_created ? 1 : 0);
  if (rc != 0) fail("PROBE_FAILED", "cannot start thread %d: %s; use fewer writers or raise the thread limits", nthreads + 1, strerror(rc));

  for (int r; (r = atomic_load(&g.ready)) < nthreads;) futex_wait(&g.ready, r);
  pthread_mutex_lock(&g.mu);
  bool setup_failed = g.failed;
  pthread_mutex_unlock(&g.mu);

  if (!setup_failed && !has_reader) wait_ready_line();

  /* Start: t0 is taken before any thread may write. */
  atomic_store(&g.running, created);
  g.t0 = now_ns();
  atomic_store(&g.gate, setup_failed ? 2 : 1);
  futex_wake_all(&g.gate);
  pthread_mutex_lock(&g.mu);
  if (!setup_failed) {
    uint64_t deadline = g.t0 + (uint64_t)o->duration_ms * 1000000u;
    struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000u), .tv_nsec = (long)(deadline % 1000000000u)};
    while (!g.failed && pthread_cond_timedwait(&g.cv, &g.mu, &ts) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&g.mu);
  atomic_store(&g.stop, 1);
  /* t_w: when the last writer finished its last write. */
  g.t_w = g.t0;
  if (!setup_failed) {
    for (int r; (r = atomic_load(&g.running)) > 0;) futex_wait(&g.running, r);
    for (int w = 0; w < created; w++)
      if (g.writers[w].stopped_at > g.t_w) g.t_w = g.writers[w].stopped_at;
  }

  /* Drain: wake the reader (condition variable in drain mode, EINTR in a blocked read()) until it
   * says it is draining. */
  uint64_t t_end = g.t_w;
  if (reader_created) {
    pthread_mutex_lock(&g.mu);
    atomic_store(&g.drain, 1);
    pthread_cond_broadcast(&g.cv);
    while (!g.drain_acked) {
      pthread_kill(reader, SIGUSR1);
      uint64_t until = now_ns() + 10000000u;
      struct timespec ts = {.tv_sec = (time_t)(until / 1000000000u), .tv_nsec = (long)(until % 1000000000u)};
      while (!g.drain_acked && pthread_cond_timedwait(&g.cv, &g.mu, &ts) != ETIMEDOUT) {
      }
    }
    pthread_mutex_unlock(&g.mu);
  }
  for (int w = 0; w < created; w++) pthread_join(g.writers[w].thread, NULL);
  if (reader_created) {
    pthread_join(reader, NULL);
    t_end = g.rr.end > g.t_w ? g.rr.end : g.t_w;
  }

  if (g.failed) {
    print_error(g.err_code, g.err_msg);
    return EXIT_RUNTIME;
  }
  print_result(t_end);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) usage("usage: probe sysinfo | probe inotify --dir DIR --files F --writers W --duration-ms MS --write-bytes B "
                      "--buffer-bytes N --watch files|dir --mode concurrent|drain --reader full|bare|none [--pin 0|1] "
                      "[--reader-nice N] [--drain-timeout-ms MS] [--sample-every K] [--backend inotify|fanotify] "
                      "[--mark inode|dir|mount|filesystem] [--report dfid-name|fid] [--unlimited-queue 0|1]");
  if (strcmp(argv[1], "sysinfo") == 0) return cmd_sysinfo(argc - 2, argv + 2);
  if (strcmp(argv[1], "inotify") == 0) return cmd_inotify(argc - 2, argv + 2);
  usage("unknown subcommand '%s'; use 'sysinfo' or 'inotify'", argv[1]);
}
