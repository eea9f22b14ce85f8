/*
 * strategy_guided.c -- one execution guided by a recorded actor sequence that
 * the program may no longer be able to follow (stage 7, adversarial replay:
 * the failing schedule of a program, replayed on the same program with locks
 * added).  Unlike replay it never diverges: where the schedule cannot be
 * followed it takes the schedule's next feasible step, or the default one.
 *
 * Semantics.  The schedule is s[0..n).  Each entry carries a consumed mark;
 * the cursor is the first unconsumed index (n when all are consumed).  At
 * each choice among the enabled actors e[0..m) (the front end's default
 * order):
 *   - j = the smallest index >= cursor with s[j] unconsumed and s[j] enabled;
 *     if there is one, the step runs s[j] and entry j is consumed (the cursor
 *     then moves to the next unconsumed index);
 *   - otherwise (nothing of the rest of the schedule is enabled, or it is used
 *     up) the step runs e[0], the default choice (fifo's, stock asyncio's
 *     order), and consumes nothing.
 * Entries whose actor never becomes enabled again (it is blocked forever, or
 * does not exist in this program) stay unconsumed: the cursor stops at the
 * first of them for the rest of the execution.
 *
 * Deviations.  A choice is a deviation when the chosen actor is not s[cursor]
 * at that moment; past the end of the schedule (cursor == n) every choice is
 * one (the schedule prescribes nothing there).  Replaying a schedule the
 * program follows exactly therefore counts 0.  The count of the execution is
 * added to cs_stats.guide_deviations.
 *
 * Tie-breaks.  Schedule order first: of the enabled actors, the one of the
 * earliest unconsumed entry wins, whatever its place in e; the default choice
 * is e[0].  An actor appears at most once in e (cs_choose's contract), so the
 * choice is unique.
 *
 * Bookkeeping happens when a step is observed, not when it is chosen: the
 * observed step's actor a consumes the earliest unconsumed entry >= cursor
 * whose actor is a, if any.  For a step this strategy chose, that is exactly
 * the entry j above (an earlier unconsumed entry of a would be enabled, so it
 * would have been j); a step the front end ran without asking is accounted
 * the same way, so the marks always describe the steps that really ran.
 *
 * Complexity.  choose marks the enabled actors in a table indexed by actor id
 * (O(m)) and scans the schedule from the cursor (O(n - cursor)); observe scans
 * from the cursor too.  O(n + m) per step, O(n) memory; schedules hold at
 * most a few thousand steps.  One execution, like replay.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const cs_actor *sched; /* s[0..len): owned by the explorer's config */
    size_t len;
    unsigned char *consumed; /* consumed[j] = 1 once entry j ran; len entries
                                (NULL when len == 0) */
    size_t cursor;         /* first unconsumed index; len when none is left.
                              Invariant: consumed[j] for every j < cursor */
    /* Which actors the current choice has enabled: slot[a] == stamp marks
     * actor a enabled at index pos[a] of e.  Grown to the explorer's actor
     * count; a schedule entry >= cap is an actor that was never enabled. */
    uint64_t *slot;
    size_t *pos;
    size_t cap;
    uint64_t stamp;        /* bumped at every choice; 0 is never a valid stamp */
} guided_state;

static int guided_create(cs_explorer *ex, const cs_config *cfg, void **state) {
    (void)ex;
    guided_state *s = calloc(1, sizeof *s);
    if (!s) return CS_ENOMEM;
    s->sched = cfg->replay;
    s->len = cfg->replay_len;
    if (s->len) {
        s->consumed = calloc(s->len, 1);
        if (!s->consumed) {
            free(s);
            return CS_ENOMEM;
        }
    }
    *state = s;
    return CS_OK;
}

static void guided_destroy(void *state) {
    guided_state *s = state;
    if (!s) return;
    free(s->consumed);
    free(s->slot);
    free(s->pos);
    free(s);
}

static int guided_begin(cs_explorer *ex, void *state, int *more, int *complete) {
    guided_state *s = state;
    cs_stats st;
    cs_explorer_stats(ex, &st);
    *more = st.executions == 0;
    *complete = 0;
    if (s->len) memset(s->consumed, 0, s->len);
    s->cursor = 0;
    return CS_OK;
}

/* Makes room for actor ids below `need` in slot/pos (new slots unmarked). */
static int reserve(guided_state *s, size_t need) {
    if (need <= s->cap) return CS_OK;
    size_t ncap = s->cap ? s->cap : 16;
    while (ncap < need) ncap *= 2;
    uint64_t *nslot = realloc(s->slot, ncap * sizeof *nslot);
    if (!nslot) return CS_ENOMEM;
    s->slot = nslot;
    memset(s->slot + s->cap, 0, (ncap - s->cap) * sizeof *s->slot);
    size_t *npos = realloc(s->pos, ncap * sizeof *npos);
    if (!npos) return CS_ENOMEM;
    s->pos = npos;
    s->cap = ncap;
    return CS_OK;
}

static int guided_choose(cs_explorer *ex, void *state, size_t step,
                         const cs_actor *enabled, size_t n, size_t *chosen) {
    (void)step;
    guided_state *s = state;
    *chosen = 0; /* the default choice */
    if (s->cursor >= s->len) return CS_OK;
    /* Every enabled actor is interned (cs_step_begin checks the ids it
     * runs), but the table is sized by the largest id seen, to be safe. */
    size_t need = cs__explorer_actor_count(ex);
    for (size_t i = 0; i < n; i++)
        if ((size_t)enabled[i] + 1 > need) need = (size_t)enabled[i] + 1;
    int rc = reserve(s, need);
    if (rc) return rc;
    s->stamp++;
    for (size_t i = 0; i < n; i++) {
        s->slot[enabled[i]] = s->stamp;
        s->pos[enabled[i]] = i;
    }
    for (size_t j = s->cursor; j < s->len; j++) {
        cs_actor a = s->sched[j];
        if (s->consumed[j] || a >= s->cap || s->slot[a] != s->stamp) continue;
        *chosen = s->pos[a];
        return CS_OK;
    }
    return CS_OK;
}

static int guided_observe(cs_explorer *ex, void *state, size_t index) {
    guided_state *s = state;
    cs_event ev;
    int rc = cs_trace_event(ex, index, &ev);
    if (rc) return rc;
    if (s->cursor >= s->len || s->sched[s->cursor] != ev.actor)
        cs__explorer_count_deviation(ex);
    for (size_t j = s->cursor; j < s->len; j++) {
        if (s->consumed[j] || s->sched[j] != ev.actor) continue;
        s->consumed[j] = 1;
        while (s->cursor < s->len && s->consumed[s->cursor]) s->cursor++;
        break;
    }
    return CS_OK;
}

static int guided_end(cs_explorer *ex, void *state, int outcome) {
    (void)ex;
    (void)state;
    (void)outcome;
    return CS_OK;
}

const cs__strategy_ops cs__strategy_guided = {
    "guided", guided_create, guided_destroy, guided_begin,
    guided_choose, guided_observe, guided_end,
};
