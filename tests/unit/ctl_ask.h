/* SPDX-License-Identifier: BSD-2-Clause */
/* The C tests' one request to a control session: its reply, as a string. */
#ifndef VZ_TEST_CTL_ASK_H
#define VZ_TEST_CTL_ASK_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ctl/ctl.h"

static inline char *ask(struct vz_ctl *ctl, const char *text)
{
	char *reply = NULL, *out;
	size_t len = 0;

	CHECK(!vz_ctl_run_text(ctl, text, strlen(text), &reply, &len),
	      "run_text");
	out = strndup(reply ? reply : "", len);
	free(reply);
	return out;
}

#endif
