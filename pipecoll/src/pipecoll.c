/*
 * pipecoll: pipelined non-blocking MPI collectives (see include/pipecoll.h for the contract).
 *
 * Structure: a collective is (1) cut into segments by pipecoll_segments (the plan), then
 * (2) each segment is started by the request's schedule. Only the NATIVE schedule exists
 * (one MPI_I<collective> per segment); a schedule of pipecoll's own (a segmented ring of
 * Isend/Irecv progressed together) is one more case in start_segment() and in the
 * completion switch of pipecoll_wait/pipecoll_test.
 *
 * The interposer (preload.c) compiles this file a second time with PIPECOLL_USE_PMPI so that
 * its pipelined paths call PMPI_* directly and can never re-enter MPI_* wrappers.
 */
#include "pipecoll.h"
#include "pipecoll_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- plans ---------------------------------------------------------------------------- */

pipecoll_plan pipecoll_plan_single(void)
{
    pipecoll_plan plan = {PIPECOLL_PLAN_SINGLE, 0, PIPECOLL_SCHEDULE_NATIVE};
    return plan;
}

pipecoll_plan pipecoll_plan_fconc(size_t segments)
{
    pipecoll_plan plan = {PIPECOLL_PLAN_FCONC, segments, PIPECOLL_SCHEDULE_NATIVE};
    return plan;
}

pipecoll_plan pipecoll_plan_fsize(size_t segment_bytes)
{
    pipecoll_plan plan = {PIPECOLL_PLAN_FSIZE, segment_bytes, PIPECOLL_SCHEDULE_NATIVE};
    return plan;
}

/* Parses a decimal size_t with no sign, no leading blanks, into *value; returns the end. */
static const char *parse_unsigned(const char *text, size_t *value)
{
    if (!isdigit((unsigned char)*text))
        return NULL;
    errno = 0;
    char *end;
    unsigned long long parsed = strtoull(text, &end, 10);
    if (errno == ERANGE || parsed > SIZE_MAX)
        return NULL;
    *value = (size_t)parsed;
    return end;
}

int pipecoll_plan_parse(const char *text, pipecoll_plan *plan)
{
    if (text == NULL || plan == NULL)
        return -1;
    if (strcmp(text, "single") == 0) {
        *plan = pipecoll_plan_single();
        return 0;
    }
    if (strncmp(text, "fconc:", 6) == 0) {
        size_t segments;
        const char *end = parse_unsigned(text + 6, &segments);
        if (end == NULL || *end != '\0' || segments == 0)
            return -1;
        *plan = pipecoll_plan_fconc(segments);
        return 0;
    }
    if (strncmp(text, "fsize:", 6) == 0) {
        size_t bytes;
        const char *end = parse_unsigned(text + 6, &bytes);
        if (end == NULL || bytes == 0)
            return -1;
        size_t scale = 1;
        switch (*end) {
        case '\0': break;
        case 'K': case 'k': scale = (size_t)1 << 10; end++; break;
        case 'M': case 'm': scale = (size_t)1 << 20; end++; break;
        case 'G': case 'g': scale = (size_t)1 << 30; end++; break;
        default: return -1;
        }
        if (*end != '\0' || bytes > SIZE_MAX / scale)
            return -1;
        *plan = pipecoll_plan_fsize(bytes * scale);
        return 0;
    }
    return -1;
}

/* ---- segmentation --------------------------------------------------------------------- */

