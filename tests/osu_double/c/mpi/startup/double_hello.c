/*
 * osu_hello of the OSU test double: MPI_Init, one line from rank 0, MPI_Finalize.
 * It exists so that an install of the double has OSU 7.2's startup/ folder (EasyBuild's
 * easyconfig checks that it is not empty). Written from scratch for mpiregress' tests.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, nprocs;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (rank == 0) {
        printf("# OSU MPI Hello World Test v7.2\nThis is a test with %d processes\n", nprocs);
    }
    MPI_Finalize();
    return EXIT_SUCCESS;
}
