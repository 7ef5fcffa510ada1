// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode's operations, the table libveloz-sock's calls run for a
 * descriptor direct mode owns (src/sock/app/mode.h); the calls are
 * direct.h's.
 */
#include "sock/app/mode.h"
#include "sock/direct/direct.h"

/* No poller to reach: the interface and address come from the
 * environment (direct.h). */
static int direct_init(const char *path)
{
	(void)path;
	return vz_direct_init();
}

const struct vz_sock_mode vz_direct_mode = {
	.chosen = vz_direct_enabled,
	.init = direct_init,
	.socket = vz_direct_socket,
	.poll = vz_direct_poll,
	.wait = vz_direct_wait,
	.owns = vz_direct_fd,
	.watch = vz_direct_watch,
	.burst = vz_direct_burst,
	.close = vz_direct_close,
	.dup3 = vz_direct_dup3,
	.fcntl = vz_direct_fcntl,
	.bind = vz_direct_bind,
	.connect = vz_direct_connect,
	.getsockname = vz_direct_getsockname,
	.getpeername = vz_direct_getpeername,
	.getsockopt = vz_direct_getsockopt,
	.setsockopt = vz_direct_setsockopt,
	.sendto = vz_direct_sendto,
	.recvfrom = vz_direct_recvfrom,
};
