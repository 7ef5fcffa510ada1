/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Facts about a network interface every backend and tool asks for (its
 * MAC, MTU, receive queues), and the lock that keeps one veloz on it.
 */
#ifndef VZ_COMMON_IFACE_H
#define VZ_COMMON_IFACE_H

#include <stddef.h>

#include <linux/types.h>

/* Exclusive claim on an interface, released by vz_iface_unlock(). */
struct vz_iface_lock {
	int fd;
	char path[128];
};

/*
 * Take the lock (a file under /run/veloz named by network namespace and
 * ifindex). 0, or -errno with one line in err: -EBUSY names the pid
 * holding it.
 */
int vz_iface_lock(struct vz_iface_lock *lock, int ifindex, const char *ifname,
		  char *err, size_t errlen);
void vz_iface_unlock(struct vz_iface_lock *lock);

/* The interface's hardware address: 0 or -errno. */
int vz_iface_mac(const char *ifname, __u8 mac[6]);

/* The interface's MTU: 0 or -errno. */
int vz_iface_mtu(const char *ifname, int *mtu);

/* Receive queues of the interface, from sysfs (at least 1: veth has 1). */
int vz_iface_rx_queues(const char *ifname);

#endif
