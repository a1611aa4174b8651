/*
 * pcbench: the benchmark driver behind every micro-benchmark figure.
 *
 * One run = one collective, one op, one datatype, a list of variants (BL = plain
 * MPI_<Coll>, NBL = MPI_I<coll> + MPI_Wait, fconc:N = NBLxN, fsize:BYTES = XMB through
 * pipecoll) and message sizes in powers of two. For every (size, variant) it
 *   1. checks the result once against exact expected values (unless --no-check or op noop),
 *   2. runs --warmup untimed repetitions,
 *   3. times repetitions as the paper does: MPI_Barrier, time one complete collective,
 *      the repetition's time is the slowest rank's (MPI_Reduce MAX to rank 0);
 *      --iters repetitions and/or until --time-budget seconds have passed (rank 0 decides,
 *      every rank follows, at least one repetition),
 *   4. reports mean (the paper's metric), min, median and max, MB/s = bytes/1e6/mean and
 *      the nccl-tests bus bandwidth, as a table line on stdout and one JSON Lines row
 *      (pcbench-row.schema.json beside this file), written atomically at the end.
 * Sizes are the outer loop and variants the inner one, so the variants of one size are
 * measured close together in time: comparisons between them suffer less from drifting
 * background load on a shared machine.
 *
 * Exit status: 0 success, 1 a result check failed (rows are still written), 2 usage error,
 * 3 not enough memory or the output file cannot be written, 4 an MPI call failed (the job
 * is aborted: the other ranks would wait forever).
 *
 * Test hook: PCBENCH_CORRUPT_FOR_TEST=1 overwrites the last result element on one rank after
 * each checked collective, so the tests can prove that the check detects a wrong result.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "pipecoll.h"

#ifndef PIPECOLL_VERSION_STRING
#error "PIPECOLL_VERSION_STRING must be defined (pipecoll/CMakeLists.txt defines it)"
#endif

enum { EXIT_CHECK_FAILED = 1, EXIT_USAGE = 2, EXIT_RESOURCES = 3, EXIT_MPI_ERROR = 4 };

#define MAX_BYTES_LIMIT ((size_t)1 << 30) /* 1 GiB, the paper's largest message */
#define MAX_VARIANTS 64
#define MAX_LABELS 64
/* The input pattern repeats with this period (a prime): a segment that lands at the wrong
 * offset is caught because no power-of-two segment size is a multiple of it. */
#define PATTERN_PERIOD 65521

/* ---- vocabulary -------------------------------------------------------------------- */
typedef enum { COLL_ALLREDUCE, COLL_BCAST, COLL_REDUCE, COLL_ALLGATHER, COLL_RSB } collective;
static const char *const COLL_NAMES[] = {"allreduce", "bcast", "reduce", "allgather",
                                         "reduce_scatter_block"};
#define N_COLLS 5

typedef enum { DT_INT32, DT_INT64, DT_FLOAT, DT_DOUBLE, DT_INT8, DT_UINT8 } dtype_id;
/* max_sum: largest sum the check may produce and still compare exactly; for uint8 one
 * below 255 because 255 ((uint8_t)-1) is the "not written" sentinel. */
static const struct {
    const char *name;
    size_t size;
    double max_sum;
} DTYPES[] = {
    {"int32", 4, 2147483647.0}, {"int64", 8, 9.2e18}, {"float", 4, 16777216.0},
    {"double", 8, 9007199254740992.0}, {"int8", 1, 127.0}, {"uint8", 1, 254.0},
};
#define N_DTYPES 6

static MPI_Datatype mpi_datatype(dtype_id d)
{
    switch (d) {
    case DT_INT32: return MPI_INT32_T;
    case DT_INT64: return MPI_INT64_T;
    case DT_FLOAT: return MPI_FLOAT;
    case DT_DOUBLE: return MPI_DOUBLE;
    case DT_INT8: return MPI_INT8_T;
    case DT_UINT8: return MPI_UINT8_T;
    }
    return MPI_DATATYPE_NULL;
}

typedef enum { VAR_BLOCKING, VAR_NONBLOCKING, VAR_FCONC, VAR_FSIZE } variant_kind;
static const char *const VARIANT_KINDS[] = {"blocking", "nonblocking", "fconc", "fsize"};

typedef struct {
    variant_kind kind;
    size_t value; /* segments (fconc) or bytes per segment (fsize) */
    char text[64];
} variant;

typedef struct {
    char key[128];
    char value[512];
} label;

typedef struct {
    collective coll;
    variant variants[MAX_VARIANTS];
    int nvariants;
    size_t min_bytes, max_bytes;
    int op_noop;
    dtype_id dtype;
    long warmup;
    long iters;    /* 0: no limit (only the time budget) */
    double budget; /* seconds per (size, variant); 0: none */
    int in_place;
    int root;
    int check;
    const char *output;
    int append;
    label labels[MAX_LABELS];
    int nlabels;
    int quiet;
    size_t mem_limit; /* 0: MemAvailable from /proc/meminfo */
    int corrupt;      /* PCBENCH_CORRUPT_FOR_TEST */
} options;

/* ---- small utilities --------------------------------------------------------------- */
static int g_rank;

static char g_error[1024];
static int set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    return -1;
}

/* A growing string, for the JSON rows rank 0 keeps until the end. */
typedef struct {
    char *data;
    size_t len, cap;
} strbuf;

static void sb_printf(strbuf *sb, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = sb->cap - sb->len;
        int n = vsnprintf(sb->data ? sb->data + sb->len : NULL, sb->data ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) abort();
        if ((size_t)n < room) {
            sb->len += (size_t)n;
            return;
        }
        size_t cap = sb->cap ? sb->cap * 2 : 4096;
        while (cap - sb->len <= (size_t)n) cap *= 2;
        char *grown = realloc(sb->data, cap);
        if (!grown) {
            fprintf(stderr, "pcbench: out of memory while formatting the output rows\n");
            MPI_Abort(MPI_COMM_WORLD, EXIT_RESOURCES);
        }
        sb->data = grown;
        sb->cap = cap;
    }
}

static void sb_json_string(strbuf *sb, const char *s)
{
    sb_printf(sb, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') sb_printf(sb, "\\%c", *c);
        else if (*c < 0x20) sb_printf(sb, "\\u%04x", *c);
        else sb_printf(sb, "%c", *c);
    }
    sb_printf(sb, "\"");
}

