/*
 * linktest: all-pairs MPI ping-pong (the method of JSC LinkTest, the project's own code).
 *
 * N ranks run a round-robin ("circle method") schedule: N-1 steps of N/2 pairs,
 * every pair exactly once. Each pair measures ping-pong latency at a small size
 * and ping-pong bandwidth at a large size, either all pairs of a step at once
 * (parallel, default) or one pair at a time (serial, -S). Then the suspects are
 * measured again, serially and with R times the iterations (LinkTest's way of not
 * naming a pair that one busy moment slowed): of each kind of pair (intra-node,
 * inter-node), the Z slowest by median latency and the Z slowest by median
 * bandwidth. Per kind, because an intra-node pair slow for its kind is still
 * faster than every inter-node pair. Both measurements are kept.
 *
 * Memory per rank is O(N): rank 0 gathers one fixed-size record per rank and
 * step and appends the step's records to one binary file (format in README.md).
 * No rank ever holds the N x N matrix.
 *
 * Exit codes: 0 measured, 2 bad arguments or rank count < 2, 3 results file
 * could not be written.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LT_VERSION 1u
#define LT_MAGIC "MPIRLNK\0"
#define LT_HOSTLEN 64
#define EXIT_USAGE 2
#define EXIT_IO 3

enum phase { PHASE_PARALLEL = 0, PHASE_SERIAL = 1, PHASE_RETEST = 2, PHASE_END = 255 };
enum { TAG_LAT = 11, TAG_BW = 12, TAG_RECORD = 13 };

/* One measured pair: 64 bytes, little-endian on every platform this runs on. */
struct record {
    uint32_t rank_a, rank_b;  /* rank_a < rank_b; for PHASE_END: main records, retest records */
    uint16_t phase;
    uint16_t valid;           /* 1 when this slot holds a measurement (gather slots of idle ranks do not) */
    uint32_t step;
    double lat_us;            /* mean one-way time at the small size, us */
    double lat_median_us;     /* median one-way time: robust to a few preempted iterations */
    double lat_min_us;        /* fastest one-way time */
    double bw_mbs;            /* large size / mean one-way time, MB/s (10^6 B/s) */
    double bw_median_mbs;     /* large size / median one-way time */
    double bw_max_mbs;        /* large size / fastest one-way time */
};

struct header {
    char magic[8];
    uint32_t version, header_size, record_size, nranks;
    uint64_t small_size, large_size;
    uint32_t warmup, lat_iters, bw_iters, serial, retest, hostlen;
    /* followed by nranks * hostlen bytes: node name of each rank, NUL padded */
};

struct options {
    size_t small_size, large_size;
    long warmup, lat_iters, bw_iters, retest, retest_factor;
    int serial;
    const char *out;
};

static int rank, size;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: linktest [-s SMALL] [-b LARGE] [-w WARMUP] [-i LAT_ITERS] [-I BW_ITERS] [-Z N] [-R FACTOR] [-S] [-o FILE]\n"
            "  -s SMALL     latency message size in bytes (8)\n"
            "  -b LARGE     bandwidth message size in bytes (1048576)\n"
            "  -w WARMUP    warm-up ping-pongs before each measurement (10)\n"
            "  -i ITERS     measured ping-pongs at the small size (100)\n"
            "  -I ITERS     measured ping-pongs at the large size (10)\n"
            "  -Z N         re-test the N slowest pairs of each kind by latency and by bandwidth, serially (10)\n"
            "  -R FACTOR    re-tests run FACTOR times the iterations of the first measurement (4)\n"
            "  -S           serial mode: one pair at a time (default: all pairs of a step at once)\n"
            "  -o FILE      results file (linktest.bin)\n");
}

static int parse_count(const char *text, long *value)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *end || end == text || v < 0)
        return -1;
    *value = v;
    return 0;
}

