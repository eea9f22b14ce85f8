/*
 * rng.c -- xoshiro256** (Blackman & Vigna), seeded by splitmix64.
 * The same seed gives the same stream on every platform: schedules that a
 * seed produced are reproducible from the seed alone.
 */
#include "internal.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void cs__rng_seed(cs__rng *rng, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&x);
}

void cs__rng_seed_stream(cs__rng *rng, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (0x9e3779b97f4a7c15ULL * (stream + 1));
    x ^= x >> 31;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    cs__rng_seed(rng, x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t cs__rng_next(cs__rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t cs__rng_below(cs__rng *rng, uint64_t bound) {
    if (bound <= 1) return 0;
    /* Rejection sampling: discard the top partial range. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % bound);
    uint64_t x;
    do x = cs__rng_next(rng);
    while (x >= limit);
    return x % bound;
}

double cs__rng_double(cs__rng *rng) {
    return (double)(cs__rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}
