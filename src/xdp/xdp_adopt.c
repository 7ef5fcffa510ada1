// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <linux/if_link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "common/clock.h"
#include "runner/xdp_attach.h"
#include "xdp/xdp_adopt.h"
#include "xdp/xdp_backend.h"

#define MAX_MAPS 64
/* How long a run told to leave may take: it stops at its next interval. */
#define LEAVE_WAIT_S 10.0

/* What a run recorded on one port (see xdp_adopt.h). */
struct record {
	char nf[64];
	char mode[16];
	char ctl[108];
	int pid;
	int nports;
	bool persist;
	__u32 prog_id;
	__u32 attached_id;
	__u64 config;
	double since;
};

static struct vz_xdp_run *xdp_of(const struct vz_us_run *run)
{
	return run->backend_state;
}

static __u32 mode_flag(const struct vz_xdp_run *x)
{
	return x->mode == XDP_MODE_SKB ? XDP_FLAGS_SKB_MODE
				       : XDP_FLAGS_DRV_MODE;
}

__u64 vz_xdp_config_hash(char **sets, int nsets)
{
	__u64 h = 14695981039346656037ull;
	const char *c;
	int i;

	for (i = 0; i < nsets; i++)
		for (c = sets[i];; c++) {
			h = (h ^ (unsigned char)*c) * 1099511628211ull;
			if (!*c)
				break;
		}
	return h;
}

/* ---- records -------------------------------------------------------------
 */

static void record_path(char *out, size_t len, const char *ifname)
{
	struct stat ns;

	if (stat("/proc/self/ns/net", &ns))
		ns.st_ino = 0;
	snprintf(out, len, VZ_PERSIST_DIR "/net%lu-%s.json",
		 (unsigned long)ns.st_ino, ifname);
}

/* Our own format, one line: "key": value, in the order written. */
static const char *json_at(const char *buf, const char *key)
{
	char pat[48];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(buf, pat);
	return p ? p + strlen(pat) : NULL;
}

static void json_str(const char *buf, const char *key, char *out, size_t len)
{
	const char *p = json_at(buf, key);

	if (!p || *p != '"') {
		out[0] = '\0';
		return;
	}
	p++;
	snprintf(out, len, "%.*s", (int)strcspn(p, "\""), p);
}

static double json_num(const char *buf, const char *key)
{
	const char *p = json_at(buf, key);

	return p ? strtod(p, NULL) : 0;
}

/* The record on IFNAME: 0, or -ENOENT when there is none to read. */
static int record_read(const char *ifname, struct record *r)
{
	char path[192], buf[2048], hex[24];
	size_t n;
	FILE *f;

	memset(r, 0, sizeof(*r));
	record_path(path, sizeof(path), ifname);
	f = fopen(path, "r");
	if (!f)
		return -ENOENT;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	json_str(buf, "nf", r->nf, sizeof(r->nf));
	json_str(buf, "mode", r->mode, sizeof(r->mode));
	json_str(buf, "ctl", r->ctl, sizeof(r->ctl));
	json_str(buf, "config", hex, sizeof(hex));
	r->config = strtoull(hex, NULL, 16);
	r->pid = (int)json_num(buf, "pid");
	r->nports = (int)json_num(buf, "nports");
	r->persist = json_at(buf, "persist") &&
		     !strncmp(json_at(buf, "persist"), "true", 4);
	r->prog_id = (__u32)json_num(buf, "prog_id");
	r->attached_id = (__u32)json_num(buf, "attached_id");
	r->since = json_num(buf, "since");
	return r->nf[0] ? 0 : -ENOENT;
}

static void record_write_port(struct vz_us_run *run, int port, __u32 prog_id)
{
	struct vz_xdp_run *x = xdp_of(run);
	char path[192], tmp[200];
	int i, bad;
	FILE *f;

	record_path(path, sizeof(path), run->ports[port].ifname);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		goto fail;
	fprintf(f,
		"{\"nf\": \"%s\", \"persist\": %s, \"pid\": %d, \"mode\": "
		"\"%s\", \"prog_id\": %u, \"attached_id\": %u, \"config\": "
		"\"%016llx\", \"since\": %.3f, \"ctl\": \"%s\", \"port\": %d, "
		"\"nports\": %d, \"ports\": [",
		run->nf.name, x->persist ? "true" : "false", (int)getpid(),
		vz_xdp_mode_name(x->mode), prog_id, x->attached_id[port],
		(unsigned long long)x->config_hash, x->since, run->ctl.path,
		port, run->nports);
	for (i = 0; i < run->nports; i++)
		fprintf(f, "%s\"%s\"", i ? ", " : "", run->ports[i].ifname);
	fprintf(f, "]}\n");
	bad = fflush(f) || ferror(f);
	if (!fclose(f) && !bad && !rename(tmp, path))
		return;
	unlink(tmp);
fail:
	/* without it a successor cannot adopt; the run itself is fine */
	vz_err("cannot write %s: %s", path, strerror(errno));
}

