/*
 * Shared pieces of the OSU test double: option parsing, buffers and the
 * OSU 7.2 output format. Written for mpiregress' tests; not OSU code.
 */
#ifndef OSU_DOUBLE_UTIL_H
#define OSU_DOUBLE_UTIL_H

#include <stddef.h>

#define OSU_DOUBLE_VERSION "7.2"

/* OSU 7.2 switches to fewer iterations above this size. */
#define OSU_DOUBLE_LARGE_MESSAGE 8192
#define OSU_DOUBLE_DEFAULT_MIN 1
#define OSU_DOUBLE_DEFAULT_MAX (1L << 22)

struct osu_double_options {
    long min_size;
    long max_size;
    int sizes_valid;        /* 0 after an unparsable -m: header only, no rows */
    long iterations;
    long iterations_large;
    long warmup;
    long warmup_large;
    int window;             /* osu_bw only */
    int full;               /* -f: min/max/iterations columns (collectives) */
};

enum osu_double_parse_result {
    OSU_DOUBLE_RUN = 0,
    OSU_DOUBLE_HELP = 1,
    OSU_DOUBLE_VERSION_INFO = 2,
    OSU_DOUBLE_BAD_USAGE = 3
};

/* Parse argv; on OSU_DOUBLE_BAD_USAGE a message has been written to err_msg. */
int osu_double_parse(int argc, char **argv, struct osu_double_options *opts,
                     char *err_msg, size_t err_len);

/* Die like a broken rank would if OSU_DOUBLE_ILLEGAL_INSTRUCTION=1 and rank == 1. */
void osu_double_maybe_trap(int rank);
/* Test hook OSU_DOUBLE_SLOWDOWN=F (1 < F <= 1000): spin (F - 1) x the time since `since`. */
void osu_double_stall(double since);
int osu_double_start(int *argc, char ***argv, const char *program, const char *title,
                     int with_window, struct osu_double_options *opts, int *rank);

/* Page-aligned buffer of `size` bytes filled with `fill`, or NULL. */
char *osu_double_buffer(size_t size, char fill);

/* Next message size of the sweep (OSU doubles the size each step). */
long osu_double_next_size(long size);

/* As osu_double_start, for a collective: at least two ranks; *nprocs gets their number. */
int osu_double_start_collective(int *argc, char ***argv, const char *program, const char *title,
                                struct osu_double_options *opts, int *rank, int *nprocs);

void osu_double_print_header(const char *title, const char *column);
/* OSU 7.2 collective header: blank line, title, datatype, columns (full with -f). */
void osu_double_print_coll_header(const char *title, int full);
void osu_double_print_coll_row(long size, double avg, double min, double max, long iters, int full);
/* Time of `iters` calls of `op` after `warmup` untimed ones, each call timed alone and
 * followed by a barrier as OSU does; prints the row (avg over ranks, min, max) on rank 0. */
void osu_double_time_collective(long size, long warmup, long iters, int full, int nprocs, int rank,
                                void (*op)(long size, void *ctx), void *ctx);
void osu_double_print_row(long size, double value);
void osu_double_print_usage(const char *program, int with_window);

/* The whole of a collective benchmark of the double: start, buffers (max size, times the
 * number of ranks when `per_rank` is set), the size sweep and the rows. `op` runs one
 * collective of `size` bytes per rank. Returns the process exit code. */
typedef void (*osu_double_coll_op)(long size, char *sbuf, char *rbuf, int nprocs);
int osu_double_collective_main(int argc, char **argv, const char *program, const char *title,
                               int per_rank, osu_double_coll_op op);

#endif
