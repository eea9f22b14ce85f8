/*
 * strategy_replay.c -- one execution that follows a recorded actor sequence.
 *
 * At step i the prescribed actor is replay[i].  Divergence (the program is
 * not deterministic under this schedule) is reported with
 * cs__explorer_diverged and CS_EDIVERGED in three cases:
 *   - replay[i] is not among the enabled actors (expected = replay[i]);
 *   - the program asks for a step past the end of the schedule
 *     (expected = CS_NO_ACTOR);
 *   - the execution ends (with an outcome other than ABORTED) before the
 *     schedule is used up: returned by cs_execution_end, with step = the
 *     number of steps taken, expected = the first unused actor, and
 *     n_enabled = 0.
 * A diverged execution is never a bug report; the front end should end it
 * as CS_OUTCOME_ABORTED.
 */
#include "internal.h"

#include <stdlib.h>

typedef struct {
    const cs_actor *sched; /* owned by the explorer's config */
    size_t len;
    size_t steps;          /* steps observed in the current execution
                              (<= len while not diverged) */
    int diverged;          /* 1 once an execution could not follow sched */
} replay_state;

static int replay_create(cs_explorer *ex, const cs_config *cfg, void **state) {
    (void)ex;
    replay_state *s = calloc(1, sizeof *s);
    if (!s) return CS_ENOMEM;
    s->sched = cfg->replay;
    s->len = cfg->replay_len;
    *state = s;
    return CS_OK;
}

static void replay_destroy(void *state) { free(state); }

static int replay_begin(cs_explorer *ex, void *state, int *more, int *complete) {
    replay_state *s = state;
    cs_stats st;
    cs_explorer_stats(ex, &st);
    *more = st.executions == 0;
    *complete = 0;
    s->steps = 0;
    s->diverged = 0;
    return CS_OK;
}

static int replay_choose(cs_explorer *ex, void *state, size_t step,
                         const cs_actor *enabled, size_t n, size_t *chosen) {
    replay_state *s = state;
    if (step >= s->len) {
        s->diverged = 1;
        return cs__explorer_diverged(ex, step, CS_NO_ACTOR, n);
    }
    cs_actor want = s->sched[step];
    for (size_t i = 0; i < n; i++) {
        if (enabled[i] == want) {
            *chosen = i;
            return CS_OK;
        }
    }
    s->diverged = 1;
    return cs__explorer_diverged(ex, step, want, n);
}

static int replay_observe(cs_explorer *ex, void *state, size_t index) {
    replay_state *s = state;
    cs_event ev;
    int rc = cs_trace_event(ex, index, &ev);
    if (rc) return rc;
    /* A front end that runs a step without asking (or runs another actor
     * than the one chosen) has left the schedule too. */
    if (!s->diverged && (index >= s->len || ev.actor != s->sched[index])) {
        s->diverged = 1;
        return cs__explorer_diverged(ex, index, index < s->len ? s->sched[index] : CS_NO_ACTOR,
                                    0);
    }
    s->steps = index + 1;
    return CS_OK;
}

static int replay_end(cs_explorer *ex, void *state, int outcome) {
    replay_state *s = state;
    if (outcome == CS_OUTCOME_ABORTED || s->diverged || s->steps >= s->len) return CS_OK;
    s->diverged = 1;
    return cs__explorer_diverged(ex, s->steps, s->sched[s->steps], 0);
}

const cs__strategy_ops cs__strategy_replay = {
    "replay", replay_create, replay_destroy, replay_begin,
    replay_choose, replay_observe, replay_end,
};
