/* On-disk format of an FWQ result file, version 2 (see README.md in this folder).
 *
 * Binary, little-endian, fixed-size records so that NumPy reads it with one
 * structured dtype per record and 128 ranks x 100k iterations stay ~51 MB a node.
 * Changing any record changes FWQ_FORMAT_VERSION; the reader
 * (mpiregress/families/noise/fwqfile.py) refuses versions it does not know.
 */
#ifndef FWQ_FORMAT_H
#define FWQ_FORMAT_H

#include <stdint.h>

#define FWQ_FORMAT_VERSION 2u
/* jiffy_ns when the kernel did not say. */
#define FWQ_UNKNOWN UINT64_MAX
#define FWQ_NAME_LEN 64

/* At offset 0, once per file. */
struct fwq_file_header {
    char     magic[8];            /* "MPRFWQ\0\0" */
    uint32_t version;             /* FWQ_FORMAT_VERSION */
    uint32_t nodes;               /* node sections that follow */
    uint32_t ranks;               /* MPI ranks in the run */
    uint32_t reserved;
    uint64_t iterations;          /* measured iterations per rank */
    uint64_t quantum_target_ns;   /* the quantum the ranks calibrated for */
    uint64_t timer_resolution_ns; /* clock_getres(CLOCK_MONOTONIC) */
    uint64_t reserved2;
};

/* Starts each node section; followed by `ranks` rank records and a node trailer. */
struct fwq_node_header {
    char     tag[4];              /* "NODE" */
    uint32_t ranks;
    char     name[FWQ_NAME_LEN];  /* Slurm node name (SLURMD_NODENAME) or host name */
};

/* One per rank; followed by `iterations` uint32 durations in ns (saturated at 2^32-1). */
struct fwq_rank_header {
    uint32_t rank;
    int32_t  cpu_start;           /* sched_getcpu() before the measured loop */
    int32_t  cpu_end;             /* sched_getcpu() after it: differs if the rank migrated */
    uint32_t affinity_cpus;       /* CPUs in the rank's affinity mask (1 = bound to one) */
    uint64_t work_per_quantum;    /* calibrated loop count */
    uint64_t quantum_ns;          /* median duration of a quantum at calibration */
    uint64_t start_ns;            /* CLOCK_MONOTONIC at the first measured iteration */
    uint64_t end_ns;              /* CLOCK_MONOTONIC after the last one */
    /* The kernel's jiffy, 1/CONFIG_HZ (clock_getres of CLOCK_MONOTONIC_COARSE, which ticks with it), or
     * FWQ_UNKNOWN: the node's own tick, which the durations cannot always tell from a hypervisor's faster
     * pattern (version 2). */
    uint64_t jiffy_ns;
};

/* Ends a node section; a section without it was cut short and is dropped. */
struct fwq_node_trailer {
    char     tag[4];              /* "DONE" */
    uint32_t ranks;               /* same as in the header */
};

/* The reader's dtypes assume these sizes (no padding anywhere). */
_Static_assert(sizeof(struct fwq_file_header) == 56, "file header is 56 bytes");
_Static_assert(sizeof(struct fwq_node_header) == 72, "node header is 72 bytes");
_Static_assert(sizeof(struct fwq_rank_header) == 56, "rank header is 56 bytes");
_Static_assert(sizeof(struct fwq_node_trailer) == 8, "node trailer is 8 bytes");

#endif
