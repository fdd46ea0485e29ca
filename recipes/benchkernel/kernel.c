#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t kernel(uint64_t steps, uint64_t x) {
  for (uint64_t i = 0; i < steps; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    x ^= x >> 29;
  }
  return x;
}

int main(int argc, char** argv) {
  uint64_t millions = argc > 1 ? strtoull(argv[1], NULL, 10) : 20;
  uint64_t steps = millions * 1000000ULL * BENCHKERNEL_WORK;
  /* seconds: the loop's wall clock; cpu_seconds: the CPU this process spent in it, which a
     machine shared with other work (a test suite's other worker, a build) leaves nearly alone. */
  struct timespec t0, t1, c0, c1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  uint64_t result = kernel(steps, (uint64_t)argc);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  double cpu_seconds = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
  printf("{\"seconds\": %.9f, \"cpu_seconds\": %.9f, \"steps\": %llu, \"checksum\": %llu}\n",
         seconds, cpu_seconds, (unsigned long long)steps, (unsigned long long)result);
  return 0;
}
