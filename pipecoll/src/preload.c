/*
 * libpipecoll_preload.so: PMPI interposer that gives an unmodified MPI program pipelined
 * collectives, chosen by environment variables (documented in pipecoll/README.md):
 *
 *   PIPECOLL_MODE                 bl | nbl | fconc:N | fsize:BYTES     (default bl)
 *   PIPECOLL_MODE_<COLLECTIVE>    the same, for ALLREDUCE, BCAST, REDUCE, ALLGATHER,
 *                                 REDUCE_SCATTER_BLOCK only (overrides PIPECOLL_MODE)
 *   PIPECOLL_THRESHOLD_BYTES      messages below this many bytes pass straight through
 *   PIPECOLL_TRACE                file for per-collective counts and a size histogram,
 *                                 written at MPI_Finalize ("%r" = world rank)
 *   PIPECOLL_VERBOSE              0 | 1: configuration and summary on stderr (rank 0)
 *
 * Every variable is checked in MPI_Init/MPI_Init_thread: a bad value stops the job there
 * with a message naming the variable and its valid forms.
 *
 * Cost: with mode bl and no trace/verbose, a wrapper is one load and a tail call to
 * PMPI_<collective> (no allocation, no locking, no environment look-up per call).
 * Thread safety: the configuration is written once, in MPI_Init*, before any other thread
 * can call MPI; statistics are updated under a mutex (Horovod calls MPI from its own
 * thread).
 */
#define _GNU_SOURCE /* strdup, in this C11 build */
#include "pipecoll.h"
#include "pipecoll_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef enum { C_ALLREDUCE, C_BCAST, C_REDUCE, C_ALLGATHER, C_RSB, NCOLL } coll_id;
static const char *const coll_name[NCOLL] = {"allreduce", "bcast", "reduce", "allgather",
                                             "reduce_scatter_block"};
static const char *const coll_env[NCOLL] = {
    "PIPECOLL_MODE_ALLREDUCE", "PIPECOLL_MODE_BCAST", "PIPECOLL_MODE_REDUCE",
    "PIPECOLL_MODE_ALLGATHER", "PIPECOLL_MODE_REDUCE_SCATTER_BLOCK"};

typedef enum { MODE_BL = 0, MODE_NBL, MODE_PLAN } mode_kind;

typedef struct {
    mode_kind kind;
    pipecoll_plan plan; /* MODE_PLAN */
    char text[64];      /* as given, for the trace and messages */
} mode_t_;

/* ---- configuration: written once in MPI_Init*, read-only afterwards ------------------- */
static mode_t_ g_mode[NCOLL];
/* g_slow[c] != 0: the call needs more than a tail call (pipelining or statistics). */
static int g_slow[NCOLL];
static int g_stats;         /* trace or verbose: count calls */
static size_t g_threshold;  /* bytes */
static char *g_trace;       /* path template, or NULL */
static int g_verbose;

/* ---- statistics ----------------------------------------------------------------------- */
typedef enum {
    R_PIPELINED, R_BL, R_THRESHOLD, R_DATATYPE, R_INTERCOMM, R_INVALID, NREASON
} route;
static const char *const route_name[NREASON] = {"pipelined", "mode_bl", "below_threshold",
                                                "noncontiguous_datatype", "intercommunicator",
                                                "negative_count"};

typedef struct {
    unsigned long long calls, bytes, routes[NREASON];
} coll_stats;

/* One histogram cell: (collective, datatype, message bytes) -> calls. Predefined datatypes
 * are kept by handle (stable for the whole run) and named at MPI_Finalize; derived ones
 * are lumped together as "derived" (their handles may be freed and reused). */
typedef struct {
    int used;
    int coll;
    int derived;
    MPI_Datatype type;
    unsigned long long bytes, calls;
} cell;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static coll_stats g_coll[NCOLL];
static cell *g_cells;
static size_t g_ncells, g_capcells;

