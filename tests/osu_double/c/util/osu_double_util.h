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
int osu_double_start(int *argc, char ***argv, const char *program, const char *title,
                     int with_window, struct osu_double_options *opts, int *rank);

/* Page-aligned buffer of `size` bytes filled with `fill`, or NULL. */
char *osu_double_buffer(size_t size, char fill);

/* Next message size of the sweep (OSU doubles the size each step). */
long osu_double_next_size(long size);

void osu_double_print_header(const char *title, const char *column);
void osu_double_print_row(long size, double value);
void osu_double_print_usage(const char *program, int with_window);

#endif
