/*
 * causes.c -- which reorderings of a failing execution are candidates for its
 * cause.
 *
 * A failure needs some dependent steps to run in the order the failing
 * execution ran them.  Stage 5 tests each candidate by running the execution
 * again with one race reversed (a guided replay, the front end's job); the
 * races whose reversal makes the failure go away are its causes.  This file
 * supplies the races and the reversed schedules; it decides nothing about
 * outcomes.
 *
 * Race (as in DPOR, Flanagan & Godefroid 2005): events i < j of different
 * actors such that i is an immediate happens-before predecessor of j (an
 * element of j's covering set: nothing orders them but their own
 * dependency), j was not made runnable by i (a wake-up edge cannot be
 * reversed, nor can an enabling read, CS_ENABLING), and i does not lie before the clock-advance barrier a
 * CS_AFTER_ALL event j follows (a timer made due by the advance cannot run
 * before the steps the advance waited for).  Races come sorted by (j, i),
 * i.e. in the order the failing execution completed them.
 *
 * Reversal of (i, j): the schedule that runs the events 0..i-1 as recorded,
 * then the events k of (i, j) that do not happen after i (in recorded
 * order), then j, then i, then every remaining event in recorded order.
 * Every event k placed before j is independent of i's consequences, so the
 * prefix is feasible exactly when the race is reversible; the tail is a
 * guide only (the program may take other steps once i and j are swapped).
 */
#include "internal.h"

#include <stdlib.h>

int cs_trace_races(const cs_explorer *ex, cs_race *out, size_t cap, size_t *n) {
    if (!ex || !n || (cap && !out)) return CS_EINVAL;
    const cs__trace *t = cs__explorer_trace(ex);
    size_t len = cs__trace_len(t), count = 0, pcap = 16;
    size_t *preds = malloc(pcap * sizeof *preds);
    if (!preds) return CS_ENOMEM;
    int rc = CS_OK;
    for (size_t j = 1; j < len; j++) {
        cs_event ej;
        size_t np;
        if ((rc = cs__trace_get_event(t, j, &ej))) goto done;
        if ((rc = cs__trace_preds(t, j, preds, pcap, &np))) goto done;
        if (np > pcap) {
            size_t *grown = realloc(preds, np * sizeof *preds);
            if (!grown) {
                rc = CS_ENOMEM;
                goto done;
            }
            preds = grown;
            pcap = np;
            if ((rc = cs__trace_preds(t, j, preds, pcap, &np))) goto done;
        }
        size_t barrier = cs__trace_barrier_of(t, j);
        /* covering sets come unsorted: emit this j's races by ascending i */
        for (size_t a = 1; a < np; a++)
            for (size_t b = a; b > 0 && preds[b - 1] > preds[b]; b--) {
                size_t tmp = preds[b];
                preds[b] = preds[b - 1];
                preds[b - 1] = tmp;
            }
        for (size_t q = 0; q < np; q++) {
            size_t i = preds[q];
            cs_event ei;
            if ((rc = cs__trace_get_event(t, i, &ei))) goto done;
            if (ei.actor == ej.actor || ej.scheduled_by == (int64_t)i || i < barrier ||
                cs__trace_waits_for(t, j, i))
                continue;
            if (count < cap) {
                out[count].first = i;
                out[count].second = j;
            }
            count++;
        }
    }
done:
    free(preds);
    *n = count;
    return rc;
}

int cs_trace_reversal(const cs_explorer *ex, size_t i, size_t j, cs_actor *out, size_t cap,
                      size_t *n) {
    if (!ex || !n || (cap && !out)) return CS_EINVAL;
    const cs__trace *t = cs__explorer_trace(ex);
    size_t len = cs__trace_len(t);
    if (i >= j || j >= len) return CS_EINVAL;
    *n = len;
    if (cap < len) return CS_OK; /* the caller asks again with room for len */
    bool *placed = calloc(len, sizeof *placed);
    if (!placed) return CS_ENOMEM;
    size_t w = 0;
    cs_event e;
    int rc = CS_OK;
#define PLACE(k)                                                      \
    do {                                                              \
        if ((rc = cs__trace_get_event(t, (k), &e))) goto done;        \
        out[w++] = e.actor;                                           \
        placed[(k)] = true;                                           \
    } while (0)
    for (size_t k = 0; k < i; k++) PLACE(k);
    for (size_t k = i + 1; k < j; k++)
        if (!cs__trace_hb(t, i, k)) PLACE(k);
    PLACE(j);
    for (size_t k = i; k < len; k++)
        if (!placed[k]) PLACE(k);
#undef PLACE
done:
    free(placed);
    return rc;
}
