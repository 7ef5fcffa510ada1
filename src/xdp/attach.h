/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The XDP backend's plumbing around libxdp: making sure bpffs is mounted,
 * one veloz per interface (a lock), finding and removing programs a killed
 * run left behind, attaching and detaching.
 */
#ifndef VZ_XDP_ATTACH_H
#define VZ_XDP_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <xdp/libxdp.h>

/* Programs veloz attaches are named vz_xdp_<nf>. */
#define VZ_XDP_PROG_PREFIX "vz_xdp_"
/*
 * The testbed's XDP_PASS program on its far ends (python/veloz/testbed.py):
 * a placeholder, which `veloz run` replaces without asking.
 */
#define VZ_TESTBED_RX_PROG "vz_tb_rx"

/* Does this process have CAP_NET_ADMIN and CAP_BPF (or CAP_SYS_ADMIN)? */
bool vz_xdp_privileged(void);

/*
 * libxdp pins its dispatcher state in /sys/fs/bpf. `ip netns exec` remounts
 * /sys without it; mount a bpffs there (private to that mount namespace).
 */
int vz_bpffs_ensure(char *err, size_t errlen);

/* Exclusive claim on an interface, released by vz_iface_unlock(). */
struct vz_iface_lock {
	int fd;
	char path[128];
};
int vz_iface_lock(struct vz_iface_lock *lock, int ifindex, const char *ifname,
		  char *err, size_t errlen);
void vz_iface_unlock(struct vz_iface_lock *lock);

/* What is attached to an interface now. */
struct vz_xdp_attached {
	bool any;
	bool ours; /* every program on it is a veloz program */
	enum xdp_attach_mode mode;
	char names[256]; /* comma-separated program names */
	unsigned int prog_id; /* the main (dispatcher or only) program */
};
int vz_xdp_query(int ifindex, struct vz_xdp_attached *out);

/* Remove whatever XDP program is attached, in every mode. */
int vz_xdp_detach_all(int ifindex);

const char *vz_xdp_mode_name(enum xdp_attach_mode mode);

#endif
