// SPDX-License-Identifier: BSD-2-Clause
/*
 * The "counters" request of a running NF's control socket
 * (src/ctl/ctl_session.c): the runner's latest counters line, as
 * `veloz status` and `--metrics` read it. Nothing before the first line,
 * the newest line after, nothing kept once the socket is closed.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ctl/ctl.h"
#include "ctl_ask.h"

int main(void)
{
	static const char line[] = "{\"t\": 1.000, \"packets\": 3}\n";
	char dir[] = "/tmp/vz-ctl-counters-XXXXXX", err[256], *r;
	struct vz_ctl ctl;

	if (!mkdtemp(dir))
		return 1;
	setenv("VELOZ_CTL_DIR", dir, 1);
	memset(&ctl, 0, sizeof(ctl));
	ctl.listen_fd = -1;
	ctl.nf = "test";
	ctl.backend = "none";
	vz_ctl_add_port(&ctl, "lo");

	/* not listening: nothing is kept (no reader, nothing to free later) */
	vz_ctl_publish_counters(&ctl, line, strlen(line));
	CHECK(!ctl.counters, "kept while not listening");

	CHECK(!vz_ctl_listen(&ctl, (gid_t)-1, err, sizeof(err)), "listen: %s",
	      err);
	r = ask(&ctl, "counters\n");
	CHECK(!strcmp(r, "ok 0\n"), "before the first line: '%s'", r);
	free(r);

	vz_ctl_publish_counters(&ctl, line, strlen(line));
	r = ask(&ctl, "counters\n");
	CHECK(!strcmp(r, "ok 1\n{\"t\": 1.000, \"packets\": 3}\n"),
	      "one line, its newline once: '%s'", r);
	free(r);

	vz_ctl_publish_counters(&ctl, "{\"t\": 2}", 8);
	r = ask(&ctl, "info\ncounters\n");
	CHECK(!strcmp(r, "ok test none\nok 1\n{\"t\": 2}\n"),
	      "the newest line, pipelined: '%s'", r);
	free(r);

	vz_ctl_close(&ctl);
	CHECK(!ctl.counters, "freed on close");
	rmdir(dir);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
