/*
 * An ordinary MPI program, NOT linked to pipecoll: the interposer test runs it with and
 * without LD_PRELOAD=libpipecoll_preload.so and compares what it prints.
 *
 * It makes a fixed set of MPI_Allreduce / MPI_Reduce / MPI_Bcast / MPI_Allgather /
 * MPI_Reduce_scatter_block calls (several datatypes, a user op, MPI_IN_PLACE, zero counts,
 * a non-contiguous datatype, an intercommunicator, and a second thread making calls of its
 * own at the same time), then rank 0 prints
 *   RESULT <call> <digest of rank 0> <digest of rank 1> ...   one line per call
 *   EXPECT <collective> <bytes> <datatype> <kind> <calls>       what it called, aggregated
 * where bytes = count x datatype size (allgather, reduce_scatter_block: one rank's block)
 * and kind = plain | derived | intercomm. Data are small integers, so any summation order
 * gives identical bits and digests must match exactly across modes.
 *
 * Usage: plain_mpi            run the calls above
 *        plain_mpi --time N   time N 8-byte MPI_Allreduce calls (interposer overhead)
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXCALLS 64
#define THREAD_CALLS 200

static int rank, nprocs;
static uint64_t digests[MAXCALLS];
static const char *labels[MAXCALLS];
static int ncalls;

typedef struct {
    char coll[32], dtype[64], kind[16];
    long long bytes, calls;
} expect_row;
static expect_row expects[MAXCALLS];
static int nexpects;

static uint64_t fnv(const void *buf, size_t bytes)
{
    const unsigned char *p = buf;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static void expect(const char *coll, MPI_Datatype type, long long count, const char *kind,
                   long long calls)
{
    char name[MPI_MAX_OBJECT_NAME] = "derived";
    int len, size;
    int ni, na, nd, combiner;
    MPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
    if (combiner == MPI_COMBINER_NAMED)
        MPI_Type_get_name(type, name, &len);
    MPI_Type_size(type, &size);
    long long bytes = count * size;
    for (int i = 0; i < nexpects; i++) {
        expect_row *e = &expects[i];
        if (!strcmp(e->coll, coll) && !strcmp(e->dtype, name) && !strcmp(e->kind, kind) &&
            e->bytes == bytes) {
            e->calls += calls;
            return;
        }
    }
    expect_row *e = &expects[nexpects++];
    snprintf(e->coll, sizeof e->coll, "%s", coll);
    snprintf(e->dtype, sizeof e->dtype, "%s", name);
    snprintf(e->kind, sizeof e->kind, "%s", kind);
    e->bytes = bytes;
    e->calls = calls;
}

static void result(const char *label, const void *buf, size_t bytes)
{
    labels[ncalls] = label;
    digests[ncalls++] = fnv(buf, bytes);
}

static void fill_int(int32_t *v, size_t n, int salt)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (int32_t)((i * 7 + (size_t)rank * 13 + (size_t)salt) % 57) - 28;
}

static void fill_double(double *v, size_t n, int salt)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (double)((long)((i * 5 + (size_t)rank * 11 + (size_t)salt) % 61) - 30);
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    if (*type != MPI_INT32_T) {
        fprintf(stderr, "plain_mpi: user op handed a datatype it was not written for\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (int i = 0; i < *len; i++)
        ((int32_t *)inout)[i] += ((int32_t *)in)[i];
}

/* The background thread, like Horovod's: small allreduces on its own communicator. */
static MPI_Comm thread_comm;
static uint64_t thread_digest;
static void *background(void *arg)
{
    (void)arg;
    int64_t v[3], out[3];
    uint64_t h = 0;
    for (int i = 0; i < THREAD_CALLS; i++) {
        v[0] = rank + i;
        v[1] = i;
        v[2] = -rank;
        MPI_Allreduce(v, out, 3, MPI_INT64_T, MPI_SUM, thread_comm);
        h = h * 31 + fnv(out, sizeof out);
    }
    thread_digest = h;
    return NULL;
}

