// SPDX-License-Identifier: BSD-2-Clause
/*
 * An ops file (ctl.h): request lines applied as one transaction before
 * the NF runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl_internal.h"

/* ---- an ops file --------------------------------------------------------- */

int vz_ctl_apply_file(struct vz_ctl *ctl, const char *path, char *err,
		      size_t errlen)
{
	struct buf out = { 0 };
	struct session s;
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	FILE *f;
	int ret = 0;

	f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "ops file %s: %s", path, strerror(errno));
		return -errno;
	}
	if (vz_ctl_session_init(&s, ctl)) {
		fclose(f);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s.in_tx = true;
	/* bounded lines, not getline: an ops file from /dev/zero (one endless
	 * line) must be refused, not read until memory runs out */
	cap = LINE_MAX_BYTES + 2;
	line = malloc(cap);
	if (!line)
		ret = -ENOMEM;
	while (line && fgets(line, (int)cap, f)) {
		n = (ssize_t)strlen(line);
		lineno++;
		if (n && line[n - 1] == '\n') {
			line[n - 1] = '\0';
		} else if (!feof(f)) {
			snprintf(err, errlen,
				 "ops file %s line %zu: longer than %u bytes "
				 "or holds a NUL",
				 path, lineno, LINE_MAX_BYTES);
			ret = -EINVAL;
			break;
		}
		if (!line[0] || line[0] == '#')
			continue;
		out.len = 0;
		if (strncmp(line, "update ", 7) &&
		    strncmp(line, "delete ", 7) && strncmp(line, "fill ", 5)) {
			snprintf(err, errlen,
				 "ops file %s line %zu: not an "
				 "update, delete or fill",
				 path, lineno);
			ret = -EINVAL;
			break;
		}
		vz_ctl_execute(&s, line, &out);
		if (out.len >= 5 && !strncmp(out.data, "error", 5)) {
			snprintf(err, errlen, "ops file %s line %zu: %.*s",
				 path, lineno, (int)out.len - 7, out.data + 6);
			ret = -EINVAL;
			break;
		}
	}
	if (!ret && ferror(f)) {
		snprintf(err, errlen, "ops file %s: %s", path, strerror(EIO));
		ret = -EIO;
	}
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	if (ret)
		vz_ctl_roll_back(&s);
	free(line);
	free(out.data);
	vz_ctl_session_free(&s);
	fclose(f);
	return ret;
}
