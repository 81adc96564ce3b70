/*
 * The probe's latency histogram: log-linear, exact below 64 ns, then 32 linear sub-buckets per
 * power of two (relative bucket width <= 1/32), up to 2^48 ns; larger values land in the last
 * bucket (the maximum is kept exactly anyway). Fixed size, so recording never allocates.
 */
#ifndef FSBENCH_HISTOGRAM_H
#define FSBENCH_HISTOGRAM_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

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

static inline void hist_bounds(unsigned i, uint64_t *lo, uint64_t *hi) {
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
static inline uint64_t hist_percentile(const struct histogram *h, unsigned p) {
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

/* The JSON object the driver reads: samples, p50Ns/p90Ns/p99Ns/maxNs (null without samples), and
 * [lo, hi, count] for each bucket that holds a sample, lo inclusive and hi exclusive. */
static inline void hist_print_json(const struct histogram *h) {
  printf("{\"samples\":%" PRIu64 ",", h->samples);
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
  fputs("]}", stdout);
}

#endif
