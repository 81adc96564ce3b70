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

#include "fanotify.h"
#include "histogram.h"
#include "inotify.h"
#include "output.h"
#include "probe-options.h"
#include "safe-open.h"

#define THREAD_STACK_BYTES (256 * 1024)
#define CACHE_LINE 64

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
/* inotify run state                                                                            */

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

/* Who a record is about, in the wd map, the fanotify handle table and classify_chars alike: >= 0
 * a workload file index, MARK_BASE - w the marker of writer w, WD_UNKNOWN any other file. */
#define WD_UNKNOWN (-1)
_Static_assert(WD_UNKNOWN == INOTIFY_WHO_UNKNOWN && WD_UNKNOWN == FAN_WHO_UNKNOWN, "one value for any other file");
#define MARK_BASE (-2)

static struct {
  struct options o;
  int *fds;         /* F workload files */
  int *mark_fds;    /* W marker files, or NULL */
  int ifd;          /* inotify instance or fanotify group, -1 without a reader */
  struct wd_map wds;  /* by wd (watch files) */
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
  char err_msg[ERROR_MESSAGE_BYTES];
} g = {.ifd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

/* A runtime error in any thread: the first one wins and is the error line; every thread stops. */
__attribute__((format(printf, 2, 3))) static void fail_run(const char *code, const char *fmt, ...) {
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
    fail_run("PIN_UNAVAILABLE", "cannot pin a thread to CPU %d: %s; run with pin off", cpu, strerror(rc));
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
          fail_run("PROBE_FAILED", "pwrite to file.%05u failed: %s", f, strerror(errno));
          goto done;
        }
        writes++;
        if (sampling && --until == 0) {
          until = K;
          if (atomic_load_explicit(stamp, memory_order_acquire) == 0) {
            atomic_store_explicit(stamp, now_ns(), memory_order_release);
            if (pwrite(mark_fd, buf, 1, 0) < 0) {
              fail_run("PROBE_FAILED", "pwrite to mark.%04u failed: %s", w->index, strerror(errno));
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

/* After an overflow the markers' events may be among the lost ones: let every writer stamp afresh. */
static inline void clear_stamps(void) {
  for (unsigned w = 0; w < (unsigned)g.o.writers; w++) atomic_store_explicit(&g.slots[w].stamp, 0, memory_order_relaxed);
}

/* A modify record of WHO: a workload file's event, or a marker's, whose latency is sampled. False
 * for any other file. */
static inline __attribute__((always_inline)) bool count_modify(struct rcount *c, int32_t who, bool sampling) {
  if (who >= 0) {
    c->events++;
    return true;
  }
  if (!sampling || who > MARK_BASE) return false;
  c->marker_events++;
  uint64_t t = atomic_exchange_explicit(&g.slots[MARK_BASE - who].stamp, 0, memory_order_acq_rel);
  if (t != 0) {
    uint64_t now = now_ns();
    hist_add(&g.hist, now > t ? now - t : 0);
  }
  return true;
}

/* The measuring walk: classify every record; returns the number of records. */
static inline __attribute__((always_inline)) uint64_t walk_full(const char *p, const char *end, struct rcount *c,
                                                                 bool dir_watch, bool sampling) {
  uint64_t records = 0;
  const int32_t *map = g.wds.who;
  const size_t map_len = g.wds.len;
  while (p < end) {
    const struct inotify_event *ev = (const struct inotify_event *)(const void *)p;
    p += sizeof *ev + ev->len;
    records++;
    const uint32_t mask = ev->mask;
    if (__builtin_expect(mask & IN_Q_OVERFLOW, 0)) {
      c->overflows++;
      if (sampling) clear_stamps();
      continue;
    }
    if (!(mask & IN_MODIFY)) continue;
    int32_t who;
    if (dir_watch) who = classify_name(ev);
    else who = (size_t)(uint32_t)ev->wd < map_len ? map[ev->wd] : WD_UNKNOWN;
    count_modify(c, who, sampling);
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

/* Which file a fanotify record is about (fanotify.h): FAN_REPORT_FID looks its handle up in the
 * table, FAN_REPORT_DFID_NAME (`named`) needs DIR's handle and classifies the name. */
static struct fan_ids fan;

static inline __attribute__((always_inline)) int32_t fan_who(const char *p, const struct fanotify_event_metadata *m,
                                                             bool named) {
  struct fan_fid f;
  if (!fan_fid_of(p, m, named ? FAN_EVENT_INFO_TYPE_DFID_NAME : FAN_EVENT_INFO_TYPE_FID, &f)) return WD_UNKNOWN;
  if (!named) return fid_lookup(&fan, f.type, f.handle, f.bytes);
  return fan_is_dir(&fan, &f) ? classify_chars(f.rest, f.rest_len) : WD_UNKNOWN;
}

/* The measuring walk for fanotify: attribute every FAN_MODIFY record, count overflows. */
static inline __attribute__((always_inline)) uint64_t walk_fan_full(const char *p, const char *end, struct rcount *c,
                                                                     bool named, bool sampling) {
  uint64_t records = 0;
  while (p < end) {
    struct fanotify_event_metadata m;
    if (!fan_record(p, end, &m, &c->malformed)) break;
    records++;
    if (__builtin_expect(m.mask & FAN_Q_OVERFLOW, 0)) {
      c->overflows++;
      if (sampling) clear_stamps();
    } else if ((m.mask & FAN_MODIFY) && !count_modify(c, fan_who(p, &m, named), sampling)) {
      c->foreign++;
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
    if (!fan_record(p, end, &m, &c->malformed)) break;
    records++;
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
      fail_run("PROBE_FAILED", "ioctl(FIONREAD) on the fanotify descriptor failed: %s", strerror(errno));
      return -2;
    }
    s->queue_samples++;
    if (queued > 0 && (uint64_t)queued > s->queue_max) s->queue_max = (uint64_t)queued;
    s->queue_due = s->last + FAN_QUEUE_SAMPLE_NS;
  }
  ssize_t n = read(g.ifd, g.rbuf, (size_t)g.o.buffer_bytes);
  if (n <= 0) {
    if (n < 0 && errno == EINTR) return 0;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return -1;
    if (fan && n < 0 && errno == EINVAL)
      fail_run("PROBE_FAILED", "read() of %lld bytes from the fanotify descriptor failed: %s; the next queued event is larger "
           "than the read buffer: use a larger bufferBytes", g.o.buffer_bytes, strerror(errno));
    else
      fail_run("PROBE_FAILED", "read from the %s descriptor %s", fan ? "fanotify" : "inotify", n == 0 ? "returned 0 bytes" : strerror(errno));
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
      fail_run("PROBE_FAILED", "read() returned a fanotify record that does not parse (metadata version %d expected)",
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
        fail_run("PROBE_FAILED", "read from the blocking %s descriptor returned EAGAIN", fan ? "fanotify" : "inotify");
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
    fail_run("PROBE_FAILED", "cannot make the %s descriptor non-blocking: %s", fan ? "fanotify" : "inotify", strerror(errno));
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
      fail_run("PRIVILEGE_MISSING", "cannot set the reader's nice value to %d: %s; a negative nice value needs CAP_SYS_NICE "
           "(run as root or raise RLIMIT_NICE), or use a reader nice value >= 0", g.o.nice, strerror(e));
    else fail_run("PROBE_FAILED", "setpriority(%d) for the reader failed: %s", g.o.nice, strerror(e));
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
/* Setup                                                                                        */

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

/* What watches and marks are put on: DIR/file.NNNNN for i < files, then the writers' markers
 * DIR/mark.NNNN when there are any. The path is valid until the next call. */
static long long member_count(void) { return g.o.files + (g.mark_fds ? g.o.writers : 0); }

static const char *member_path(long long i) {
  static char *path;
  static size_t len;
  if (!path) {
    len = strlen(g.o.dir) + 32;
    path = malloc(len);
    if (!path) die(EXIT_RUNTIME, "PROBE_FAILED", "out of memory");
  }
  if (i < g.o.files) snprintf(path, len, "%s/file.%05lld", g.o.dir, i);
  else snprintf(path, len, "%s/mark.%04lld", g.o.dir, i - g.o.files);
  return path;
}

/* What the wd map and the handle table answer for member i. */
static int32_t member_who(long long i) { return i < g.o.files ? (int32_t)i : MARK_BASE - (int32_t)(i - g.o.files); }

/* The inotify instance (inotify.h) and its watches: DIR's, or each member's. */
static void setup_inotify(rlim_t nofile, long long open_fds) {
  g.ifd = inotify_open(nofile, open_fds, g.o.files);
  if (g.o.watch == WATCH_DIR) {
    inotify_watch_dir(g.ifd, g.o.dir);
    return;
  }
  const long long n = member_count();
  for (long long i = 0; i < n; i++) inotify_watch_file(g.ifd, &g.wds, member_path(i), member_who(i), g.o.files, n);
}

/* The fanotify group (fanotify.h), its marks, and what identifies the members in its events. */
static void setup_fanotify(rlim_t nofile, long long open_fds) {
  static const unsigned flags[] = {FAN_MARK_INODE, FAN_MARK_INODE | FAN_MARK_ONLYDIR, FAN_MARK_MOUNT, FAN_MARK_FILESYSTEM};
  static const char *const names[] = {"FAN_MARK_INODE", "FAN_MARK_INODE|FAN_MARK_ONLYDIR", "FAN_MARK_MOUNT", "FAN_MARK_FILESYSTEM"};
  const struct options *o = &g.o;
  g.ifd = fan_group_open(o->report == REPORT_FID, o->unlimited_queue, nofile, open_fds, o->files);
  const long long n = member_count();
  if (o->mark == MARK_INODE)
    for (long long i = 0; i < n; i++) fan_mark_add(g.ifd, flags[o->mark], names[o->mark], FAN_MODIFY, member_path(i), n);
  else
    fan_mark_add(g.ifd, flags[o->mark], names[o->mark], FAN_MODIFY | (o->mark == MARK_DIR ? FAN_EVENT_ON_CHILD : 0), o->dir, 1);
  if (o->report == REPORT_FID) {
    fan_ids_init(&fan, (size_t)n);
    for (long long i = 0; i < n; i++) fan_ids_add(&fan, member_path(i), member_who(i));
  } else {
    fan_ids_dir(&fan, o->dir);
  }
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

  fputs("\"latency\":", stdout);
  hist_print_json(&g.hist);
  fputc(',', stdout);
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
  if (rc != 0) fail_run("PROBE_FAILED", "cannot start thread %d: %s; use fewer writers or raise the thread limits", nthreads + 1, strerror(rc));

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
    print_error(g.err_code, g.err_msg, NULL);
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
