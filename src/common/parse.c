// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <grp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/err.h"
#include "common/parse.h"

int vz_strtou64(const char *text, int base, __u64 min, __u64 max, __u64 *out)
{
	unsigned long long value;
	char *end;

	errno = 0;
	value = strtoull(text, &end, base);
	/* strtoull takes "-1" as ULLONG_MAX: a sign is no number of ours */
	if (errno == EINVAL || end == text || *end || text[0] == '-')
		return -EINVAL;
	if (errno || value < min || value > max)
		return -ERANGE;
	*out = value;
	return 0;
}

int vz_strtoseconds(const char *text, double max, double *out)
{
	char *end;
	double value;

	errno = 0;
	value = strtod(text, &end);
	/* NaN compares false with everything: test for what is wanted */
	if (errno || end == text || *end || !isfinite(value) || !(value > 0) ||
	    value > max)
		return -EINVAL;
	*out = value;
	return 0;
}

int vz_parse_u64(const char *what, const char *text, __u64 min, __u64 max,
		 __u64 *out)
{
	if (vz_strtou64(text, 10, min, max, out)) {
		vz_err("%s must be a whole number from %llu to %llu, not '%s'",
		       what, (unsigned long long)min, (unsigned long long)max,
		       text);
		return -EINVAL;
	}
	return 0;
}

int vz_parse_group(const char *what, const char *text, gid_t *gid)
{
	struct group *g = getgrnam(text);
	__u64 v;

	if (g) {
		*gid = g->gr_gid;
		return 0;
	}
	if (text[0] < '0' || text[0] > '9') {
		vz_err("%s: no group %s", what, text);
		return -EINVAL;
	}
	/* (gid_t)-1 is no group at all to the kernel */
	if (vz_parse_u64(what, text, 0, 0xfffffffeu, &v))
		return -EINVAL;
	*gid = (gid_t)v;
	return 0;
}

int vz_parse_seconds(const char *what, const char *text, double *out)
{
	if (vz_strtoseconds(text, VZ_SECONDS_MAX, out)) {
		vz_err("%s must be a positive number of seconds up to %g, "
		       "not '%s'",
		       what, VZ_SECONDS_MAX, text);
		return -EINVAL;
	}
	return 0;
}

int vz_parse_mac(const char *text, __u8 mac[6])
{
	unsigned int b[6], i;
	char tail;

	if (sscanf(text, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2],
		   &b[3], &b[4], &b[5], &tail) != 6)
		return -EINVAL;
	for (i = 0; i < 6; i++)
		mac[i] = (__u8)b[i];
	return 0;
}