/* Returns 0 on success, or the exit code; every rank parses the same argv and agrees. */
static int parse(int argc, char **argv, struct options *o)
{
    o->small_size = 8;
    o->large_size = 1 << 20;
    o->warmup = 10;
    o->lat_iters = 100;
    o->bw_iters = 10;
    o->retest = 10;
    o->retest_factor = 4;
    o->serial = 0;
    o->out = "linktest.bin";
    int c;
    long v;
    while ((c = getopt(argc, argv, "s:b:w:i:I:Z:R:So:hV")) != -1) {
        const char *bad = NULL;
        switch (c) {
        case 's': if (parse_count(optarg, &v) || v < 1) bad = "-s needs a size of at least 1 byte"; else o->small_size = (size_t)v; break;
        case 'b': if (parse_count(optarg, &v) || v < 1) bad = "-b needs a size of at least 1 byte"; else o->large_size = (size_t)v; break;
        case 'w': if (parse_count(optarg, &o->warmup)) bad = "-w needs a count of 0 or more"; break;
        case 'i': if (parse_count(optarg, &o->lat_iters)) bad = "-i needs a count"; break;
        case 'I': if (parse_count(optarg, &o->bw_iters)) bad = "-I needs a count"; break;
        case 'Z': if (parse_count(optarg, &o->retest)) bad = "-Z needs a count of 0 or more"; break;
        case 'R': if (parse_count(optarg, &o->retest_factor) || o->retest_factor < 1) bad = "-R needs a factor of at least 1"; break;
        case 'S': o->serial = 1; break;
        case 'o': o->out = optarg; break;
        case 'h': if (rank == 0) usage(stdout); return -1;
        case 'V': if (rank == 0) printf("linktest results format %u\n", LT_VERSION); return -1;
        default: if (rank == 0) usage(stderr); return EXIT_USAGE;
        }
        if (bad) {
            if (rank == 0) fprintf(stderr, "linktest: %s.\n", bad);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        if (rank == 0) fprintf(stderr, "linktest: unexpected argument '%s'; see linktest -h.\n", argv[optind]);
        return EXIT_USAGE;
    }
    if (o->lat_iters == 0 || o->bw_iters == 0) {
        if (rank == 0)
            fprintf(stderr, "linktest: zero iterations measure nothing: give -i and -I at least 1.\n");
        return EXIT_USAGE;
    }
    return 0;
}

/* Circle method over M = N (even) or N + 1 (odd: slot N is "idle") positions:
 * in step s < M-1, slot M-1 meets s and every other r meets (2s - r) mod (M-1). */
static int partner(int r, int step, int slots)
{
    int m = slots - 1;
    if (r == m)
        return step;
    if (r == step)
        return m;
    return ((2 * step - r) % m + m) % m;
}

/* Waits for a request without spinning: idle ranks must not steal the cores of
 * the pairs being measured (several ranks share a node; serial mode). 1 ms, not
 * less: six idle ranks waking every 50 us cost a shared 2-core host a third of a
 * core, the noise a bandwidth measurement then sees; a barrier costs ~3 ms. */
static void wait_idle(MPI_Request *req)
{
    struct timespec pause = {0, 1000000};
    int done = 0;
    while (!done) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (!done)
            nanosleep(&pause, NULL);
    }
}

static void barrier_idle(void)
{
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    wait_idle(&req);
}

static int compare_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Ping-pong with `peer`; mean, median and fastest one-way time in seconds.
 * `times` holds `iters` doubles (O(iterations) memory, reused). */
static void pingpong(int peer, char *buf, size_t bytes, long warmup, long iters, int tag, double *times,
                     double *mean, double *median, double *fastest)
{
    int first = rank < peer;
    double sum = 0.0;
    for (long i = 0; i < warmup + iters; i++) {
        double t0 = MPI_Wtime();
        if (first) {
            MPI_Send(buf, (int)bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)bytes, MPI_CHAR, peer, tag, MPI_COMM_WORLD);
        }
        double t = (MPI_Wtime() - t0) / 2.0;
        if (i >= warmup) {
            times[i - warmup] = t;
            sum += t;
        }
    }
    qsort(times, (size_t)iters, sizeof *times, compare_double);
    *mean = sum / (double)iters;
    *median = iters % 2 ? times[iters / 2] : (times[iters / 2 - 1] + times[iters / 2]) / 2.0;
    *fastest = times[0];
}

static struct record measure(int peer, char *buf, const struct options *o, uint16_t phase, uint32_t step)
{
    struct record rec;
    memset(&rec, 0, sizeof rec);
    double mean, median, fastest;
    double *times = malloc(sizeof(double) * (size_t)(o->lat_iters > o->bw_iters ? o->lat_iters : o->bw_iters));
    pingpong(peer, buf, o->small_size, o->warmup, o->lat_iters, TAG_LAT, times, &mean, &median, &fastest);
    rec.lat_us = mean * 1e6;
    rec.lat_median_us = median * 1e6;
    rec.lat_min_us = fastest * 1e6;
    pingpong(peer, buf, o->large_size, o->warmup, o->bw_iters, TAG_BW, times, &mean, &median, &fastest);
    rec.bw_mbs = (double)o->large_size / mean / 1e6;
    rec.bw_median_mbs = (double)o->large_size / median / 1e6;
    rec.bw_max_mbs = (double)o->large_size / fastest / 1e6;
    free(times);
    rec.rank_a = (uint32_t)(rank < peer ? rank : peer);
    rec.rank_b = (uint32_t)(rank < peer ? peer : rank);
    rec.phase = phase;
    rec.valid = rank < peer;  /* the lower rank reports the pair, once */
    rec.step = step;
    return rec;
}

