/* A periodic OS-noise injector for benchmarks/noise_injected.py: spin SPIN_US every PERIOD_MS.
 *
 * Usage: noise_injector PERIOD_MS SPIN_US SECONDS
 * Pin it and choose its priority from outside, as an admin would: `taskset -c 0 noise_injector 13 1000 60`
 * (normal priority, a daemon's) or `chrt -f 10 taskset -c 0 noise_injector ...` (real time, a kernel
 * thread's). Absolute clock_nanosleep deadlines: the period does not drift with the spin or the wake-up.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long ns(const struct timespec *t) { return t->tv_sec * 1000000000LL + t->tv_nsec; }

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: noise_injector PERIOD_MS SPIN_US SECONDS\n"); return 2; }
    long long period = (long long)(atof(argv[1]) * 1e6), spin = atoll(argv[2]) * 1000LL, seconds = atoll(argv[3]);
    if (period <= 0 || spin <= 0 || spin >= period || seconds <= 0) {
        fprintf(stderr, "noise_injector: need 0 < SPIN_US < PERIOD_MS and SECONDS > 0\n");
        return 2;
    }
    struct timespec next, now;
    clock_gettime(CLOCK_MONOTONIC, &next);
    long long end = ns(&next) + seconds * 1000000000LL;
    /* The clock origin: burst k (k >= 1) spins from origin + k * period, on the CLOCK_MONOTONIC FWQ stamps
     * its runs with, so the benchmark can find each burst in FWQ's samples. */
    printf("noise_injector: every %.3f ms spin %lld us from %lld ns\n", period / 1e6, spin / 1000, ns(&next));
    fflush(stdout);
    while (ns(&next) < end) {
        long long t = ns(&next) + period;
        next.tv_sec = t / 1000000000LL;
        next.tv_nsec = t % 1000000000LL;
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        do clock_gettime(CLOCK_MONOTONIC, &now); while (ns(&now) - ns(&next) < spin);
    }
    return 0;
}