/* N, NK, NM or NG (powers of 1024). Returns 0 on success. */
static int parse_bytes(const char *text, size_t *out)
{
    if (!text || !*text || *text == '-' || *text == '+') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text) return -1;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    else if (*end == 'G' || *end == 'g') shift = 30, end++;
    if (*end) return -1;
    if (v > (SIZE_MAX >> shift)) return -1;
    *out = (size_t)v << shift;
    return 0;
}

static int parse_long(const char *text, long min, long max, long *out)
{
    if (!text || !*text) return -1;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

static int is_power_of_two(size_t v) { return v && !(v & (v - 1)); }

static void format_bytes(size_t bytes, char *out, size_t len)
{
    if (bytes >= ((size_t)1 << 30) && bytes % ((size_t)1 << 30) == 0)
        snprintf(out, len, "%zuG", bytes >> 30);
    else if (bytes >= ((size_t)1 << 20) && bytes % ((size_t)1 << 20) == 0)
        snprintf(out, len, "%zuM", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(out, len, "%zuK", bytes >> 10);
    else
        snprintf(out, len, "%zu", bytes);
}

static void utc_now(char *out, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, len, "%s.%03dZ", base, (int)(ts.tv_nsec / 1000000L));
}

/* ---- command line ------------------------------------------------------------------ */
static void print_usage(FILE *f)
{
    fprintf(f,
"Usage: pcbench [OPTION]...\n"
"Time one MPI collective in several variants over message sizes; check the results.\n"
"\n"
"  --collective NAME     allreduce (default) | bcast | reduce | allgather | reduce_scatter_block\n"
"  --variant V[,V...]    repeatable; blocking (BL, MPI_<Coll>), nonblocking (NBL, MPI_I<coll>\n"
"                        + MPI_Wait), fconc:N (NBLxN, pipecoll, N segments), fsize:BYTES\n"
"                        (XMB, pipecoll, segments of BYTES). Default: blocking\n"
"  --min-bytes BYTES     smallest message, a power of two (default 8)\n"
"  --max-bytes BYTES     largest message, a power of two, at most 1G (default 1M)\n"
"                        BYTES accepts K, M, G suffixes (powers of 1024). bytes is the\n"
"                        buffer for allreduce/bcast/reduce, the whole receive buffer for\n"
"                        allgather, the whole send buffer for reduce_scatter_block\n"
"                        (nccl-tests); the count per rank is rounded down to whole elements\n"
"  --op sum|noop         reduction (default sum); noop: a user-defined commutative op that\n"
"                        does nothing (the paper's NOOP runs; results are not checked)\n"
"  --dtype T             int32 | int64 | float (default) | double | int8 | uint8\n"
"  --warmup N            untimed repetitions per size and variant (default 5)\n"
"  --iters N             timed repetitions per size and variant (default 20 without\n"
"                        --time-budget, otherwise no limit)\n"
"  --time-budget SEC     stop timing a size and variant after SEC seconds (at least one\n"
"                        repetition); rank 0 decides, every rank follows\n"
"  --in-place            use MPI_IN_PLACE (not for bcast)\n"
"  --root R              root of bcast and reduce (default 0)\n"
"  --no-check            do not verify results (rows say check=skipped)\n"
"  --output FILE         write JSON Lines rows (pcbench-row.schema.json) to FILE, replaced\n"
"                        atomically when the run ends\n"
"  --append              add the rows to FILE's existing rows (still replaced atomically)\n"
"  --label KEY=VALUE     repeatable; copied into every row's \"labels\"\n"
"  --mem-limit BYTES     memory available per host for the buffers (default: MemAvailable\n"
"                        from /proc/meminfo); pcbench refuses sizes that do not fit\n"
"  --quiet               no table on stdout\n"
"  --help, --version\n"
"\n"
"Exit status: 0 ok, 1 a result check failed, 2 usage error, 3 not enough memory or\n"
"output not writable, 4 an MPI call failed (job aborted).\n"
"Test hook: PCBENCH_CORRUPT_FOR_TEST=1 corrupts one result element after each check.\n");
}

static int parse_variant(const char *text, variant *v)
{
    memset(v, 0, sizeof *v);
    if (strlen(text) >= sizeof v->text)
        return set_error("--variant '%s': too long", text);
    snprintf(v->text, sizeof v->text, "%s", text);
    if (!strcmp(text, "blocking")) {
        v->kind = VAR_BLOCKING;
        return 0;
    }
    if (!strcmp(text, "nonblocking")) {
        v->kind = VAR_NONBLOCKING;
        return 0;
    }
    if (!strncmp(text, "fconc:", 6)) {
        long n;
        if (parse_long(text + 6, 1, PIPECOLL_MAX_SEGMENTS, &n))
            return set_error("--variant '%s': fconc:N needs a segment count N from 1 to %d",
                             text, PIPECOLL_MAX_SEGMENTS);
        v->kind = VAR_FCONC;
        v->value = (size_t)n;
        return 0;
    }
    if (!strncmp(text, "fsize:", 6)) {
        size_t b;
        if (parse_bytes(text + 6, &b) || b == 0 || b > MAX_BYTES_LIMIT)
            return set_error("--variant '%s': fsize:BYTES needs a segment size from 1 to 1G "
                             "(K, M, G suffixes allowed)", text);
        v->kind = VAR_FSIZE;
        v->value = b;
        return 0;
    }
    return set_error("--variant '%s': unknown variant; use blocking, nonblocking, fconc:N or "
                     "fsize:BYTES", text);
}

static int add_variants(options *o, const char *list)
{
    char buf[1024];
    if (strlen(list) >= sizeof buf) return set_error("--variant '%s': too long", list);
    snprintf(buf, sizeof buf, "%s", list);
    if (!*buf) return set_error("--variant '': empty");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nvariants == MAX_VARIANTS)
            return set_error("--variant: more than %d variants", MAX_VARIANTS);
        variant v;
        if (parse_variant(tok, &v)) return -1;
        for (int i = 0; i < o->nvariants; i++)
            if (o->variants[i].kind == v.kind && o->variants[i].value == v.value)
                return set_error("--variant '%s': given twice", tok);
        o->variants[o->nvariants++] = v;
    }
    return 0;
}

