/*
 * osu_latency of the OSU test double: a real MPI ping-pong between two ranks,
 * printed in the OSU 7.2 format. Written from scratch for mpiregress' tests.
 *
 * Latency of one size = elapsed time of `iters` round trips / (2 * iters),
 * in microseconds, measured on rank 0 after `warmup` untimed round trips.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "osu_double_util.h"

#define PING_TAG 1

int main(int argc, char **argv)
{
    struct osu_double_options opts;
    char *s_buf, *r_buf;
    int rank, exit_code;
    long size;

    exit_code = osu_double_start(&argc, &argv, "osu_latency", "Latency", 0, &opts, &rank);
    if (exit_code >= 0) {
        return exit_code;
    }

    s_buf = osu_double_buffer(opts.sizes_valid ? (size_t)opts.max_size : 1, 'a');
    r_buf = osu_double_buffer(opts.sizes_valid ? (size_t)opts.max_size : 1, 'b');
    if (s_buf == NULL || r_buf == NULL) {
        fprintf(stderr, "Error allocating %ld-byte message buffers\n", opts.max_size);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }

    if (rank == 0) {
        osu_double_print_header("Latency", "Latency (us)");
    }

    for (size = opts.min_size; opts.sizes_valid && size <= opts.max_size;
         size = osu_double_next_size(size)) {
        long iters = size > OSU_DOUBLE_LARGE_MESSAGE ? opts.iterations_large : opts.iterations;
        long warmup = size > OSU_DOUBLE_LARGE_MESSAGE ? opts.warmup_large : opts.warmup;
        double t_start = 0.0, t_end;
        long i;

        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < warmup + iters; i++) {
            double t_step;

            if (i == warmup) {
                t_start = MPI_Wtime();
            }
            t_step = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(s_buf, (int)size, MPI_CHAR, 1, PING_TAG, MPI_COMM_WORLD);
                MPI_Recv(r_buf, (int)size, MPI_CHAR, 1, PING_TAG, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(r_buf, (int)size, MPI_CHAR, 0, PING_TAG, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                MPI_Send(s_buf, (int)size, MPI_CHAR, 0, PING_TAG, MPI_COMM_WORLD);
            }
            if (rank == 0 && i >= warmup) {
                osu_double_stall(t_step);
            }
        }
        t_end = MPI_Wtime();
        if (rank == 0) {
            osu_double_print_row(size, (t_end - t_start) * 1e6 / (2.0 * (double)iters));
        }
    }

    free(s_buf);
    free(r_buf);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
