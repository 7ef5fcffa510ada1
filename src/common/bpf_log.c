// SPDX-License-Identifier: BSD-2-Clause
/* vz_quiet_bpf_logs (common/err.h): the only part of src/common on libbpf. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "common/err.h"

/* libbpf's own chatter is for debugging; our errors say what went wrong. */
static int quiet_libbpf(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	if (level == LIBBPF_WARN && getenv("VELOZ_DEBUG"))
		return vfprintf(stderr, fmt, ap);
	if (level == LIBBPF_DEBUG && getenv("VELOZ_DEBUG") &&
	    !strcmp(getenv("VELOZ_DEBUG"), "2"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

void vz_quiet_bpf_logs(void)
{
	libbpf_set_print(quiet_libbpf);
	/* e.g. its dispatcher fallback notice: say it only when debugging */
	libxdp_set_print((libxdp_print_fn_t)quiet_libbpf);
}