void vz_xdp_record_write(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	char name[64];
	__u32 prog_id;
	int i;

	if (x->dsp) /* the NF is behind the dispatch stage: not adoptable */
		return;
	mkdir("/run/veloz", 0755);
	mkdir(VZ_PERSIST_DIR, 0755);
	for (i = 0; i < run->nports; i++) {
		if (!x->attached[i])
			continue;
		prog_id = vz_xdp_nf_prog_id(x->attached_id[i], name,
					    sizeof(name));
		record_write_port(run, i, prog_id);
	}
}

void vz_xdp_record_remove(struct vz_us_run *run)
{
	char path[192];
	struct record r;
	int i;

	for (i = 0; i < run->nports; i++) {
		if (record_read(run->ports[i].ifname, &r) ||
		    r.pid != (int)getpid())
			continue; /* none, or a successor's */
		record_path(path, sizeof(path), run->ports[i].ifname);
		unlink(path);
	}
}

/* ---- what runs on the ports now ------------------------------------------
 */

/* The program on PORT's hook (0: none) and its attach mode. */
static int hook_prog(const struct vz_us_port *port, __u32 *id, __u32 *flag)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int ret = bpf_xdp_query(port->ifindex, 0, &q);

	if (ret) {
		vz_err("cannot query XDP on %s: %s", port->ifname,
		       strerror(-ret));
		return ret;
	}
	*id = q.drv_prog_id ? q.drv_prog_id : q.skb_prog_id;
	*flag = q.drv_prog_id ? XDP_FLAGS_DRV_MODE : XDP_FLAGS_SKB_MODE;
	return 0;
}

/* Does a live run hold PORT's lock? */
static bool port_held(const struct vz_us_port *port)
{
	struct vz_iface_lock lock;
	char err[256];

	if (vz_iface_lock(&lock, port->ifindex, port->ifname, err,
			  sizeof(err)) == -EBUSY)
		return true;
	vz_iface_unlock(&lock);
	return false;
}

/*
 * Each map of the running NF that this build has: reused, when it is the
 * same map (type, key, value, entries), refused otherwise. Maps only this
 * build has are created new at load.
 */
static int reuse_maps(struct vz_us_run *run, __u32 nf_id, const char *old_nf)
{
	struct bpf_prog_info info = { 0 };
	struct bpf_map_info mi;
	__u32 ids[MAX_MAPS], n, i, len = sizeof(info);
	struct bpf_map *map;
	int fd, ret;

	fd = bpf_prog_get_fd_by_id(nf_id);
	info.nr_map_ids = MAX_MAPS;
	info.map_ids = (__u64)(unsigned long)ids;
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len)) {
		vz_err("cannot read the running %s's maps: %s", old_nf,
		       strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	n = info.nr_map_ids < MAX_MAPS ? info.nr_map_ids : MAX_MAPS;
	for (i = 0; i < n; i++) {
		fd = bpf_map_get_fd_by_id(ids[i]);
		memset(&mi, 0, sizeof(mi));
		len = sizeof(mi);
		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &mi, &len))
			goto next;
		if (strchr(mi.name, '.')) /* .rodata, .bss: each build's own */
			goto next;
		bpf_object__for_each_map (map, run->nf.obj)
			if (!strncmp(bpf_map__name(map), mi.name,
				     sizeof(mi.name) - 1))
				break;
		if (!map)
			goto next;
		if (bpf_map__type(map) != mi.type ||
		    bpf_map__key_size(map) != mi.key_size ||
		    bpf_map__value_size(map) != mi.value_size ||
		    bpf_map__max_entries(map) != mi.max_entries) {
			vz_err("map %s of the running %s (key %u, value %u, "
			       "%u entries) is not this build's (key %u, value "
			       "%u, %u entries): not adopted, nothing changed",
			       mi.name, old_nf, mi.key_size, mi.value_size,
			       mi.max_entries, bpf_map__key_size(map),
			       bpf_map__value_size(map),
			       bpf_map__max_entries(map));
			close(fd);
			return -1;
		}
		ret = bpf_map__reuse_fd(map, fd);
		if (ret) {
			vz_err("cannot reuse map %s: %s", mi.name,
			       strerror(-ret));
			close(fd);
			return -1;
		}
	next:
		if (fd >= 0)
			close(fd); /* reuse_fd took its own copy */
	}
	return 0;
}

/* ---- deciding --------------------------------------------------------------
 */