/* Returns 0 to run, 1 for --help/--version (exit 0), -1 on a usage error (g_error set). */
static int parse_options(int argc, char **argv, options *o)
{
    enum { O_COLL = 256, O_VARIANT, O_MINB, O_MAXB, O_OP, O_DTYPE, O_WARMUP, O_ITERS, O_BUDGET,
           O_INPLACE, O_ROOT, O_NOCHECK, O_OUTPUT, O_APPEND, O_LABEL, O_MEMLIMIT, O_QUIET,
           O_HELP, O_VERSION };
    static const struct option longopts[] = {
        {"collective", required_argument, 0, O_COLL}, {"variant", required_argument, 0, O_VARIANT},
        {"min-bytes", required_argument, 0, O_MINB}, {"max-bytes", required_argument, 0, O_MAXB},
        {"op", required_argument, 0, O_OP}, {"dtype", required_argument, 0, O_DTYPE},
        {"warmup", required_argument, 0, O_WARMUP}, {"iters", required_argument, 0, O_ITERS},
        {"time-budget", required_argument, 0, O_BUDGET}, {"in-place", no_argument, 0, O_INPLACE},
        {"root", required_argument, 0, O_ROOT}, {"no-check", no_argument, 0, O_NOCHECK},
        {"output", required_argument, 0, O_OUTPUT}, {"append", no_argument, 0, O_APPEND},
        {"label", required_argument, 0, O_LABEL}, {"mem-limit", required_argument, 0, O_MEMLIMIT},
        {"quiet", no_argument, 0, O_QUIET}, {"help", no_argument, 0, O_HELP},
        {"version", no_argument, 0, O_VERSION}, {0, 0, 0, 0}};

    memset(o, 0, sizeof *o);
    o->coll = COLL_ALLREDUCE;
    o->min_bytes = 8;
    o->max_bytes = (size_t)1 << 20;
    o->dtype = DT_FLOAT;
    o->warmup = 5;
    o->iters = -1; /* not given */
    o->check = 1;

    opterr = 0; /* errors are reported once, by rank 0, with the argument named */
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, ":", longopts, NULL);
        if (c == -1) break;
        const char *arg = optarg;
        long n;
        switch (c) {
        case O_COLL: {
            int found = -1;
            for (int i = 0; i < N_COLLS; i++)
                if (!strcmp(arg, COLL_NAMES[i])) found = i;
            if (found < 0)
                return set_error("--collective '%s': unknown; use allreduce, bcast, reduce, "
                                 "allgather or reduce_scatter_block", arg);
            o->coll = (collective)found;
            break;
        }
        case O_VARIANT:
            if (add_variants(o, arg)) return -1;
            break;
        case O_MINB:
        case O_MAXB: {
            const char *name = c == O_MINB ? "--min-bytes" : "--max-bytes";
            size_t b;
            if (parse_bytes(arg, &b) || !is_power_of_two(b))
                return set_error("%s '%s': needs a power of two (K, M, G suffixes allowed)",
                                 name, arg);
            if (b > MAX_BYTES_LIMIT)
                return set_error("%s '%s': at most 1G (1073741824)", name, arg);
            if (c == O_MINB) o->min_bytes = b;
            else o->max_bytes = b;
            break;
        }
        case O_OP:
            if (!strcmp(arg, "sum")) o->op_noop = 0;
            else if (!strcmp(arg, "noop")) o->op_noop = 1;
            else return set_error("--op '%s': unknown; use sum or noop", arg);
            break;
        case O_DTYPE: {
            int found = -1;
            for (int i = 0; i < N_DTYPES; i++)
                if (!strcmp(arg, DTYPES[i].name)) found = i;
            if (found < 0)
                return set_error("--dtype '%s': unknown; use int32, int64, float, double, int8 "
                                 "or uint8", arg);
            o->dtype = (dtype_id)found;
            break;
        }
        case O_WARMUP:
            if (parse_long(arg, 0, 1000000000L, &n))
                return set_error("--warmup '%s': needs an integer >= 0", arg);
            o->warmup = n;
            break;
        case O_ITERS:
            if (parse_long(arg, 1, 1000000000L, &n))
                return set_error("--iters '%s': needs an integer >= 1", arg);
            o->iters = n;
            break;
        case O_BUDGET: {
            char *end;
            errno = 0;
            double s = strtod(arg, &end);
            if (errno || end == arg || *end || !(s > 0) || s > 1e6)
                return set_error("--time-budget '%s': needs seconds > 0", arg);
            o->budget = s;
            break;
        }
        case O_INPLACE: o->in_place = 1; break;
        case O_ROOT:
            if (parse_long(arg, 0, INT_MAX, &n))
                return set_error("--root '%s': needs a rank number >= 0", arg);
            o->root = (int)n;
            break;
        case O_NOCHECK: o->check = 0; break;
        case O_OUTPUT:
            if (!*arg) return set_error("--output '': needs a file name");
            o->output = arg;
            break;
        case O_APPEND: o->append = 1; break;
        case O_LABEL: {
            const char *eq = strchr(arg, '=');
            if (!eq || eq == arg)
                return set_error("--label '%s': needs KEY=VALUE with a non-empty KEY", arg);
            size_t klen = (size_t)(eq - arg);
            if (klen >= sizeof o->labels[0].key || strlen(eq + 1) >= sizeof o->labels[0].value)
                return set_error("--label '%s': too long", arg);
            if (o->nlabels == MAX_LABELS)
                return set_error("--label '%s': more than %d labels", arg, MAX_LABELS);
            label *l = &o->labels[o->nlabels];
            memcpy(l->key, arg, klen);
            l->key[klen] = 0;
            for (int i = 0; i < o->nlabels; i++)
                if (!strcmp(o->labels[i].key, l->key))
                    return set_error("--label '%s': key '%s' given twice", arg, l->key);
            snprintf(l->value, sizeof l->value, "%s", eq + 1);
            o->nlabels++;
            break;
        }
        case O_MEMLIMIT: {
            size_t b;
            if (parse_bytes(arg, &b) || b == 0)
                return set_error("--mem-limit '%s': needs bytes > 0 (K, M, G suffixes allowed)",
                                 arg);
            o->mem_limit = b;
            break;
        }
        case O_QUIET: o->quiet = 1; break;
        case O_HELP:
            if (g_rank == 0) print_usage(stdout);
            return 1;
        case O_VERSION:
            if (g_rank == 0) printf("pcbench %s\n", PIPECOLL_VERSION_STRING);
            return 1;
        case ':':
            return set_error("%s: needs a value", argv[optind - 1]);
        default:
            return set_error("%s: unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc) return set_error("'%s': unexpected argument (options start with --)",
                                        argv[optind]);
    if (o->nvariants == 0) add_variants(o, "blocking");
    if (o->iters < 0) o->iters = o->budget > 0 ? 0 : 20;
    if (o->append && !o->output) return set_error("--append: needs --output FILE");
    if (o->in_place && o->coll == COLL_BCAST)
        return set_error("--in-place: does not apply to bcast (its buffer is always in place)");
    if (o->min_bytes > o->max_bytes)
        return set_error("--min-bytes %zu is larger than --max-bytes %zu", o->min_bytes,
                         o->max_bytes);

    const char *corrupt = getenv("PCBENCH_CORRUPT_FOR_TEST");
    if (corrupt && *corrupt && strcmp(corrupt, "0")) {
        if (strcmp(corrupt, "1"))
            return set_error("PCBENCH_CORRUPT_FOR_TEST='%s': must be 0 or 1 (a test hook)",
                             corrupt);
        o->corrupt = 1;
    }
    return 0;
}