static size_t cell_hash(int coll, int derived, MPI_Datatype type, unsigned long long bytes,
                        size_t cap)
{
    unsigned long long h = bytes * 0x9e3779b97f4a7c15ULL;
    uintptr_t t = 0;
    memcpy(&t, &type, sizeof(type) < sizeof(t) ? sizeof(type) : sizeof(t));
    h ^= (unsigned long long)t * 0xc2b2ae3d27d4eb4fULL + (unsigned long long)(coll * 2 + derived);
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static void cell_insert(cell *cells, size_t cap, const cell *c)
{
    size_t i = cell_hash(c->coll, c->derived, c->type, c->bytes, cap);
    while (cells[i].used)
        i = (i + 1) & (cap - 1);
    cells[i] = *c;
}

/* Called with g_lock held. */
static void cell_count(int coll, int derived, MPI_Datatype type, unsigned long long bytes)
{
    if (derived)
        type = MPI_DATATYPE_NULL;
    if (2 * (g_ncells + 1) > g_capcells) { /* keep the table at most half full */
        size_t cap = g_capcells ? 2 * g_capcells : 64;
        cell *cells = calloc(cap, sizeof(cell));
        if (cells == NULL)
            return; /* out of memory: the histogram loses this call, the counters do not */
        for (size_t i = 0; i < g_capcells; i++)
            if (g_cells[i].used)
                cell_insert(cells, cap, &g_cells[i]);
        free(g_cells);
        g_cells = cells;
        g_capcells = cap;
    }
    size_t i = cell_hash(coll, derived, type, bytes, g_capcells);
    while (g_cells[i].used) {
        cell *c = &g_cells[i];
        if (c->coll == coll && c->derived == derived && c->type == type && c->bytes == bytes) {
            c->calls++;
            return;
        }
        i = (i + 1) & (g_capcells - 1);
    }
    g_cells[i] = (cell){1, coll, derived, type, bytes, 1};
    g_ncells++;
}

static void record(coll_id c, route r, MPI_Datatype type, unsigned long long bytes)
{
    int combiner = MPI_COMBINER_NAMED, ni, na, nd;
    if (type != MPI_DATATYPE_NULL)
        PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
    pthread_mutex_lock(&g_lock);
    g_coll[c].calls++;
    g_coll[c].bytes += bytes;
    g_coll[c].routes[r]++;
    cell_count(c, combiner != MPI_COMBINER_NAMED, type, bytes);
    pthread_mutex_unlock(&g_lock);
}

/* ---- routing -------------------------------------------------------------------------- */

static int contiguous(MPI_Datatype type, int *size)
{
    MPI_Aint lb, extent, true_lb, true_extent;
    *size = 0;
    if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, size) != MPI_SUCCESS)
        return 0;
    PMPI_Type_get_extent(type, &lb, &extent);
    PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
    return *size > 0 && (MPI_Aint)*size == extent && true_extent == extent;
}

/* Decides how a call in a non-bl mode (or with statistics on) is carried out, and counts
 * it. `type` is the datatype whose size defines the message; `same_sides` is 0 when the
 * send side of an allgather differs from its receive side (then it is not cut). */
static route choose(coll_id c, int count, MPI_Datatype type, int same_sides, MPI_Comm comm)
{
    int size = 0, inter = 0;
    int ok = contiguous(type, &size) && same_sides; /* also gets the size when it can */
    unsigned long long bytes = (unsigned long long)(count > 0 ? count : 0) * (unsigned)size;
    route r;
    if (g_mode[c].kind == MODE_BL)
        r = R_BL;
    else if (count < 0) /* erroneous: let the MPI library report it as it would */
        r = R_INVALID;
    else if (bytes < g_threshold)
        r = R_THRESHOLD;
    else if (!ok)
        r = R_DATATYPE;
    else if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
        r = R_INTERCOMM;
    else
        r = R_PIPELINED;
    if (g_stats)
        record(c, r, type, bytes);
    return r;
}

/* ---- the wrappers --------------------------------------------------------------------- */
/* Each MPI_<coll> is a test and a tail call; the rest lives in a separate, never inlined
 * slow_<coll> so that the fast path saves no registers and sets up no frame. */

