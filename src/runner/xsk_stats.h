/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the kernel dropped on an AF_XDP socket before userspace saw it: no
 * free buffer in the fill ring, a bad fill descriptor, or a full receive
 * ring. Read from the socket itself (XDP_STATISTICS), so it counts the same
 * for veloz's own sockets and for those DPDK's net_af_xdp opens, whose
 * imissed leaves out the full-ring drops.
 */
#ifndef VZ_RUNNER_XSK_STATS_H
#define VZ_RUNNER_XSK_STATS_H

#include <dirent.h>
#include <linux/if_xdp.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <linux/types.h>

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

/* The frames socket fd lost; 0 if fd is not an AF_XDP socket. */
static inline __u64 vz_xsk_missed(int fd)
{
	struct xdp_statistics st;
	socklen_t len = sizeof(st);

	if (getsockopt(fd, SOL_XDP, XDP_STATISTICS, &st, &len))
		return 0;
	return st.rx_dropped + st.rx_invalid_descs + st.rx_ring_full;
}

/* The same, summed over every AF_XDP socket this process has open. */
static inline __u64 vz_xsk_missed_all(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	__u64 missed = 0;
	int domain, fd;
	socklen_t len;

	if (!dir)
		return 0;
	while ((e = readdir(dir))) {
		fd = atoi(e->d_name);
		len = sizeof(domain);
		if (e->d_name[0] != '.' && fd != dirfd(dir) &&
		    !getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) &&
		    domain == AF_XDP)
			missed += vz_xsk_missed(fd);
	}
	closedir(dir);
	return missed;
}

#endif
