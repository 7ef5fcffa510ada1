/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Who may use a veloz control socket: root, or a member (primary or
 * supplementary) of one configured group. The rule of both control
 * sockets, a running NF's (src/ctl/ctl_server.c) and the UDP poller's
 * (src/sock/poller/server.c). The socket file's mode says the same; checking
 * the peer's credentials too means a mode loosened by hand opens nothing.
 *
 * Header-only: libveloz-sock's server links no other veloz library.
 */
#ifndef VZ_COMMON_PEERCRED_H
#define VZ_COMMON_PEERCRED_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#define VZ_ROOT_ONLY ((gid_t)-1) /* no group besides root */

static inline bool vz_gid_in(const gid_t *groups, size_t n, gid_t gid)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* The peer's supplementary groups from /proc, for kernels without
 * SO_PEERGROUPS. */
static inline bool vz_proc_in_group(pid_t pid, gid_t gid)
{
	char path[64], line[4096];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = line + 7, *end;

		if (strncmp(line, "Groups:", 7))
			continue;
		for (;;) {
			unsigned long v = strtoul(p, &end, 10);

			if (end == p)
				break;
			if (v == gid)
				found = true;
			p = end;
		}
		break;
	}
	fclose(f);
	return found;
}

/* Root, or a member of gid (VZ_ROOT_ONLY: root only). *uid: the peer's. */
static inline bool vz_peer_allowed(int fd, gid_t gid, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	gid_t groups[256];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return false;
	*uid = cr.uid;
	if (cr.uid == 0)
		return true;
	if (gid == VZ_ROOT_ONLY)
		return false;
	if (cr.gid == gid)
		return true;
	len = sizeof(groups);
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len))
		return vz_gid_in(groups, len / sizeof(gid_t), gid);
	return vz_proc_in_group(cr.pid, gid);
}

#endif