/* Checks that need the number of ranks (and, on rank 0, the output directory). */
static int check_against_nprocs(const options *o, int nprocs)
{
    if ((o->coll == COLL_BCAST || o->coll == COLL_REDUCE) && o->root >= nprocs)
        return set_error("--root %d: there are only %d ranks (0..%d)", o->root, nprocs,
                         nprocs - 1);
    size_t es = DTYPES[o->dtype].size;
    size_t unit = (o->coll == COLL_ALLGATHER || o->coll == COLL_RSB) ? es * (size_t)nprocs : es;
    if (o->min_bytes < unit) {
        size_t need = 1;
        while (need < unit) need <<= 1;
        return set_error("--min-bytes %zu: smaller than one %s element%s (%zu B); use "
                         "--min-bytes %zu or more", o->min_bytes, DTYPES[o->dtype].name,
                         unit == es ? "" : " per rank", unit, need);
    }
    if (o->output && g_rank == 0) {
        /* Refuse an unwritable destination now, not after an hour of measuring. Only rank 0
         * writes, so only rank 0 looks (the other ranks may see another file system). */
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", o->output);
        char *slash = strrchr(dir, '/');
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == dir) dir[1] = 0;
        else *slash = 0;
        struct stat st;
        if (stat(o->output, &st) == 0 && S_ISDIR(st.st_mode))
            return set_error("--output '%s': is a directory", o->output);
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return set_error("--output '%s': directory '%s' does not exist", o->output, dir);
        if (access(dir, W_OK | X_OK) != 0)
            return set_error("--output '%s': directory '%s' is not writable", o->output, dir);
    }
    return 0;
}

/* ---- data: exact patterns and their checks ----------------------------------------- */
/* Rank r's input element at global index g is H[(g + 7r) mod P], small integers in
 * [0, M) so that every sum is exact in every datatype. E[j] = sum over ranks of
 * H[(j + 7r) mod P] is what a sum reduction must give at index j. */
typedef struct {
    int32_t *h, *e;
} patterns;

static int make_patterns(patterns *pt, dtype_id d, int nprocs)
{
    double m = DTYPES[d].max_sum / nprocs + 1;
    int32_t mod = m > 16 ? 16 : (int32_t)m;
    pt->h = malloc(sizeof(int32_t) * PATTERN_PERIOD);
    pt->e = calloc(PATTERN_PERIOD, sizeof(int32_t));
    if (!pt->h || !pt->e) return -1;
    uint64_t x = 0x9E3779B97F4A7C15ULL; /* fixed seed: the pattern is the same every run */
    for (size_t j = 0; j < PATTERN_PERIOD; j++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        pt->h[j] = (int32_t)(x % (uint64_t)mod);
    }
    for (size_t j = 0; j < PATTERN_PERIOD; j++)
        for (int r = 0; r < nprocs; r++)
            pt->e[j] += pt->h[(j + 7 * (size_t)r) % PATTERN_PERIOD];
    return 0;
}

typedef struct {
    size_t mismatches, first;
    double got, want;
} check_result;

#define DEFINE_TYPED(T, S)                                                                   \
    static void fill_##S(void *buf, size_t n, size_t phase, const int32_t *table)           \
    {                                                                                        \
        T *b = buf;                                                                          \
        size_t j = phase % PATTERN_PERIOD;                                                   \
        for (size_t k = 0; k < n; k++) {                                                     \
            b[k] = (T)table[j];                                                              \
            if (++j == PATTERN_PERIOD) j = 0;                                                \
        }                                                                                    \
    }                                                                                        \
    static void sentinel_##S(void *buf, size_t n)                                            \
    {                                                                                        \
        T *b = buf;                                                                          \
        for (size_t k = 0; k < n; k++) b[k] = (T)-1;                                         \
    }                                                                                        \
    static void check_##S(const void *buf, size_t n, size_t phase, const int32_t *table,    \
                          size_t offset, check_result *res)                                  \
    {                                                                                        \
        const T *b = buf;                                                                    \
        size_t j = phase % PATTERN_PERIOD;                                                   \
        for (size_t k = 0; k < n; k++) {                                                     \
            if (b[k] != (T)table[j]) {                                                       \
                if (res->mismatches++ == 0) {                                                \
                    res->first = offset + k;                                                 \
                    res->got = (double)b[k];                                                 \
                    res->want = (double)(T)table[j];                                         \
                }                                                                            \
            }                                                                                \
            if (++j == PATTERN_PERIOD) j = 0;                                                \
        }                                                                                    \
    }
DEFINE_TYPED(int32_t, int32)
DEFINE_TYPED(int64_t, int64)
DEFINE_TYPED(float, float)
DEFINE_TYPED(double, double)
DEFINE_TYPED(int8_t, int8)
DEFINE_TYPED(uint8_t, uint8)

#define DISPATCH(d, fn, ...)                                                                 \
    do {                                                                                     \
        switch (d) {                                                                         \
        case DT_INT32: fn##_int32(__VA_ARGS__); break;                                       \
        case DT_INT64: fn##_int64(__VA_ARGS__); break;                                       \
        case DT_FLOAT: fn##_float(__VA_ARGS__); break;                                       \
        case DT_DOUBLE: fn##_double(__VA_ARGS__); break;                                     \
        case DT_INT8: fn##_int8(__VA_ARGS__); break;                                         \
        case DT_UINT8: fn##_uint8(__VA_ARGS__); break;                                       \
        }                                                                                    \
    } while (0)

