/*
 * u64set.c -- the engine's set of 64-bit values (trace fingerprints, final
 * states of C programs).  Open addressing with linear probing, load <= 1/2;
 * 0 marks an empty slot, so the value 0 is stored out of band.
 */
#include "internal.h"

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
