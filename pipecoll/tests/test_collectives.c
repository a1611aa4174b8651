/*
 * Correctness of every pipecoll collective against the plain blocking MPI call.
 *
 * For each collective x plan x datatype x count (x MPI_IN_PLACE where MPI allows it, x
 * root for rooted collectives), the same input goes once through the plain MPI call
 * (MPI_Allreduce, MPI_Reduce, MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter_block) and
 * once through pipecoll; the two results must be identical bytes.
 *
 * Why bit for bit, floats included: every input value is a small integer (|v| <= 30), so
 * every partial sum of up to a few thousand ranks is an integer well below 2^24 and exactly
 * representable in float and double. Floating-point addition of such values is exact, hence
 * associative: any reduction order (any algorithm, any segmentation) gives the same bits.
 * A difference is therefore a real bug (a wrong offset, a lost or doubled segment, a wrong
 * stride), never rounding.
 *
 * Every receive buffer is followed by a guard zone that must stay untouched (catches a
 * segment or a strided datatype writing past the end). The number of MPI requests behind
 * each handle is checked against pipecoll_segments().
 *
 * Usage: test_collectives [--colls a,b] [--plans p,q] [--types t,u] [--counts n,m]
 *                         [--ops sum,max,user] [--verbose]
 * Prints each mismatch (rank, case, first differing element) and exits 1 on any failure.
 */
#include "pipecoll.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE 0x5a
#define JUNK_BYTE 0xab

typedef struct {
    const char *name;
    MPI_Datatype type; /* filled at run time: some handles are not compile-time constants */
    size_t size;
    int is_float;
    int is_signed;
    int reducible; /* MPI_SUM/MPI_MAX defined on it */
} dtype_info;

static dtype_info dtypes[] = {
    {"int32", 0, 4, 0, 1, 1},  {"int64", 0, 8, 0, 1, 1},  {"float", 0, 4, 1, 1, 1},
    {"double", 0, 8, 1, 1, 1}, {"uint8", 0, 1, 0, 0, 1},  {"short", 0, sizeof(short), 0, 1, 1},
    {"uint64", 0, 8, 0, 0, 1}, {"char", 0, 1, 0, 1, 0},   /* char: no arithmetic in MPI */
};
#define NDTYPES (sizeof(dtypes) / sizeof(*dtypes))

static void init_dtypes(void)
{
    MPI_Datatype t[NDTYPES] = {MPI_INT32_T, MPI_INT64_T, MPI_FLOAT,          MPI_DOUBLE,
                               MPI_UINT8_T, MPI_SHORT,   MPI_UNSIGNED_LONG_LONG, MPI_CHAR};
    for (size_t i = 0; i < NDTYPES; i++)
        dtypes[i].type = t[i];
}

