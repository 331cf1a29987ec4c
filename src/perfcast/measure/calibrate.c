/* perfcast's instrumentation calibration (measure/overhead.py): the wall time per call of a
 * tiny function, best of REPEATS loops of CALLS calls each. Built with `perfcast build` and
 * run with the function measured and, with PERFCAST_FILTER naming only main, unpatched: the
 * difference is what the runtime's entry and exit cost one call. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile long sink;

__attribute__((noinline)) void perfcast_calibration_leaf(long i) { sink += i; }

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s CALLS REPEATS\n", argv[0]);
        return 2;
    }
    long calls = atol(argv[1]), repeats = atol(argv[2]);
    double best = -1;
    for (long r = 0; r < repeats; r++) {
        double start = now_ns();
        for (long i = 0; i < calls; i++)
            perfcast_calibration_leaf(i);
        double per_call = (now_ns() - start) / calls;
        if (best < 0 || per_call < best)
            best = per_call;
    }
    printf("%.3f\n", best);
    return 0;
}
