/* Tiny MPI probe for tests/mpistack: with no arguments prints MPI_Get_library_version;
 * else runs one collective: coll_probe COLL BLOCKING(0|1) COUNT(doubles) OP(sum|noop) [ITERS].
 * The noop op is commutative like pcbench's, so the library sees the same kind of user op. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void noop(void *in, void *inout, int *len, MPI_Datatype *dt) { (void)in; (void)inout; (void)len; (void)dt; }
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2) { char v[MPI_MAX_LIBRARY_VERSION_STRING]; int l; MPI_Get_library_version(v, &l); if (!rank) printf("%s\n", v); MPI_Finalize(); return 0; }
  const char *coll = argv[1]; int blocking = atoi(argv[2]); int count = atoi(argv[3]);
  MPI_Op op = MPI_SUM; if (!strcmp(argv[4], "noop")) MPI_Op_create(noop, 1, &op);
  int iters = argc > 5 ? atoi(argv[5]) : 1;
  double *a = calloc((size_t)count * size, sizeof(double)), *b = calloc((size_t)count * size, sizeof(double));
  for (int i = 0; i < count * size; i++) a[i] = rank + 1;
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (int it = 0; it < iters; it++) {
    MPI_Request r = MPI_REQUEST_NULL;
    if (!strcmp(coll, "allreduce")) { if (blocking) MPI_Allreduce(a, b, count, MPI_DOUBLE, op, MPI_COMM_WORLD); else MPI_Iallreduce(a, b, count, MPI_DOUBLE, op, MPI_COMM_WORLD, &r); }
    else if (!strcmp(coll, "bcast")) { if (blocking) MPI_Bcast(a, count, MPI_DOUBLE, 0, MPI_COMM_WORLD); else MPI_Ibcast(a, count, MPI_DOUBLE, 0, MPI_COMM_WORLD, &r); }
    else if (!strcmp(coll, "reduce")) { if (blocking) MPI_Reduce(a, b, count, MPI_DOUBLE, op, 0, MPI_COMM_WORLD); else MPI_Ireduce(a, b, count, MPI_DOUBLE, op, 0, MPI_COMM_WORLD, &r); }
    else if (!strcmp(coll, "allgather")) { if (blocking) MPI_Allgather(a, count, MPI_DOUBLE, b, count, MPI_DOUBLE, MPI_COMM_WORLD); else MPI_Iallgather(a, count, MPI_DOUBLE, b, count, MPI_DOUBLE, MPI_COMM_WORLD, &r); }
    else if (!strcmp(coll, "reduce_scatter_block")) { if (blocking) MPI_Reduce_scatter_block(a, b, count, MPI_DOUBLE, op, MPI_COMM_WORLD); else MPI_Ireduce_scatter_block(a, b, count, MPI_DOUBLE, op, MPI_COMM_WORLD, &r); }
    else { if (!rank) fprintf(stderr, "bad coll %s\n", coll); MPI_Abort(MPI_COMM_WORLD, 2); }
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  t = MPI_Wtime() - t;
  if (!rank) printf("%s blocking=%d count=%d t=%.6f b0=%g\n", coll, blocking, count, t / iters, b[0]);
  MPI_Finalize(); return 0;
}