/* ---- the benchmark state ------------------------------------------------------------ */
typedef struct {
    const options *o;
    MPI_Comm comm;
    int rank, nprocs;
    MPI_Datatype dt;
    size_t es;
    MPI_Op op;
    void *sbuf, *rbuf; /* sbuf doubles as the pristine input for in-place reductions */
    patterns pt;
} bench;

/* Elements per rank passed to the collective, and the bytes reported, for a size. */
static size_t count_for(const bench *b, size_t bytes, size_t *reported)
{
    size_t count = (b->o->coll == COLL_ALLGATHER || b->o->coll == COLL_RSB)
                       ? bytes / (b->es * (size_t)b->nprocs)
                       : bytes / b->es;
    *reported = (b->o->coll == COLL_ALLGATHER || b->o->coll == COLL_RSB)
                    ? count * b->es * (size_t)b->nprocs
                    : count * b->es;
    return count;
}

/* Elements each buffer needs for `count` (as passed to the collective). */
static void buffer_elems(collective c, int in_place, size_t count, int nprocs, size_t *send,
                         size_t *recv)
{
    size_t p = (size_t)nprocs;
    *send = *recv = 0;
    switch (c) {
    case COLL_ALLREDUCE:
    case COLL_REDUCE: *send = count, *recv = count; break;
    case COLL_BCAST: *send = 0, *recv = count; break;
    case COLL_ALLGATHER: *send = in_place ? 0 : count, *recv = count * p; break;
    case COLL_RSB: *send = count * p, *recv = in_place ? count * p : count; break;
    }
}

static int is_reduction(collective c) { return c != COLL_BCAST && c != COLL_ALLGATHER; }

/* One complete collective in the given variant. *segments (if not NULL) receives the
 * number of segments issued. */
static int run_collective(const bench *b, const variant *v, size_t count, size_t *segments)
{
    const options *o = b->o;
    const void *send = o->in_place ? MPI_IN_PLACE : b->sbuf;
    if (o->coll == COLL_REDUCE && b->rank != o->root) send = b->sbuf; /* IN_PLACE: root only */
    int n = (int)count; /* count <= 1 GiB / element size < INT_MAX */
    void *r = b->rbuf;
    MPI_Request req;
    int rc;
    if (segments) *segments = 1;
    switch (v->kind) {
    case VAR_BLOCKING:
        switch (o->coll) {
        case COLL_ALLREDUCE: return MPI_Allreduce(send, r, n, b->dt, b->op, b->comm);
        case COLL_BCAST: return MPI_Bcast(r, n, b->dt, o->root, b->comm);
        case COLL_REDUCE: return MPI_Reduce(send, r, n, b->dt, b->op, o->root, b->comm);
        case COLL_ALLGATHER: return MPI_Allgather(send, n, b->dt, r, n, b->dt, b->comm);
        case COLL_RSB: return MPI_Reduce_scatter_block(send, r, n, b->dt, b->op, b->comm);
        }
        break;
    case VAR_NONBLOCKING:
        switch (o->coll) {
        case COLL_ALLREDUCE: rc = MPI_Iallreduce(send, r, n, b->dt, b->op, b->comm, &req); break;
        case COLL_BCAST: rc = MPI_Ibcast(r, n, b->dt, o->root, b->comm, &req); break;
        case COLL_REDUCE:
            rc = MPI_Ireduce(send, r, n, b->dt, b->op, o->root, b->comm, &req);
            break;
        case COLL_ALLGATHER:
            rc = MPI_Iallgather(send, n, b->dt, r, n, b->dt, b->comm, &req);
            break;
        case COLL_RSB:
            rc = MPI_Ireduce_scatter_block(send, r, n, b->dt, b->op, b->comm, &req);
            break;
        default: rc = MPI_ERR_ARG;
        }
        return rc != MPI_SUCCESS ? rc : MPI_Wait(&req, MPI_STATUS_IGNORE);
    case VAR_FCONC:
    case VAR_FSIZE: {
        pipecoll_plan plan = v->kind == VAR_FCONC ? pipecoll_plan_fconc(v->value)
                                                  : pipecoll_plan_fsize(v->value);
        pipecoll_request pr = PIPECOLL_REQUEST_NULL;
        switch (o->coll) {
        case COLL_ALLREDUCE:
            rc = pipecoll_iallreduce(send, r, count, b->dt, b->op, b->comm, &plan, &pr);
            break;
        case COLL_BCAST: rc = pipecoll_ibcast(r, count, b->dt, o->root, b->comm, &plan, &pr); break;
        case COLL_REDUCE:
            rc = pipecoll_ireduce(send, r, count, b->dt, b->op, o->root, b->comm, &plan, &pr);
            break;
        case COLL_ALLGATHER:
            rc = pipecoll_iallgather(send, count, b->dt, r, count, b->dt, b->comm, &plan, &pr);
            break;
        case COLL_RSB:
            rc = pipecoll_ireduce_scatter_block(send, r, count, b->dt, b->op, b->comm, &plan,
                                                &pr);
            break;
        default: rc = MPI_ERR_ARG;
        }
        if (rc != MPI_SUCCESS) return rc;
        if (segments) *segments = pipecoll_request_segments(pr);
        return pipecoll_wait(&pr);
    }
    }
    return MPI_ERR_ARG;
}

static void die_on_mpi_error(const bench *b, int rc, const char *what, const variant *v,
                             size_t bytes)
{
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    /* An MPI error mid-collective leaves the other ranks waiting: abort the job. */
    fprintf(stderr, "pcbench: rank %d: %s %s %s at %zu B failed: %s\n", b->rank, what,
            COLL_NAMES[b->o->coll], v->text, bytes, msg);
    MPI_Abort(b->comm, EXIT_MPI_ERROR);
}

