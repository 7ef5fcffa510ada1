/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The number, group and MAC parsers of every veloz C tool, written once.
 * The vz_parse_* ones print one line naming the option (`what`) and return
 * -EINVAL; the vz_str* ones are silent, for callers with their own message.
 */
#ifndef VZ_COMMON_PARSE_H
#define VZ_COMMON_PARSE_H

#include <sys/types.h>

#include <linux/types.h>

/* Durations and intervals: finite, positive, at most VZ_SECONDS_MAX (some
 * 31 years: a value past it is a typo, and overflows time arithmetic). */
#define VZ_SECONDS_MAX 1e9

/*
 * The whole of `text` as a number in `base` (0: C prefixes) in [min, max]:
 * 0, or -EINVAL (not a number, trailing text, a sign) or -ERANGE.
 */
int vz_strtou64(const char *text, int base, __u64 min, __u64 max, __u64 *out);

/* The whole of `text` as finite seconds in (0, max]: 0 or -EINVAL. */
int vz_strtoseconds(const char *text, double max, double *out);

/* Parse a whole decimal number in [min, max] or fail with a message. */
int vz_parse_u64(const char *what, const char *text, __u64 min, __u64 max,
		 __u64 *out);

/* A group by name, or by number when no group has that name; fails with
 * a message naming the option `what`. */
int vz_parse_group(const char *what, const char *text, gid_t *gid);

/* Seconds in (0, VZ_SECONDS_MAX], or fails with a message. */
int vz_parse_seconds(const char *what, const char *text, double *out);

/* "aa:bb:cc:dd:ee:ff" (one or two hex digits a byte), silent: 0 or -EINVAL. */
int vz_parse_mac(const char *text, __u8 mac[6]);

#endif
