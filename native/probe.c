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
 *       W writer threads pwrite() B bytes at offset 0 of F files in DIR for MS milliseconds while
 *       (or, with --mode drain, after which) one reader thread drains an inotify instance with a
 *       read() buffer of N bytes. Prints one JSON line with counts, times, rusage and a
 *       write-to-event latency histogram (see print_result for the fields).
 *       --reader none creates the files, prints {"ready":true}, and starts writing after a line
 *       arrives on stdin, so that another program (fs.watch, @parcel/watcher) can do the watching.
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
#include <sys/resource.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_RUNTIME 3

/* sizeof(struct inotify_event) + NAME_MAX + 1: the kernel refuses smaller read() buffers (EINVAL). */
#define MIN_BUFFER_BYTES ((long long)sizeof(struct inotify_event) + NAME_MAX + 1)
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

struct options {
  const char *dir;
  long long files, writers, duration_ms, write_bytes, buffer_bytes;
  enum watch_kind watch;
  enum run_mode mode;
  enum reader_kind reader;
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
  int ifd;          /* inotify instance, -1 without a reader */
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
};

/* "file.NNNNN" -> index, "mark.NNNN" -> MARK_BASE - index, anything else WD_UNKNOWN. */
static inline int32_t classify_name(const struct inotify_event *ev) {
  const char *n = ev->name;
  if (ev->len < 10) return WD_UNKNOWN;
  if (memcmp(n, "file.", 5) == 0) {
    unsigned v = 0;
    for (int i = 5; i < 10; i++) {
      unsigned d = (unsigned)(n[i] - '0');
      if (d > 9) return WD_UNKNOWN;
      v = v * 10 + d;
    }
    return n[10] == '\0' && v < (unsigned)g.o.files ? (int32_t)v : WD_UNKNOWN;
  }
  if (memcmp(n, "mark.", 5) == 0 && g.mark_fds) {
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

struct rstate {
  struct rcount c;
  uint64_t reads, bytes, max_recs, first, last;
};

/* One read(); returns 1 with data, 0 when the caller should re-check (EINTR), -1 at EAGAIN, -2 on error. */
static inline __attribute__((always_inline)) int read_once(struct rstate *s, enum reader_kind kind, bool dir_watch,
                                                           bool sampling, uint64_t *when) {
  ssize_t n = read(g.ifd, g.rbuf, (size_t)g.o.buffer_bytes);
  if (n <= 0) {
    if (n < 0 && errno == EINTR) return 0;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -1;
    fail("PROBE_FAILED", "read from the inotify descriptor %s", n == 0 ? "returned 0 bytes" : strerror(errno));
    return -2;
  }
  uint64_t t = now_ns();
  *when = t;
  if (s->first == 0) s->first = t;
  s->last = t;
  s->reads++;
  s->bytes += (uint64_t)n;
  uint64_t recs = kind == READER_FULL ? walk_full(g.rbuf, g.rbuf + n, &s->c, dir_watch, sampling)
                                      : walk_bare(g.rbuf, g.rbuf + n, &s->c);
  if (recs > s->max_recs) s->max_recs = recs;
  return 1;
}

static void reader_loop(struct rstate *s, enum reader_kind kind, bool dir_watch, bool sampling) {
  uint64_t when = 0;
  if (g.o.mode == MODE_CONCURRENT) {
    for (;;) {
      if (atomic_load_explicit(&g.drain, memory_order_acquire)) break;
      int r = read_once(s, kind, dir_watch, sampling, &when);
      if (r == -2) return;
      if (r == -1) { /* cannot happen on a blocking fd */
        fail("PROBE_FAILED", "read from the blocking inotify descriptor returned EAGAIN");
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
    fail("PROBE_FAILED", "cannot make the inotify descriptor non-blocking: %s", strerror(errno));
    return;
  }
  pthread_mutex_lock(&g.mu);
  g.drain_acked = true;
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);

  const uint64_t limit = (uint64_t)g.o.drain_timeout_ms * 1000000u;
  for (;;) {
    int r = read_once(s, kind, dir_watch, sampling, &when);
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
    /* Separate instantiations so the per-record loop carries no run-time mode checks. */
    if (g.o.reader == READER_BARE) reader_loop(&s, READER_BARE, dir_watch, false);
    else if (dir_watch && sampling) reader_loop(&s, READER_FULL, true, true);
    else if (dir_watch) reader_loop(&s, READER_FULL, true, false);
    else if (sampling) reader_loop(&s, READER_FULL, false, true);
    else reader_loop(&s, READER_FULL, false, false);
  }
  g.rr.end = now_ns();
  g.rr.records = s.c.records;
  g.rr.events = s.c.events;
  g.rr.marker_events = s.c.marker_events;
  g.rr.overflows = s.c.overflows;
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
                                      "--reader-nice", "--drain-timeout-ms", "--sample-every", NULL};
  enum { N_REQUIRED = 9, N_OPTIONS = 13 };
  bool seen[N_OPTIONS] = {false};
  static const char *const watch_v[] = {"files", "dir", NULL};
  static const char *const mode_v[] = {"concurrent", "drain", NULL};
  static const char *const reader_v[] = {"full", "bare", "none", NULL};

  *o = (struct options){.drain_timeout_ms = 10000, .sample_every = 256};
  for (int i = 0; i < argc; i += 2) {
    int k = -1;
    for (int j = 0; names[j]; j++)
      if (strcmp(argv[i], names[j]) == 0) k = j;
    if (k < 0) usage("unknown option '%s'; options are --dir --files --writers --duration-ms --write-bytes "
                     "--buffer-bytes --watch --mode --reader --pin --reader-nice --drain-timeout-ms --sample-every", argv[i]);
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
    }
  }
  for (int j = 0; j < N_REQUIRED; j++)
    if (!seen[j]) usage("%s is required", names[j]);
  if (o->reader == READER_NONE && o->mode == MODE_DRAIN)
    usage("--mode drain measures the raw read path and needs --reader full or bare, not none");
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

static int create_file(int dfd, const char *name, rlim_t nofile) {
  int fd = openat(dfd, name, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) return fd;
  int e = errno;
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

  int dfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    die(EXIT_RUNTIME, "TARGET_UNUSABLE", "cannot open the directory %s: %s; --dir must name an existing directory",
        o->dir, strerror(errno));

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

  if (has_reader) {
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
                      "[--reader-nice N] [--drain-timeout-ms MS] [--sample-every K]");
  if (strcmp(argv[1], "sysinfo") == 0) return cmd_sysinfo(argc - 2, argv + 2);
  if (strcmp(argv[1], "inotify") == 0) return cmd_inotify(argc - 2, argv + 2);
  usage("unknown subcommand '%s'; use 'sysinfo' or 'inotify'", argv[1]);
}
