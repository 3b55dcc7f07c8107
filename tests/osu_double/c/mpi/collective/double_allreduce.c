/*
 * osu_allreduce of the OSU test double: times the real MPI_Allreduce of the MPI library
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
    MPI_Allreduce(sbuf, rbuf, (int)size, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    return osu_double_collective_main(argc, argv, "osu_allreduce", "Allreduce Latency", 0, op);
}
