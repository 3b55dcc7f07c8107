/*
 * coll_trace: an LD_PRELOAD observer for the tests (not part of the product).
 *
 * OpenMPI's coll/tuned component (mca_coll_tuned.so) runs an algorithm by calling
 * ompi_coll_base_<coll>_intra_<algorithm>() in libmpi through the PLT, so a preloaded
 * library can see which algorithm really ran, with which segment size, and forward the
 * call unchanged. Non-debug OpenMPI builds print nothing about the rules file or the
 * forced algorithm, so this is how the tests show that a forced algorithm or a
 * generated dynamic rules file takes effect.
 *
 * Output, on stderr of the rank whose OMPI_COMM_WORLD_RANK is COLL_TRACE_RANK (default 0),
 * once per distinct (function, count, segsize):
 *   coll_trace: <collective> <algorithm> count=<n> segsize=<bytes> comm_size=<n>
 * Prototypes follow ompi/mca/coll/base/coll_base_functions.h of OpenMPI 4.1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEEN 256

static struct { const char *fn; int count; long segsize; } seen[MAX_SEEN];
static int n_seen;

static int tracing_rank(void)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    const char *want = getenv("COLL_TRACE_RANK");

    return rank != NULL && strcmp(rank, want != NULL ? want : "0") == 0;
}

static void note(const char *coll, const char *alg, int count, long segsize, void *comm)
{
    int i, size = -1;

    if (!tracing_rank()) {
        return;
    }
    for (i = 0; i < n_seen; i++) {
        if (seen[i].fn == alg && seen[i].count == count && seen[i].segsize == segsize) {
            return;
        }
    }
    if (n_seen < MAX_SEEN) {
        seen[n_seen].fn = alg;
        seen[n_seen].count = count;
        seen[n_seen].segsize = segsize;
        n_seen++;
    }
    MPI_Comm_size((MPI_Comm)comm, &size);
    fprintf(stderr, "coll_trace: %s %s count=%d segsize=%ld comm_size=%d\n", coll, alg, count, segsize, size);
    fflush(stderr);
}

static void *next(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);

    if (fn == NULL) {
        fprintf(stderr, "coll_trace: %s not found in the MPI library\n", name);
        abort();
    }
    return fn;
}

#define BCAST_P void *buf, int count, void *dtype, int root, void *comm, void *module
#define BCAST_A buf, count, dtype, root, comm, module
#define SCATTER_P const void *sbuf, int scount, void *sdtype, void *rbuf, int rcount, void *rdtype, int root, void *comm, void *module
#define SCATTER_A sbuf, scount, sdtype, rbuf, rcount, rdtype, root, comm, module
#define ALLREDUCE_P const void *sbuf, void *rbuf, int count, void *dtype, void *op, void *comm, void *module
#define ALLREDUCE_A sbuf, rbuf, count, dtype, op, comm, module
#define ALLTOALL_P const void *sbuf, int scount, void *sdtype, void *rbuf, int rcount, void *rdtype, void *comm, void *module
#define ALLTOALL_A sbuf, scount, sdtype, rbuf, rcount, rdtype, comm, module

/* An algorithm without extra arguments. */
#define WRAP0(coll, alg, P, A, cnt)                                                \
    int ompi_coll_base_##coll##_intra_##alg(P)                                    \
    {                                                                             \
        static int (*real)(P);                                                    \
        if (real == NULL) real = next("ompi_coll_base_" #coll "_intra_" #alg);    \
        note(#coll, #alg, cnt, 0, comm);                                          \
        return real(A);                                                           \
    }

/* An algorithm with a segment size argument. */
#define WRAPSEG(coll, alg, P, A, cnt)                                              \
    int ompi_coll_base_##coll##_intra_##alg(P, uint32_t segsize)                  \
    {                                                                             \
        static int (*real)(P, uint32_t);                                          \
        if (real == NULL) real = next("ompi_coll_base_" #coll "_intra_" #alg);    \
        note(#coll, #alg, cnt, (long)segsize, comm);                              \
        return real(A, segsize);                                                  \
    }

/* An algorithm with a segment size and an int (chains, radix). */
#define WRAPSEGINT(coll, alg, P, A, cnt)                                           \
    int ompi_coll_base_##coll##_intra_##alg(P, uint32_t segsize, int extra)       \
    {                                                                             \
        static int (*real)(P, uint32_t, int);                                     \
        if (real == NULL) real = next("ompi_coll_base_" #coll "_intra_" #alg);    \
        note(#coll, #alg, cnt, (long)segsize, comm);                              \
        return real(A, segsize, extra);                                           \
    }

/* An algorithm with one int argument (max requests). */
#define WRAPINT(coll, alg, P, A, cnt)                                              \
    int ompi_coll_base_##coll##_intra_##alg(P, int extra)                         \
    {                                                                             \
        static int (*real)(P, int);                                               \
        if (real == NULL) real = next("ompi_coll_base_" #coll "_intra_" #alg);    \
        note(#coll, #alg, cnt, 0, comm);                                          \
        return real(A, extra);                                                    \
    }

WRAP0(bcast, basic_linear, BCAST_P, BCAST_A, count)
WRAPSEGINT(bcast, chain, BCAST_P, BCAST_A, count)
WRAPSEG(bcast, pipeline, BCAST_P, BCAST_A, count)
WRAPSEG(bcast, split_bintree, BCAST_P, BCAST_A, count)
WRAPSEG(bcast, bintree, BCAST_P, BCAST_A, count)
WRAPSEG(bcast, binomial, BCAST_P, BCAST_A, count)
WRAPSEGINT(bcast, knomial, BCAST_P, BCAST_A, count)
WRAPSEG(bcast, scatter_allgather, BCAST_P, BCAST_A, count)
WRAPSEG(bcast, scatter_allgather_ring, BCAST_P, BCAST_A, count)

WRAP0(scatter, basic_linear, SCATTER_P, SCATTER_A, scount)
WRAP0(scatter, binomial, SCATTER_P, SCATTER_A, scount)
WRAPINT(scatter, linear_nb, SCATTER_P, SCATTER_A, scount)

WRAP0(allreduce, basic_linear, ALLREDUCE_P, ALLREDUCE_A, count)
WRAP0(allreduce, nonoverlapping, ALLREDUCE_P, ALLREDUCE_A, count)
WRAP0(allreduce, recursivedoubling, ALLREDUCE_P, ALLREDUCE_A, count)
WRAP0(allreduce, ring, ALLREDUCE_P, ALLREDUCE_A, count)
WRAPSEG(allreduce, ring_segmented, ALLREDUCE_P, ALLREDUCE_A, count)
WRAP0(allreduce, redscat_allgather, ALLREDUCE_P, ALLREDUCE_A, count)

WRAP0(alltoall, basic_linear, ALLTOALL_P, ALLTOALL_A, scount)
WRAP0(alltoall, pairwise, ALLTOALL_P, ALLTOALL_A, scount)
WRAP0(alltoall, bruck, ALLTOALL_P, ALLTOALL_A, scount)
WRAPINT(alltoall, linear_sync, ALLTOALL_P, ALLTOALL_A, scount)
WRAP0(alltoall, two_procs, ALLTOALL_P, ALLTOALL_A, scount)