/* One port: what runs on its hook, and what its run recorded. */
struct port_state {
	__u32 attached_id, flag, nf_id;
	char name[64]; /* the NF program's kernel name */
	struct record rec;
	bool have_rec; /* a record of this very program */
	bool held; /* its run still holds the port */
};

static int survey(struct vz_us_run *run, struct port_state *ps)
{
	int i;

	for (i = 0; i < run->nports; i++) {
		if (hook_prog(&run->ports[i], &ps[i].attached_id, &ps[i].flag))
			return -1;
		if (!ps[i].attached_id)
			continue;
		/* not an NF (the testbed's, a user's): claiming decides */
		ps[i].nf_id = vz_xdp_nf_prog_id(ps[i].attached_id, ps[i].name,
						sizeof(ps[i].name));
		if (!ps[i].nf_id)
			continue;
		ps[i].have_rec =
			!record_read(run->ports[i].ifname, &ps[i].rec) &&
			ps[i].rec.prog_id == ps[i].nf_id;
		ps[i].held = port_held(&run->ports[i]);
	}
	return 0;
}

/* The running NF is this run's NF, in this run's mode? */
static int same_nf(struct vz_us_run *run, const struct port_state *p)
{
	struct vz_xdp_run *x = xdp_of(run);
	const char *old = p->have_rec ? p->rec.nf : p->name;
	char want[16];

	snprintf(want, sizeof(want), VZ_XDP_PROG_PREFIX "%s", run->nf.name);
	if (strcmp(p->name, want) ||
	    (p->have_rec && strcmp(p->rec.nf, run->nf.name))) {
		vz_err("%s runs %s (prog %u), not %s: not adopted, nothing "
		       "changed (--replace removes it)",
		       run->ports[0].ifname, old, p->nf_id, run->nf.name);
		return -1;
	}
	if (p->flag != mode_flag(x)) {
		vz_err("%s runs %s in %s mode: adopt it with --backend %s; "
		       "nothing changed",
		       run->ports[0].ifname, old,
		       p->flag == XDP_FLAGS_SKB_MODE ? "generic" : "native",
		       p->flag == XDP_FLAGS_SKB_MODE ? "xdp-generic" : "xdp");
		return -1;
	}
	if (p->have_rec && p->rec.nports && p->rec.nports != run->nports) {
		vz_err("the running %s has %d ports, this run %d: not "
		       "adopted, nothing changed",
		       old, p->rec.nports, run->nports);
		return -1;
	}
	if (p->have_rec && p->rec.attached_id &&
	    p->rec.attached_id != p->attached_id) {
		vz_err("%s's program changed under its record; nothing changed",
		       run->ports[0].ifname);
		return -1;
	}
	return 0;
}

/* Adopt: 1; leave it to claiming (fresh, busy or stale): 0; refused: -1. */
static int decide(struct vz_us_run *run, const struct port_state *ps)
{
	struct vz_xdp_run *x = xdp_of(run);
	const struct port_state *p = &ps[0];
	int i, any = 0;

	for (i = 0; i < run->nports; i++)
		any += ps[i].nf_id != 0;
	if (!any || run->replace) {
		if (!any && x->take_over)
			fprintf(stderr,
				"veloz: no NF runs on %s to take over; "
				"starting %s\n",
				run->ports[0].ifname, run->nf.name);
		return 0;
	}
	for (i = 1; i < run->nports; i++)
		if (ps[i].nf_id != p->nf_id) {
			vz_err("%s and %s do not run the same NF program: not "
			       "adopted, nothing changed",
			       run->ports[0].ifname, run->ports[i].ifname);
			return -1;
		}
	/* A live run is upgraded on request only; a dead one if it said so. */
	if (!x->take_over && (p->held || !p->have_rec || !p->rec.persist))
		return 0;
	if (p->held && !p->have_rec) {
		vz_err("the run on %s left no record to take over from; stop "
		       "it first",
		       run->ports[0].ifname);
		return -1;
	}
	if (p->held && !p->rec.ctl[0]) {
		vz_err("the run on %s (pid %d) has no control socket to be "
		       "told to leave by",
		       run->ports[0].ifname, p->rec.pid);
		return -1;
	}
	return same_nf(run, p) ? -1 : 1;
}

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Keep what the swap needs: each port's program, and who to tell. */
static int hold_old(struct vz_us_run *run, const struct port_state *ps)
{
	struct vz_xdp_run *x = xdp_of(run);
	int i;

	for (i = 0; i < run->nports; i++) {
		x->old_id[i] = ps[i].attached_id;
		x->old_fd[i] = bpf_prog_get_fd_by_id(ps[i].attached_id);
		if (x->old_fd[i] < 0) {
			vz_err("the program on %s went away while it was "
			       "being adopted; nothing changed",
			       run->ports[i].ifname);
			return -1;
		}
		run->adopt_id[i] = ps[i].attached_id;
		run->claim_later[i] = ps[i].held;
	}
	if (ps[0].held) {
		x->old_pid = ps[0].rec.pid;
		snprintf(x->old_ctl, sizeof(x->old_ctl), "%s", ps[0].rec.ctl);
	}
	return 0;
}

