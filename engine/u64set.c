/*
 * u64set.c -- the engine's set of 64-bit values (trace fingerprints, final
 * states of C programs).  Open addressing with linear probing, load <= 1/2;
 * 0 marks an empty slot, so the value 0 is stored out of band.
 *
 * cs__distinct: the same up to a threshold, then a HyperLogLog sketch
 * (Flajolet, Fusy, Gandouet, Meunier 2007) with the small-range correction
 * (linear counting while the estimate is below 5/2 m and registers are
 * empty); 64-bit hashes make the large-range correction unnecessary.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

static void place(uint64_t *slots, size_t cap, uint64_t v) {
    size_t j = cs__mix64(v) & (cap - 1);
    while (slots[j]) j = (j + 1) & (cap - 1);
    slots[j] = v;
}

int cs__u64set_add(cs__u64set *s, uint64_t v) {
    if (v == 0) {
        if (s->has_zero) return 0;
        s->has_zero = true;
        return 1;
    }
    if ((s->len + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 64;
        uint64_t *ns = calloc(ncap, sizeof *ns);
        if (!ns) return CS_ENOMEM;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i]) place(ns, ncap, s->slots[i]);
        free(s->slots);
        s->slots = ns;
        s->cap = ncap;
    }
    size_t j = cs__mix64(v) & (s->cap - 1);
    while (s->slots[j]) {
        if (s->slots[j] == v) return 0;
        j = (j + 1) & (s->cap - 1);
    }
    s->slots[j] = v;
    s->len++;
    return 1;
}

bool cs__u64set_has(const cs__u64set *s, uint64_t v) {
    if (v == 0) return s->has_zero;
    if (!s->cap) return false;
    size_t j = cs__mix64(v) & (s->cap - 1);
    for (; s->slots[j]; j = (j + 1) & (s->cap - 1))
        if (s->slots[j] == v) return true;
    return false;
}

size_t cs__u64set_count(const cs__u64set *s) { return s->len + (s->has_zero ? 1 : 0); }

void cs__u64set_members(const cs__u64set *s, uint64_t *out) {
    size_t k = 0;
    if (s->has_zero) out[k++] = 0;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i]) out[k++] = s->slots[i];
}

void cs__u64set_free(cs__u64set *s) {
    free(s->slots);
    s->slots = NULL;
    s->cap = s->len = 0;
    s->has_zero = false;
}

/* ------------------------------------------------------------ distinct */

#define HLL_M ((size_t)1 << CS__HLL_P)

static void hll_add(cs__distinct *d, uint64_t v) {
    uint8_t *reg = d->hll;
    /* fingerprints are hashes already; mixing again keeps the sketch sound
     * for any input (C programs' final states are hashes too) */
    uint64_t h = cs__mix64(v ^ 0x5851f42d4c957f2dULL);
    size_t idx = (size_t)(h >> (64 - CS__HLL_P));
    uint64_t w = h << CS__HLL_P;
    uint8_t rank = 1;
    while (rank <= 64 - CS__HLL_P && !(w & (1ULL << 63))) {
        rank++;
        w <<= 1;
    }
    if (rank <= reg[idx]) return;
    /* the estimate's sum of 2^-register and count of empty registers, kept
     * up to date so that a count is O(1) */
    d->hll_sum += ldexp(1.0, -(int)rank) - ldexp(1.0, -(int)reg[idx]);
    if (reg[idx] == 0) d->hll_zeros--;
    reg[idx] = rank;
}

int cs__distinct_add(cs__distinct *d, uint64_t v) {
    if (d->hll) {
        hll_add(d, v);
        return 0;
    }
    if (cs__u64set_count(&d->exact) >= d->exact_max) {
        if (cs__u64set_has(&d->exact, v)) return 0;
        /* the switch: every value so far goes into the sketch */
        uint8_t *reg = calloc(HLL_M, 1);
        uint64_t *all = malloc((cs__u64set_count(&d->exact) + 1) * sizeof *all);
        if (!reg || !all) {
            free(reg);
            free(all);
            return CS_ENOMEM;
        }
        size_t n = cs__u64set_count(&d->exact);
        cs__u64set_members(&d->exact, all);
        d->hll = reg;
        d->hll_sum = (double)HLL_M; /* every register 0: 2^0 each */
        d->hll_zeros = HLL_M;
        for (size_t i = 0; i < n; i++) hll_add(d, all[i]);
        free(all);
        cs__u64set_free(&d->exact);
        hll_add(d, v);
        return 0;
    }
    return cs__u64set_add(&d->exact, v);
}

uint64_t cs__distinct_count(const cs__distinct *d) {
    if (!d->hll) return cs__u64set_count(&d->exact);
    double m = (double)HLL_M;
    double alpha = 0.7213 / (1.0 + 1.079 / m);
    double e = alpha * m * m / d->hll_sum;
    if (e <= 2.5 * m && d->hll_zeros) e = m * log(m / (double)d->hll_zeros);
    return (uint64_t)llround(e);
}

bool cs__distinct_estimated(const cs__distinct *d) { return d->hll != NULL; }

void cs__distinct_free(cs__distinct *d) {
    cs__u64set_free(&d->exact);
    free(d->hll);
    d->hll = NULL;
}
