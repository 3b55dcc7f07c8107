/* hello_mpi: the smallest program of checks/src/, built by every build method like the
 * others (Makefile: MPICC, CFLAGS, PREFIX). Each rank prints its rank, the size of
 * MPI_COMM_WORLD and its host; rank 0 also prints the MPI library version, so a manifest's
 * program can be shown to run against the MPI it was built with. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    char version[MPI_MAX_LIBRARY_VERSION_STRING];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    if (rank == 0) {
        MPI_Get_library_version(version, &len);
        printf("# library: %s\n", version);
    }
    printf("rank %d of %d on %s\n", rank, size, host);
    MPI_Finalize();
    return 0;
}
