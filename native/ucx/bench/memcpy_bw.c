#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int c, char** v) { size_t n = atol(v[1]); int it = atoi(v[2]); char *a = malloc(n), *b = malloc(n);
  memset(a, 1, n); memset(b, 2, n); double best = 1e9, tot = 0;
  for (int i = 0; i < it; i++) { struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0); memcpy(b, a, n);
    clock_gettime(CLOCK_MONOTONIC, &t1); double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9; tot += s; if (s < best) best = s; }
  printf("memcpy %zu B: best %.0f MiB/s, avg %.0f MiB/s (%d)\n", n, n / 1048576.0 / best, n / 1048576.0 / (tot / it), b[n-1]); return 0; }
