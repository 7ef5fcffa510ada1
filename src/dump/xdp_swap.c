// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "dump/xdp_swap.h"
#include "runner/xdp_attach.h"

#define MAX_MAPS 64

static int prog_info(int fd, struct bpf_prog_info *info, __u32 *map_ids,
		     __u32 nmaps)
{
	__u32 len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	if (map_ids) {
		info->nr_map_ids = nmaps;
		info->map_ids = (__u64)(unsigned long)map_ids;
	}
	return bpf_obj_get_info_by_fd(fd, info, &len) ? -errno : 0;
}

static int attached_prog(struct vz_xdp_swap *s, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int ret = bpf_xdp_query(s->ifindex, 0, &q);

	if (ret) {
		snprintf(err, errlen, "cannot query %s: %s", s->ifname,
			 strerror(-ret));
		return ret;
	}
	if (q.drv_prog_id) {
		s->orig_id = q.drv_prog_id;
		s->mode_flag = XDP_FLAGS_DRV_MODE;
	} else if (q.skb_prog_id) {
		s->orig_id = q.skb_prog_id;
		s->mode_flag = XDP_FLAGS_SKB_MODE;
	} else {
		snprintf(err, errlen, "no NF runs on %s (no XDP program)",
			 s->ifname);
		return -ENOENT;
	}
	return 0;
}

int vz_swap_find(struct vz_xdp_swap *s, int ifindex, const char *ifname,
		 char *err, size_t errlen)
{
	struct bpf_prog_info info;
	char name[64];
	int ret, fd;

	memset(s, 0, sizeof(*s));
	s->orig_fd = s->dump_fd = -1;
	s->ifindex = ifindex;
	s->ifname = ifname;
	ret = attached_prog(s, err, errlen);
	if (ret)
		return ret;
	s->orig_fd = bpf_prog_get_fd_by_id(s->orig_id);
	if (s->orig_fd < 0 || prog_info(s->orig_fd, &info, NULL, 0)) {
		snprintf(err, errlen, "cannot open program %u on %s: %s",
			 s->orig_id, ifname, strerror(errno));
		return -errno;
	}
	s->nf_id = vz_xdp_nf_prog_id(s->orig_id, name, sizeof(name));
	fd = s->nf_id ? bpf_prog_get_fd_by_id(s->nf_id) : -1;
	if (fd < 0 || prog_info(fd, &info, NULL, 0) ||
	    !vz_xdp_is_nf_name(info.name)) {
		snprintf(err, errlen,
			 "no NF runs on %s (its XDP program %u is "
			 "not a veloz NF: with --dispatch, or not veloz's)",
			 ifname, s->orig_id);
		if (fd >= 0)
			close(fd);
		return -ENOENT;
	}
	close(fd);
	return 0;
}

/*
 * Each map of the dump build that the NF's program holds: the NF's, reused.
 * The others are made anew: the NF's program never touches them (clang
 * removed the code, e.g. vz_ports in an NF that never redirects), so they
 * cannot change what it does.
 */
static int reuse_maps(struct vz_xdp_swap *s, char *err, size_t errlen)
{
	__u32 ids[MAX_MAPS], n, i;
	struct bpf_prog_info info;
	struct bpf_map_info mi;
	struct bpf_map *map;
	int fd, nf_fd, ret, reused = 0;

	nf_fd = bpf_prog_get_fd_by_id(s->nf_id);
	if (nf_fd < 0)
		return -errno;
	ret = prog_info(nf_fd, &info, ids, MAX_MAPS);
	close(nf_fd);
	if (ret)
		return ret;
	n = info.nr_map_ids < MAX_MAPS ? info.nr_map_ids : MAX_MAPS;
	for (i = 0; i < n; i++) {
		fd = bpf_map_get_fd_by_id(ids[i]);
		if (fd < 0)
			continue;
		memset(&mi, 0, sizeof(mi));
		ret = bpf_obj_get_info_by_fd(fd, &mi, &(__u32){ sizeof(mi) });
		map = ret ? NULL
			  : bpf_object__find_map_by_name(s->obj, mi.name);
		if (!map) {
			close(fd);
			continue;
		}
		if (bpf_map__type(map) != mi.type ||
		    bpf_map__key_size(map) != mi.key_size ||
		    bpf_map__value_size(map) != mi.value_size) {
			snprintf(err, errlen,
				 "the dump build's map %s is not "
				 "the running NF's (rebuilt since it started?)",
				 mi.name);
			close(fd);
			return -EINVAL;
		}
		ret = bpf_map__reuse_fd(map, fd);
		close(fd); /* reuse_fd took its own copy */
		if (ret)
			return ret;
		reused++;
	}
	return reused ? 0 : -ENOENT;
}

int vz_swap_load(struct vz_xdp_swap *s, const char *path, char *err,
		 size_t errlen)
{
	struct bpf_program *prog;
	struct bpf_prog_info info;
	int ret;

	s->obj = bpf_object__open_file(path, NULL);
	if (!s->obj) {
		ret = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path,
			 strerror(-ret));
		return ret;
	}
	prog = bpf_object__next_program(s->obj, NULL);
	if (!prog)
		return snprintf(err, errlen, "%s has no program", path),
		       -EINVAL;
	ret = reuse_maps(s, err, errlen);
	if (ret) {
		if (!err[0])
			snprintf(err, errlen, "cannot share the NF's maps: %s",
				 strerror(-ret));
		return ret;
	}
	ret = bpf_object__load(s->obj);
	if (ret) {
		snprintf(err, errlen, "the kernel refused %s: %s", path,
			 strerror(-ret));
		return ret;
	}
	s->dump_fd = bpf_program__fd(prog);
	if (prog_info(s->dump_fd, &info, NULL, 0))
		return -errno;
	s->dump_id = info.id;
	return 0;
}

