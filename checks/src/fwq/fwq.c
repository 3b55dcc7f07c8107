/* Fixed work quantum (FWQ): how much of each core the operating system takes away.
 *
 * One MPI rank per core. Each rank calibrates a loop that takes about
 * --quantum ns on its core, then runs it --iterations times back to back and
 * keeps the duration of every iteration (CLOCK_MONOTONIC, ns). On a quiet core
 * all iterations take the same time; every interruption (timer tick, daemon,
 * interrupt) lengthens the iteration it falls into. Rank 0 writes everything
 * to one file, node by node (format: fwq_format.h, README.md); the analysis
 * is in mpiregress/families/noise/.
 *
 * Exit codes (one sentence on stderr from rank 0):
 *   0 written; 2 bad arguments; 11 the quantum cannot be calibrated (timer too
 *   coarse, or the quantum is shorter than the loop's overhead); 12 a node has
 *   more ranks than cores in their affinity masks; 13 the output file cannot be
 *   written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fwq_format.h"

enum { EXIT_USAGE = 2, EXIT_CALIBRATION = 11, EXIT_OVERSUBSCRIBED = 12, EXIT_OUTPUT = 13 };
#define MESSAGE_LEN 256

/* Sink for the work loop's result, so the compiler cannot drop the loop. */
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A dependent xorshift chain: no vectorisation, no memory traffic, the same
 * number of cycles every time, so any variation is the core being taken away. */
static void work(uint64_t n)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    sink = x;
}

/* The kernel's jiffy (ns): CLOCK_MONOTONIC_COARSE advances once a tick, and its resolution says by how
 * much (unprivileged, unlike CONFIG_HZ in /proc/timer_list or /boot). FWQ_UNKNOWN where it does not. */
static uint64_t jiffy_ns(void)
{
#ifdef CLOCK_MONOTONIC_COARSE
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && (res.tv_sec || res.tv_nsec))
        return (uint64_t)res.tv_sec * 1000000000ull + (uint64_t)res.tv_nsec;
#endif
    return FWQ_UNKNOWN;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Median duration of `reps` quanta of `n` loop turns (median: robust to the noise we measure). */
static uint64_t median_quantum(uint64_t n, int reps)
{
    uint64_t t[101];
    if (reps > 101) reps = 101;
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = now_ns();
        work(n);
        t[r] = now_ns() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_u64);
    return t[reps / 2];
}

/* Smallest nonzero step of the clock seen over back-to-back reads. */
static uint64_t observed_timer_step(void)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 2000; i++) {
        uint64_t a = now_ns(), b;
        while ((b = now_ns()) == a) {}
        if (b - a < best) best = b - a;
    }
    return best;
}

/* Loop count whose quantum takes about target_ns, or 0 with a sentence in msg. */
static uint64_t calibrate(uint64_t target_ns, uint64_t *quantum_ns, char *msg)
{
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);
    uint64_t resolution = (uint64_t)res.tv_sec * 1000000000ull + (uint64_t)res.tv_nsec;
    uint64_t step = observed_timer_step();
    if (step > resolution) resolution = step;
    /* A quantum must span many clock steps, or its variation is the clock's. */
    if (resolution * 20 > target_ns) {
        snprintf(msg, MESSAGE_LEN, "the timer's resolution (%llu ns) is too coarse to time a %llu ns quantum; "
                 "use a quantum of at least %llu ns", (unsigned long long)resolution,
                 (unsigned long long)target_ns, (unsigned long long)(resolution * 20));
        return 0;
    }
    uint64_t n = 1;
    while (median_quantum(n, 11) < target_ns / 4) {
        if (n > (1ull << 40)) {
            snprintf(msg, MESSAGE_LEN, "the work loop does not slow down with more work; cannot calibrate");
            return 0;
        }
        n *= 2;
    }
    for (int round = 0; round < 4; round++) {
        uint64_t t = median_quantum(n, 21);
        if (t == 0) t = 1;
        n = (uint64_t)((double)n * (double)target_ns / (double)t + 0.5);
        if (n == 0) n = 1;
    }
    *quantum_ns = median_quantum(n, 101);
    uint64_t lo = target_ns - target_ns / 4, hi = target_ns + target_ns / 4;
    if (*quantum_ns < lo || *quantum_ns > hi) {
        snprintf(msg, MESSAGE_LEN, "cannot calibrate a %llu ns quantum: the closest one takes %llu ns "
                 "(loop count %llu; the clock read alone costs about that much)",
                 (unsigned long long)target_ns, (unsigned long long)*quantum_ns, (unsigned long long)n);
        return 0;
    }
    return n;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fwq -o FILE [-n ITERATIONS] [-q QUANTUM_NS] [-w WARMUP]\n"
            "  -o FILE        result file (format version %u, see checks/src/fwq/README.md)\n"
            "  -n ITERATIONS  measured iterations per rank (default 100000)\n"
            "  -q QUANTUM_NS  target duration of one work quantum (default 10000)\n"
            "  -w WARMUP      unrecorded iterations before the measurement (default 1000)\n",
            FWQ_FORMAT_VERSION);
}

