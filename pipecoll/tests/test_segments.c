/*
 * Unit test of the segmentation rules (pipecoll_segments) and of the plan syntax
 * (pipecoll_plan_parse). Pure arithmetic: no MPI call is made, so it runs as one process.
 * Prints every mismatch; exits 1 if there was any.
 */
#include "pipecoll.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            failures++;                                                                   \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                         \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
        }                                                                                 \
    } while (0)

static size_t segs[PIPECOLL_MAX_SEGMENTS];

/* Exact expected segmentation for a hand-worked case. */
static void expect(pipecoll_plan plan, size_t count, size_t elem, size_t n, const size_t *want,
                   const char *what)
{
    memset(segs, 0xff, sizeof(segs));
    size_t got = pipecoll_segments(&plan, count, elem, segs);
    CHECK(got == n, "%s: %zu segments, want %zu", what, got, n);
    for (size_t h = 0; h < n && h < got; h++)
        CHECK(segs[h] == want[h], "%s: segment %zu has %zu elements, want %zu", what, h,
              segs[h], want[h]);
}

/* Invariants every plan must keep, for any count. */
static void invariants(pipecoll_plan plan, size_t count, size_t elem)
{
    size_t n = pipecoll_segments(&plan, count, elem, segs);
    CHECK(n >= 1 && n <= PIPECOLL_MAX_SEGMENTS, "kind %d value %zu count %zu: %zu segments",
          plan.kind, plan.value, count, n);
    CHECK(n == pipecoll_segments(&plan, count, elem, NULL), "count-only call disagrees");
    size_t total = 0;
    for (size_t h = 0; h < n; h++) {
        total += segs[h];
        if (count > 0)
            CHECK(segs[h] > 0, "kind %d value %zu count %zu: empty segment %zu", plan.kind,
                  plan.value, count, h);
        if (h + 1 < n)
            CHECK(segs[h] == segs[0], "kind %d value %zu count %zu: segment %zu differs",
                  plan.kind, plan.value, count, h);
    }
    CHECK(total == count, "kind %d value %zu count %zu: segments sum to %zu", plan.kind,
          plan.value, count, total);
    if (plan.kind == PIPECOLL_PLAN_FCONC) {
        size_t want = plan.value < count ? plan.value : (count ? count : 1);
        if (want > PIPECOLL_MAX_SEGMENTS)
            want = PIPECOLL_MAX_SEGMENTS;
        CHECK(n == want, "fconc:%zu count %zu: %zu segments, want %zu", plan.value, count, n,
              want);
        /* Listing 2: every segment count/numseg elements, the last takes the remainder */
        CHECK(segs[0] == (count ? count / n : 0), "fconc:%zu count %zu: segsize %zu",
              plan.value, count, segs[0]);
    }
    if (plan.kind == PIPECOLL_PLAN_FSIZE && count > 0) {
        size_t per = plan.value / elem ? plan.value / elem : 1;
        /* Listing 1: numseg = ceil(count / segsize), unless that exceeds the cap */
        size_t listing = count <= per ? 1 : count / per + (count % per != 0);
        if (listing <= PIPECOLL_MAX_SEGMENTS) {
            CHECK(n == listing, "fsize:%zu elem %zu count %zu: %zu segments, listing 1 says %zu",
                  plan.value, elem, count, n, listing);
            CHECK(n == 1 || segs[0] == per, "fsize:%zu elem %zu count %zu: segsize %zu, want %zu",
                  plan.value, elem, count, segs[0], per);
        }
        CHECK(segs[n - 1] <= segs[0], "fsize: last segment larger than the others");
    }
}

static void parse_ok(const char *text, pipecoll_plan_kind kind, size_t value)
{
    pipecoll_plan plan = {PIPECOLL_PLAN_FCONC, 12345, PIPECOLL_SCHEDULE_NATIVE};
    int rc = pipecoll_plan_parse(text, &plan);
    CHECK(rc == 0, "parse(\"%s\") failed", text);
    CHECK(rc != 0 || (plan.kind == kind && plan.value == value),
          "parse(\"%s\") gave kind %d value %zu, want kind %d value %zu", text, plan.kind,
          plan.value, kind, value);
}

static void parse_bad(const char *text)
{
    pipecoll_plan plan = {PIPECOLL_PLAN_FCONC, 12345, PIPECOLL_SCHEDULE_NATIVE};
    CHECK(pipecoll_plan_parse(text, &plan) == -1, "parse(\"%s\") accepted", text);
    CHECK(plan.kind == PIPECOLL_PLAN_FCONC && plan.value == 12345,
          "parse(\"%s\") changed the plan on error", text);
}

