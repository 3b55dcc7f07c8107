/* Test-only periodic noise source: on one CPU, wake every PERIOD_US and spin BUSY_US.
 * Stands in for a daemon or a badly configured timer so the FWQ analysis has a
 * known answer (core, period, lost share).
 * Usage: noise_source CPU PERIOD_US BUSY_US SECONDS [FIFO_PRIORITY]
 * With FIFO_PRIORITY (root) it runs SCHED_FIFO, as kernel threads and interrupt
 * handlers do: it preempts whatever runs on the CPU on time, whatever else the
 * shared machine is doing, so its period is exact.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long ns(const struct timespec *t) { return t->tv_sec * 1000000000LL + t->tv_nsec; }

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) { fprintf(stderr, "usage: noise_source CPU PERIOD_US BUSY_US SECONDS [FIFO_PRIORITY]\n"); return 2; }
    int cpu = atoi(argv[1]);
    long long period = atoll(argv[2]) * 1000, busy = atoll(argv[3]) * 1000, seconds = atoll(argv[4]);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) { perror("noise_source: sched_setaffinity"); return 2; }
    if (argc == 6) {
        struct sched_param param = { .sched_priority = atoi(argv[5]) };
        if (sched_setscheduler(0, SCHED_FIFO, &param)) { perror("noise_source: SCHED_FIFO"); return 3; }
    }
    struct timespec next, now;
    clock_gettime(CLOCK_MONOTONIC, &next);
    long long end = ns(&next) + seconds * 1000000000LL;
    printf("noise_source: cpu %d, every %lld us spin %lld us\n", cpu, period / 1000, busy / 1000);
    fflush(stdout);
    volatile unsigned long spin = 0;
    /* Absolute deadlines: the period does not drift with the spin or the wake-up latency. */
    while (ns(&next) < end) {
        long long t = ns(&next) + period;
        next.tv_sec = t / 1000000000LL;
        next.tv_nsec = t % 1000000000LL;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long stop = ns(&now) + busy;
        do { spin++; clock_gettime(CLOCK_MONOTONIC, &now); } while (ns(&now) < stop);
    }
    return 0;
}