size_t pipecoll_segments(const pipecoll_plan *plan, size_t count, size_t elem_size,
                         size_t *seg_counts)
{
    size_t numseg = 1, segsize = count;
    if (plan != NULL && count > 0) {
        switch (plan->kind) {
        case PIPECOLL_PLAN_SINGLE:
            break;
        case PIPECOLL_PLAN_FCONC: /* Listing 2: numseg fixed, segsize = count / numseg */
            numseg = plan->value == 0 ? 1 : plan->value;
            if (numseg > PIPECOLL_MAX_SEGMENTS)
                numseg = PIPECOLL_MAX_SEGMENTS;
            if (numseg > count) /* at least one element per segment */
                numseg = count;
            segsize = count / numseg;
            break;
        case PIPECOLL_PLAN_FSIZE: /* Listing 1: segsize fixed, numseg = ceil(count / segsize) */
            /* Whole elements only: a segment smaller than one element carries one. */
            segsize = (elem_size == 0 || plan->value < elem_size) ? 1 : plan->value / elem_size;
            if (segsize > count)
                segsize = count;
            numseg = count / segsize + (count % segsize != 0);
            if (numseg > PIPECOLL_MAX_SEGMENTS) { /* grow the segments to respect the cap */
                segsize = count / PIPECOLL_MAX_SEGMENTS + (count % PIPECOLL_MAX_SEGMENTS != 0);
                numseg = count / segsize + (count % segsize != 0);
            }
            break;
        }
    }
    if (seg_counts != NULL) {
        for (size_t h = 0; h + 1 < numseg; h++)
            seg_counts[h] = segsize;
        seg_counts[numseg - 1] = count - (numseg - 1) * segsize; /* the remainder */
    }
    return numseg;
}

/* ---- requests ------------------------------------------------------------------------- */

struct pipecoll_request_s {
    pipecoll_schedule schedule;
    int nreq;            /* MPI requests started */
    void *scratch;       /* owned buffer the segments read from (freed on completion) */
    MPI_Request reqs[];  /* NATIVE: one per segment */
};

static pipecoll_request request_new(pipecoll_schedule schedule, size_t numseg)
{
    pipecoll_request req = malloc(sizeof(*req) + numseg * sizeof(MPI_Request));
    if (req != NULL) {
        req->schedule = schedule;
        req->nreq = 0;
        req->scratch = NULL;
    }
    return req;
}

/* Completes what was started before an error, so no request leaks; returns `err`. */
static int request_abandon(pipecoll_request req, int err)
{
    if (req->nreq > 0)
        PC_MPI(Waitall)(req->nreq, req->reqs, MPI_STATUSES_IGNORE);
    free(req->scratch);
    free(req);
    return err;
}

int pipecoll_wait(pipecoll_request *request)
{
    if (request == NULL)
        return MPI_ERR_ARG;
    pipecoll_request req = *request;
    if (req == PIPECOLL_REQUEST_NULL)
        return MPI_SUCCESS;
    int err = MPI_SUCCESS;
    switch (req->schedule) {
    case PIPECOLL_SCHEDULE_NATIVE:
        err = PC_MPI(Waitall)(req->nreq, req->reqs, MPI_STATUSES_IGNORE);
        break;
    }
    free(req->scratch);
    free(req);
    *request = PIPECOLL_REQUEST_NULL;
    return err;
}

int pipecoll_test(pipecoll_request *request, int *completed)
{
    if (request == NULL || completed == NULL)
        return MPI_ERR_ARG;
    pipecoll_request req = *request;
    if (req == PIPECOLL_REQUEST_NULL) {
        *completed = 1;
        return MPI_SUCCESS;
    }
    int err = MPI_SUCCESS;
    *completed = 0;
    switch (req->schedule) {
    case PIPECOLL_SCHEDULE_NATIVE:
        err = PC_MPI(Testall)(req->nreq, req->reqs, completed, MPI_STATUSES_IGNORE);
        break;
    }
    if (err != MPI_SUCCESS || *completed) {
        free(req->scratch);
        free(req);
        *request = PIPECOLL_REQUEST_NULL;
    }
    return err;
}

size_t pipecoll_request_segments(pipecoll_request request)
{
    return request == PIPECOLL_REQUEST_NULL ? 0 : (size_t)request->nreq;
}

/* ---- the engine ----------------------------------------------------------------------- */

typedef enum { COLL_ALLREDUCE, COLL_REDUCE, COLL_BCAST, COLL_ALLGATHER, COLL_RSB } coll_kind;

/* One collective call, as given by the caller. For ALLGATHER/RSB `count` is the per-rank
 * block (elements) and `stride_type` describes one segment of every block (see below). */
typedef struct {
    coll_kind kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    MPI_Datatype datatype;  /* recvtype for allgather */
    size_t sendcount;       /* allgather, unsegmented only */
    MPI_Datatype sendtype;  /* allgather, unsegmented only */
    MPI_Op op;
    int root;
    MPI_Comm comm;
    MPI_Aint extent;        /* of datatype */
    char *packed;           /* RSB: the send blocks regrouped segment by segment */
    size_t nblocks;         /* RSB: blocks in the send buffer */
} coll_args;

