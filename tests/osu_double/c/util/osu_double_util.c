/*
 * Shared pieces of the OSU test double. Written from scratch for mpiregress'
 * tests: it reproduces the command-line contract and output format of the
 * OSU 7.2 point-to-point benchmarks, not their code.
 */
#define _POSIX_C_SOURCE 200809L
#include "osu_double_util.h"

#include <errno.h>
#include <mpi.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A non-negative decimal number filling all of [start, end); -1 otherwise. */
static long parse_count(const char *start, const char *end)
{
    char buf[32];
    size_t len = (size_t)(end - start);
    char *stop = NULL;
    long value;

    if (len == 0 || len >= sizeof(buf)) {
        return -1;
    }
    memcpy(buf, start, len);
    buf[len] = '\0';
    if (buf[0] < '0' || buf[0] > '9') {
        return -1;
    }
    errno = 0;
    value = strtol(buf, &stop, 10);
    if (errno != 0 || *stop != '\0') {
        return -1;
    }
    return value;
}

/* "-m [MIN:]MAX", "MIN:" or ":MAX"; returns 0 when the text is not a size range. */
static int parse_sizes(const char *text, struct osu_double_options *opts)
{
    /* Test hook: treat any -m as unparsable, so the pipeline's handling of OSU's
     * "header, no data row, exit 0" can be driven through a check that passes a valid -m. */
    const char *unparsable = getenv("OSU_DOUBLE_UNPARSABLE_SIZES");
    if (unparsable != NULL && strcmp(unparsable, "1") == 0) {
        return 0;
    }
    const char *colon = strchr(text, ':');
    const char *end = text + strlen(text);
    long min = OSU_DOUBLE_DEFAULT_MIN, max = OSU_DOUBLE_DEFAULT_MAX;

    if (colon == NULL) {
        max = parse_count(text, end);
        if (max < 0) {
            return 0;
        }
    } else {
        if (colon > text) {
            min = parse_count(text, colon);
            if (min < 0) {
                return 0;
            }
        }
        if (colon + 1 < end) {
            max = parse_count(colon + 1, end);
            if (max < 0) {
                return 0;
            }
        }
    }
    opts->min_size = min;
    opts->max_size = max;
    return 1;
}

static int parse_number(const char *name, const char *text, long minimum, long *out,
                        char *err_msg, size_t err_len)
{
    long value = parse_count(text, text + strlen(text));

    if (value < minimum) {
        snprintf(err_msg, err_len, "Invalid %s: '%s' (expected an integer >= %ld)",
                 name, text, minimum);
        return 0;
    }
    *out = value;
    return 1;
}

int osu_double_parse(int argc, char **argv, struct osu_double_options *opts,
                     char *err_msg, size_t err_len)
{
    static const struct option long_options[] = {
        {"message-size", required_argument, NULL, 'm'},
        {"iterations", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'x'},
        {"window-size", required_argument, NULL, 'W'},
        {"buffer-num", required_argument, NULL, 'b'},
        {"mem-limit", required_argument, NULL, 'M'},
        {"validation", no_argument, NULL, 'c'},
        {"validation-warmup", required_argument, NULL, 'u'},
        {"graph", required_argument, NULL, 'G'},
        {"ddt", required_argument, NULL, 'D'},
        {"full", no_argument, NULL, 'f'},
        {"type", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'v'},
        {NULL, 0, NULL, 0},
    };
    long value;
    int c;

    opts->min_size = OSU_DOUBLE_DEFAULT_MIN;
    opts->max_size = OSU_DOUBLE_DEFAULT_MAX;
    opts->sizes_valid = 1;
    opts->iterations = 1000;
    opts->iterations_large = 100;
    opts->warmup = 200;
    opts->warmup_large = 10;
    opts->window = 64;
    opts->full = 0;

    opterr = 0;   /* options the double does not model are ignored silently */
    optind = 1;
    while ((c = getopt_long(argc, argv, ":b:m:M:i:x:W:cu:G:D:T:a:fhv", long_options, NULL)) != -1) {
        switch (c) {
        case 'm':
            /* Real OSU 7.2 prints the header and no data row for a size it
             * cannot parse, and exits 0; the pipeline must catch that. */
            if (!parse_sizes(optarg, opts)) {
                opts->sizes_valid = 0;
            }
            break;
        case 'i':
            if (!parse_number("number of iterations", optarg, 1, &value, err_msg, err_len)) {
                return OSU_DOUBLE_BAD_USAGE;
            }
            opts->iterations = opts->iterations_large = value;
            break;
        case 'x':
            if (!parse_number("number of warmup iterations", optarg, 0, &value, err_msg, err_len)) {
                return OSU_DOUBLE_BAD_USAGE;
            }
            opts->warmup = opts->warmup_large = value;
            break;
        case 'W':
            if (!parse_number("window size", optarg, 1, &value, err_msg, err_len)) {
                return OSU_DOUBLE_BAD_USAGE;
            }
            opts->window = (int)value;
            break;
        case 'f':
            opts->full = 1;
            break;
        case 'h':
            return OSU_DOUBLE_HELP;
        case 'v':
            return OSU_DOUBLE_VERSION_INFO;
        case ':':
            snprintf(err_msg, err_len, "Option -%c needs an argument", optopt);
            return OSU_DOUBLE_BAD_USAGE;
        default:
            break;   /* -b, -M, -c, -u, -G, -D and unknown options: ignored */
        }
    }
    return OSU_DOUBLE_RUN;
}