/* The Z worst pairs seen so far by one score (rank 0 only; O(Z) memory). */
struct worst {
    long cap, count;
    double *score;
    uint32_t *a, *b;
};

static void worst_init(struct worst *w, long cap)
{
    w->cap = cap;
    w->count = 0;
    w->score = malloc(sizeof(double) * (size_t)(cap ? cap : 1));
    w->a = malloc(sizeof(uint32_t) * (size_t)(cap ? cap : 1));
    w->b = malloc(sizeof(uint32_t) * (size_t)(cap ? cap : 1));
}

static void worst_offer(struct worst *w, double score, uint32_t a, uint32_t b)
{
    if (w->cap == 0)
        return;
    long slot;
    if (w->count < w->cap) {
        slot = w->count++;
    } else {
        slot = 0;
        for (long i = 1; i < w->count; i++)
            if (w->score[i] < w->score[slot])
                slot = i;
        if (score <= w->score[slot])
            return;
    }
    w->score[slot] = score;
    w->a[slot] = a;
    w->b[slot] = b;
}

static int write_all(FILE *f, const void *data, size_t bytes)
{
    return fwrite(data, 1, bytes, f) == bytes && fflush(f) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    struct options o;
    int code = parse(argc, argv, &o);
    if (code) {
        MPI_Finalize();
        return code < 0 ? 0 : code;
    }
    if (size < 2) {
        fprintf(stderr, "linktest: 1 rank has no pair to measure: start at least 2 ranks.\n");
        MPI_Finalize();
        return EXIT_USAGE;
    }
    int slots = size + (size % 2);
    int steps = slots - 1;
    if (size % 2 && rank == 0)
        fprintf(stderr, "linktest: %d ranks is odd: one rank sits out each step (%d steps of %d pairs); "
                "every pair is still measured once.\n", size, steps, size / 2);

    /* Node name of every rank: Slurm's name when run under Slurm (several slurmd may share a host). */
    char host[LT_HOSTLEN];
    memset(host, 0, sizeof host);
    const char *slurm_node = getenv("SLURMD_NODENAME");
    if (slurm_node && *slurm_node) {
        snprintf(host, LT_HOSTLEN, "%s", slurm_node);
    } else {
        int len;
        char name[MPI_MAX_PROCESSOR_NAME];
        MPI_Get_processor_name(name, &len);
        snprintf(host, LT_HOSTLEN, "%.*s", LT_HOSTLEN - 1, name);
    }
    char *hosts = rank == 0 ? calloc((size_t)size, LT_HOSTLEN) : NULL;
    MPI_Gather(host, LT_HOSTLEN, MPI_CHAR, hosts, LT_HOSTLEN, MPI_CHAR, 0, MPI_COMM_WORLD);

    FILE *out = NULL;
    int io_ok = 1;
    if (rank == 0) {
        out = fopen(o.out, "wb");
        struct header h;
        memset(&h, 0, sizeof h);
        memcpy(h.magic, LT_MAGIC, 8);
        h.version = LT_VERSION;
        h.header_size = (uint32_t)(sizeof h + (size_t)size * LT_HOSTLEN);
        h.record_size = sizeof(struct record);
        h.nranks = (uint32_t)size;
        h.small_size = o.small_size;
        h.large_size = o.large_size;
        h.warmup = (uint32_t)o.warmup;
        h.lat_iters = (uint32_t)o.lat_iters;
        h.bw_iters = (uint32_t)o.bw_iters;
        h.serial = (uint32_t)o.serial;
        h.retest = (uint32_t)o.retest;
        h.hostlen = LT_HOSTLEN;
        if (!out || write_all(out, &h, sizeof h) || write_all(out, hosts, (size_t)size * LT_HOSTLEN)) {
            fprintf(stderr, "linktest: cannot write the results file %s: %s.\n", o.out, strerror(errno));
            io_ok = 0;
        }
    }
    MPI_Bcast(&io_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!io_ok) {
        free(hosts);
        MPI_Finalize();
        return EXIT_IO;
    }

    char *buf = calloc(o.large_size > o.small_size ? o.large_size : o.small_size, 1);
    struct record *step_records = rank == 0 ? malloc(sizeof(struct record) * (size_t)size) : NULL;
    /* Suspects per metric and kind: [0] intra-node, [1] inter-node, by latency then by bandwidth. */
    struct worst suspects[4];
    if (rank == 0)
        for (int l = 0; l < 4; l++)
            worst_init(&suspects[l], o.retest);
    uint32_t main_records = 0, retest_records = 0;
    uint16_t phase = o.serial ? PHASE_SERIAL : PHASE_PARALLEL;

    for (int step = 0; step < steps; step++) {
        int peer = partner(rank, step, slots);
        struct record mine;
        memset(&mine, 0, sizeof mine);
        if (o.serial) {
            /* Pair k of this step is the one whose lower member is the k-th lowest rank. */
            for (int k = 0; k < size; k++) {
                int other = partner(k, step, slots);
                if (other >= size || other < k)
                    continue;
                if (k == rank || other == rank)
                    mine = measure(peer, buf, &o, phase, (uint32_t)step);
                barrier_idle();
            }
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            if (peer < size)
                mine = measure(peer, buf, &o, phase, (uint32_t)step);
        }
        MPI_Gather(&mine, sizeof mine, MPI_BYTE, step_records, sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            for (int r = 0; r < size; r++) {
                struct record *rec = &step_records[r];
                if (!rec->valid)
                    continue;
                if (io_ok && write_all(out, rec, sizeof *rec))
                    io_ok = 0;
                main_records++;
                /* The median, the statistic judged: a mean would pick the pairs a preemption hit. */
                int inter = strncmp(hosts + (size_t)rec->rank_a * LT_HOSTLEN, hosts + (size_t)rec->rank_b * LT_HOSTLEN,
                                    LT_HOSTLEN) != 0;
                worst_offer(&suspects[inter], rec->lat_median_us, rec->rank_a, rec->rank_b);
                worst_offer(&suspects[2 + inter], -rec->bw_median_mbs, rec->rank_a, rec->rank_b);
            }
        }
    }

    /* Re-test: the union of the suspects, one pair at a time, R times the iterations. */
    int nretest = 0;
    uint32_t *pairs = NULL;
    if (rank == 0) {
        long total = 0;
        struct worst *lists[4] = {&suspects[0], &suspects[1], &suspects[2], &suspects[3]};
        for (int l = 0; l < 4; l++)
            total += lists[l]->count;
        pairs = malloc(sizeof(uint32_t) * 2 * (size_t)(total + 1));
        for (int l = 0; l < 4; l++)
            for (long i = 0; i < lists[l]->count; i++) {
                int seen = 0;
                for (int j = 0; j < nretest; j++)
                    seen |= pairs[2 * j] == lists[l]->a[i] && pairs[2 * j + 1] == lists[l]->b[i];
                if (!seen) {
                    pairs[2 * nretest] = lists[l]->a[i];
                    pairs[2 * nretest + 1] = lists[l]->b[i];
                    nretest++;
                }
            }
    }
    MPI_Bcast(&nretest, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank != 0)
        pairs = malloc(sizeof(uint32_t) * 2 * (size_t)(nretest + 1));
    MPI_Bcast(pairs, 2 * nretest, MPI_UINT32_T, 0, MPI_COMM_WORLD);
    struct options longer = o;
    longer.lat_iters = o.lat_iters * o.retest_factor;
    longer.bw_iters = o.bw_iters * o.retest_factor;
    for (int i = 0; i < nretest; i++) {
        int a = (int)pairs[2 * i], b = (int)pairs[2 * i + 1];
        struct record rec;
        memset(&rec, 0, sizeof rec);
        if (rank == a || rank == b)
            rec = measure(rank == a ? b : a, buf, &longer, PHASE_RETEST, (uint32_t)i);
        if (rank == a && a != 0)
            MPI_Send(&rec, sizeof rec, MPI_BYTE, 0, TAG_RECORD, MPI_COMM_WORLD);
        if (rank == 0) {
            if (a != 0) {
                MPI_Request req;
                MPI_Irecv(&rec, sizeof rec, MPI_BYTE, a, TAG_RECORD, MPI_COMM_WORLD, &req);
                wait_idle(&req);
            }
            if (io_ok && write_all(out, &rec, sizeof rec))
                io_ok = 0;
            retest_records++;
        }
        barrier_idle();
    }

    if (rank == 0) {
        struct record end;
        memset(&end, 0, sizeof end);
        end.phase = PHASE_END;
        end.valid = 1;
        end.rank_a = main_records;
        end.rank_b = retest_records;
        if (io_ok && write_all(out, &end, sizeof end))
            io_ok = 0;
        if (out && fclose(out))
            io_ok = 0;
        if (!io_ok)
            fprintf(stderr, "linktest: writing the results file %s failed: %s.\n", o.out, strerror(errno));
        else
            printf("linktest: %d ranks, %d steps, %u pairs, %u re-tested, %s mode; results in %s\n",
                   size, steps, main_records, retest_records, o.serial ? "serial" : "parallel", o.out);
    }
    MPI_Bcast(&io_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(buf);
    free(hosts);
    free(pairs);
    free(step_records);
    MPI_Finalize();
    return io_ok ? 0 : EXIT_IO;
}