/* Segment h covers elements [off, off + n) of the buffer (of every rank's block for
 * ALLGATHER/RSB). ALLGATHER: `blocktype`, when not MPI_DATATYPE_NULL, is n elements resized
 * to the extent of a whole block: with count 1 it picks the segment out of every block.
 * RSB: when `packed` is set, the segment's pieces of all blocks lie side by side there at
 * element nblocks * off (see pack_rsb). */
static int start_native(const coll_args *a, size_t off, size_t n, MPI_Datatype blocktype,
                        MPI_Request *req)
{
    const char *sbuf = a->sendbuf;
    char *rbuf = a->recvbuf;
    MPI_Aint shift = (MPI_Aint)off * a->extent;
    const void *s = (sbuf == MPI_IN_PLACE || sbuf == NULL) ? sbuf : sbuf + shift;
    void *r = rbuf == NULL ? NULL : rbuf + shift;
    int cnt = (int)n;
    switch (a->kind) {
    case COLL_ALLREDUCE:
        return PC_MPI(Iallreduce)(s, r, cnt, a->datatype, a->op, a->comm, req);
    case COLL_REDUCE:
        return PC_MPI(Ireduce)(s, r, cnt, a->datatype, a->op, a->root, a->comm, req);
    case COLL_BCAST:
        return PC_MPI(Ibcast)(r, cnt, a->datatype, a->root, a->comm, req);
    case COLL_ALLGATHER:
        if (blocktype == MPI_DATATYPE_NULL) /* the whole block: exactly the caller's call */
            return PC_MPI(Iallgather)(a->sendbuf, (int)a->sendcount, a->sendtype, a->recvbuf,
                                      cnt, a->datatype, a->comm, req);
        /* send side: n contiguous elements of this rank's block; receive side: the same
         * n elements of every rank's block, one blocktype each */
        return PC_MPI(Iallgather)(s, cnt, a->datatype, r, 1, blocktype, a->comm, req);
    case COLL_RSB:
        if (a->packed != NULL)
            s = a->packed + (MPI_Aint)(off * a->nblocks) * a->extent;
        return PC_MPI(Ireduce_scatter_block)(s, r, cnt, a->datatype, a->op, a->comm, req);
    }
    return MPI_ERR_INTERN;
}

/* A datatype the engine may cut between elements: its data fills its extent, no gaps.
 * Anything else (vectors, padded structs, ...) is carried in one segment. */
static int is_contiguous(MPI_Datatype type, MPI_Aint *extent, int *size)
{
    MPI_Aint lb, true_lb, true_extent;
    *extent = 0;
    if (type == MPI_DATATYPE_NULL) /* let the MPI call itself report it */
        return 0;
    if (PC_MPI(Type_size)(type, size) != MPI_SUCCESS ||
        PC_MPI(Type_get_extent)(type, &lb, extent) != MPI_SUCCESS ||
        PC_MPI(Type_get_true_extent)(type, &true_lb, &true_extent) != MPI_SUCCESS)
        return 0;
    return *size > 0 && (MPI_Aint)*size == *extent && true_extent == *extent;
}

/* count elements of datatype, one block of a strided layout of `count` elements per rank:
 * n elements, stretched to the block's extent. */
static int make_blocktype(MPI_Datatype datatype, size_t n, size_t count, MPI_Aint extent,
                          MPI_Datatype *out)
{
    MPI_Datatype piece;
    MPI_Aint lb, ext;
    int err = PC_MPI(Type_contiguous)((int)n, datatype, &piece);
    if (err != MPI_SUCCESS)
        return err;
    PC_MPI(Type_get_extent)(piece, &lb, &ext);
    err = PC_MPI(Type_create_resized)(piece, lb, (MPI_Aint)count * extent, out);
    PC_MPI(Type_free)(&piece);
    if (err == MPI_SUCCESS)
        err = PC_MPI(Type_commit)(out);
    return err;
}

