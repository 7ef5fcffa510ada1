/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The plumbing around libxdp that every backend needs (the xdp backend for
 * its NF, afxdp and dpdk for their steering program, gen and udpd too):
 * making sure bpffs is mounted, finding and removing programs a killed run
 * left behind, detaching. The interface lock is in common/iface.h.
 */
#ifndef VZ_RUNNER_XDP_ATTACH_H
#define VZ_RUNNER_XDP_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <xdp/libxdp.h>

/* Programs veloz attaches are named vz_xdp_<nf>. */
#define VZ_XDP_PROG_PREFIX "vz_xdp_"
/*
 * The testbed's XDP_PASS program on its far ends
 * (python/veloz/testbed/receivers.py): a placeholder, which `veloz run`
 * replaces without asking.
 */
#define VZ_TESTBED_RX_PROG "vz_tb_rx"

/* Does this process have CAP_NET_ADMIN and CAP_BPF (or CAP_SYS_ADMIN)? */
bool vz_xdp_privileged(void);

/*
 * libxdp pins its dispatcher state in /sys/fs/bpf. `ip netns exec` remounts
 * /sys without it; mount a bpffs there (private to that mount namespace).
 */
int vz_bpffs_ensure(char *err, size_t errlen);

/* What is attached to an interface now. */
struct vz_xdp_attached {
	bool any;
	bool ours; /* every program on it is a veloz program */
	enum xdp_attach_mode mode;
	char names[256]; /* comma-separated program names */
	unsigned int prog_id; /* the main (dispatcher or only) program */
	/*
	 * Attached through a BPF link (0: through netlink): the link's
	 * holders keep it, a process's descriptor or a pin in bpffs, and
	 * netlink cannot remove it. An unpinned link dies with its process,
	 * so one found attached has a live owner.
	 */
	unsigned int link_id;
};
int vz_xdp_query(int ifindex, struct vz_xdp_attached *out);

/* A process holding a descriptor of the link (0: none seen, e.g. pinned). */
int vz_xdp_link_holder(unsigned int link_id);

/* Does a program of this name come from veloz (an NF's vz_xdp_<nf>)? */
bool vz_xdp_is_nf_name(const char *name);
/*
 * The NF program behind ATTACHED_ID (the program on the hook: the NF
 * itself, or libxdp's dispatcher in front of it), its kernel name (at
 * most 15 characters) in NAME; 0 when it is no veloz NF.
 */
__u32 vz_xdp_nf_prog_id(__u32 attached_id, char *name, size_t len);

/* Remove whatever XDP program is attached, in every mode. */
int vz_xdp_detach_all(int ifindex);

const char *vz_xdp_mode_name(enum xdp_attach_mode mode);

#endif
