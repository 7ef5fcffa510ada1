/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * IP_MTU_DISCOVER / IPV6_MTU_DISCOVER on a veloz socket, shared by poller
 * and direct mode. The stack does no path-MTU discovery: it never sets DF
 * and fragments what exceeds the interface MTU itself, which is what
 * IP_PMTUDISC_DONT (and, for a stack that learns no path MTU, OMIT) ask
 * for. DNS servers (unbound, knotd) set one of those two at start-up and
 * unbound refuses to run when it fails; a mode that needs DF cannot be
 * honoured and says so.
 */
#ifndef VZ_SOCK_APP_PMTU_H
#define VZ_SOCK_APP_PMTU_H

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

/* Is (level, name) the MTU-discovery option of the socket's family? */
static inline bool vz_pmtu_opt(bool v6, int level, int name)
{
	return v6 ? level == IPPROTO_IPV6 && name == IPV6_MTU_DISCOVER
		  : level == IPPROTO_IP && name == IP_MTU_DISCOVER;
}

/* 0, or a negative errno as Linux gives it (EINVAL beyond OMIT). */
static inline int vz_pmtu_set(const void *val, socklen_t len)
{
	int v;

	if (!val)
		return -EFAULT;
	if (len < sizeof(int))
		return -EINVAL;
	memcpy(&v, val, sizeof(v));
	if (v < IP_PMTUDISC_DONT || v > IP_PMTUDISC_OMIT)
		return -EINVAL;
	if (v != IP_PMTUDISC_DONT && v != IP_PMTUDISC_OMIT)
		return -EOPNOTSUPP; /* WANT, DO, PROBE: DF, which we never set
				     */
	return 0;
}

/* What the stack does, whatever was set: fragment locally, no DF. */
static inline int vz_pmtu_get(void *val, socklen_t *len)
{
	int v = IP_PMTUDISC_DONT;

	if (!val || !len)
		return -EFAULT;
	if (*len < sizeof(int))
		return -EINVAL;
	memcpy(val, &v, sizeof(v));
	*len = sizeof(v);
	return 0;
}

#endif
