/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The unit tests' one assertion: report where and why, count it, go on (a
 * test's main returns non-zero when `failures` is). REQUIRE is CHECK that
 * also jumps to the scenario's `out:` label.
 */
#ifndef VZ_TESTS_CHECK_H
#define VZ_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                \
	do {                                                            \
		if (!(cond)) {                                          \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                   \
			fputc('\n', stderr);                            \
			failures++;                                     \
		}                                                       \
	} while (0)

/* Stop a scenario at its first failure: the rest would only repeat it. */
#define REQUIRE(cond, ...)                \
	do {                              \
		int before_ = failures;   \
		CHECK(cond, __VA_ARGS__); \
		if (failures != before_)  \
			goto out;         \
	} while (0)

#endif
