/*
 * pipecoll: pipelined non-blocking MPI collectives.
 *
 * The idea of Castelló, Quintana-Ortí and Duato (Cluster Computing 24(4), 2021): split one
 * large collective into segments, start every segment at once as a concurrent non-blocking
 * collective, then wait for all of them. Two segmentation plans, as in the paper:
 *   - fixed concurrency ("fconc", NBLxY): the message is split into Y segments;
 *   - fixed size ("fsize", XMB): segments of X bytes each.
 * The last segment takes the remainder; segments never split an element; a message with
 * fewer elements than segments becomes fewer segments (at least one element each); the
 * number of segments is capped at PIPECOLL_MAX_SEGMENTS.
 *
 * Every function returns an MPI error code (MPI_SUCCESS on success). Arguments that MPI
 * itself would reject are passed to MPI unchanged; pipecoll's own argument errors (a NULL
 * plan or request, fconc with 0 segments, fsize with 0 bytes) return MPI_ERR_ARG.
 *
 * A pipecoll_request is one handle for all segments of one collective: complete it with
 * pipecoll_wait or pipecoll_test, which free it and set it to PIPECOLL_REQUEST_NULL.
 */
#ifndef PIPECOLL_H
#define PIPECOLL_H

#include <stddef.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PIPECOLL_VERSION_MAJOR 0
#define PIPECOLL_VERSION_MINOR 1
#define PIPECOLL_VERSION_PATCH 0

/* Upper bound on segments per collective: more concurrent requests than this only add
 * per-request overhead (and some MPI libraries limit outstanding collectives). */
#define PIPECOLL_MAX_SEGMENTS 1024

typedef enum {
    PIPECOLL_PLAN_SINGLE = 0, /* one non-blocking call, no segmentation (NBL) */
    PIPECOLL_PLAN_FCONC = 1,  /* fixed number of segments (NBLxY): value = Y */
    PIPECOLL_PLAN_FSIZE = 2   /* fixed segment size (XMB): value = bytes per segment */
} pipecoll_plan_kind;

/* How each segment is carried out. NATIVE: one MPI_I<collective> per segment. The engine
 * keeps this open for schedules of pipecoll's own (segmented ring / Rabenseifner built
 * from Isend/Irecv), which do not depend on each library's non-blocking algorithms. */
typedef enum {
    PIPECOLL_SCHEDULE_NATIVE = 0
} pipecoll_schedule;

typedef struct {
    pipecoll_plan_kind kind;
    size_t value;               /* segments (FCONC) or bytes per segment (FSIZE); unused for SINGLE */
    pipecoll_schedule schedule;
} pipecoll_plan;

typedef struct pipecoll_request_s *pipecoll_request;
#define PIPECOLL_REQUEST_NULL ((pipecoll_request)0)

/* Convenience constructors. */
pipecoll_plan pipecoll_plan_single(void);
pipecoll_plan pipecoll_plan_fconc(size_t segments);
pipecoll_plan pipecoll_plan_fsize(size_t segment_bytes);

/* Parse "single" | "fconc:N" | "fsize:BYTES" (BYTES may end in K, M or G, powers of 1024)
 * into *plan. Returns 0 on success, -1 (and leaves *plan alone) on a malformed string. */
int pipecoll_plan_parse(const char *text, pipecoll_plan *plan);

/* Segmentation of `count` elements of `elem_size` bytes under `plan`: the number of
 * segments, and (if seg_counts != NULL, room for PIPECOLL_MAX_SEGMENTS entries) the element
 * count of each segment. count == 0 gives one segment of zero elements. */
size_t pipecoll_segments(const pipecoll_plan *plan, size_t count, size_t elem_size,
                         size_t *seg_counts);

/* Non-blocking pipelined collectives. Counts are size_t: segmentation lets a total exceed
 * INT_MAX elements as long as each segment fits in an int. sendbuf may be MPI_IN_PLACE
 * wherever the matching MPI call allows it. Only contiguous datatypes are segmented. */
int pipecoll_iallreduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, const pipecoll_plan *plan,
                        pipecoll_request *request);
int pipecoll_ireduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Datatype datatype,
                     MPI_Op op, int root, MPI_Comm comm, const pipecoll_plan *plan,
                     pipecoll_request *request);
int pipecoll_ibcast(void *buffer, size_t count, MPI_Datatype datatype, int root, MPI_Comm comm,
                    const pipecoll_plan *plan, pipecoll_request *request);
/* sendcount/recvcount: elements per rank, as MPI_Allgather. Each rank's block is split
 * into segments; segment h of every block travels in the same MPI_Iallgather. */
int pipecoll_iallgather(const void *sendbuf, size_t sendcount, MPI_Datatype sendtype,
                        void *recvbuf, size_t recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                        const pipecoll_plan *plan, pipecoll_request *request);
/* recvcount: elements each rank receives, as MPI_Reduce_scatter_block. */
int pipecoll_ireduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                   const pipecoll_plan *plan, pipecoll_request *request);

/* Completion. Both free the request when complete and set *request = PIPECOLL_REQUEST_NULL.
 * Waiting on PIPECOLL_REQUEST_NULL returns MPI_SUCCESS at once. */
int pipecoll_wait(pipecoll_request *request);
int pipecoll_test(pipecoll_request *request, int *completed);
/* Number of MPI requests (segments) behind a handle, for statistics and tests. */
size_t pipecoll_request_segments(pipecoll_request request);

/* Blocking helpers: start, then wait. */
int pipecoll_allreduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, const pipecoll_plan *plan);
int pipecoll_reduce(const void *sendbuf, void *recvbuf, size_t count, MPI_Datatype datatype,
                    MPI_Op op, int root, MPI_Comm comm, const pipecoll_plan *plan);
int pipecoll_bcast(void *buffer, size_t count, MPI_Datatype datatype, int root, MPI_Comm comm,
                   const pipecoll_plan *plan);
int pipecoll_allgather(const void *sendbuf, size_t sendcount, MPI_Datatype sendtype,
                       void *recvbuf, size_t recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                       const pipecoll_plan *plan);
int pipecoll_reduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                  const pipecoll_plan *plan);

#ifdef __cplusplus
}
#endif
#endif /* PIPECOLL_H */
