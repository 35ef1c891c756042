/* make_project: a byte histogram and its summary. */
#ifndef HISTO_STATS_H
#define HISTO_STATS_H

#include <stdio.h>

struct histogram {
  long bins[256];
};

void histogram_add(struct histogram *h, const unsigned char *data, long n);
/* Writes count, mean, standard deviation and the three fullest bins. */
void histogram_summary(const struct histogram *h, FILE *out);

#endif
