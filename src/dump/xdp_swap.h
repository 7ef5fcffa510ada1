/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Swapping an NF's dump build (include/veloz/nf_dump.h) in for the program
 * attached to an interface, and back. The dump build is loaded with every
 * map of the running NF reused, so counters, routes and connections are
 * the same objects before, during and after; both swaps are one
 * compare-and-exchange in the kernel (XDP_FLAGS_REPLACE with the expected
 * old program), so no frame meets an interface without a program.
 *
 * While swapped, a state file in /run/veloz/dump names the original
 * program: if the dump is killed (-9), `veloz status` shows it and
 * `veloz dump --restore --iface IF` puts the original back.
 */
#ifndef VZ_DUMP_XDP_SWAP_H
#define VZ_DUMP_XDP_SWAP_H

#include <stdbool.h>
#include <stddef.h>

#include <bpf/libbpf.h>

#define VZ_DUMP_STATE_DIR "/run/veloz/dump"

struct vz_xdp_swap {
	int ifindex;
	const char *ifname;
	__u32 mode_flag; /* XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE */
	__u32 orig_id; /* attached: the NF, or libxdp's dispatcher in front */
	int orig_fd;
	__u32 nf_id; /* the NF's program (orig, or behind the dispatcher) */
	struct bpf_object *obj; /* the dump build, loaded */
	int dump_fd;
	__u32 dump_id;
	bool swapped;
	char state_path[128];
};

/* The NF attached to IFINDEX. -ENOENT (with a reason in err): none. */
int vz_swap_find(struct vz_xdp_swap *s, int ifindex, const char *ifname,
		 char *err, size_t errlen);
/* Load PATH (NAME.dump.bpf.o) over the NF's maps. 0 or -errno, err says. */
int vz_swap_load(struct vz_xdp_swap *s, const char *path, char *err,
		 size_t errlen);
/* The dump build in, the original out: one atomic replace. */
int vz_swap_in(struct vz_xdp_swap *s, char *err, size_t errlen);
/* The original back. Also when the state already changed: says so. */
int vz_swap_out(struct vz_xdp_swap *s, char *err, size_t errlen);
void vz_swap_close(struct vz_xdp_swap *s);

/* --restore: put back what a killed dump left swapped on IFINDEX. */
int vz_swap_restore_stale(int ifindex, const char *ifname, char *err,
			  size_t errlen);

#endif