static void netns_ino(unsigned long *ino)
{
	struct stat st;

	*ino = stat("/proc/self/ns/net", &st) ? 0 : (unsigned long)st.st_ino;
}

static void state_path(char *out, size_t len, int ifindex)
{
	unsigned long ino;

	netns_ino(&ino);
	snprintf(out, len, VZ_DUMP_STATE_DIR "/net%lu-%d.state", ino, ifindex);
}

/* One line: pid, ifname, original id, dump id, mode flag. */
static int write_state(struct vz_xdp_swap *s)
{
	char tmp[160];
	FILE *f;
	int bad;

	mkdir("/run/veloz", 0755);
	mkdir(VZ_DUMP_STATE_DIR, 0755);
	state_path(s->state_path, sizeof(s->state_path), s->ifindex);
	snprintf(tmp, sizeof(tmp), "%s.tmp", s->state_path);
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "pid %d iface %s orig %u dump %u mode %u\n", (int)getpid(),
		s->ifname, s->orig_id, s->dump_id, s->mode_flag);
	bad = fflush(f) || ferror(f);
	if (fclose(f) || bad || rename(tmp, s->state_path)) {
		unlink(tmp);
		return -EIO;
	}
	return 0;
}

static int replace(int ifindex, int new_fd, int old_fd, __u32 mode_flag)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = old_fd);

	return bpf_xdp_attach(ifindex, new_fd, mode_flag | XDP_FLAGS_REPLACE,
			      &opts);
}

int vz_swap_in(struct vz_xdp_swap *s, char *err, size_t errlen)
{
	int ret = write_state(s);

	if (ret) {
		snprintf(err, errlen, "cannot write %s: %s", s->state_path,
			 strerror(-ret));
		return ret;
	}
	ret = replace(s->ifindex, s->dump_fd, s->orig_fd, s->mode_flag);
	if (ret) {
		unlink(s->state_path);
		snprintf(err, errlen, "cannot swap the dump build in on %s: %s",
			 s->ifname,
			 ret == -EEXIST ? "its program changed meanwhile"
					: strerror(-ret));
		return ret;
	}
	s->swapped = true;
	return 0;
}

int vz_swap_out(struct vz_xdp_swap *s, char *err, size_t errlen)
{
	int ret;

	if (!s->swapped)
		return 0;
	s->swapped = false;
	ret = replace(s->ifindex, s->orig_fd, s->dump_fd, s->mode_flag);
	unlink(s->state_path);
	if (ret == -EEXIST || ret == -ENOENT || ret == -ENODEV)
		snprintf(err, errlen,
			 "%s's program changed while capturing "
			 "(its run stopped?): left as it is",
			 s->ifname);
	else if (ret)
		snprintf(err, errlen, "cannot swap the NF back on %s: %s",
			 s->ifname, strerror(-ret));
	return ret;
}

void vz_swap_close(struct vz_xdp_swap *s)
{
	char err[256];

	if (s->swapped && vz_swap_out(s, err, sizeof(err)))
		fprintf(stderr, "veloz: %s\n", err);
	bpf_object__close(s->obj); /* closes dump_fd */
	if (s->orig_fd >= 0)
		close(s->orig_fd);
	memset(s, 0, sizeof(*s));
	s->orig_fd = s->dump_fd = -1;
}

static int read_state(const char *path, int *pid, __u32 *orig, __u32 *dump,
		      __u32 *mode)
{
	char ifname[64];
	FILE *f = fopen(path, "r");
	int n;

	if (!f)
		return -errno;
	n = fscanf(f, "pid %d iface %63s orig %u dump %u mode %u", pid, ifname,
		   orig, dump, mode);
	fclose(f);
	return n == 5 ? 0 : -EINVAL;
}

int vz_swap_restore_stale(int ifindex, const char *ifname, char *err,
			  size_t errlen)
{
	__u32 orig, dump, mode;
	char path[128];
	int pid, ofd, dfd, ret;

	state_path(path, sizeof(path), ifindex);
	if (read_state(path, &pid, &orig, &dump, &mode)) {
		snprintf(err, errlen, "no dump left anything on %s", ifname);
		return -ENOENT;
	}
	if (pid > 0 && !kill(pid, 0)) {
		snprintf(err, errlen,
			 "a dump (pid %d) is capturing on %s: "
			 "stop it instead",
			 pid, ifname);
		return -EBUSY;
	}
	ofd = bpf_prog_get_fd_by_id(orig);
	dfd = bpf_prog_get_fd_by_id(dump);
	if (ofd < 0 || dfd < 0) {
		snprintf(err, errlen,
			 "program %u is gone (its run stopped): "
			 "`ip link set dev %s %s off` removes the dump's",
			 ofd < 0 ? orig : dump, ifname,
			 mode == XDP_FLAGS_SKB_MODE ? "xdpgeneric" : "xdpdrv");
		ret = -ENOENT;
	} else {
		ret = replace(ifindex, ofd, dfd, mode);
		if (ret)
			snprintf(err, errlen,
				 "cannot put program %u back on "
				 "%s: %s",
				 orig, ifname, strerror(-ret));
	}
	if (!ret || ret == -ENOENT || ret == -EEXIST)
		unlink(path);
	if (ofd >= 0)
		close(ofd);
	if (dfd >= 0)
		close(dfd);
	return ret;
}