/* Put the inputs in place (and the sentinel where results go). */
static void prepare_inputs(const bench *b, size_t count)
{
    const options *o = b->o;
    size_t p = (size_t)b->nprocs, rk = (size_t)b->rank, shift = 7 * rk;
    dtype_id d = o->dtype;
    char *sb = b->sbuf, *rb = b->rbuf;
    switch (o->coll) {
    case COLL_ALLREDUCE:
    case COLL_REDUCE:
        DISPATCH(d, fill, sb, count, shift, b->pt.h);
        if (o->in_place) memcpy(rb, sb, count * b->es);
        else DISPATCH(d, sentinel, rb, count);
        break;
    case COLL_BCAST:
        if (b->rank == o->root) DISPATCH(d, fill, rb, count, shift, b->pt.h);
        else DISPATCH(d, sentinel, rb, count);
        break;
    case COLL_ALLGATHER:
        DISPATCH(d, sentinel, rb, count * p);
        if (o->in_place) DISPATCH(d, fill, rb + rk * count * b->es, count, shift, b->pt.h);
        else DISPATCH(d, fill, sb, count, shift, b->pt.h);
        break;
    case COLL_RSB:
        DISPATCH(d, fill, sb, count * p, shift, b->pt.h);
        if (o->in_place) memcpy(rb, sb, count * p * b->es);
        else DISPATCH(d, sentinel, rb, count);
        break;
    }
}

/* In-place reductions overwrite their input: restore it before each repetition so every
 * repetition reduces the same data (outside the timed region). */
static void restore_in_place_input(const bench *b, size_t count)
{
    const options *o = b->o;
    if (!o->in_place || !is_reduction(o->coll)) return;
    size_t elems = o->coll == COLL_RSB ? count * (size_t)b->nprocs : count;
    memcpy(b->rbuf, b->sbuf, elems * b->es);
}

/* Verify this rank's result; returns the number of wrong elements (0 = pass). */
static size_t verify(const bench *b, const variant *v, size_t count, size_t bytes)
{
    const options *o = b->o;
    size_t p = (size_t)b->nprocs, rk = (size_t)b->rank;
    dtype_id d = o->dtype;
    const char *rb = b->rbuf;
    check_result res = {0, 0, 0, 0};
    size_t checked = count;
    switch (o->coll) {
    case COLL_ALLREDUCE: DISPATCH(d, check, rb, count, 0, b->pt.e, 0, &res); break;
    case COLL_REDUCE:
        if (b->rank == o->root) DISPATCH(d, check, rb, count, 0, b->pt.e, 0, &res);
        else checked = 0;
        break;
    case COLL_BCAST:
        DISPATCH(d, check, rb, count, 7 * (size_t)o->root, b->pt.h, 0, &res);
        break;
    case COLL_ALLGATHER:
        for (size_t r = 0; r < p; r++)
            DISPATCH(d, check, rb + r * count * b->es, count, 7 * r, b->pt.h, r * count, &res);
        checked = count * p;
        break;
    case COLL_RSB: DISPATCH(d, check, rb, count, rk * count, b->pt.e, 0, &res); break;
    }
    if (res.mismatches)
        fprintf(stderr,
                "pcbench: CHECK FAILED on rank %d: %s %s, %zu B, %s: element %zu is %.17g, "
                "expected %.17g (%zu of %zu elements wrong on this rank)\n",
                b->rank, COLL_NAMES[o->coll], v->text, bytes, DTYPES[d].name, res.first,
                res.got, res.want, res.mismatches, checked);
    return res.mismatches;
}

/* Test hook: make one rank's last result element wrong (the sentinel never is right). */
static void corrupt_for_test(const bench *b, size_t count)
{
    const options *o = b->o;
    int victim = o->coll == COLL_REDUCE ? o->root : b->nprocs - 1;
    if (o->coll == COLL_BCAST && b->nprocs > 1 && victim == o->root) victim = 0;
    if (b->rank != victim || count == 0) return;
    size_t last = (o->coll == COLL_ALLGATHER ? count * (size_t)b->nprocs : count) - 1;
    DISPATCH(o->dtype, sentinel, (char *)b->rbuf + last * b->es, 1);
}

static void noop_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    /* NOOP: the same exchange as a sum, without the arithmetic. */
    (void)in, (void)inout, (void)len, (void)dt;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- memory ------------------------------------------------------------------------ */
static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

/* Bytes one rank needs at message size `bytes`: its buffers plus, for reductions, one
 * message-sized temporary that MPI libraries allocate internally. */
static size_t bytes_per_rank(const options *o, int nprocs, size_t es, size_t bytes)
{
    size_t count = (o->coll == COLL_ALLGATHER || o->coll == COLL_RSB)
                       ? bytes / (es * (size_t)nprocs) : bytes / es;
    size_t s, r;
    buffer_elems(o->coll, o->in_place, count, nprocs, &s, &r);
    return (s + r) * es + (is_reduction(o->coll) ? bytes : 0);
}

/* ---- output ------------------------------------------------------------------------ */
static int write_rows_atomically(const options *o, const strbuf *rows)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", o->output, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out) return set_error("--output '%s': cannot create %s: %s", o->output, tmp,
                               strerror(errno));
    int ok = 1;
    if (o->append) {
        FILE *old = fopen(o->output, "r");
        if (old) {
            char buf[65536];
            size_t n;
            int last = '\n';
            while ((n = fread(buf, 1, sizeof buf, old)) > 0) {
                ok &= fwrite(buf, 1, n, out) == n;
                last = buf[n - 1];
            }
            ok &= !ferror(old);
            fclose(old);
            if (last != '\n') ok &= fputc('\n', out) != EOF; /* keep one row per line */
        } else if (errno != ENOENT) {
            ok = 0;
        }
    }
    if (rows->len) ok &= fwrite(rows->data, 1, rows->len, out) == rows->len;
    ok &= fflush(out) == 0;
    ok &= fsync(fileno(out)) == 0;
    ok &= fclose(out) == 0;
    if (!ok || rename(tmp, o->output) != 0) {
        int err = errno;
        unlink(tmp);
        return set_error("--output '%s': writing failed: %s", o->output, strerror(err));
    }
    return 0;
}

/* ---- main -------------------------------------------------------------------------- */
static double busbw_factor(collective c, int p)
{
    switch (c) {
    case COLL_ALLREDUCE: return 2.0 * (p - 1) / p;
    case COLL_ALLGATHER:
    case COLL_RSB: return (double)(p - 1) / p;
    case COLL_BCAST:
    case COLL_REDUCE: return 1.0;
    }
    return 1.0;
}