int main(void)
{
    /* Listing 2 (fconc): 10 / 4 = 2 per segment, the last takes 10 - 3*2 = 4 */
    expect(pipecoll_plan_fconc(4), 10, 4, 4, (size_t[]){2, 2, 2, 4}, "fconc:4 count 10");
    expect(pipecoll_plan_fconc(4), 8, 4, 4, (size_t[]){2, 2, 2, 2}, "fconc:4 count 8");
    /* fewer elements than segments: fewer segments of one element each */
    expect(pipecoll_plan_fconc(4), 3, 8, 3, (size_t[]){1, 1, 1}, "fconc:4 count 3");
    expect(pipecoll_plan_fconc(8), 1, 8, 1, (size_t[]){1}, "fconc:8 count 1");
    expect(pipecoll_plan_fconc(4), 0, 4, 1, (size_t[]){0}, "fconc:4 count 0");
    expect(pipecoll_plan_fconc(1), 7, 4, 1, (size_t[]){7}, "fconc:1 count 7");
    /* capped at PIPECOLL_MAX_SEGMENTS */
    {
        pipecoll_plan plan = pipecoll_plan_fconc(5000);
        size_t n = pipecoll_segments(&plan, 1000000, 4, segs);
        CHECK(n == PIPECOLL_MAX_SEGMENTS, "fconc:5000: %zu segments", n);
        CHECK(segs[0] == 1000000 / PIPECOLL_MAX_SEGMENTS && segs[n - 1] ==
              1000000 - (PIPECOLL_MAX_SEGMENTS - 1) * (1000000 / PIPECOLL_MAX_SEGMENTS),
              "fconc:5000: segments %zu .. %zu", segs[0], segs[n - 1]);
    }
    /* Listing 1 (fsize): 16 B of 4-byte elements = 4 per segment, the last the remainder */
    expect(pipecoll_plan_fsize(16), 10, 4, 3, (size_t[]){4, 4, 2}, "fsize:16 count 10");
    expect(pipecoll_plan_fsize(16), 8, 4, 2, (size_t[]){4, 4}, "fsize:16 count 8");
    /* never split an element: 17 B is 4 whole ints, 3 B rounds up to one element */
    expect(pipecoll_plan_fsize(17), 9, 4, 3, (size_t[]){4, 4, 1}, "fsize:17 count 9");
    expect(pipecoll_plan_fsize(3), 3, 8, 3, (size_t[]){1, 1, 1}, "fsize:3 elem 8 count 3");
    expect(pipecoll_plan_fsize(1 << 30), 10, 8, 1, (size_t[]){10}, "fsize:1G count 10");
    expect(pipecoll_plan_fsize(64), 0, 8, 1, (size_t[]){0}, "fsize:64 count 0");
    /* capped: 1e6 one-element segments become 1024 segments of ceil(1e6/1024) = 977 */
    {
        pipecoll_plan plan = pipecoll_plan_fsize(4);
        size_t n = pipecoll_segments(&plan, 1000000, 4, segs);
        CHECK(n == PIPECOLL_MAX_SEGMENTS && segs[0] == 977 && segs[n - 1] == 1000000 - 1023 * 977,
              "fsize:4 count 1e6: %zu segments of %zu, last %zu", n, segs[0], segs[n - 1]);
    }
    expect(pipecoll_plan_single(), 1000003, 4, 1, (size_t[]){1000003}, "single");

    size_t counts[] = {0, 1, 2, 3, 5, 7, 8, 9, 63, 64, 65, 1009, 4096, 65537, 1000000,
                       (size_t)3 << 31};
    size_t values[] = {1, 2, 3, 4, 7, 8, 16, 1000, 1024, 1025, 65536, (size_t)1 << 30};
    size_t elems[] = {1, 2, 4, 8, 16};
    for (size_t c = 0; c < sizeof(counts) / sizeof(*counts); c++)
        for (size_t v = 0; v < sizeof(values) / sizeof(*values); v++)
            for (size_t e = 0; e < sizeof(elems) / sizeof(*elems); e++) {
                invariants(pipecoll_plan_fconc(values[v]), counts[c], elems[e]);
                invariants(pipecoll_plan_fsize(values[v]), counts[c], elems[e]);
                invariants(pipecoll_plan_single(), counts[c], elems[e]);
            }

    parse_ok("single", PIPECOLL_PLAN_SINGLE, 0);
    parse_ok("fconc:8", PIPECOLL_PLAN_FCONC, 8);
    parse_ok("fconc:1", PIPECOLL_PLAN_FCONC, 1);
    parse_ok("fsize:4096", PIPECOLL_PLAN_FSIZE, 4096);
    parse_ok("fsize:64K", PIPECOLL_PLAN_FSIZE, 65536);
    parse_ok("fsize:1M", PIPECOLL_PLAN_FSIZE, 1048576);
    parse_ok("fsize:2g", PIPECOLL_PLAN_FSIZE, (size_t)2 << 30);
    const char *bad[] = {"", "fconc:", "fconc:0", "fconc:-1", "fconc:+2", "fconc: 2",
                         "fconc:2x", "fconc:2.5", "fsize:", "fsize:0", "fsize:0K", "fsize:1T",
                         "fsize:1MB", "fsize:-4", "bl", "nbl", "Single", " fconc:2",
                         "fconc:99999999999999999999999", "fsize:18446744073709551615G",
                         "fsize:1M ", "fconc", "fsize"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        parse_bad(bad[i]);
    pipecoll_plan untouched = pipecoll_plan_single();
    CHECK(pipecoll_plan_parse(NULL, &untouched) == -1, "parse(NULL) accepted");

    if (failures) {
        fprintf(stderr, "test_segments: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_segments: all checks passed\n");
    return 0;
}
