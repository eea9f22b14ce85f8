/* recording_overhead.c -- the engine's per-step cost of recording a trace
 * (cs__trace_step_begin / access_add / step_end), without the Python loop.
 *
 * Workloads, shaped like what the controlled asyncio loop records:
 *   ping-pong   every step is a new one-step actor scheduled by the previous
 *               step (loop.call_soon ping-pong), one write to a counter
 *   tasks(T)    T actors in round robin, each step scheduled by the actor's
 *               own previous step (sleep(0)), reading a shared object and
 *               writing a key of its own
 *   fan-out(F)  rounds of one step that schedules F one-step callbacks, each
 *               writing its own key of one object, then a step that reads
 *               the whole object after all of them (gather-like)
 *               (still grows with the run: the object's per-actor list of
 *               key writes, cleared only by a whole-object write, holds every
 *               sibling, and each whole read takes all of them as candidates)
 *
 * Prints ns/step for several run lengths: a per-step cost that stays flat as
 * runs get longer is the point.  Build and run:
 *   cc -std=c11 -O2 -Iinclude -Iengine bench/recording_overhead.c engine/[a-z]*.c -lm \
 *      -o build/c/bench_recording_overhead && build/c/bench_recording_overhead [MAX] */
#define _POSIX_C_SOURCE 199309L
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int ping_pong(cs__trace *t, uint32_t steps) {
    for (uint32_t i = 0; i < steps; i++) {
        if (cs__trace_step_begin(t, i, i ? (int64_t)i - 1 : -1)) return -1;
        if (cs__trace_access_add(t, 1, 0, CS_WRITE, 0)) return -1;
        if (cs__trace_step_end(t)) return -1;
    }
    return 0;
}

static int tasks(cs__trace *t, uint32_t steps, uint32_t n) {
    for (uint32_t i = 0; i < steps; i++) {
        uint32_t a = i % n;
        int64_t by = i >= n ? (int64_t)(i - n) : -1;
        if (cs__trace_step_begin(t, a, by)) return -1;
        if (cs__trace_access_add(t, 2, 0, CS_READ, 0)) return -1;
        if (cs__trace_access_add(t, 3, a, CS_WRITE, 0)) return -1;
        if (cs__trace_step_end(t)) return -1;
    }
    return 0;
}

static int fan_out(cs__trace *t, uint32_t steps, uint32_t f) {
    cs_actor next = 1;
    uint32_t i = 0;
    while (i < steps) {
        int64_t root = (int64_t)i;
        if (cs__trace_step_begin(t, 0, i ? root - 1 : -1)) return -1;
        if (cs__trace_step_end(t)) return -1;
        i++;
        for (uint32_t k = 0; k < f && i < steps; k++, i++) {
            if (cs__trace_step_begin(t, next++, root)) return -1;
            if (cs__trace_access_add(t, 4, k, CS_WRITE, 0)) return -1;
            if (cs__trace_step_end(t)) return -1;
        }
        if (i >= steps) break;
        if (cs__trace_step_begin(t, next++, CS_AFTER_ALL)) return -1;
        if (cs__trace_access_add(t, 4, CS_KEY_WHOLE, CS_READ, 0)) return -1;
        if (cs__trace_step_end(t)) return -1;
        i++;
    }
    return 0;
}

int main(int argc, char **argv) {
    /* argv[1]: the longest run (default 100000); a dense per-actor clock
     * needs steps^2 * 4 bytes for ping-pong, so keep it small there */
    uint32_t max = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 100000;
    static const uint32_t lengths[] = {1000, 5000, 20000, 100000};
    setvbuf(stdout, NULL, _IOLBF, 0);
    cs__trace *t = NULL;
    if (cs__trace_new(&t)) return 1;
    printf("%-14s %10s %12s\n", "workload", "steps", "ns/step");
    for (int w = 0; w < 3; w++) {
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
            uint32_t n = lengths[l];
            if (n > max) break;
            double best = 1e30;
            for (int rep = 0; rep < 3; rep++) {
                cs__trace_reset(t);
                double t0 = now();
                int rc = w == 0 ? ping_pong(t, n) : w == 1 ? tasks(t, n, 100) : fan_out(t, n, 8);
                double dt = now() - t0;
                if (rc) {
                    fprintf(stderr, "recording failed\n");
                    cs__trace_free(t);
                    return 1;
                }
                if (dt < best) best = dt;
            }
            const char *name = w == 0 ? "ping-pong" : w == 1 ? "tasks(100)" : "fan-out(8)";
            printf("%-14s %10u %12.0f\n", name, n, best / n * 1e9);
        }
    }
    cs__trace_free(t);
    return 0;
}
