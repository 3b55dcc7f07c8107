/*
 * osu_bw of the OSU test double (installed as osu_bw): a real windowed bandwidth test between two
 * ranks, printed in the OSU 7.2 format. Written from scratch for mpiregress'
 * tests.
 *
 * Per iteration rank 0 posts `window` MPI_Isend, rank 1 the matching MPI_Irecv,
 * both wait, then rank 1 sends a small ack. Bandwidth of one size =
 * size * iters * window / 1e6 / elapsed seconds (MB/s), measured on rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "osu_double_util.h"

#define DATA_TAG 100
#define ACK_TAG 101
#define ACK_BYTES 4

int main(int argc, char **argv)
{
    struct osu_double_options opts;
    char *s_buf, *r_buf;
    char ack[ACK_BYTES] = {0};
    MPI_Request *requests;
    int rank, exit_code;
    long size;

    exit_code = osu_double_start(&argc, &argv, "osu_bw", "Bandwidth", 1, &opts, &rank);
    if (exit_code >= 0) {
        return exit_code;
    }

    s_buf = osu_double_buffer(opts.sizes_valid ? (size_t)opts.max_size : 1, 'a');
    r_buf = osu_double_buffer(opts.sizes_valid ? (size_t)opts.max_size : 1, 'b');
    requests = malloc(sizeof(MPI_Request) * (size_t)opts.window);
    if (s_buf == NULL || r_buf == NULL || requests == NULL) {
        fprintf(stderr, "Error allocating %ld-byte message buffers\n", opts.max_size);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
    }

    if (rank == 0) {
        osu_double_print_header("Bandwidth", "Bandwidth (MB/s)");
    }

    for (size = opts.min_size; opts.sizes_valid && size <= opts.max_size;
         size = osu_double_next_size(size)) {
        long iters = size > OSU_DOUBLE_LARGE_MESSAGE ? opts.iterations_large : opts.iterations;
        long warmup = size > OSU_DOUBLE_LARGE_MESSAGE ? opts.warmup_large : opts.warmup;
        double t_start = 0.0, t_end;
        long i;
        int j;

        MPI_Barrier(MPI_COMM_WORLD);
        for (i = 0; i < warmup + iters; i++) {
            double t_step;

            if (i == warmup) {
                t_start = MPI_Wtime();
            }
            t_step = MPI_Wtime();
            if (rank == 0) {
                for (j = 0; j < opts.window; j++) {
                    MPI_Isend(s_buf, (int)size, MPI_CHAR, 1, DATA_TAG, MPI_COMM_WORLD,
                              &requests[j]);
                }
                MPI_Waitall(opts.window, requests, MPI_STATUSES_IGNORE);
                MPI_Recv(ack, ACK_BYTES, MPI_CHAR, 1, ACK_TAG, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            } else {
                for (j = 0; j < opts.window; j++) {
                    MPI_Irecv(r_buf, (int)size, MPI_CHAR, 0, DATA_TAG, MPI_COMM_WORLD,
                              &requests[j]);
                }
                MPI_Waitall(opts.window, requests, MPI_STATUSES_IGNORE);
                MPI_Send(ack, ACK_BYTES, MPI_CHAR, 0, ACK_TAG, MPI_COMM_WORLD);
            }
            if (rank == 0 && i >= warmup) {
                osu_double_stall(t_step);
            }
        }
        t_end = MPI_Wtime();
        if (rank == 0) {
            double seconds = t_end - t_start;
            osu_double_print_row(size, (double)size / 1e6 * (double)iters * opts.window / seconds);
        }
    }

    free(requests);
    free(s_buf);
    free(r_buf);
    MPI_Finalize();
    return EXIT_SUCCESS;
}