/* Reduce-scatter segments cannot use a strided datatype as allgather does: all three MPI
 * libraries refuse a predefined op (MPI_SUM, MPI_MAX) on a resized contiguous type with
 * MPI_ERR_OP (Open MPI 4.1.4, MPICH 5.0.2: "MPI_Op operation not defined for this
 * datatype", Intel MPI 2021.18), and a user op would be handed a datatype its author
 * never saw. So the send blocks are regrouped once, before any segment starts, into a
 * scratch buffer where segment h's pieces of every block are contiguous; each segment is
 * then an ordinary MPI_Ireduce_scatter_block of the caller's datatype. Packing everything
 * first also makes MPI_IN_PLACE safe: results land in recvbuf after it was read. */
static int pack_rsb(coll_args *a, const size_t *seg_counts, size_t numseg)
{
    int inter = 0, nblocks = 0;
    PC_MPI(Comm_test_inter)(a->comm, &inter);
    int err = inter ? PC_MPI(Comm_remote_size)(a->comm, &nblocks)
                    : PC_MPI(Comm_size)(a->comm, &nblocks);
    if (err != MPI_SUCCESS)
        return err;
    size_t es = (size_t)a->extent, block = a->count * es;
    a->nblocks = (size_t)nblocks;
    a->packed = malloc(a->nblocks * block);
    if (a->packed == NULL)
        return MPI_ERR_NO_MEM;
    const char *src = a->sendbuf == MPI_IN_PLACE ? a->recvbuf : a->sendbuf;
    size_t off = 0;
    for (size_t h = 0; h < numseg; h++) {
        size_t piece = seg_counts[h] * es;
        char *dst = a->packed + a->nblocks * off * es;
        for (size_t b = 0; b < a->nblocks; b++)
            memcpy(dst + b * piece, src + b * block + off * es, piece);
        off += seg_counts[h];
    }
    return MPI_SUCCESS;
}

static int pipelined_start(coll_args *a, const pipecoll_plan *plan, pipecoll_request *request)
{
    if (plan == NULL || request == NULL)
        return MPI_ERR_ARG;
    *request = PIPECOLL_REQUEST_NULL;
    if ((plan->kind == PIPECOLL_PLAN_FSIZE || plan->kind == PIPECOLL_PLAN_FCONC) &&
        plan->value == 0)
        return MPI_ERR_ARG; /* zero segments, or segments of zero bytes */

    int elem_size = 0;
    int segmentable = is_contiguous(a->datatype, &a->extent, &elem_size);
    if (a->kind == COLL_ALLGATHER && a->sendbuf != MPI_IN_PLACE &&
        (a->sendtype != a->datatype || a->sendcount != a->count)) {
        segmentable = 0; /* differing type signatures: carried whole, as given */
        if (a->sendcount > INT_MAX)
            return MPI_ERR_COUNT;
    }

    size_t seg_counts[PIPECOLL_MAX_SEGMENTS];
    size_t numseg = segmentable
        ? pipecoll_segments(plan, a->count, (size_t)elem_size, seg_counts)
        : pipecoll_segments(NULL, a->count, 0, seg_counts);
    for (size_t h = 0; h < numseg; h++)
        if (seg_counts[h] > INT_MAX)
            return MPI_ERR_COUNT; /* each segment goes through an int count */

    pipecoll_request req = request_new(plan->schedule, numseg);
    if (req == NULL)
        return MPI_ERR_NO_MEM;

    if (a->kind == COLL_RSB && numseg > 1) {
        int err = pack_rsb(a, seg_counts, numseg);
        req->scratch = a->packed; /* freed with the request */
        if (err != MPI_SUCCESS)
            return request_abandon(req, err);
    }
    int strided = a->kind == COLL_ALLGATHER && numseg > 1;
    /* Every segment but the last has the same size: at most two block types. */
    MPI_Datatype types[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};
    int err = MPI_SUCCESS;
    size_t off = 0;
    for (size_t h = 0; h < numseg && err == MPI_SUCCESS; h++) {
        MPI_Datatype blocktype = MPI_DATATYPE_NULL;
        if (strided) {
            int slot = seg_counts[h] == seg_counts[0] ? 0 : 1;
            if (types[slot] == MPI_DATATYPE_NULL)
                err = make_blocktype(a->datatype, seg_counts[h], a->count, a->extent,
                                     &types[slot]);
            blocktype = types[slot];
        }
        if (err != MPI_SUCCESS)
            break;
        switch (plan->schedule) {
        case PIPECOLL_SCHEDULE_NATIVE:
            err = start_native(a, off, seg_counts[h], blocktype, &req->reqs[h]);
            break;
        default:
            err = MPI_ERR_ARG;
        }
        if (err == MPI_SUCCESS)
            req->nreq++;
        off += seg_counts[h];
    }
    /* Freeing a datatype after the operations that use it started is legal MPI. */
    for (int i = 0; i < 2; i++)
        if (types[i] != MPI_DATATYPE_NULL)
            PC_MPI(Type_free)(&types[i]);
    if (err != MPI_SUCCESS)
        return request_abandon(req, err);
    *request = req;
    return MPI_SUCCESS;
}

