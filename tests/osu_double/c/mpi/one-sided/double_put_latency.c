/*
 * osu_put_latency of the OSU test double: a real MPI_Put from rank 0 into rank 1's window,
 * each put completed by MPI_Win_flush inside one passive-target epoch (lock_all). It exists
 * so that an install of the double has OSU 7.2's one-sided/ folder (EasyBuild's easyconfig
 * checks that it is not empty). Written from scratch for mpiregress' tests.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "osu_double_util.h"

int main(int argc, char **argv)
{
    struct osu_double_options opts;
    char *s_buf, *w_buf;
    int rank, exit_code;
    long size;
    MPI_Win win;

    exit_code = osu_double_start(&argc, &argv, "osu_put_latency", "MPI_Put Latency", 0, &opts, &rank);
    if (exit_code >= 0) {
        return exit_code;
    }
    s_buf = osu_double_buffer(opts.sizes_valid ? (size_t)opts.max_size : 1, 'a');
    if (s_buf == NULL) {
        fprintf(stderr, "Error allocating a %ld-byte message buffer\n", opts.max_size);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }
    MPI_Win_allocate(opts.sizes_valid ? (MPI_Aint)opts.max_size : 1, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                     &w_buf, &win);
    if (rank == 0) {
        osu_double_print_header("MPI_Put Latency", "Latency (us)");
    }
    MPI_Win_lock_all(0, win);
    for (size = opts.min_size; opts.sizes_valid && size <= opts.max_size;
         size = osu_double_next_size(size)) {
        long iters = size > OSU_DOUBLE_LARGE_MESSAGE ? opts.iterations_large : opts.iterations;
        long warmup = size > OSU_DOUBLE_LARGE_MESSAGE ? opts.warmup_large : opts.warmup;
        double t_start = 0.0, t_end;
        long i;

        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (i = 0; i < warmup + iters; i++) {
                if (i == warmup) {
                    t_start = MPI_Wtime();
                }
                MPI_Put(s_buf, (int)size, MPI_CHAR, 1, 0, (int)size, MPI_CHAR, win);
                MPI_Win_flush(1, win);
            }
            t_end = MPI_Wtime();
            osu_double_print_row(size, (t_end - t_start) * 1e6 / (double)iters);
        }
    }
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    free(s_buf);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