static int time_mode(long iterations)
{
    double in = rank, out;
    double best = 1e30;
    for (int trial = 0; trial < 7; trial++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iterations; i++)
            MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / (double)iterations, slowest;
        PMPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (slowest < best)
            best = slowest;
    }
    if (rank == 0)
        printf("TIME_PER_CALL_US %.4f\n", best * 1e6);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc == 3 && strcmp(argv[1], "--time") == 0)
        return time_mode(atol(argv[2]));
    if (argc != 1) {
        if (rank == 0)
            fprintf(stderr, "usage: plain_mpi [--time ITERATIONS]\n");
        MPI_Finalize();
        return 2;
    }
    const size_t p = (size_t)nprocs;
    const size_t big = 65537;
    int32_t *ia = malloc(big * p * 4), *ib = malloc(big * p * 4);
    double *da = malloc(big * p * 8), *db = malloc(big * p * 8);

    pthread_t thread;
    int threaded = provided >= MPI_THREAD_MULTIPLE;
    if (threaded) {
        MPI_Comm_dup(MPI_COMM_WORLD, &thread_comm);
        pthread_create(&thread, NULL, background, NULL);
    }

    /* MPI_Allreduce: counts 0, 1, primes; int32, double, float; SUM, MAX, a user op */
    size_t counts[] = {0, 1, 7, 1009, 65537};
    static const char *ar_labels[] = {"allreduce_int32_0", "allreduce_int32_1",
                                      "allreduce_int32_7", "allreduce_int32_1009",
                                      "allreduce_int32_65537"};
    for (int i = 0; i < 5; i++) {
        fill_int(ia, counts[i], i);
        memset(ib, 0, counts[i] * 4 + 4);
        MPI_Allreduce(ia, ib, (int)counts[i], MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
        result(ar_labels[i], ib, counts[i] * 4);
        expect("allreduce", MPI_INT32_T, (long long)counts[i], "plain", 1);
    }
    fill_double(db, 40000, 1); /* in place, as Horovod does */
    MPI_Allreduce(MPI_IN_PLACE, db, 40000, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    result("allreduce_double_inplace_40000", db, 40000 * 8);
    expect("allreduce", MPI_DOUBLE, 40000, "plain", 1);
    {
        float fa[4099], fb[4099];
        for (int i = 0; i < 4099; i++)
            fa[i] = (float)((i * 3 + rank * 17) % 101);
        MPI_Allreduce(fa, fb, 4099, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
        result("allreduce_float_max_4099", fb, sizeof fb);
        expect("allreduce", MPI_FLOAT, 4099, "plain", 1);
    }
    MPI_Op op;
    MPI_Op_create(user_sum, 1, &op);
    fill_int(ia, 5000, 9);
    MPI_Allreduce(ia, ib, 5000, MPI_INT32_T, op, MPI_COMM_WORLD);
    result("allreduce_int32_userop_5000", ib, 5000 * 4);
    expect("allreduce", MPI_INT32_T, 5000, "plain", 1);
    MPI_Op_free(&op);
    for (int i = 0; i < 3; i++) { /* Horovod's control traffic: tiny MPI_LONG_LONG */
        long long x = rank + i, y;
        MPI_Allreduce(&x, &y, 1, MPI_LONG_LONG, MPI_BOR, MPI_COMM_WORLD);
        result(i == 0 ? "allreduce_ll_0" : i == 1 ? "allreduce_ll_1" : "allreduce_ll_2", &y, 8);
    }
    expect("allreduce", MPI_LONG_LONG, 1, "plain", 3);

    /* MPI_Bcast: non-zero root, a non-contiguous datatype */
    fill_double(da, 100000, rank == nprocs - 1 ? 5 : rank + 100);
    MPI_Bcast(da, 100000, MPI_DOUBLE, nprocs - 1, MPI_COMM_WORLD);
    result("bcast_double_100000", da, 100000 * 8);
    expect("bcast", MPI_DOUBLE, 100000, "plain", 1);
    {
        char text[3] = {'a', 'b', (char)('0' + rank % 10)};
        MPI_Bcast(text, 3, MPI_CHAR, 0, MPI_COMM_WORLD);
        result("bcast_char_3", text, 3);
        expect("bcast", MPI_CHAR, 3, "plain", 1);
    }
    MPI_Datatype every_other;
    MPI_Type_vector(500, 1, 2, MPI_INT32_T, &every_other);
    MPI_Type_commit(&every_other);
    fill_int(ia, 1000, rank);
    MPI_Bcast(ia, 1, every_other, nprocs / 2, MPI_COMM_WORLD);
    result("bcast_vector_1", ia, 1000 * 4);
    expect("bcast", every_other, 1, "derived", 1);
    MPI_Type_free(&every_other);

    /* MPI_Reduce: root 0 with MPI_IN_PLACE, and a non-zero root */
    int64_t la[1009], lb[1009];
    for (int i = 0; i < 1009; i++)
        la[i] = lb[i] = (int64_t)i * (rank + 1);
    MPI_Reduce(rank == 0 ? MPI_IN_PLACE : la, rank == 0 ? la : NULL, 1009, MPI_INT64_T,
               MPI_SUM, 0, MPI_COMM_WORLD);
    result("reduce_int64_inplace_1009", la, rank == 0 ? sizeof la : 0);
    expect("reduce", MPI_INT64_T, 1009, "plain", 1);
    MPI_Reduce(lb, la, 1009, MPI_INT64_T, MPI_MAX, nprocs - 1, MPI_COMM_WORLD);
    result("reduce_int64_root_last_1009", la, rank == nprocs - 1 ? sizeof la : 0);
    expect("reduce", MPI_INT64_T, 1009, "plain", 1);

    /* MPI_Allgather: normal and in place */
    fill_int(ia, 1000, 3);
    MPI_Allgather(ia, 1000, MPI_INT32_T, ib, 1000, MPI_INT32_T, MPI_COMM_WORLD);
    result("allgather_int32_1000", ib, 1000 * 4 * p);
    expect("allgather", MPI_INT32_T, 1000, "plain", 1);
    fill_double(db + (size_t)rank * 777, 777, 4);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, db, 777, MPI_DOUBLE, MPI_COMM_WORLD);
    result("allgather_double_inplace_777", db, 777 * 8 * p);
    expect("allgather", MPI_DOUBLE, 777, "plain", 1);

    /* MPI_Reduce_scatter_block: normal and in place */
    fill_double(da, 1024 * p, 6);
    MPI_Reduce_scatter_block(da, db, 1024, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    result("rsb_double_1024", db, 1024 * 8);
    expect("reduce_scatter_block", MPI_DOUBLE, 1024, "plain", 1);
    fill_int(ia, 513 * p, 7);
    MPI_Reduce_scatter_block(MPI_IN_PLACE, ia, 513, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    result("rsb_int32_inplace_513", ia, 513 * 4);
    expect("reduce_scatter_block", MPI_INT32_T, 513, "plain", 1);

    /* An intercommunicator between the two halves of the world */
    if (nprocs >= 2) {
        MPI_Comm half, inter;
        int color = rank < nprocs / 2;
        MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color ? nprocs / 2 : 0, 42, &inter);
        int32_t x[10], y[10];
        for (int i = 0; i < 10; i++)
            x[i] = rank * 10 + i;
        MPI_Allreduce(x, y, 10, MPI_INT32_T, MPI_SUM, inter);
        result("allreduce_intercomm_10", y, sizeof y);
        expect("allreduce", MPI_INT32_T, 10, "intercomm", 1);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }

    if (threaded) {
        pthread_join(thread, NULL);
        MPI_Comm_free(&thread_comm);
        result("thread_allreduce_int64_3", &thread_digest, 8);
        expect("allreduce", MPI_INT64_T, 3, "plain", THREAD_CALLS);
    }

    /* Collect every rank's digests on rank 0 (MPI_Gather: not one of the wrapped calls). */
    uint64_t *all = rank == 0 ? malloc(sizeof(uint64_t) * MAXCALLS * p) : NULL;
    MPI_Gather(digests, MAXCALLS, MPI_UINT64_T, all, MAXCALLS, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("THREADED %d\n", threaded);
        for (int c = 0; c < ncalls; c++) {
            printf("RESULT %s", labels[c]);
            for (size_t r = 0; r < p; r++)
                printf(" %016llx", (unsigned long long)all[r * MAXCALLS + (size_t)c]);
            printf("\n");
        }
        for (int i = 0; i < nexpects; i++)
            printf("EXPECT %s %lld %s %s %lld\n", expects[i].coll, expects[i].bytes,
                   expects[i].dtype, expects[i].kind, expects[i].calls);
        free(all);
    }
    free(ia);
    free(ib);
    free(da);
    free(db);
    MPI_Finalize();
    return 0;
}