static __attribute__((noinline)) int slow_allreduce(const void *sendbuf, void *recvbuf,
                                                    int count, MPI_Datatype datatype,
                                                    MPI_Op op, MPI_Comm comm)
{
    if (choose(C_ALLREDUCE, count, datatype, 1, comm) != R_PIPELINED)
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    if (g_mode[C_ALLREDUCE].kind == MODE_NBL) {
        MPI_Request req;
        int err = PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, &req);
        return err != MPI_SUCCESS ? err : PMPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    return pipecoll_allreduce(sendbuf, recvbuf, (size_t)count, datatype, op, comm,
                              &g_mode[C_ALLREDUCE].plan);
}

EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm)
{
    if (__builtin_expect(!g_slow[C_ALLREDUCE], 1))
        return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    return slow_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

static __attribute__((noinline)) int slow_reduce(const void *sendbuf, void *recvbuf, int count,
                                                 MPI_Datatype datatype, MPI_Op op, int root,
                                                 MPI_Comm comm)
{
    if (choose(C_REDUCE, count, datatype, 1, comm) != R_PIPELINED)
        return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    if (g_mode[C_REDUCE].kind == MODE_NBL) {
        MPI_Request req;
        int err = PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, &req);
        return err != MPI_SUCCESS ? err : PMPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    return pipecoll_reduce(sendbuf, recvbuf, (size_t)count, datatype, op, root, comm,
                           &g_mode[C_REDUCE].plan);
}

EXPORT int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                      MPI_Op op, int root, MPI_Comm comm)
{
    if (__builtin_expect(!g_slow[C_REDUCE], 1))
        return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
    return slow_reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}

static __attribute__((noinline)) int slow_bcast(void *buffer, int count, MPI_Datatype datatype,
                                                int root, MPI_Comm comm)
{
    if (choose(C_BCAST, count, datatype, 1, comm) != R_PIPELINED)
        return PMPI_Bcast(buffer, count, datatype, root, comm);
    if (g_mode[C_BCAST].kind == MODE_NBL) {
        MPI_Request req;
        int err = PMPI_Ibcast(buffer, count, datatype, root, comm, &req);
        return err != MPI_SUCCESS ? err : PMPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    return pipecoll_bcast(buffer, (size_t)count, datatype, root, comm, &g_mode[C_BCAST].plan);
}

EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    if (__builtin_expect(!g_slow[C_BCAST], 1))
        return PMPI_Bcast(buffer, count, datatype, root, comm);
    return slow_bcast(buffer, count, datatype, root, comm);
}

static __attribute__((noinline)) int slow_allgather(const void *sendbuf, int sendcount,
                                                    MPI_Datatype sendtype, void *recvbuf,
                                                    int recvcount, MPI_Datatype recvtype,
                                                    MPI_Comm comm)
{
    /* The message is one rank's block; in place, the send arguments are ignored. A send
     * side that differs from the receive side (type or count) is not cut. */
    int same = sendbuf == MPI_IN_PLACE || (sendtype == recvtype && sendcount == recvcount);
    if (choose(C_ALLGATHER, recvcount, recvtype, same, comm) != R_PIPELINED)
        return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    if (g_mode[C_ALLGATHER].kind == MODE_NBL) {
        MPI_Request req;
        int err = PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                  comm, &req);
        return err != MPI_SUCCESS ? err : PMPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    return pipecoll_allgather(sendbuf, (size_t)sendcount, sendtype, recvbuf, (size_t)recvcount,
                              recvtype, comm, &g_mode[C_ALLGATHER].plan);
}

EXPORT int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                         void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    if (__builtin_expect(!g_slow[C_ALLGATHER], 1))
        return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    return slow_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