static int finish(int code)
{
    MPI_Finalize();
    return code;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    /* Errors come back as codes so pcbench can say which collective and variant failed. */
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank, nprocs;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nprocs);
    g_rank = rank;

    /* Every rank parses the same argv, so all reach the same verdict without talking. */
    static options o;
    int parsed = parse_options(argc, argv, &o);
    if (parsed == 0) parsed = check_against_nprocs(&o, nprocs);
    if (parsed < 0 && rank == 0)
        fprintf(stderr, "pcbench: error: %s\nTry 'pcbench --help' for the options.\n", g_error);
    /* Only the output check can differ between ranks (rank 0 alone makes it): rank 0's
     * verdict is everyone's. */
    int verdict = parsed;
    MPI_Bcast(&verdict, 1, MPI_INT, 0, comm);
    if (verdict != 0) {
        MPI_Comm_free(&comm);
        return finish(verdict > 0 ? 0 : EXIT_USAGE);
    }

    bench b = {.o = &o, .comm = comm, .rank = rank, .nprocs = nprocs,
               .dt = mpi_datatype(o.dtype), .es = DTYPES[o.dtype].size, .op = MPI_SUM};

    /* Memory: refuse before allocating if the largest size cannot fit on this host. */
    MPI_Comm local;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    int local_rank, local_size;
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_size(local, &local_size);
    int hosts = local_rank == 0;
    MPI_Allreduce(MPI_IN_PLACE, &hosts, 1, MPI_INT, MPI_SUM, comm);
    MPI_Comm_free(&local);

    size_t per_rank = bytes_per_rank(&o, nprocs, b.es, o.max_bytes);
    size_t need = per_rank * (size_t)local_size;
    size_t avail = o.mem_limit ? o.mem_limit : mem_available();
    int fits = avail == 0 || need <= avail / 10 * 9; /* keep 10% for MPI and the system */
    int all_fit;
    MPI_Allreduce(&fits, &all_fit, 1, MPI_INT, MPI_MIN, comm);
    if (!all_fit) {
        if (rank == 0) {
            size_t largest = 0;
            for (size_t s = o.min_bytes; s <= o.max_bytes; s <<= 1)
                if (bytes_per_rank(&o, nprocs, b.es, s) * (size_t)local_size <= avail / 10 * 9)
                    largest = s;
            char big[32], fit[32];
            format_bytes(o.max_bytes, big, sizeof big);
            format_bytes(largest, fit, sizeof fit);
            fprintf(stderr,
                    "pcbench: error: not enough memory for --max-bytes %s: %s needs about %zu "
                    "MiB per rank x %d ranks on this host = %zu MiB, but only %zu MiB is "
                    "available (%s; 10%% kept free).\n",
                    big, COLL_NAMES[o.coll], per_rank >> 20, local_size, need >> 20,
                    avail >> 20, o.mem_limit ? "--mem-limit" : "MemAvailable in /proc/meminfo");
            if (largest)
                fprintf(stderr, "Lower --max-bytes to %s or less, or run fewer ranks per host.\n",
                        fit);
            else
                fprintf(stderr, "Even --min-bytes does not fit: run fewer ranks per host.\n");
        }
        MPI_Comm_free(&comm);
        return finish(EXIT_RESOURCES);
    }

    size_t max_count, max_reported;
    max_count = count_for(&b, o.max_bytes, &max_reported);
    size_t s_elems, r_elems;
    buffer_elems(o.coll, o.in_place, max_count, nprocs, &s_elems, &r_elems);
    if (o.in_place && is_reduction(o.coll) && s_elems < r_elems) s_elems = r_elems;
    /* malloc(0) may return NULL: allocate at least one element. */
    b.sbuf = malloc((s_elems ? s_elems : 1) * b.es);
    b.rbuf = malloc((r_elems ? r_elems : 1) * b.es);
    int alloc_ok = b.sbuf && b.rbuf && make_patterns(&b.pt, o.dtype, nprocs) == 0, all_alloc;
    MPI_Allreduce(&alloc_ok, &all_alloc, 1, MPI_INT, MPI_MIN, comm);
    if (!all_alloc) {
        if (!alloc_ok)
            fprintf(stderr, "pcbench: error: rank %d could not allocate %zu MiB for --max-bytes "
                    "%zu; lower --max-bytes\n", rank, ((s_elems + r_elems) * b.es) >> 20,
                    o.max_bytes);
        MPI_Comm_free(&comm);
        return finish(EXIT_RESOURCES);
    }
    /* Touch every page now: page faults must not land in the first timed repetitions. */
    memset(b.sbuf, 0, (s_elems ? s_elems : 1) * b.es);
    memset(b.rbuf, 0, (r_elems ? r_elems : 1) * b.es);

    if (o.op_noop) MPI_Op_create(noop_op, 1, &b.op);

    /* Provenance, read at run time. */
    char libver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, major = 0, minor = 0;
    MPI_Get_library_version(libver, &len);
    libver[strcspn(libver, "\r\n")] = 0;
    for (size_t l = strlen(libver); l && (libver[l - 1] == ' ' || libver[l - 1] == '\t');)
        libver[--l] = 0;
    MPI_Get_version(&major, &minor);
    char mpiver[32];
    snprintf(mpiver, sizeof mpiver, "%d.%d", major, minor);
    char host[256] = "";
    gethostname(host, sizeof host - 1);

    int checking = o.check && !o.op_noop;
    if (rank == 0 && !o.quiet) {
        printf("# pcbench %s\n", PIPECOLL_VERSION_STRING);
        printf("# MPI library: %s\n", libver);
        printf("# MPI version %s, %d ranks on %d host(s), host %s\n", mpiver, nprocs, hosts,
               host);
        printf("# collective %s, op %s, dtype %s, root %d, in-place %s, check %s\n",
               COLL_NAMES[o.coll], o.op_noop ? "noop" : "sum", DTYPES[o.dtype].name, o.root,
               o.in_place ? "yes" : "no", checking ? "on" : o.op_noop ? "off (noop)" : "off");
        char iters[32] = "no limit", budget[64] = "none";
        if (o.iters) snprintf(iters, sizeof iters, "%ld", o.iters);
        if (o.budget > 0) snprintf(budget, sizeof budget, "%g s per size and variant", o.budget);
        printf("# warmup %ld, iters %s, time budget %s\n", o.warmup, iters, budget);
        if (o.corrupt) printf("# PCBENCH_CORRUPT_FOR_TEST=1: results are corrupted on purpose\n");
        printf("#%13s %12s %7s %14s %5s %12s %12s %11s %11s %7s\n", "size(B)", "count", "dtype",
               "variant", "segs", "mean(us)", "min(us)", "MB/s", "busbw(MB/s)", "check");
        fflush(stdout);
    }

    strbuf rows = {0, 0, 0};
    double *times = NULL;
    size_t times_cap = 0;
    int any_failure = 0;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes <<= 1) {
        size_t reported;
        size_t count = count_for(&b, bytes, &reported);
        for (int vi = 0; vi < o.nvariants; vi++) {
            const variant *v = &o.variants[vi];
            size_t segments = 1;
            const char *check = "skipped";
            /* 1. check once, on fresh inputs */
            prepare_inputs(&b, count);
            int rc = run_collective(&b, v, count, &segments);
            die_on_mpi_error(&b, rc, "checked run of", v, reported);
            if (checking) {
                if (o.corrupt) corrupt_for_test(&b, count);
                int bad = verify(&b, v, count, reported) > 0, any_bad;
                MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, comm);
                check = any_bad ? "fail" : "pass";
                any_failure |= any_bad;
            }
            /* 2. warm-up */
            for (long w = 0; w < o.warmup; w++) {
                restore_in_place_input(&b, count);
                MPI_Barrier(comm);
                die_on_mpi_error(&b, run_collective(&b, v, count, NULL), "warm-up of", v,
                                 reported);
            }
            /* 3. timed repetitions */
            long reps = 0;
            int go = 1;
            double start = MPI_Wtime();
            while (go) {
                restore_in_place_input(&b, count);
                MPI_Barrier(comm);
                double t0 = MPI_Wtime();
                rc = run_collective(&b, v, count, NULL);
                double t = MPI_Wtime() - t0;
                die_on_mpi_error(&b, rc, "timed run of", v, reported);
                double tmax = 0;
                MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
                reps++;
                if (rank == 0) {
                    if ((size_t)reps > times_cap) {
                        size_t cap = times_cap ? times_cap * 2 : 1024;
                        double *grown = realloc(times, cap * sizeof *times);
                        if (!grown) {
                            fprintf(stderr, "pcbench: out of memory for %zu timings\n", cap);
                            MPI_Abort(comm, EXIT_RESOURCES);
                        }
                        times = grown, times_cap = cap;
                    }
                    times[reps - 1] = tmax;
                    go = (o.iters == 0 || reps < o.iters) &&
                         (o.budget <= 0 || MPI_Wtime() - start < o.budget);
                }
                if (o.budget > 0) MPI_Bcast(&go, 1, MPI_INT, 0, comm);
                else go = reps < o.iters;
            }
            if (rank != 0) continue;

            /* 4. statistics and output (rank 0) */
            double sum = 0, tmin = times[0], tmaxall = times[0];
            for (long i = 0; i < reps; i++) {
                sum += times[i];
                if (times[i] < tmin) tmin = times[i];
                if (times[i] > tmaxall) tmaxall = times[i];
            }
            double mean = sum / reps;
            qsort(times, (size_t)reps, sizeof *times, cmp_double);
            double median = reps % 2 ? times[reps / 2]
                                     : (times[reps / 2 - 1] + times[reps / 2]) / 2;
            double mbps = mean > 0 ? (double)reported / 1e6 / mean : 0;
            double busbw = mbps * busbw_factor(o.coll, nprocs);
            char stamp[64];
            utc_now(stamp, sizeof stamp);

            if (!o.quiet) {
                printf(" %13zu %12zu %7s %14s %5zu %12.2f %12.2f %11.1f %11.1f %7s\n", reported,
                       count, DTYPES[o.dtype].name, v->text, segments, mean * 1e6, tmin * 1e6,
                       mbps, busbw, check);
                fflush(stdout);
            }
            sb_printf(&rows, "{\"schema\":\"pcbench-row/1\",\"collective\":\"%s\","
                      "\"variant\":\"%s\",", COLL_NAMES[o.coll], VARIANT_KINDS[v->kind]);
            if (v->kind == VAR_FCONC) sb_printf(&rows, "\"segments_requested\":%zu,", v->value);
            else sb_printf(&rows, "\"segments_requested\":null,");
            if (v->kind == VAR_FSIZE)
                sb_printf(&rows, "\"segment_bytes_requested\":%zu,", v->value);
            else sb_printf(&rows, "\"segment_bytes_requested\":null,");
            sb_printf(&rows, "\"segments\":%zu,\"op\":\"%s\",\"dtype\":\"%s\",\"bytes\":%zu,"
                      "\"count\":%zu,\"nprocs\":%d,\"root\":%d,\"warmup\":%ld,\"iters\":%ld,",
                      segments, o.op_noop ? "noop" : "sum", DTYPES[o.dtype].name, reported,
                      count, nprocs, o.root, o.warmup, reps);
            sb_printf(&rows, "\"time_mean_s\":%.9g,\"time_min_s\":%.9g,\"time_median_s\":%.9g,"
                      "\"time_max_s\":%.9g,\"mbps\":%.9g,\"busbw_mbps\":%.9g,\"check\":\"%s\","
                      "\"in_place\":%s,\"mpi_library\":", mean, tmin, median, tmaxall, mbps,
                      busbw, check, o.in_place ? "true" : "false");
            sb_json_string(&rows, libver);
            sb_printf(&rows, ",\"mpi_version\":\"%s\",\"host\":", mpiver);
            sb_json_string(&rows, host);
            sb_printf(&rows, ",\"labels\":{");
            for (int i = 0; i < o.nlabels; i++) {
                if (i) sb_printf(&rows, ",");
                sb_json_string(&rows, o.labels[i].key);
                sb_printf(&rows, ":");
                sb_json_string(&rows, o.labels[i].value);
            }
            sb_printf(&rows, "},\"timestamp\":\"%s\",\"pipecoll_version\":", stamp);
            sb_json_string(&rows, PIPECOLL_VERSION_STRING);
            sb_printf(&rows, "}\n");
        }
    }

    int status = any_failure ? EXIT_CHECK_FAILED : 0;
    if (rank == 0 && o.output && write_rows_atomically(&o, &rows) != 0) {
        fprintf(stderr, "pcbench: error: %s\n", g_error);
        status = EXIT_RESOURCES;
    }
    if (rank == 0 && any_failure)
        fprintf(stderr, "pcbench: result check FAILED (see the messages above)%s\n",
                o.output ? "; rows written with check=fail" : "");
    MPI_Bcast(&status, 1, MPI_INT, 0, comm);

    if (o.op_noop) MPI_Op_free(&b.op);
    free(times);
    free(rows.data);
    free(b.pt.h);
    free(b.pt.e);
    free(b.sbuf);
    free(b.rbuf);
    MPI_Comm_free(&comm);
    return finish(status);
}