/* ---- the API -------------------------------------------------------------------------- */

int pipecoll_iallreduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, const pipecoll_plan *plan,
                        pipecoll_request *request)
{
    coll_args a = {.kind = COLL_ALLREDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf,
                   .count = count, .datatype = datatype, .op = op, .comm = comm};
    return pipelined_start(&a, plan, request);
}

int pipecoll_ireduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Datatype datatype,
                     MPI_Op op, int root, MPI_Comm comm, const pipecoll_plan *plan,
                     pipecoll_request *request)
{
    coll_args a = {.kind = COLL_REDUCE, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                   .datatype = datatype, .op = op, .root = root, .comm = comm};
    return pipelined_start(&a, plan, request);
}

int pipecoll_ibcast(void *buffer, size_t count, MPI_Datatype datatype, int root, MPI_Comm comm,
                    const pipecoll_plan *plan, pipecoll_request *request)
{
    coll_args a = {.kind = COLL_BCAST, .sendbuf = NULL, .recvbuf = buffer, .count = count,
                   .datatype = datatype, .root = root, .comm = comm};
    return pipelined_start(&a, plan, request);
}

int pipecoll_iallgather(const void *sendbuf, size_t sendcount, MPI_Datatype sendtype,
                        void *recvbuf, size_t recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                        const pipecoll_plan *plan, pipecoll_request *request)
{
    coll_args a = {.kind = COLL_ALLGATHER, .sendbuf = sendbuf, .recvbuf = recvbuf,
                   .count = recvcount, .datatype = recvtype, .sendcount = sendcount,
                   .sendtype = sendtype, .comm = comm};
    return pipelined_start(&a, plan, request);
}

int pipecoll_ireduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                   const pipecoll_plan *plan, pipecoll_request *request)
{
    coll_args a = {.kind = COLL_RSB, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = recvcount,
                   .datatype = datatype, .op = op, .comm = comm};
    return pipelined_start(&a, plan, request);
}

int pipecoll_allreduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, const pipecoll_plan *plan)
{
    pipecoll_request req;
    int err = pipecoll_iallreduce(sendbuf, recvbuf, count, datatype, op, comm, plan, &req);
    return err != MPI_SUCCESS ? err : pipecoll_wait(&req);
}

int pipecoll_reduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Datatype datatype,
                    MPI_Op op, int root, MPI_Comm comm, const pipecoll_plan *plan)
{
    pipecoll_request req;
    int err = pipecoll_ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, plan, &req);
    return err != MPI_SUCCESS ? err : pipecoll_wait(&req);
}

int pipecoll_bcast(void *buffer, size_t count, MPI_Datatype datatype, int root, MPI_Comm comm,
                   const pipecoll_plan *plan)
{
    pipecoll_request req;
    int err = pipecoll_ibcast(buffer, count, datatype, root, comm, plan, &req);
    return err != MPI_SUCCESS ? err : pipecoll_wait(&req);
}

int pipecoll_allgather(const void *sendbuf, size_t sendcount, MPI_Datatype sendtype,
                       void *recvbuf, size_t recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                       const pipecoll_plan *plan)
{
    pipecoll_request req;
    int err = pipecoll_iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                  comm, plan, &req);
    return err != MPI_SUCCESS ? err : pipecoll_wait(&req);
}

int pipecoll_reduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                  const pipecoll_plan *plan)
{
    pipecoll_request req;
    int err = pipecoll_ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm,
                                             plan, &req);
    return err != MPI_SUCCESS ? err : pipecoll_wait(&req);
}
