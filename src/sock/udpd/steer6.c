// SPDX-License-Identifier: BSD-2-Clause
/*
 * Give the steering program udpd's IPv6 address (udpd_config6). port.c
 * attaches the program and sets the IPv4 address; this finds the program
 * on the interface again (alone, or behind libxdp's dispatcher) by its
 * name, and its map by name, so the port needs no IPv6 knowledge.
 */
#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <xdp/libxdp.h>

#include "common/err.h"
#include "sock/udpd/steer6.h"

#define STEER_PROG "vz_xdp_udpd"
#define STEER_MAP6 "udpd_config6"

/* The descriptor of prog_fd's map called `name`, or -ENOENT. */
static int map_of(int prog_fd, const char *name)
{
	__u32 ids[16], len, i, n;
	struct bpf_prog_info info;
	int fd;

	memset(&info, 0, sizeof(info));
	info.nr_map_ids = 16;
	info.map_ids = (__u64)(unsigned long)ids;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		return -errno;
	n = info.nr_map_ids < 16 ? info.nr_map_ids : 16;
	for (i = 0; i < n; i++) {
		struct bpf_map_info mi;
		__u32 mlen = sizeof(mi);

		fd = bpf_map_get_fd_by_id(ids[i]);
		if (fd < 0)
			continue;
		memset(&mi, 0, sizeof(mi));
		if (!bpf_obj_get_info_by_fd(fd, &mi, &mlen) &&
		    !strcmp(mi.name, name))
			return fd;
		close(fd);
	}
	return -ENOENT;
}

int vz_udpd_steer6(const char *ifname, const __u8 ip6[16])
{
	struct xdp_program *prog = NULL;
	struct xdp_multiprog *mp;
	__u32 key = 0;
	int err, fd;

	mp = xdp_multiprog__get_from_ifindex((int)if_nametoindex(ifname));
	err = (int)libxdp_get_error(mp);
	if (err) {
		vz_err("cannot find udpd's steering program on %s: %s", ifname,
		       strerror(-err));
		return err;
	}
	if (xdp_multiprog__is_legacy(mp))
		prog = xdp_multiprog__main_prog(mp);
	else
		while ((prog = xdp_multiprog__next_prog(prog, mp)) &&
		       strcmp(xdp_program__name(prog), STEER_PROG))
			;
	if (!prog || strcmp(xdp_program__name(prog), STEER_PROG)) {
		vz_err("udpd's steering program is not on %s", ifname);
		xdp_multiprog__close(mp);
		return -ENOENT;
	}
	fd = map_of(xdp_program__fd(prog), STEER_MAP6);
	err = fd < 0 ? fd : 0;
	if (!err && bpf_map_update_elem(fd, &key, ip6, BPF_ANY))
		err = -errno;
	if (err)
		vz_err("cannot give the steering program the IPv6 address: %s",
		       strerror(-err));
	if (fd >= 0)
		close(fd);
	xdp_multiprog__close(mp);
	return err;
}
