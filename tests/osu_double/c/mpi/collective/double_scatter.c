/*
 * osu_scatter of the OSU test double: times the real MPI_Scatter of the MPI library
 * (so OpenMPI's coll/tuned selection, forced or not, applies) and prints the OSU 7.2
 * collective format. Written from scratch for mpiregress' tests; not OSU code.
 */
#include <mpi.h>

#include "osu_double_util.h"

static void op(long size, char *sbuf, char *rbuf, int nprocs)
{
    (void)sbuf;
    (void)rbuf;
    (void)nprocs;
    MPI_Scatter(sbuf, (int)size, MPI_CHAR, rbuf, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    return osu_double_collective_main(argc, argv, "osu_scatter", "Scatter Latency", 1, op);
}