/* ---- a user-defined op: elementwise sum, written for the datatypes it is given --------- */
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    /* A real user op only knows the datatypes its program uses: it must receive exactly
     * the datatype of the call, never a pipecoll-made derived type. */
    if (*type == MPI_INT32_T) {
        for (int i = 0; i < *len; i++)
            ((int32_t *)inout)[i] += ((int32_t *)in)[i];
    } else if (*type == MPI_DOUBLE) {
        for (int i = 0; i < *len; i++)
            ((double *)inout)[i] += ((double *)in)[i];
    } else {
        fprintf(stderr, "user_sum: called with a datatype it was not written for\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}
static MPI_Op user_op;

/* ---- data ------------------------------------------------------------------------------ */

/* Small integer for (rank, element, salt), stored in the element type. */
static void put(const dtype_info *d, void *buf, size_t i, long v)
{
    if (!d->is_signed)
        v = v < 0 ? -v : v;
    switch (d->size * 2 + d->is_float) {
    case 2: ((int8_t *)buf)[i] = (int8_t)v; break;
    case 4: ((int16_t *)buf)[i] = (int16_t)v; break;
    case 8: ((int32_t *)buf)[i] = (int32_t)v; break;
    case 9: ((float *)buf)[i] = (float)v; break;
    case 16: ((int64_t *)buf)[i] = (int64_t)v; break;
    case 17: ((double *)buf)[i] = (double)v; break;
    default: abort();
    }
}

static double get(const dtype_info *d, const void *buf, size_t i)
{
    switch (d->size * 2 + d->is_float) {
    case 2: return d->is_signed ? ((const int8_t *)buf)[i] : ((const uint8_t *)buf)[i];
    case 4: return ((const int16_t *)buf)[i];
    case 8: return ((const int32_t *)buf)[i];
    case 9: return ((const float *)buf)[i];
    case 16: return d->is_signed ? (double)((const int64_t *)buf)[i]
                                 : (double)((const uint64_t *)buf)[i];
    case 17: return ((const double *)buf)[i];
    default: abort();
    }
}

static void fill(const dtype_info *d, void *buf, size_t n, int rank, int salt)
{
    /* uint8 sums of 9 ranks stay below 256 with |v| <= 28 */
    for (size_t i = 0; i < n; i++)
        put(d, buf, i, (long)((i * 7 + (size_t)rank * 13 + (size_t)salt * 5) % 57) - 28);
}

/* A buffer of n elements plus a guard zone, filled with junk. */
static char *alloc_buf(size_t bytes)
{
    char *buf = malloc(bytes + GUARD);
    if (buf == NULL) {
        fprintf(stderr, "test_collectives: out of memory (%zu bytes)\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(buf, JUNK_BYTE, bytes);
    memset(buf + bytes, GUARD_BYTE, GUARD);
    return buf;
}

/* ---- the run -------------------------------------------------------------------------- */

static int rank, nprocs, verbose;
static long ncases, nfailed;

/* Compares `bytes` of result and reference, then checks the guard zone after the
 * `total` bytes of the result buffer; prints on error. */
static int compare(const char *what, const dtype_info *d, const char *got, const char *want,
                   size_t bytes, size_t total)
{
    int bad = 0;
    if (memcmp(got, want, bytes) != 0) {
        size_t i = 0;
        while (memcmp(got + i * d->size, want + i * d->size, d->size) == 0)
            i++;
        fprintf(stderr, "FAIL rank %d %s: element %zu is %g, plain MPI gives %g\n", rank,
                what, i, get(d, got, i), get(d, want, i));
        bad = 1;
    }
    for (size_t g = 0; g < GUARD; g++)
        if ((unsigned char)got[total + g] != GUARD_BYTE) {
            fprintf(stderr, "FAIL rank %d %s: wrote past the end of the buffer (byte %zu)\n",
                    rank, what, total + g);
            bad = 1;
            break;
        }
    return bad;
}

typedef enum { ALLREDUCE, REDUCE, BCAST, ALLGATHER, RSB, NCOLLS } coll_kind;
static const char *coll_names[NCOLLS] = {"allreduce", "reduce", "bcast", "allgather",
                                          "reduce_scatter_block"};

/* How a case is completed: blocking helper, start + wait, or start + test loop. */
static int finish(int err, pipecoll_request *req, int how, size_t want_segments,
                  const char *what)
{
    if (err != MPI_SUCCESS || how == 0)
        return err;
    size_t got = pipecoll_request_segments(*req);
    if (got != want_segments) {
        fprintf(stderr, "FAIL rank %d %s: %zu MPI requests behind the handle, want %zu\n", rank,
                what, got, want_segments);
        nfailed++;
    }
    if (how == 1)
        return pipecoll_wait(req);
    int done = 0;
    while (!done) {
        err = pipecoll_test(req, &done);
        if (err != MPI_SUCCESS)
            return err;
    }
    if (*req != PIPECOLL_REQUEST_NULL) {
        fprintf(stderr, "FAIL rank %d %s: completed handle not reset\n", rank, what);
        nfailed++;
    }
    return MPI_SUCCESS;
}

/* One case. Returns 1 if this rank saw a failure. */
static int run_case(coll_kind coll, const char *plan_text, const dtype_info *d, size_t count,
                    MPI_Op op, const char *op_name, int inplace, int root, int how)
{
    pipecoll_plan plan;
    if (pipecoll_plan_parse(plan_text, &plan) != 0) {
        fprintf(stderr, "test_collectives: bad plan %s\n", plan_text);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char what[256];
    snprintf(what, sizeof what, "%s plan=%s type=%s count=%zu op=%s%s root=%d p=%d via=%s",
             coll_names[coll], plan_text, d->name, count, op_name, inplace ? " in_place" : "",
             root, nprocs, how == 0 ? "blocking" : how == 1 ? "wait" : "test");
    if (verbose && rank == 0)
        printf("case %s\n", what);

    size_t es = d->size, p = (size_t)nprocs;
    size_t in_elems = (coll == RSB) ? count * p : count;
    size_t out_elems = (coll == ALLGATHER) ? count * p : (coll == RSB && inplace) ? count * p
                                                                                  : count;
    char *in = alloc_buf(in_elems * es);
    fill(d, in, in_elems, rank, (int)count);
    char *ref = alloc_buf(out_elems * es), *got = alloc_buf(out_elems * es);
    size_t check_elems = (coll == RSB) ? count : out_elems; /* RSB in place: first block */
    int check = 1;
    int err_ref = MPI_SUCCESS, err = MPI_SUCCESS;
    pipecoll_request req = PIPECOLL_REQUEST_NULL;
    size_t segs = pipecoll_segments(&plan, count, es, NULL);
    int ic = (int)count; /* the reference call's count: tests keep it in an int */

    switch (coll) {
    case ALLREDUCE:
        if (inplace) {
            memcpy(ref, in, count * es);
            memcpy(got, in, count * es);
            err_ref = MPI_Allreduce(MPI_IN_PLACE, ref, ic, d->type, op, MPI_COMM_WORLD);
            err = how == 0 ? pipecoll_allreduce(MPI_IN_PLACE, got, count, d->type, op,
                                                MPI_COMM_WORLD, &plan)
                           : pipecoll_iallreduce(MPI_IN_PLACE, got, count, d->type, op,
                                                 MPI_COMM_WORLD, &plan, &req);
        } else {
            err_ref = MPI_Allreduce(in, ref, ic, d->type, op, MPI_COMM_WORLD);
            err = how == 0 ? pipecoll_allreduce(in, got, count, d->type, op, MPI_COMM_WORLD,
                                                &plan)
                           : pipecoll_iallreduce(in, got, count, d->type, op, MPI_COMM_WORLD,
                                                 &plan, &req);
        }
        break;
    case REDUCE: {
        int me_inplace = inplace && rank == root; /* MPI_IN_PLACE is for the root only */
        if (me_inplace) {
            memcpy(ref, in, count * es);
            memcpy(got, in, count * es);
        }
        const void *sb = me_inplace ? MPI_IN_PLACE : in;
        err_ref = MPI_Reduce(sb, ref, ic, d->type, op, root, MPI_COMM_WORLD);
        err = how == 0 ? pipecoll_reduce(sb, got, count, d->type, op, root, MPI_COMM_WORLD,
                                         &plan)
                       : pipecoll_ireduce(sb, got, count, d->type, op, root, MPI_COMM_WORLD,
                                          &plan, &req);
        check = rank == root;
        break;
    }
    case BCAST:
        if (rank == root) {
            memcpy(ref, in, count * es);
            memcpy(got, in, count * es);
        }
        err_ref = MPI_Bcast(ref, ic, d->type, root, MPI_COMM_WORLD);
        err = how == 0 ? pipecoll_bcast(got, count, d->type, root, MPI_COMM_WORLD, &plan)
                       : pipecoll_ibcast(got, count, d->type, root, MPI_COMM_WORLD, &plan, &req);
        break;
    case ALLGATHER:
        if (inplace) {
            memcpy(ref + (size_t)rank * count * es, in, count * es);
            memcpy(got + (size_t)rank * count * es, in, count * es);
            err_ref = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ref, ic, d->type,
                                    MPI_COMM_WORLD);
            err = how == 0 ? pipecoll_allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, count,
                                                d->type, MPI_COMM_WORLD, &plan)
                           : pipecoll_iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, got, count,
                                                 d->type, MPI_COMM_WORLD, &plan, &req);
        } else {
            err_ref = MPI_Allgather(in, ic, d->type, ref, ic, d->type, MPI_COMM_WORLD);
            err = how == 0 ? pipecoll_allgather(in, count, d->type, got, count, d->type,
                                                MPI_COMM_WORLD, &plan)
                           : pipecoll_iallgather(in, count, d->type, got, count, d->type,
                                                 MPI_COMM_WORLD, &plan, &req);
        }
        break;
    case RSB:
        if (inplace) {
            memcpy(ref, in, in_elems * es);
            memcpy(got, in, in_elems * es);
            err_ref = MPI_Reduce_scatter_block(MPI_IN_PLACE, ref, ic, d->type, op,
                                               MPI_COMM_WORLD);
            err = how == 0 ? pipecoll_reduce_scatter_block(MPI_IN_PLACE, got, count, d->type,
                                                           op, MPI_COMM_WORLD, &plan)
                           : pipecoll_ireduce_scatter_block(MPI_IN_PLACE, got, count, d->type,
                                                            op, MPI_COMM_WORLD, &plan, &req);
        } else {
            err_ref = MPI_Reduce_scatter_block(in, ref, ic, d->type, op, MPI_COMM_WORLD);
            err = how == 0 ? pipecoll_reduce_scatter_block(in, got, count, d->type, op,
                                                           MPI_COMM_WORLD, &plan)
                           : pipecoll_ireduce_scatter_block(in, got, count, d->type, op,
                                                            MPI_COMM_WORLD, &plan, &req);
        }
        break;
    default:
        abort();
    }
    err = finish(err, &req, how, segs, what);

    int bad = 0;
    if (err_ref != MPI_SUCCESS || err != MPI_SUCCESS) {
        fprintf(stderr, "FAIL rank %d %s: error code plain %d, pipecoll %d\n", rank, what,
                err_ref, err);
        bad = 1;
    } else if (check) {
        /* RSB in place: blocks after the first are undefined after the call; only the
         * guard after the whole buffer counts there */
        bad = compare(what, d, got, ref, check_elems * es, out_elems * es);
    }
    free(in);
    free(ref);
    free(got);
    return bad;
}

/* A datatype pipecoll must not cut: an int padded to 8 bytes. One request, same result. */
static int run_noncontiguous(const char *plan_text)
{
    pipecoll_plan plan;
    pipecoll_plan_parse(plan_text, &plan);
    MPI_Datatype padded;
    MPI_Type_create_resized(MPI_INT32_T, 0, 8, &padded);
    MPI_Type_commit(&padded);
    const size_t count = 101;
    int32_t *ref = calloc(count * 2 * (size_t)nprocs, 4), *got = calloc(count * 2 * (size_t)nprocs, 4);
    int bad = 0;
    for (size_t i = 0; i < count; i++)
        ref[2 * i] = got[2 * i] = (int32_t)(i * 3 + (size_t)rank);
    MPI_Bcast(ref, (int)count, padded, nprocs - 1, MPI_COMM_WORLD);
    pipecoll_request req;
    int err = pipecoll_ibcast(got, count, padded, nprocs - 1, MPI_COMM_WORLD, &plan, &req);
    if (err == MPI_SUCCESS && pipecoll_request_segments(req) != 1) {
        fprintf(stderr, "FAIL rank %d bcast non-contiguous plan=%s: %zu segments, want 1\n",
                rank, plan_text, pipecoll_request_segments(req));
        bad = 1;
    }
    if (err == MPI_SUCCESS)
        err = pipecoll_wait(&req);
    if (err != MPI_SUCCESS || memcmp(ref, got, count * 8) != 0) {
        fprintf(stderr, "FAIL rank %d bcast non-contiguous plan=%s: result differs\n", rank,
                plan_text);
        bad = 1;
    }
    free(ref);
    free(got);
    MPI_Type_free(&padded);
    return bad;
}

/* pipecoll's own argument errors: MPI_ERR_ARG, no communication started; the null handle. */
static int run_api_errors(void)
{
    int bad = 0, x = 1, y = 0, done = 0;
    pipecoll_plan zero_conc = pipecoll_plan_fconc(0), zero_size = pipecoll_plan_fsize(0);
    pipecoll_plan ok = pipecoll_plan_fconc(2);
    pipecoll_request req = PIPECOLL_REQUEST_NULL;
    struct { const char *what; int got; } checks[] = {
        {"NULL plan", pipecoll_iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, NULL, &req)},
        {"NULL request", pipecoll_iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &ok, NULL)},
        {"fconc:0", pipecoll_ibcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD, &zero_conc, &req)},
        {"fsize:0", pipecoll_allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &zero_size)},
        {"wait(NULL)", pipecoll_wait(NULL)},
    };
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++)
        if (checks[i].got != MPI_ERR_ARG) {
            fprintf(stderr, "FAIL rank %d API error %s: returned %d, want MPI_ERR_ARG\n", rank,
                    checks[i].what, checks[i].got);
            bad = 1;
        }
    req = PIPECOLL_REQUEST_NULL;
    if (pipecoll_wait(&req) != MPI_SUCCESS || pipecoll_test(&req, &done) != MPI_SUCCESS ||
        !done || pipecoll_request_segments(req) != 0) {
        fprintf(stderr, "FAIL rank %d: PIPECOLL_REQUEST_NULL not complete at once\n", rank);
        bad = 1;
    }
    return bad;
}

