// SPDX-License-Identifier: BSD-2-Clause
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "runner/xdp_attach.h"

#define VZ_BPFFS "/sys/fs/bpf"

#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static bool has_cap(const struct __user_cap_data_struct data[2], int cap)
{
	return data[cap / 32].effective & (1u << (cap % 32));
}

bool vz_xdp_privileged(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[2] = { 0 };

	if (syscall(SYS_capget, &hdr, data))
		return geteuid() == 0;
	return has_cap(data, CAP_NET_ADMIN) &&
	       (has_cap(data, CAP_BPF) || has_cap(data, CAP_SYS_ADMIN));
}

int vz_bpffs_ensure(char *err, size_t errlen)
{
	struct statfs fs;

	if (!statfs(VZ_BPFFS, &fs) && fs.f_type == BPF_FS_MAGIC)
		return 0;
	if (mount("bpf", VZ_BPFFS, "bpf", 0, "mode=0700")) {
		snprintf(err, errlen, "cannot mount bpffs on %s: %s", VZ_BPFFS,
			 strerror(errno));
		return -errno;
	}
	return 0;
}

static void append_name(struct vz_xdp_attached *out, const char *name)
{
	size_t used = strlen(out->names);

	snprintf(out->names + used, sizeof(out->names) - used, "%s%s",
		 used ? ", " : "", name);
	if (strncmp(name, VZ_XDP_PROG_PREFIX, strlen(VZ_XDP_PROG_PREFIX)))
		out->ours = false;
}

/* Name of a program by id, from the kernel (truncated to 15 characters). */
static void kernel_prog_name(unsigned int id, char *name, size_t len)
{
	struct bpf_prog_info info = { 0 };
	__u32 info_len = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id);

	snprintf(name, len, "id %u", id);
	if (fd < 0)
		return;
	if (!bpf_obj_get_info_by_fd(fd, &info, &info_len) && info.name[0])
		snprintf(name, len, "%s", info.name);
	close(fd);
}

/*
 * The kernel's links, one by one, until match() accepts one: its info
 * (the link's id in *id), or false. Asked of the kernel, not of pins: they
 * may live in another bpffs (`ip netns exec` gives each command its own).
 */
static bool find_link(bool (*match)(const struct bpf_link_info *, const void *),
		      const void *arg, struct bpf_link_info *info, __u32 *id)
{
	bool found = false;
	__u32 len;
	int fd;

	*id = 0;
	while (!found && !bpf_link_get_next_id(*id, id)) {
		fd = bpf_link_get_fd_by_id(*id);
		if (fd < 0)
			continue;
		memset(info, 0, sizeof(*info));
		len = sizeof(*info);
		found = !bpf_obj_get_info_by_fd(fd, info, &len) &&
			match(info, arg);
		close(fd);
	}
	return found;
}

struct xdp_hook {
	__u32 prog_id;
	int ifindex;
};

static bool is_xdp_link_of(const struct bpf_link_info *info, const void *arg)
{
	const struct xdp_hook *h = arg;

	return info->type == BPF_LINK_TYPE_XDP && info->prog_id == h->prog_id &&
	       (int)info->xdp.ifindex == h->ifindex;
}

/* The XDP link that attached prog_id to ifindex, 0 when netlink did. */
static unsigned int xdp_link_of(unsigned int prog_id, int ifindex)
{
	struct xdp_hook h = { prog_id, ifindex };
	struct bpf_link_info info;
	__u32 id;

	return find_link(is_xdp_link_of, &h, &info, &id) ? id : 0;
}

/* Does /proc/PID/fdinfo/FD describe the BPF link LINK_ID? */
static bool fd_is_link(const char *pid, const char *fd, unsigned int link_id)
{
	char path[300], line[128];
	unsigned int id;
	bool yes = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/fdinfo/%s", pid, fd);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!yes && fgets(line, sizeof(line), f))
		yes = sscanf(line, "link_id: %u", &id) == 1 && id == link_id;
	fclose(f);
	return yes;
}

