/* make_project: histogram arithmetic (no I/O besides the summary's fprintf). */
#include "stats.h"

#include <math.h>

/* The analysis a real program would do per block (here: mixing every byte 64 times), so
 * that computation and reads are comparable, as in the corpus's other programs; its
 * result only feeds a sink, so the output stays the histogram's. */
static volatile unsigned long analysis_sink;

void histogram_add(struct histogram *h, const unsigned char *data, long n) {
  unsigned long mix = 0;
  for (long i = 0; i < n; ++i) {
    h->bins[data[i]]++;
    for (int round = 0; round < 64; ++round) mix = (mix ^ data[i]) * 0x100000001b3UL;
  }
  analysis_sink ^= mix;
}

void histogram_summary(const struct histogram *h, FILE *out) {
  long n = 0, s1 = 0, s2 = 0;
  for (int v = 0; v < 256; ++v) {
    n += h->bins[v];
    s1 += (long)v * h->bins[v];
    s2 += (long)v * v * h->bins[v];
  }
  double mean = (double)s1 / (double)n;
  double sd = sqrt((double)s2 / (double)n - mean * mean);
  int top[3] = {-1, -1, -1};
  for (int k = 0; k < 3; ++k)
    for (int v = 0; v < 256; ++v) {
      if (v == top[0] || v == top[1]) continue;
      if (top[k] < 0 || h->bins[v] > h->bins[top[k]]) top[k] = v;
    }
  fprintf(out, "histo %s: %ld bytes mean %.6f sd %.6f top %d:%ld %d:%ld %d:%ld\n", HISTO_VERSION, n,
          mean, sd, top[0], h->bins[top[0]], top[1], h->bins[top[1]], top[2], h->bins[top[2]]);
}