void osu_double_maybe_trap(int rank)
{
    const char *hook = getenv("OSU_DOUBLE_ILLEGAL_INSTRUCTION");

    if (rank == 1 && hook != NULL && strcmp(hook, "1") == 0) {
        /* A real SIGILL (ud2 on x86), as a binary built for a newer CPU gets. */
        __builtin_trap();
    }
}

void osu_double_stall(double since)
{
    static double factor = -1.0;
    double until;

    if (factor < 0.0) {
        const char *hook = getenv("OSU_DOUBLE_SLOWDOWN");

        factor = hook != NULL ? strtod(hook, NULL) : 1.0;
        if (!(factor > 1.0) || factor > 1000.0) {
            factor = 1.0;
        }
    }
    if (factor > 1.0) {
        /* Busy, like a slower MPI stack: the timed loop really takes `factor` times as long. */
        until = MPI_Wtime() + (factor - 1.0) * (MPI_Wtime() - since);
        while (MPI_Wtime() < until) {
        }
    }
}

char *osu_double_buffer(size_t size, char fill)
{
    long page = sysconf(_SC_PAGESIZE);
    void *buf = NULL;

    if (page <= 0) {
        page = 4096;
    }
    if (posix_memalign(&buf, (size_t)page, size > 0 ? size : 1) != 0) {
        return NULL;
    }
    memset(buf, fill, size > 0 ? size : 1);
    return buf;
}

long osu_double_next_size(long size)
{
    return size > 0 ? size * 2 : 1;
}

void osu_double_print_header(const char *title, const char *column)
{
    printf("# OSU MPI %s Test v%s\n", title, OSU_DOUBLE_VERSION);
    printf("%-10s%18s\n", "# Size", column);
    printf("# Datatype: MPI_CHAR.\n");
    fflush(stdout);
}

void osu_double_print_row(long size, double value)
{
    printf("%-10ld%18.2f\n", size, value);
    fflush(stdout);
}

void osu_double_print_usage(const char *program, int with_window)
{
    printf("Usage: %s [options]\n", program);
    printf("Options (OSU test double; other OSU options are accepted and ignored):\n");
    printf("  -m, --message-size [MIN:]MAX  message sizes from MIN to MAX bytes\n");
    printf("  -i, --iterations ITER         measured iterations per size\n");
    printf("  -x, --warmup ITER             warm-up iterations per size\n");
    if (with_window) {
        printf("  -W, --window-size SIZE        messages in flight before an ack (default 64)\n");
    }
    printf("  -f, --full                    min/max latency and iterations (collectives)\n");
    printf("  -h, --help                    print this help\n");
    printf("  -v, --version                 print version info\n");
}

/* MPI_Init, trap hook, options and the rank-count rule (pt2pt: exactly two; collective:
 * at least two). Returns -1 when the benchmark should run; otherwise MPI is finalized and
 * the value is the process exit code (usage, version, bad option, wrong number of ranks). */
