/* SPDX-License-Identifier: Apache-2.0
 * The peer of bench/allreduce_vs_mpi.sh: OpenMPI's MPI_Allreduce (float32, sum, in place) on
 * buffers allocated and touched once, the median of ITERS calls after two warm-ups, as
 * algorithm bandwidth (bytes / time), the same figure dp_ranks --mode bench prints.
 *   mpirun -np N ./mpi_allreduce ELEMENTS[,ELEMENTS...] ITERS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const char* sizes = argc > 1 ? argv[1] : "1048576,16777216";
  int iters = argc > 2 ? atoi(argv[2]) : 10;
  char* list = strdup(sizes);
  for (char* tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    long n = atol(tok);
    float* buf = malloc((size_t)n * sizeof(float));
    for (long k = 0; k < n; ++k)
      buf[k] = (float)((k + rank) % 17) - 8.0f;
    double* t = malloc(sizeof(double) * (size_t)iters);
    for (int i = 0; i < iters + 2; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (i >= 2)
        t[i - 2] = MPI_Wtime() - t0;
    }
    qsort(t, (size_t)iters, sizeof(double), cmp);
    double med = t[iters / 2];
    if (rank == 0)
      printf("allreduce transport=mpi ranks=%d bytes=%ld median_us=%.0f algbw_GBps=%.3f\n", world,
             n * 4, med * 1e6, n * 4 / med / 1e9);
    fflush(stdout);
    free(t);
    free(buf);
  }
  free(list);
  MPI_Finalize();
  return 0;
}
