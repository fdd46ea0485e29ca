/* cudademo_smoke: the nightly GPU smoke test (run with CUDA_LAUNCH_BLOCKING=1).
   Exit 0 when the kernel's result is right on every element; 1 otherwise, saying why. */
#include <stdio.h>
#include <stdlib.h>

int cudademo_selftest(int n, int* bad);
const char* cudademo_error_string(int code);

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
  int bad = -1;
  int rc = cudademo_selftest(n, &bad);
  if (rc != 0) {
    fprintf(stderr, "cudademo_smoke: FAILED (%d: %s)", rc, cudademo_error_string(rc));
    if (bad >= 0) fprintf(stderr, " at element %d", bad);
    fprintf(stderr, "\n");
    return 1;
  }
  printf("cudademo_smoke: ok, axpy on %d elements matches\n", n);
  return 0;
}
