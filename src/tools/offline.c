// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "common/clock.h"
#include "tools/offline.h"

/* ---- xdp: BPF_PROG_TEST_RUN ---------------------------------------------- */

static int map_fd(struct vz_nf *nf, const char *name)
{
	struct bpf_map *map = bpf_object__find_map_by_name(nf->obj, name);

	return map ? bpf_map__fd(map) : -1;
}

/*
 * A timed test run (repeat > 1) adds the program to the kernel's XDP
 * dispatcher before its loop and removes it after, and each change waits
 * for an RCU grace period: milliseconds a call, whatever the repeat. The
 * dispatcher counts users per program, so while the program is attached to
 * a device those changes are no-ops and the loop still makes the same
 * direct call. The device is the loopback of a network namespace of this
 * process's own: down, so no frame crosses it, seen by no one else, and
 * gone with the process. This has to happen before anything looks a device
 * up, so that the port map and the test runs' receive queue are the
 * namespace's. Without CAP_SYS_ADMIN, or if the attach fails, timing works
 * as before, only slower.
 */
static bool xdp_private_netns(__u64 repeat)
{
	return repeat > 1 && !unshare(CLONE_NEWNET);
}

/* Generic mode: loopback has no driver hook; a link detaches on close. */
static int xdp_hold(struct vz_offline *o, __u32 lo)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = XDP_FLAGS_SKB_MODE);

	return bpf_link_create(o->prog_fd, (int)lo, BPF_XDP, &opts);
}

static int xdp_open(struct vz_offline *o, __u64 repeat)
{
	struct bpf_program *prog = vz_nf_program(o->nf);
	bool private;
	__u32 port, lo;
	cpu_set_t cpus;
	int err, fd;

	if (!prog) {
		vz_err("%s has no XDP program", o->nf->name);
		return -EINVAL;
	}
	private = xdp_private_netns(repeat);
	lo = if_nametoindex("lo");
	err = bpf_object__load(o->nf->obj);
	if (err) {
		if (err == -EPERM)
			vz_err("the xdp backend needs root (CAP_BPF and "
			       "CAP_PERFMON) to load the program");
		else
			vz_err("the kernel refused to load %s: %s (run with "
			       "VELOZ_DEBUG=2 for the verifier log)",
			       o->nf->name, strerror(-err));
		return err;
	}
	o->prog_fd = bpf_program__fd(prog);
	if (private)
		o->hold_fd = xdp_hold(o, lo); /* a failure only costs time */
	/*
	 * Test runs never transmit, but bpf_redirect_map() needs a device in
	 * the slot to say REDIRECT; loopback is one every namespace has.
	 */
	fd = map_fd(o->nf, "vz_ports");
	for (port = 0; fd >= 0 && port < VZ_MAX_PORTS; port++) {
		if (bpf_map_update_elem(fd, &port, &lo, 0)) {
			vz_err("cannot fill the port map: %s", strerror(errno));
			return -errno;
		}
	}
	o->stats_fd = map_fd(o->nf, "vz_stats");
	o->redirects_fd = map_fd(o->nf, "vz_redirects");
	o->ncpus = libbpf_num_possible_cpus();
	o->percpu = calloc((size_t)o->ncpus, sizeof(*o->percpu));
	o->redirects = calloc((size_t)VZ_MAX_PORTS * (size_t)o->ncpus,
			      sizeof(*o->redirects));
	if (!o->percpu || !o->redirects || o->stats_fd < 0 ||
	    o->redirects_fd < 0)
		return -ENOMEM;
	/* Stay on one CPU, so per-CPU maps behave as one native worker's. */
	CPU_ZERO(&cpus);
	CPU_SET(sched_getcpu(), &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
	return 0;
}

static __u64 percpu_packets(struct vz_offline *o, int fd, __u32 key)
{
	__u64 total = 0;
	int cpu;

	if (bpf_map_lookup_elem(fd, &key, o->percpu))
		return 0;
	for (cpu = 0; cpu < o->ncpus; cpu++)
		total += o->percpu[cpu].packets;
	return total;
}

/*
 * The port of the last redirect: the one whose counter moved. (The XDP
 * program's redirect target is not visible to a test run otherwise.) One
 * batch read of every port's per-CPU counters: this runs per redirected frame.
 */
static int xdp_redirect_port(struct vz_offline *o)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	__u32 keys[VZ_MAX_PORTS], count = VZ_MAX_PORTS, next, i;
	const struct vz_stat *stat;
	int cpu, found = -1;
	__u64 now;

	/* arrays answer ENOENT once the batch reaches their end */
	if (bpf_map_lookup_batch(o->redirects_fd, NULL, &next, keys,
				 o->redirects, &count, &opts) &&
	    errno != ENOENT)
		return -1;
	for (i = 0; i < count; i++) {
		stat = o->redirects + (size_t)i * (size_t)o->ncpus;
		for (now = 0, cpu = 0; cpu < o->ncpus; cpu++)
			now += stat[cpu].packets;
		if (keys[i] >= VZ_MAX_PORTS)
			continue;
		if (now != o->redirected[keys[i]] && found < 0)
			found = (int)keys[i];
		o->redirected[keys[i]] = now;
	}
	return found;
}

