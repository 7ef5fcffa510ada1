// SPDX-License-Identifier: BSD-2-Clause
/*
 * The "leave" request (src/ctl/ctl_session.c): a successor that took an
 * in-kernel NF over (`veloz run --take-over`) tells its run to stop and
 * leave the program attached. A run whose NF ends with it (userspace:
 * no stop_run) refuses and goes on.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ctl/ctl.h"
#include "ctl_ask.h"

int main(void)
{
	volatile sig_atomic_t stop = 0;
	struct vz_ctl ctl;
	char *r;

	memset(&ctl, 0, sizeof(ctl));
	ctl.listen_fd = -1;
	ctl.nf = "test";
	ctl.backend = "afxdp";

	r = ask(&ctl, "leave\n");
	CHECK(!strncmp(r, "error ", 6) && strstr(r, "ends with it"),
	      "a userspace run refuses: '%s'", r);
	CHECK(!ctl.leave, "marked leaving though it refused");
	free(r);

	ctl.backend = "xdp";
	ctl.stop_run = &stop;
	r = ask(&ctl, "info\nleave\n");
	CHECK(!strcmp(r, "ok test xdp\nok\n"), "leave: '%s'", r);
	CHECK(ctl.leave && stop, "leave %d, stop %d", (int)ctl.leave,
	      (int)stop);
	free(r);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