static __attribute__((noinline)) int slow_reduce_scatter_block(const void *sendbuf,
                                                               void *recvbuf, int recvcount,
                                                               MPI_Datatype datatype,
                                                               MPI_Op op, MPI_Comm comm)
{
    if (choose(C_RSB, recvcount, datatype, 1, comm) != R_PIPELINED)
        return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
    if (g_mode[C_RSB].kind == MODE_NBL) {
        MPI_Request req;
        int err = PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm,
                                             &req);
        return err != MPI_SUCCESS ? err : PMPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    return pipecoll_reduce_scatter_block(sendbuf, recvbuf, (size_t)recvcount, datatype, op,
                                         comm, &g_mode[C_RSB].plan);
}

EXPORT int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    if (__builtin_expect(!g_slow[C_RSB], 1))
        return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
    return slow_reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

/* ---- configuration -------------------------------------------------------------------- */

static const char mode_forms[] =
    "bl (the library's own blocking call), nbl (one non-blocking call + wait), "
    "fconc:N (N >= 1 concurrent segments) or fsize:BYTES (segments of BYTES >= 1, "
    "suffix K, M or G allowed), e.g. fconc:4 or fsize:4M";

/* Appends one problem to the error text. */
__attribute__((format(printf, 3, 4)))
static void complain(char *errors, size_t room, const char *fmt, ...)
{
    size_t used = strlen(errors);
    va_list args;
    va_start(args, fmt);
    vsnprintf(errors + used, room - used, fmt, args);
    va_end(args);
}

static int parse_mode(const char *text, mode_t_ *mode)
{
    pipecoll_plan plan;
    if (strcmp(text, "bl") == 0)
        mode->kind = MODE_BL;
    else if (strcmp(text, "nbl") == 0)
        mode->kind = MODE_NBL;
    else if ((strncmp(text, "fconc:", 6) == 0 || strncmp(text, "fsize:", 6) == 0) &&
             pipecoll_plan_parse(text, &plan) == 0) {
        mode->kind = MODE_PLAN;
        mode->plan = plan;
    } else
        return -1;
    snprintf(mode->text, sizeof mode->text, "%s", text);
    return 0;
}

/* Reads an environment variable; an empty value counts as unset. */
static const char *env(const char *name)
{
    const char *value = getenv(name);
    return (value != NULL && *value != '\0') ? value : NULL;
}

/* Parses every PIPECOLL_* variable; returns 0, or -1 with the problems in `errors`. */
static int configure(char *errors, size_t room)
{
    errors[0] = '\0';
    mode_t_ base = {MODE_BL, {PIPECOLL_PLAN_SINGLE, 0, PIPECOLL_SCHEDULE_NATIVE}, "bl"};
    const char *value = env("PIPECOLL_MODE");
    if (value != NULL && parse_mode(value, &base) != 0)
        complain(errors, room, "pipecoll: %s='%s' is not valid; use %s\n", "PIPECOLL_MODE",
                 value, mode_forms);
    for (int c = 0; c < NCOLL; c++) {
        g_mode[c] = base;
        value = env(coll_env[c]);
        if (value != NULL && parse_mode(value, &g_mode[c]) != 0)
            complain(errors, room, "pipecoll: %s='%s' is not valid; use %s\n", coll_env[c],
                     value, mode_forms);
    }
    value = env("PIPECOLL_THRESHOLD_BYTES");
    if (value != NULL) {
        /* the fsize syntax parses a byte count with its K/M/G suffix; 0 is allowed here */
        pipecoll_plan plan;
        char buf[80];
        snprintf(buf, sizeof buf, "fsize:%s", value);
        if (strcmp(value, "0") == 0)
            g_threshold = 0;
        else if (strlen(value) < 60 && pipecoll_plan_parse(buf, &plan) == 0)
            g_threshold = plan.value;
        else
            complain(errors, room, "pipecoll: %s='%s' is not valid; use a byte count (an "
                     "integer >= 0, suffix K, M or G allowed), e.g. 65536 or 64K\n",
                     "PIPECOLL_THRESHOLD_BYTES", value);
    }
    value = env("PIPECOLL_VERBOSE");
    if (value != NULL) {
        if (strcmp(value, "0") == 0 || strcmp(value, "1") == 0)
            g_verbose = value[0] == '1';
        else
            complain(errors, room, "pipecoll: %s='%s' is not valid; use 0 or 1\n",
                     "PIPECOLL_VERBOSE", value);
    }
    value = env("PIPECOLL_TRACE");
    if (value != NULL) {
        /* The trace is written at the end of the run: find a bad directory now, not then. */
        char *dir = strdup(value);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        const char *where = slash == NULL ? "." : (slash == dir ? "/" : (*slash = '\0', dir));
        if (dir == NULL || access(where, W_OK) != 0)
            complain(errors, room, "pipecoll: %s='%s' is not valid; its directory does not "
                     "exist or is not writable (the trace file is written there at "
                     "MPI_Finalize)\n", "PIPECOLL_TRACE", value);
        else
            g_trace = strdup(value);
        free(dir);
    }
    if (errors[0] != '\0')
        return -1;
    g_stats = g_trace != NULL || g_verbose;
    for (int c = 0; c < NCOLL; c++)
        g_slow[c] = g_mode[c].kind != MODE_BL || g_stats;
    return 0;
}

