/* ctest.h -- a minimal unit-test harness for the engine's C tests.
 * Each test file defines TESTS(X) listing its test functions (the one place
 * a test is named), then CTEST_MAIN(); the program prints "N passed,
 * N failed" and exits 1 on any failure.  `prog NAME...` runs only the named
 * tests (exit 2 for a name that is no test); `prog --list` lists them. */
#ifndef CTEST_H
#define CTEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One test: run it when no name was given on the command line or when its
 * name is one of the arguments (`build/c/san/test_dpor test_after_all`);
 * `--list` prints the names instead. */
#define CTEST_RUN_ONE(fn)                                                      \
    do {                                                                       \
        if (ctest_list_) {                                                     \
            printf("%s\n", #fn);                                               \
            break;                                                             \
        }                                                                      \
        if (!ctest_selected(argc, argv, #fn, ctest_used_)) break;              \
        int before_ = ctest_failed_checks;                                     \
        fn();                                                                  \
        if (ctest_failed_checks == before_) passed_++;                         \
        else { failed_++; fprintf(stderr, "FAILED: %s\n", #fn); }              \
    } while (0);

/* Is `name` selected?  Marks the argument that selected it as used. */
static int ctest_selected(int argc, char **argv, const char *name, int *used) {
    if (argc <= 1) return 1;
    int hit = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) {
            used[i] = 1;
            hit = 1;
        }
    return hit;
}

/* The test list is the file's TESTS(X) macro: the one place tests are
 * named.  An argument that names no test is an error (exit 2), so a typo
 * never passes as "0 failed". */
#define CTEST_MAIN()                                                           \
    int main(int argc, char **argv) {                                          \
        int passed_ = 0, failed_ = 0;                                          \
        int ctest_list_ = argc == 2 && strcmp(argv[1], "--list") == 0;         \
        int *ctest_used_ = calloc((size_t)argc + 1, sizeof(int));              \
        if (!ctest_used_) return 2;                                            \
        TESTS(CTEST_RUN_ONE)                                                   \
        if (ctest_list_) {                                                     \
            free(ctest_used_);                                                 \
            return 0;                                                          \
        }                                                                      \
        int unknown_ = 0;                                                      \
        for (int i_ = 1; i_ < argc; i_++)                                      \
            if (!ctest_used_[i_]) {                                            \
                fprintf(stderr, "%s: no test named %s\n", __FILE__, argv[i_]); \
                unknown_ = 1;                                                  \
            }                                                                  \
        free(ctest_used_);                                                     \
        printf("%s: %d passed, %d failed\n", __FILE__, passed_, failed_);      \
        return unknown_ ? 2 : failed_ ? 1 : 0;                                 \
    }
#endif