static int xdp_run(struct vz_offline *o, const __u8 *pkt, __u32 len, __u8 *out,
		   struct vz_offline_result *res)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt,
		    .data_size_in = len, .data_out = out,
		    .data_size_out = VZ_OFFLINE_OUT_MAX, .repeat = 1);

	if (bpf_prog_test_run_opts(o->prog_fd, &opts)) {
		vz_err("BPF_PROG_TEST_RUN failed on a %u-byte frame: %s", len,
		       strerror(errno));
		return -errno;
	}
	res->verdict = (int)opts.retval;
	res->len_out = opts.data_size_out;
	res->port =
		res->verdict == VZ_REDIRECT_VERDICT ? xdp_redirect_port(o) : -1;
	return 0;
}

/* ---- native -------------------------------------------------------------- */

static int native_open(struct vz_offline *o)
{
	struct vz_map *ports = vz_native_map(&o->nf->native, "vz_ports");
	__u32 port, present = 1;

	for (port = 0; ports && port < VZ_MAX_PORTS; port++)
		vz_map_write(ports, &port, &present, 0);
	o->frame = aligned_alloc(64, VZ_HEADROOM + VZ_FRAME_MAX + 64);
	return o->frame ? 0 : -ENOMEM;
}

static void native_ctx(struct vz_offline *o, struct vz_ctx *ctx,
		       const __u8 *pkt, __u32 len)
{
	__u32 linear = len < VZ_LINEAR_MAX ? len : VZ_LINEAR_MAX;

	memset(ctx, 0, sizeof(*ctx));
	/*
	 * The kernel's test runs start from a zeroed buffer (kzalloc): bytes an
	 * NF claims with vz_adjust_head() and does not write read as 0 there,
	 * so they must here too.
	 */
	memset(o->frame, 0, VZ_HEADROOM);
	memcpy(o->frame + VZ_HEADROOM, pkt, linear);
	ctx->data_hard_start = o->frame;
	ctx->data = o->frame + VZ_HEADROOM;
	ctx->data_end = ctx->data + linear;
	ctx->frags_len = len - linear;
}

static void native_run(struct vz_offline *o, const __u8 *pkt, __u32 len,
		       __u8 *out, struct vz_offline_result *res)
{
	struct vz_ctx ctx;
	__u32 linear;

	native_ctx(o, &ctx, pkt, len);
	res->verdict = vz_native_run(&o->nf->native, &ctx);
	res->port = res->verdict == VZ_REDIRECT_VERDICT ? (int)ctx.redirect_port
							: -1;
	/* Output: the linear part as the NF left it, then the fragments. */
	linear = (__u32)(ctx.data_end - ctx.data);
	memcpy(out, ctx.data, linear);
	memcpy(out + linear, pkt + (len - ctx.frags_len), ctx.frags_len);
	res->len_out = linear + ctx.frags_len;
}

/* ---- both ---------------------------------------------------------------- */

int vz_offline_open(struct vz_offline *o, struct vz_nf *nf, bool xdp,
		    __u64 repeat)
{
	memset(o, 0, sizeof(*o));
	o->nf = nf;
	o->xdp = xdp;
	o->prog_fd = o->stats_fd = o->redirects_fd = o->hold_fd = -1;
	return xdp ? xdp_open(o, repeat) : native_open(o);
}

void vz_offline_close(struct vz_offline *o)
{
	if (o->xdp && o->hold_fd >= 0) /* a zeroed one was never opened */
		close(o->hold_fd);
	free(o->percpu);
	free(o->redirects);
	free(o->frame);
	memset(o, 0, sizeof(*o));
}

int vz_offline_run(struct vz_offline *o, const __u8 *pkt, __u32 len, __u8 *out,
		   struct vz_offline_result *res)
{
	if (o->xdp)
		return xdp_run(o, pkt, len, out, res);
	native_run(o, pkt, len, out, res);
	return 0;
}

int vz_offline_time(struct vz_offline *o, const __u8 *pkt, __u32 len,
		    __u64 repeat, double *ns)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt,
		    .data_size_in = len, .repeat = (__u32)repeat);
	struct vz_ctx ctx;
	__u64 i, t0;

	if (o->xdp) {
		/* the kernel's own loop and clock */
		if (bpf_prog_test_run_opts(o->prog_fd, &opts)) {
			vz_err("timed BPF_PROG_TEST_RUN failed: %s",
			       strerror(errno));
			return -errno;
		}
		*ns = opts.duration;
		xdp_redirect_port(o); /* the timing runs moved counters */
		return 0;
	}
	/* Like the kernel's loop: same buffer, no reset between runs. */
	native_ctx(o, &ctx, pkt, len);
	t0 = vz_now_ns();
	for (i = 0; i < repeat; i++)
		vz_native_run(&o->nf->native, &ctx);
	*ns = (double)(vz_now_ns() - t0) / (double)repeat;
	return 0;
}

int vz_offline_counts(struct vz_offline *o, __u64 counted[VZ_VERDICT_COUNT])
{
	struct vz_stat values[VZ_MAX_WORKERS];
	struct vz_map *map;
	__u32 v;

	for (v = 0; v < VZ_VERDICT_COUNT; v++) {
		if (o->xdp) {
			counted[v] = percpu_packets(o, o->stats_fd, v);
			continue;
		}
		map = vz_native_map(&o->nf->native, "vz_stats");
		if (!map || vz_map_read(map, &v, values))
			return -ENOENT;
		counted[v] = values[0].packets; /* one worker */
	}
	return 0;
}