/* After PMPI_Init*: stop the job on a bad configuration, else report it if asked.
 * Stopping is a clean exit, not MPI_Abort: an abort can tear the job down before the
 * launcher has forwarded the message (seen with MPICH's hydra, about 1 run in 15), and the
 * message is the point. All ranks first agree whether any of them has a problem, so no
 * rank is left waiting in the program's first collective. */
static int after_init(int err)
{
    if (err != MPI_SUCCESS)
        return err;
    char errors[4096];
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int mine = configure(errors, sizeof errors) != 0 ? rank : INT_MAX, first = INT_MAX;
    PMPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first != INT_MAX) {
        if (rank == first) { /* the lowest rank with a problem speaks for all */
            fputs(errors, stderr);
            fputs("pipecoll: stopping (see pipecoll/README.md, the interposer)\n", stderr);
            fflush(stderr);
        }
        PMPI_Finalize();
        exit(2);
    }
    if (g_verbose && rank == 0) {
        fprintf(stderr, "pipecoll %s interposer:", PIPECOLL_VERSION_STRING);
        for (int c = 0; c < NCOLL; c++)
            fprintf(stderr, " %s=%s", coll_name[c], g_mode[c].text);
        fprintf(stderr, " threshold=%zu trace=%s\n", g_threshold, g_trace ? g_trace : "(none)");
    }
    return MPI_SUCCESS;
}

EXPORT int MPI_Init(int *argc, char ***argv)
{
    return after_init(PMPI_Init(argc, argv));
}

EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    return after_init(PMPI_Init_thread(argc, argv, required, provided));
}

/* ---- the trace ------------------------------------------------------------------------ */

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", out);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

static int cell_order(const void *a, const void *b)
{
    const cell *x = a, *y = b;
    if (x->coll != y->coll)
        return x->coll - y->coll;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? -1 : 1;
    return x->derived - y->derived;
}

/* "%r" in the template becomes the rank; the result is malloc'ed. */
static char *trace_path(const char *tmpl, int rank)
{
    size_t room = strlen(tmpl) + 32;
    char *path = malloc(room), *out = path;
    if (path == NULL)
        return NULL;
    for (const char *s = tmpl; *s; s++) {
        if (s[0] == '%' && s[1] == 'r') {
            out += snprintf(out, room - (size_t)(out - path), "%d", rank);
            s++;
        } else
            *out++ = *s;
        if ((size_t)(out - path) + 24 > room) { /* another rank number must still fit */
            size_t used = (size_t)(out - path);
            room *= 2;
            char *grown = realloc(path, room);
            if (grown == NULL) {
                free(path);
                return NULL;
            }
            path = grown;
            out = path + used;
        }
    }
    *out = '\0';
    return path;
}