int vz_xdp_adopt(struct vz_us_run *run)
{
	static struct port_state ps[VZ_MAX_PORTS];
	struct vz_xdp_run *x = xdp_of(run);
	const struct record *r = &ps[0].rec;
	int ret;

	memset(ps, 0, sizeof(ps));
	if (x->policy >= 0 || survey(run, ps))
		return x->policy >= 0 ? 0 : 1;
	ret = decide(run, ps);
	if (ret <= 0)
		return ret < 0 ? 1 : 0;
	if (reuse_maps(run, ps[0].nf_id, run->nf.name) || hold_old(run, ps)) {
		vz_xdp_adopt_close(run);
		return 1;
	}
	run->adopted = true;
	x->since = ps[0].have_rec && r->since > 0 ? r->since : wall_now();
	fprintf(stderr, "veloz: adopting %s (prog %u) on %s%s%s\n",
		run->nf.name, ps[0].nf_id, run->ports[0].ifname,
		run->nports > 1 ? " and the other ports" : "",
		ps[0].held ? " from the run that holds it" : "");
	if (ps[0].have_rec && r->config != x->config_hash)
		fprintf(stderr,
			"veloz: the config differs from the running "
			"%s's; this run's applies from now on\n",
			run->nf.name);
	return 0;
}

void vz_xdp_adopt_close(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	int i;

	for (i = 0; i < VZ_MAX_PORTS; i++) {
		if (x->old_fd[i] >= 0)
			close(x->old_fd[i]);
		x->old_fd[i] = -1;
	}
}

/* ---- swapping and handing over ---------------------------------------------
 */

static int replace(int ifindex, int new_fd, int old_fd, __u32 flag)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = old_fd);

	return bpf_xdp_attach(ifindex, new_fd, flag | XDP_FLAGS_REPLACE, &opts);
}

int vz_xdp_adopt_swap(struct vz_us_run *run, int prog_fd)
{
	struct vz_xdp_run *x = xdp_of(run);
	int i, err;

	for (i = 0; i < run->nports; i++) {
		err = replace(run->ports[i].ifindex, prog_fd, x->old_fd[i],
			      mode_flag(x));
		if (!err) {
			x->attached[i] = true;
			continue;
		}
		vz_err("cannot swap %s in for the running one on %s: %s%s",
		       run->nf.name, run->ports[i].ifname, strerror(-err),
		       err == -EEXIST ? " (it changed meanwhile)" : "");
		/* the ports already swapped get the old program back */
		while (--i >= 0) {
			replace(run->ports[i].ifindex, x->old_fd[i], prog_fd,
				mode_flag(x));
			x->attached[i] = false;
		}
		return err;
	}
	return 0;
}

/* Tell the run at PATH to leave: its control socket's "leave". */
static int send_leave(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	char reply[256] = "";
	ssize_t n;
	int fd, ret = -EIO;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    write(fd, "leave\n", 6) != 6) {
		ret = -errno;
		goto out;
	}
	n = read(fd, reply, sizeof(reply) - 1);
	if (n > 0 && !strncmp(reply, "ok", 2))
		ret = 0;
out:
	close(fd);
	return ret;
}

int vz_xdp_adopt_finish(struct vz_us_run *run)
{
	struct vz_xdp_run *x = xdp_of(run);
	int ret;

	vz_xdp_adopt_close(run);
	if (!x->old_pid)
		return 0;
	ret = send_leave(x->old_ctl);
	if (ret) {
		/* its program is off the hook: stopping cannot detach ours */
		fprintf(stderr,
			"veloz: pid %d did not take \"leave\" (%s); stopping "
			"it\n",
			x->old_pid, strerror(-ret));
		kill(x->old_pid, SIGTERM);
	}
	if (!vz_claim_left_ports(run, vz_now_s() + LEAVE_WAIT_S))
		goto done;
	fprintf(stderr, "veloz: pid %d did not leave in %.0f s; killing it\n",
		x->old_pid, LEAVE_WAIT_S);
	kill(x->old_pid, SIGKILL);
	if (vz_claim_left_ports(run, vz_now_s() + 2)) {
		vz_err("the ports are still held after pid %d was killed; "
		       "%s stays attached for the next run to adopt",
		       x->old_pid, run->nf.name);
		/* the old program is gone: detaching would leave none */
		x->persist = true;
		return -1;
	}
done:
	fprintf(stderr, "veloz: pid %d left; %s is this run's now\n",
		x->old_pid, run->nf.name);
	return 0;
}