/* Splits a comma list in place into at most `max` items; returns how many. */
static int split(char *list, char **items, int max)
{
    int n = 0;
    for (char *tok = strtok(list, ","); tok != NULL && n < max; tok = strtok(NULL, ","))
        items[n++] = tok;
    return n;
}

static void usage_error(const char *msg, const char *arg)
{
    if (rank == 0)
        fprintf(stderr, "test_collectives: %s '%s'\nusage: test_collectives [--colls a,b] "
                "[--plans single,fconc:N,fsize:BYTES] [--types t,u] [--counts n,m] "
                "[--ops sum,max,user] [--verbose]\n", msg, arg);
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* report codes, keep going */
    init_dtypes();
    MPI_Op_create(user_sum, 1, &user_op);

    char default_colls[] = "allreduce,reduce,bcast,allgather,reduce_scatter_block";
    char default_plans[] = "single,fconc:2,fconc:3,fconc:4,fconc:8,fsize:8,fsize:100,fsize:4K";
    char default_types[] = "int32,int64,float,double,uint8,short,uint64,char";
    char default_counts[] = "0,1,3,7,1009,65537";
    char default_ops[] = "sum,max,user";
    char *colls_s = default_colls, *plans_s = default_plans, *types_s = default_types,
         *counts_s = default_counts, *ops_s = default_ops;
    for (int i = 1; i < argc; i++) {
        char **slot = NULL;
        if (strcmp(argv[i], "--verbose") == 0) { verbose = 1; continue; }
        if (strcmp(argv[i], "--colls") == 0) slot = &colls_s;
        else if (strcmp(argv[i], "--plans") == 0) slot = &plans_s;
        else if (strcmp(argv[i], "--types") == 0) slot = &types_s;
        else if (strcmp(argv[i], "--counts") == 0) slot = &counts_s;
        else if (strcmp(argv[i], "--ops") == 0) slot = &ops_s;
        else usage_error("unknown argument", argv[i]);
        if (i + 1 >= argc)
            usage_error("missing value after", argv[i]);
        *slot = argv[++i];
    }
    char *colls[NCOLLS], *plans[32], *types[NDTYPES], *counts_txt[32], *ops[3];
    int ncolls = split(colls_s, colls, NCOLLS), nplans = split(plans_s, plans, 32),
        ntypes = split(types_s, types, NDTYPES), ncounts = split(counts_s, counts_txt, 32),
        nops = split(ops_s, ops, 3);
    int coll_ids[NCOLLS];
    const dtype_info *type_ids[NDTYPES];
    size_t counts[32];
    for (int i = 0; i < ncolls; i++) {
        coll_ids[i] = -1;
        for (int c = 0; c < NCOLLS; c++)
            if (strcmp(colls[i], coll_names[c]) == 0)
                coll_ids[i] = c;
        if (coll_ids[i] < 0)
            usage_error("unknown collective", colls[i]);
    }
    for (int i = 0; i < nplans; i++) {
        pipecoll_plan plan;
        if (pipecoll_plan_parse(plans[i], &plan) != 0)
            usage_error("bad plan", plans[i]);
    }
    for (int i = 0; i < ntypes; i++) {
        type_ids[i] = NULL;
        for (size_t t = 0; t < NDTYPES; t++)
            if (strcmp(types[i], dtypes[t].name) == 0)
                type_ids[i] = &dtypes[t];
        if (type_ids[i] == NULL)
            usage_error("unknown datatype", types[i]);
    }
    for (int i = 0; i < ncounts; i++) {
        char *end;
        counts[i] = strtoull(counts_txt[i], &end, 10);
        if (*end != '\0' || counts[i] > 100000000)
            usage_error("bad count", counts_txt[i]);
    }
    for (int i = 0; i < nops; i++)
        if (strcmp(ops[i], "sum") && strcmp(ops[i], "max") && strcmp(ops[i], "user"))
            usage_error("unknown op", ops[i]);

    int bad_here = 0;
    long case_no = 0;
    for (int ci = 0; ci < ncolls; ci++) {
        coll_kind coll = (coll_kind)coll_ids[ci];
        int reduces = coll == ALLREDUCE || coll == REDUCE || coll == RSB;
        int rooted = coll == REDUCE || coll == BCAST;
        int has_inplace = coll != BCAST;
        for (int pi = 0; pi < nplans; pi++)
            for (int ti = 0; ti < ntypes; ti++)
                for (int ni = 0; ni < ncounts; ni++)
                    for (int oi = 0; oi < (reduces ? nops : 1); oi++) {
                        const dtype_info *d = type_ids[ti];
                        MPI_Op op = MPI_SUM;
                        const char *op_name = reduces ? ops[oi] : "none";
                        if (reduces) {
                            if (!d->reducible)
                                continue;
                            /* other ops than SUM: two types are enough (time budget) */
                            if (strcmp(ops[oi], "sum") != 0 && d->type != MPI_INT32_T &&
                                d->type != MPI_DOUBLE)
                                continue;
                            if (strcmp(ops[oi], "max") == 0)
                                op = MPI_MAX;
                            else if (strcmp(ops[oi], "user") == 0) {
                                op = user_op; /* user_sum is written for int32, double */
                            }
                        }
                        for (int inplace = 0; inplace <= has_inplace; inplace++) {
                            /* roots cycle through 0, the last rank and the middle one */
                            int roots[3] = {0, nprocs - 1, nprocs / 2};
                            int root = rooted ? roots[case_no % 3] : 0;
                            int how = (int)(case_no % 3);
                            case_no++;
                            ncases++;
                            bad_here |= run_case(coll, plans[pi], d, counts[ni], op, op_name,
                                                 inplace, root, how);
                        }
                    }
    }
    for (int pi = 0; pi < nplans; pi++) {
        ncases++;
        bad_here |= run_noncontiguous(plans[pi]);
    }
    ncases++;
    bad_here |= run_api_errors();

    int bad_anywhere = 0;
    MPI_Allreduce(&bad_here, &bad_anywhere, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    long failed_local = nfailed + bad_here, failed_any = 0;
    MPI_Allreduce(&failed_local, &failed_any, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_collectives: p=%d, %ld cases, %s\n", nprocs, ncases,
               (bad_anywhere || failed_any) ? "FAILED (see stderr)" : "all identical to plain MPI");
    MPI_Op_free(&user_op);
    MPI_Finalize();
    return (bad_anywhere || failed_any) ? 1 : 0;
}