static bool pid_holds_link(const char *pid, unsigned int link_id)
{
	char path[300], target[64];
	struct dirent *fd;
	bool yes = false;
	ssize_t n;
	DIR *fds;

	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	fds = opendir(path);
	if (!fds)
		return false;
	while (!yes && (fd = readdir(fds))) {
		snprintf(path, sizeof(path), "/proc/%s/fd/%s", pid, fd->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		yes = !strcmp(target, "anon_inode:bpf_link") &&
		      fd_is_link(pid, fd->d_name, link_id);
	}
	closedir(fds);
	return yes;
}

int vz_xdp_link_holder(unsigned int link_id)
{
	struct dirent *p;
	int pid = 0;
	DIR *proc;

	proc = opendir("/proc");
	if (!proc)
		return 0;
	while (!pid && (p = readdir(proc))) {
		if (p->d_name[0] < '1' || p->d_name[0] > '9')
			continue;
		if (pid_holds_link(p->d_name, link_id))
			pid = atoi(p->d_name);
	}
	closedir(proc);
	return pid;
}

int vz_xdp_query(int ifindex, struct vz_xdp_attached *out)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	struct xdp_multiprog *mp;
	struct xdp_program *prog;
	char name[64];
	int err;

	memset(out, 0, sizeof(*out));
	out->ours = true;
	err = bpf_xdp_query(ifindex, 0, &q);
	if (err)
		return err;
	if (q.attach_mode == XDP_ATTACHED_NONE) {
		out->ours = false;
		return 0;
	}
	out->any = true;
	out->prog_id = q.drv_prog_id   ? q.drv_prog_id
		       : q.skb_prog_id ? q.skb_prog_id
				       : q.hw_prog_id;
	out->mode = q.drv_prog_id   ? XDP_MODE_NATIVE
		    : q.skb_prog_id ? XDP_MODE_SKB
				    : XDP_MODE_HW;
	/* libxdp sees through its dispatcher to the programs behind it. */
	mp = xdp_multiprog__get_from_ifindex(ifindex);
	if (!libxdp_get_error(mp) && mp) {
		if (xdp_multiprog__is_legacy(mp)) {
			prog = xdp_multiprog__main_prog(mp);
			append_name(out, prog ? xdp_program__name(prog) : "?");
		} else {
			for (prog = xdp_multiprog__next_prog(NULL, mp); prog;
			     prog = xdp_multiprog__next_prog(prog, mp))
				append_name(out, xdp_program__name(prog));
		}
		xdp_multiprog__close(mp);
	}
	if (!out->names[0]) {
		/* A dispatcher whose pins live in another bpffs: name it. */
		kernel_prog_name(out->prog_id, name, sizeof(name));
		append_name(out, name);
	}
	out->link_id = xdp_link_of(out->prog_id, ifindex);
	return 0;
}

int vz_xdp_detach_all(int ifindex)
{
	static const __u32 modes[] = { XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE };
	struct xdp_multiprog *mp;
	size_t i;
	int err = 0;

	mp = xdp_multiprog__get_from_ifindex(ifindex);
	if (!libxdp_get_error(mp) && mp) {
		err = xdp_multiprog__detach(mp);
		xdp_multiprog__close(mp);
		if (!err)
			return 0;
	}
	/* libxdp could not (pins in another bpffs): the kernel can. */
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		err = bpf_xdp_detach(ifindex, modes[i], NULL);
		if (err && err != -ENOENT && err != -EINVAL)
			return err;
	}
	return 0;
}

static bool targets(const struct bpf_link_info *info, const void *arg)
{
	return info->type == BPF_LINK_TYPE_TRACING &&
	       info->tracing.target_obj_id == *(const __u32 *)arg;
}

/* The program behind libxdp's dispatcher: an freplace link targets it. */
static __u32 component_of(__u32 dispatcher_id)
{
	struct bpf_link_info info;
	__u32 id;

	return find_link(targets, &dispatcher_id, &info, &id) ? info.prog_id
							      : 0;
}

bool vz_xdp_is_nf_name(const char *name)
{
	return !strncmp(name, VZ_XDP_PROG_PREFIX, strlen(VZ_XDP_PROG_PREFIX));
}

__u32 vz_xdp_nf_prog_id(__u32 attached_id, char *name, size_t len)
{
	__u32 id = 0;
	int attempt;

	for (attempt = 0; attempt < 2 && attached_id; attempt++) {
		kernel_prog_name(attached_id, name, len);
		if (vz_xdp_is_nf_name(name))
			return attached_id;
		id = attempt ? 0 : component_of(attached_id);
		attached_id = id;
	}
	snprintf(name, len, "%s", "");
	return 0;
}

const char *vz_xdp_mode_name(enum xdp_attach_mode mode)
{
	switch (mode) {
	case XDP_MODE_NATIVE:
		return "native";
	case XDP_MODE_SKB:
		return "generic";
	case XDP_MODE_HW:
		return "offload";
	default:
		return "unspecified";
	}
}
