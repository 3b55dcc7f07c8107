/*
 * Test-only fault injector (LD_PRELOAD): delays MPI_Send on chosen links, through PMPI.
 *   LINKFAULT_PAIR=a,b      delay every send between world ranks a and b (a slow link; or a-b)
 *   LINKFAULT_RANK=r        delay every send from or to world rank r (a slow node/rank)
 *   LINKFAULT_DELAY_US=us   the delay per message (default 1000)
 * Lives under tests/ only: the product never loads it.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int ready, me = -1, pair_a = -1, pair_b = -1, slow_rank = -1;
static long delay_us = 1000;

static void setup(void)
{
    const char *pair = getenv("LINKFAULT_PAIR"), *rank = getenv("LINKFAULT_RANK");
    const char *delay = getenv("LINKFAULT_DELAY_US");
    /* "a,b" or "a-b" (ReFrame's -S env_vars=K:V,K:V syntax has no room for a comma) */
    if (pair && sscanf(pair, "%d,%d", &pair_a, &pair_b) != 2 && sscanf(pair, "%d-%d", &pair_a, &pair_b) != 2)
        pair_a = pair_b = -1;
    if (rank)
        slow_rank = atoi(rank);
    if (delay)
        delay_us = atol(delay);
    PMPI_Comm_rank(MPI_COMM_WORLD, &me);
    ready = 1;
}

static void delay_if_faulty(int dest, MPI_Comm comm)
{
    if (!ready)
        setup();
    int world_dest = dest;
    if (comm != MPI_COMM_WORLD) {
        MPI_Group g, w;
        PMPI_Comm_group(comm, &g);
        PMPI_Comm_group(MPI_COMM_WORLD, &w);
        PMPI_Group_translate_ranks(g, 1, &dest, w, &world_dest);
        PMPI_Group_free(&g);
        PMPI_Group_free(&w);
    }
    int on_pair = (me == pair_a && world_dest == pair_b) || (me == pair_b && world_dest == pair_a);
    int on_rank = slow_rank >= 0 && (me == slow_rank || world_dest == slow_rank);
    if (on_pair || on_rank) {
        /* Busy wait: a sleeping rank would free its core and hide nothing, but the
         * delay must be exact and independent of the scheduler's timer slack. */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do
            clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < delay_us);
    }
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    delay_if_faulty(dest, comm);
    return PMPI_Send(buf, count, type, dest, tag, comm);
}
