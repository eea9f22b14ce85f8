/* ctest.h -- a minimal unit-test harness for the engine's C tests.
 * Each test file defines TESTS(X) listing its test functions, then
 * CTEST_MAIN(); the program prints "N passed, N failed" and exits 1 on any
 * failure. */
#ifndef CTEST_H
#define CTEST_H
#include <stdio.h>
#include <stdlib.h>

static int ctest_failed_checks;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            ctest_failed_checks++;                                             \
        }                                                                      \
    } while (0)

#define CHECK_EQ(a, b)                                                         \
    do {                                                                       \
        long long ctest_a_ = (long long)(a), ctest_b_ = (long long)(b);        \
        if (ctest_a_ != ctest_b_) {                                            \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld vs %lld)\n",\
                    __FILE__, __LINE__, #a, #b, ctest_a_, ctest_b_);           \
            ctest_failed_checks++;                                             \
        }                                                                      \
    } while (0)

#define CTEST_RUN_ONE(fn)                                                      \
    do {                                                                       \
        int before_ = ctest_failed_checks;                                     \
        fn();                                                                  \
        if (ctest_failed_checks == before_) passed_++;                         \
        else { failed_++; fprintf(stderr, "FAILED: %s\n", #fn); }              \
    } while (0);

#define CTEST_MAIN()                                                           \
    int main(void) {                                                           \
        int passed_ = 0, failed_ = 0;                                          \
        TESTS(CTEST_RUN_ONE)                                                   \
        printf("%s: %d passed, %d failed\n", __FILE__, passed_, failed_);      \
        return failed_ ? 1 : 0;                                                \
    }
#endif