static int start(int *argc, char ***argv, const char *program, const char *title,
                 int with_window, int collective, struct osu_double_options *opts, int *rank,
                 int *nprocs_out)
{
    char err_msg[256] = "";
    int nprocs, status;

    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    osu_double_maybe_trap(*rank);

    status = osu_double_parse(*argc, *argv, opts, err_msg, sizeof(err_msg));
    if (status != OSU_DOUBLE_RUN) {
        if (*rank == 0) {
            if (status == OSU_DOUBLE_BAD_USAGE) {
                fprintf(stderr, "%s\n", err_msg);
            }
            if (status == OSU_DOUBLE_VERSION_INFO) {
                printf("# OSU MPI %s Test v%s\n", title, OSU_DOUBLE_VERSION);
            } else {
                osu_double_print_usage(program, with_window);
            }
        }
        MPI_Finalize();
        return status == OSU_DOUBLE_BAD_USAGE ? EXIT_FAILURE : EXIT_SUCCESS;
    }
    if (collective ? nprocs < 2 : nprocs != 2) {
        if (*rank == 0) {
            fprintf(stderr, collective ? "This test requires at least two processes\n"
                                       : "This test requires exactly two processes\n");
        }
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    *nprocs_out = nprocs;
    return -1;
}

int osu_double_start(int *argc, char ***argv, const char *program, const char *title,
                     int with_window, struct osu_double_options *opts, int *rank)
{
    int nprocs;

    return start(argc, argv, program, title, with_window, 0, opts, rank, &nprocs);
}

int osu_double_start_collective(int *argc, char ***argv, const char *program, const char *title,
                                struct osu_double_options *opts, int *rank, int *nprocs)
{
    return start(argc, argv, program, title, 0, 1, opts, rank, nprocs);
}

void osu_double_print_coll_header(const char *title, int full)
{
    printf("\n# OSU MPI %s Test v%s\n", title, OSU_DOUBLE_VERSION);
    printf("# Datatype: MPI_CHAR.\n");
    printf("%-10s%18s", "# Size", "Avg Latency(us)");
    if (full) {
        printf("%18s%18s%12s", "Min Latency(us)", "Max Latency(us)", "Iterations");
    }
    printf("\n");
    fflush(stdout);
}

void osu_double_print_coll_row(long size, double avg, double min, double max, long iters, int full)
{
    printf("%-10ld%18.2f", size, avg);
    if (full) {
        printf("%18.2f%18.2f%12ld", min, max, iters);
    }
    printf("\n");
    fflush(stdout);
}

void osu_double_time_collective(long size, long warmup, long iters, int full, int nprocs, int rank,
                                void (*op)(long size, void *ctx), void *ctx)
{
    double timer = 0.0, latency, min_time, max_time, sum_time;
    long i;

    for (i = 0; i < warmup + iters; i++) {
        double t_start = MPI_Wtime(), t_stop;

        op(size, ctx);
        t_stop = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        if (i >= warmup) {
            timer += t_stop - t_start;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    latency = timer * 1e6 / (double)iters;
    MPI_Reduce(&latency, &min_time, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&latency, &max_time, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&latency, &sum_time, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        osu_double_print_coll_row(size, sum_time / nprocs, min_time, max_time, iters, full);
    }
}

struct coll_ctx {
    osu_double_coll_op op;
    char *sbuf;
    char *rbuf;
    int nprocs;
};

static void run_op(long size, void *ctx)
{
    struct coll_ctx *c = ctx;

    c->op(size, c->sbuf, c->rbuf, c->nprocs);
}

int osu_double_collective_main(int argc, char **argv, const char *program, const char *title,
                               int per_rank, osu_double_coll_op op)
{
    struct osu_double_options opts;
    struct coll_ctx ctx;
    int rank, nprocs, exit_code;
    size_t bytes;
    long size;

    exit_code = osu_double_start_collective(&argc, &argv, program, title, &opts, &rank, &nprocs);
    if (exit_code >= 0) {
        return exit_code;
    }
    bytes = opts.sizes_valid ? (size_t)opts.max_size : 1;
    if (per_rank) {
        bytes *= (size_t)nprocs;
    }
    ctx.op = op;
    ctx.nprocs = nprocs;
    ctx.sbuf = osu_double_buffer(bytes, 'a');
    ctx.rbuf = osu_double_buffer(bytes, 'b');
    if (ctx.sbuf == NULL || ctx.rbuf == NULL) {
        fprintf(stderr, "Error allocating %zu-byte message buffers\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }
    if (rank == 0) {
        osu_double_print_coll_header(title, opts.full);
    }
    for (size = opts.min_size; opts.sizes_valid && size <= opts.max_size;
         size = osu_double_next_size(size)) {
        int large = size > OSU_DOUBLE_LARGE_MESSAGE;

        if (size == 0) {
            continue;   /* OSU's collectives skip sizes of zero elements */
        }
        osu_double_time_collective(size, large ? opts.warmup_large : opts.warmup,
                                   large ? opts.iterations_large : opts.iterations,
                                   opts.full, nprocs, rank, run_op, &ctx);
    }
    free(ctx.sbuf);
    free(ctx.rbuf);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