static void write_trace(int rank, int nprocs)
{
    /* Without "%r" only rank 0 writes (an SPMD program makes the same calls everywhere);
     * with it, every rank writes its own file. */
    if (strstr(g_trace, "%r") == NULL && rank != 0)
        return;
    char *path = trace_path(g_trace, rank);
    if (path == NULL)
        return;
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (tmp == NULL) {
        free(path);
        return;
    }
    snprintf(tmp, tlen, "%s.tmp.%d", path, (int)getpid());
    FILE *out = fopen(tmp, "w");
    if (out == NULL) {
        fprintf(stderr, "pipecoll: cannot write the trace %s: %s\n", tmp, strerror(errno));
        free(tmp);
        free(path);
        return;
    }
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    PMPI_Get_library_version(version, &len);
    char host[256] = "";
    gethostname(host, sizeof host - 1);

    pthread_mutex_lock(&g_lock);
    fprintf(out, "{\n  \"format\": \"pipecoll-trace/1\",\n  \"pipecoll_version\": ");
    json_string(out, PIPECOLL_VERSION_STRING);
    fprintf(out, ",\n  \"mpi_library_version\": ");
    json_string(out, version);
    fprintf(out, ",\n  \"host\": ");
    json_string(out, host);
    fprintf(out, ",\n  \"rank\": %d,\n  \"nprocs\": %d,\n  \"threshold_bytes\": %zu,\n", rank,
            nprocs, g_threshold);
    fprintf(out, "  \"size_definition\": \"count x datatype size of the call; allgather and "
                 "reduce_scatter_block: one rank's block\",\n  \"collectives\": {");
    size_t n = 0;
    cell *sorted = calloc(g_ncells ? g_ncells : 1, sizeof(cell));
    if (sorted != NULL) {
        for (size_t i = 0; i < g_capcells; i++)
            if (g_cells[i].used)
                sorted[n++] = g_cells[i];
        qsort(sorted, n, sizeof(cell), cell_order);
    }
    for (int c = 0; c < NCOLL; c++) {
        fprintf(out, "%s\n    \"%s\": {\n      \"mode\": ", c ? "," : "", coll_name[c]);
        json_string(out, g_mode[c].text);
        fprintf(out, ",\n      \"calls\": %llu,\n      \"bytes\": %llu,\n      \"routes\": {",
                g_coll[c].calls, g_coll[c].bytes);
        for (int r = 0; r < NREASON; r++)
            fprintf(out, "%s\"%s\": %llu", r ? ", " : "", route_name[r], g_coll[c].routes[r]);
        fprintf(out, "},\n      \"sizes\": [");
        int first = 1;
        for (size_t i = 0; i < n; i++) {
            if (sorted[i].coll != c)
                continue;
            char name[MPI_MAX_OBJECT_NAME] = "derived";
            int nlen = 0;
            if (!sorted[i].derived)
                PMPI_Type_get_name(sorted[i].type, name, &nlen);
            fprintf(out, "%s\n        {\"bytes\": %llu, \"datatype\": ", first ? "" : ",",
                    sorted[i].bytes);
            json_string(out, name);
            fprintf(out, ", \"calls\": %llu}", sorted[i].calls);
            first = 0;
        }
        fprintf(out, "%s]\n    }", first ? "" : "\n      ");
    }
    fprintf(out, "\n  }\n}\n");
    pthread_mutex_unlock(&g_lock);
    free(sorted);
    int bad = ferror(out);
    bad |= fclose(out) != 0;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "pipecoll: cannot write the trace %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    free(path);
}

EXPORT int MPI_Finalize(void)
{
    int rank = 0, nprocs = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (g_trace != NULL)
        write_trace(rank, nprocs);
    if (g_verbose && rank == 0) {
        pthread_mutex_lock(&g_lock);
        for (int c = 0; c < NCOLL; c++) {
            if (g_coll[c].calls == 0)
                continue;
            fprintf(stderr, "pipecoll: rank 0 %s: %llu calls, %llu bytes;", coll_name[c],
                    g_coll[c].calls, g_coll[c].bytes);
            for (int r = 0; r < NREASON; r++)
                fprintf(stderr, " %s %llu", route_name[r], g_coll[c].routes[r]);
            fputc('\n', stderr);
        }
        pthread_mutex_unlock(&g_lock);
    }
    return PMPI_Finalize();
}