static int parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || end == text || text[0] == '-' || v < min || v > max) return -1;
    *out = v;
    return 0;
}

/* What every rank tells every other before measuring. */
struct rank_info {
    char name[FWQ_NAME_LEN];
    cpu_set_t affinity;
};

/* Every rank learns whether any rank failed; rank 0 prints the first failure's sentence. */
static int agree(int code, const char *msg, int rank, int size, const char *node)
{
    int worst = 0;
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!worst) return 0;
    char line[MESSAGE_LEN + FWQ_NAME_LEN + 32] = "";
    if (code) snprintf(line, sizeof line, "rank %d on %s: %s", rank, node, msg);
    char *all = NULL;
    if (rank == 0) all = calloc((size_t)size, sizeof line);
    MPI_Gather(line, (int)sizeof line, MPI_CHAR, all, (int)sizeof line, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int failed = 0, first = -1;
        for (int r = 0; r < size; r++)
            if (all[(size_t)r * sizeof line]) { failed++; if (first < 0) first = r; }
        fprintf(stderr, "fwq: %s%s\n", all + (size_t)first * sizeof line,
                failed > 1 ? " (other ranks failed the same way)" : "");
        free(all);
    }
    return worst;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    uint64_t iterations = 100000, target_ns = 10000, warmup = 1000;
    const char *path = NULL;
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { if (rank == 0) usage(stdout); MPI_Finalize(); return 0; }
        else if (!strcmp(a, "-o") && v) { path = v; i++; }
        else if (!strcmp(a, "-n") && v && !parse_u64(v, 1, 100000000, &iterations)) i++;
        else if (!strcmp(a, "-q") && v && !parse_u64(v, 1, 1000000000, &target_ns)) i++;
        else if (!strcmp(a, "-w") && v && !parse_u64(v, 0, 100000000, &warmup)) i++;
        else { bad = 1; break; }
    }
    if (bad || !path) {
        if (rank == 0) {
            fprintf(stderr, "fwq: bad arguments: -o FILE is required, -n 1..1e8, -q 1..1e9 ns, -w 0..1e8\n");
            usage(stderr);
        }
        MPI_Finalize();
        return EXIT_USAGE;
    }

    struct rank_info me;
    memset(&me, 0, sizeof me);
    const char *slurm_node = getenv("SLURMD_NODENAME");
    if (slurm_node && *slurm_node) {
        snprintf(me.name, FWQ_NAME_LEN, "%s", slurm_node);
    } else {
        char host[MPI_MAX_PROCESSOR_NAME];
        int len;
        MPI_Get_processor_name(host, &len);
        snprintf(me.name, FWQ_NAME_LEN, "%.*s", FWQ_NAME_LEN - 1, host);
    }
    sched_getaffinity(0, sizeof me.affinity, &me.affinity);

    struct rank_info *all = malloc((size_t)size * sizeof *all);
    MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, MPI_COMM_WORLD);

    /* Nodes in order of their first rank; ranks of a node in rank order. */
    int *node_of = malloc((size_t)size * sizeof *node_of);
    int nodes = 0;
    for (int r = 0; r < size; r++) {
        node_of[r] = -1;
        for (int q = 0; q < r; q++)
            if (!strncmp(all[q].name, all[r].name, FWQ_NAME_LEN)) { node_of[r] = node_of[q]; break; }
        if (node_of[r] < 0) node_of[r] = nodes++;
    }

    /* One rank per core: a node with more ranks than CPUs to run them on measures sharing, not noise. */
    char msg[MESSAGE_LEN] = "";
    int code = 0;
    {
        cpu_set_t cores;
        CPU_ZERO(&cores);
        int here = 0;
        for (int r = 0; r < size; r++)
            if (node_of[r] == node_of[rank]) { CPU_OR(&cores, &cores, &all[r].affinity); here++; }
        if (here > CPU_COUNT(&cores)) {
            snprintf(msg, MESSAGE_LEN, "%d ranks share %d CPU(s) on this node; FWQ needs one core per rank "
                     "(ask Slurm for fewer tasks per node or bind one task per core)", here, CPU_COUNT(&cores));
            code = EXIT_OVERSUBSCRIBED;
        }
    }
    if (agree(code, msg, rank, size, me.name)) { MPI_Finalize(); return EXIT_OVERSUBSCRIBED; }

    /* Open the output before measuring: a run that cannot be written is not worth its time. */
    FILE *out = NULL;
    if (rank == 0) {
        out = fopen(path, "wb");
        if (!out) { snprintf(msg, MESSAGE_LEN, "cannot write %s: %s", path, strerror(errno)); code = EXIT_OUTPUT; }
    }
    if (agree(code, msg, rank, size, me.name)) { MPI_Finalize(); return EXIT_OUTPUT; }

    struct fwq_rank_header head;
    memset(&head, 0, sizeof head);
    head.rank = (uint32_t)rank;
    head.affinity_cpus = (uint32_t)CPU_COUNT(&me.affinity);
    head.work_per_quantum = calibrate(target_ns, &head.quantum_ns, msg);
    code = head.work_per_quantum ? 0 : EXIT_CALIBRATION;
    if (agree(code, msg, rank, size, me.name)) {
        if (out) { fclose(out); remove(path); }
        MPI_Finalize();
        return EXIT_CALIBRATION;
    }

    uint32_t *times = malloc((size_t)iterations * sizeof *times);
    if (!times) { fprintf(stderr, "fwq: rank %d: out of memory for %llu iterations\n", rank,
                          (unsigned long long)iterations); MPI_Abort(MPI_COMM_WORLD, EXIT_USAGE); }
    for (uint64_t i = 0; i < warmup; i++) work(head.work_per_quantum);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Back-to-back timestamps: iteration i starts where i-1 ended, so start times are
     * start_ns + the sum of earlier durations, and nothing between iterations is unseen. */
    head.cpu_start = sched_getcpu();
    uint64_t t0 = now_ns();
    head.start_ns = t0;
    for (uint64_t i = 0; i < iterations; i++) {
        work(head.work_per_quantum);
        uint64_t t1 = now_ns();
        uint64_t d = t1 - t0;
        times[i] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
        t0 = t1;
    }
    head.end_ns = t0;
    head.cpu_end = sched_getcpu();
    head.jiffy_ns = jiffy_ns();

    /* Rank 0 writes node after node and flushes each: if the run dies while
     * gathering, the nodes already written stay readable. */
    if (rank == 0) {
        struct fwq_file_header fh;
        memset(&fh, 0, sizeof fh);
        memcpy(fh.magic, "MPRFWQ\0\0", 8);
        fh.version = FWQ_FORMAT_VERSION;
        fh.nodes = (uint32_t)nodes;
        fh.ranks = (uint32_t)size;
        fh.iterations = iterations;
        fh.quantum_target_ns = target_ns;
        struct timespec res;
        clock_getres(CLOCK_MONOTONIC, &res);
        fh.timer_resolution_ns = (uint64_t)res.tv_sec * 1000000000ull + (uint64_t)res.tv_nsec;
        int ok = fwrite(&fh, sizeof fh, 1, out) == 1;
        uint32_t *buffer = malloc((size_t)iterations * sizeof *buffer);
        for (int n = 0; n < nodes && ok; n++) {
            struct fwq_node_header nh;
            memset(&nh, 0, sizeof nh);
            memcpy(nh.tag, "NODE", 4);
            int first = -1;
            for (int r = 0; r < size; r++)
                if (node_of[r] == n) { nh.ranks++; if (first < 0) first = r; }
            memcpy(nh.name, all[first].name, FWQ_NAME_LEN);
            ok = fwrite(&nh, sizeof nh, 1, out) == 1;
            for (int r = 0; r < size && ok; r++) {
                if (node_of[r] != n) continue;
                struct fwq_rank_header rh;
                const uint32_t *data = times;
                if (r == 0) {
                    rh = head;
                } else {
                    MPI_Recv(&rh, (int)sizeof rh, MPI_BYTE, r, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Recv(buffer, (int)iterations, MPI_UINT32_T, r, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    data = buffer;
                }
                ok = fwrite(&rh, sizeof rh, 1, out) == 1 &&
                     fwrite(data, sizeof *data, (size_t)iterations, out) == (size_t)iterations;
            }
            struct fwq_node_trailer nt;
            memcpy(nt.tag, "DONE", 4);
            nt.ranks = nh.ranks;
            ok = ok && fwrite(&nt, sizeof nt, 1, out) == 1 && fflush(out) == 0;
            if (ok) fsync(fileno(out));
        }
        free(buffer);
        if (fclose(out) != 0) ok = 0;
        if (!ok) {
            fprintf(stderr, "fwq: writing %s failed: %s; nodes written before the failure are kept\n",
                    path, strerror(errno));
            MPI_Abort(MPI_COMM_WORLD, EXIT_OUTPUT);
        }
        printf("fwq: %d ranks on %d node(s), %llu iterations of a %llu ns quantum written to %s\n", size, nodes,
               (unsigned long long)iterations, (unsigned long long)target_ns, path);
    } else {
        MPI_Send(&head, (int)sizeof head, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        MPI_Send(times, (int)iterations, MPI_UINT32_T, 0, 2, MPI_COMM_WORLD);
    }

    free(times);
    free(all);
    free(node_of);
    MPI_Finalize();
    return 0;
}
