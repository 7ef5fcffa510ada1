// SPDX-License-Identifier: BSD-2-Clause
/*
 * The loader of the XDP dispatch stage: the NF as a cpumap program on CPUs
 * 0..workers-1, the dispatcher's maps filled before libxdp loads and
 * attaches it (so its first frame already has a CPU to go to), and the
 * userspace half of the policies: active set changes, buckets rebalancing,
 * flow loads recounted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/clock.h"
#include "dispatch/xdp_stage.h"

/* xdp_stage.bpf.o, as bytes (meson embeds it). */
static const unsigned char vz_dispatch_bpf[] = {
#include "xdp_stage.bpf.inc"
};

#define VZ_DSP_IMBALANCE 0.10 /* act when max > (1 + this) * mean */

struct vz_xdp_dispatch {
	struct bpf_object *obj;
	int policy;
	unsigned int workers;
	int ncpus; /* possible CPUs: per-CPU values */
	struct vz_dsp_config cfg;
	int cfg_fd, cpu_map_fd, flows_fd, cpu_pkts_fd, counters_fd;
	int bkt_cpu_fd, bkt_next_fd, bkt_pkts_fd;
	__u32 bkt_next[VZ_DSP_BUCKETS]; /* what userspace last asked */
	__u64 bkt_total[VZ_DSP_BUCKETS]; /* packets so far */
	__u64 bkt_delta[VZ_DSP_BUCKETS]; /* packets in the last interval */
	__u64 buckets_requested;
	__u64 rebalances;
	__u64 flows;
	__u64 *percpu; /* ncpus values */
};

int vz_xdp_dispatch_policy_parse(const char *name)
{
	return vz_dispatch_policy_parse(name);
}

const char *vz_xdp_dispatch_policy_name(int policy)
{
	return vz_dispatch_policy_name((unsigned int)policy);
}

/* Is CPU `cpu` in the kernel's online list ("0-3,5")? */
static int cpu_online(unsigned int cpu)
{
	char buf[1024], *p = buf, *end;
	unsigned long lo, hi;
	FILE *f = fopen("/sys/devices/system/cpu/online", "r");
	int found = 0;

	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	while (*p && *p != '\n') {
		lo = strtoul(p, &end, 10);
		if (end == p)
			return -EINVAL;
		hi = lo;
		p = end;
		if (*p == '-') {
			hi = strtoul(p + 1, &end, 10);
			p = end;
		}
		if (cpu >= lo && cpu <= hi)
			found = 1;
		if (*p == ',')
			p++;
	}
	return found;
}

/*
 * Can a cpumap hold an XDP program on this kernel (Linux 5.9+)? A program
 * that passes everything, loaded as BPF_XDP_CPUMAP and put in a one-entry
 * cpumap for CPU 0; both are gone when this returns.
 */
static int probe_cpumap_prog(char *err, size_t errlen)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K,
		  .dst_reg = BPF_REG_0,
		  .imm = XDP_PASS },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = BPF_XDP_CPUMAP);
	struct bpf_cpumap_val val = { .qsize = 16 };
	int prog_fd, map_fd, ret = 0;
	__u32 key = 0;

	prog_fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "vz_probe_cpumap", "GPL",
				insns, 2, &opts);
	if (prog_fd < 0) {
		ret = -errno;
		snprintf(err, errlen,
			 "this kernel cannot load XDP programs for a cpumap "
			 "(needs Linux 5.9 or later): %s",
			 strerror(-ret));
		return ret;
	}
	map_fd = bpf_map_create(BPF_MAP_TYPE_CPUMAP, "vz_probe_cpumap",
				sizeof(key), sizeof(val), 1, NULL);
	if (map_fd < 0) {
		ret = -errno;
	} else {
		val.bpf_prog.fd = prog_fd;
		if (bpf_map_update_elem(map_fd, &key, &val, 0))
			ret = -errno;
		close(map_fd);
	}
	close(prog_fd);
	if (ret)
		snprintf(err, errlen,
			 "this kernel cannot run XDP programs in a cpumap "
			 "(needs Linux 5.9 or later): %s",
			 strerror(-ret));
	return ret;
}

int vz_xdp_dispatch_check(unsigned int workers, char *err, size_t errlen)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int cpu;
	int ret;

	if (workers < 1 || workers > VZ_DSP_MAX_CPUS ||
	    (online > 0 && workers > (unsigned long)online)) {
		snprintf(err, errlen,
			 "--workers must be between 1 and %ld (the online "
			 "CPUs, at most %d) with --dispatch, not %u",
			 online > 0 && online < VZ_DSP_MAX_CPUS
				 ? online
				 : (long)VZ_DSP_MAX_CPUS,
			 VZ_DSP_MAX_CPUS, workers);
		return -EINVAL;
	}
	for (cpu = 0; cpu < workers; cpu++) {
		ret = cpu_online(cpu);
		if (ret < 0) {
			snprintf(err, errlen, "cannot read the online CPUs: %s",
				 strerror(-ret));
			return ret;
		}
		if (!ret) {
			snprintf(err, errlen,
				 "CPU %u is offline: --dispatch runs the NF on "
				 "CPUs 0..%u",
				 cpu, workers - 1);
			return -EINVAL;
		}
	}
	return probe_cpumap_prog(err, errlen);
}

/*
 * Create the map now and let libbpf reuse it when libxdp loads the object,
 * so it is filled before the dispatcher sees its first frame.
 */
static int precreate(struct bpf_map *map, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts,
		    .map_flags = bpf_map__map_flags(map));
	int fd, ret;

	fd = bpf_map_create(bpf_map__type(map), bpf_map__name(map),
			    bpf_map__key_size(map), bpf_map__value_size(map),
			    bpf_map__max_entries(map), &opts);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen,
			 "cannot create the dispatcher's map %s: %s",
			 bpf_map__name(map), strerror(-ret));
		return ret;
	}
	ret = bpf_map__reuse_fd(map, fd);
	close(fd);
	if (ret) {
		snprintf(err, errlen,
			 "cannot set up the dispatcher's map %s: %s",
			 bpf_map__name(map), strerror(-ret));
		return ret;
	}
	return bpf_map__fd(map);
}

static int map_fd(struct vz_xdp_dispatch *d, const char *name, char *err,
		  size_t errlen)
{
	struct bpf_map *map = bpf_object__find_map_by_name(d->obj, name);

	if (!map) {
		snprintf(err, errlen, "the dispatcher has no map %s", name);
		return -ENOENT;
	}
	return precreate(map, err, errlen);
}

static int write_config(struct vz_xdp_dispatch *d)
{
	__u32 zero = 0;

	return bpf_map_update_elem(d->cfg_fd, &zero, &d->cfg, 0) ? -errno : 0;
}

static void set_active_cpus(struct vz_xdp_dispatch *d, unsigned int n)
{
	unsigned int i;

	d->cfg.view.nactive = n;
	d->cfg.active_mask = 0;
	memset(d->cfg.active, 0, sizeof(d->cfg.active));
	for (i = 0; i < n; i++) {
		d->cfg.active[i] = i;
		d->cfg.active_mask |= 1ull << i;
	}
}

/* The NF as the cpumap's program: its own object, loaded here. */
static int load_nf(struct vz_xdp_dispatch *d, struct bpf_object *nf_obj,
		   char *err, size_t errlen)
{
	struct bpf_program *prog = bpf_object__next_program(nf_obj, NULL);
	struct bpf_cpumap_val val = { .qsize = VZ_DSP_QSIZE };
	__u32 cpu;
	int ret;

	if (!prog) {
		snprintf(err, errlen, "the NF object has no program");
		return -ENOENT;
	}
	ret = bpf_program__set_expected_attach_type(prog, BPF_XDP_CPUMAP);
	if (!ret)
		ret = bpf_object__load(nf_obj);
	if (ret) {
		snprintf(err, errlen,
			 "cannot load %s as a cpumap program: %s (run with "
			 "LIBBPF_LOG_LEVEL=debug for the verifier's log)",
			 bpf_program__name(prog), strerror(-ret));
		return ret;
	}
	val.bpf_prog.fd = bpf_program__fd(prog);
	for (cpu = 0; cpu < d->workers; cpu++) {
		if (bpf_map_update_elem(d->cpu_map_fd, &cpu, &val, 0)) {
			ret = -errno;
			snprintf(err, errlen,
				 "cannot run %s in the cpumap on CPU %u: %s",
				 bpf_program__name(prog), cpu, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static int init_buckets(struct vz_xdp_dispatch *d)
{
	__u32 b, cpu;

	for (b = 0; b < VZ_DSP_BUCKETS; b++) {
		cpu = b % d->workers;
		d->bkt_next[b] = cpu;
		if (bpf_map_update_elem(d->bkt_cpu_fd, &b, &cpu, 0) ||
		    bpf_map_update_elem(d->bkt_next_fd, &b, &cpu, 0))
			return -errno;
	}
	return 0;
}

/* The stage's maps, by name: 0, or -1 with the one missing in err. */
static int find_maps(struct vz_xdp_dispatch *d, char *err, size_t errlen)
{
	if ((d->cfg_fd = map_fd(d, "dsp_config", err, errlen)) < 0 ||
	    (d->cpu_map_fd = map_fd(d, "cpu_map", err, errlen)) < 0 ||
	    (d->flows_fd = map_fd(d, "dsp_flows", err, errlen)) < 0 ||
	    (d->cpu_pkts_fd = map_fd(d, "dsp_cpu_pkts", err, errlen)) < 0 ||
	    (d->counters_fd = map_fd(d, "dsp_counters", err, errlen)) < 0 ||
	    (d->bkt_cpu_fd = map_fd(d, "dsp_bkt_cpu", err, errlen)) < 0 ||
	    (d->bkt_next_fd = map_fd(d, "dsp_bkt_next", err, errlen)) < 0 ||
	    map_fd(d, "dsp_bkt_seen", err, errlen) < 0 ||
	    (d->bkt_pkts_fd = map_fd(d, "dsp_bkt_pkts", err, errlen)) < 0)
		return -1;
	return 0;
}

struct vz_xdp_dispatch *vz_xdp_dispatch_open(int policy, unsigned int workers,
					     struct bpf_object *nf_obj,
					     char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "vz_dispatch");
	struct vz_xdp_dispatch *d = calloc(1, sizeof(*d));
	int ret;

	if (!d) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	d->policy = policy;
	d->workers = workers;
	d->ncpus = libbpf_num_possible_cpus();
	d->percpu =
		calloc(d->ncpus > 0 ? (size_t)d->ncpus : 1, sizeof(*d->percpu));
	d->obj = bpf_object__open_mem(vz_dispatch_bpf, sizeof(vz_dispatch_bpf),
				      &opts);
	if (!d->percpu || d->ncpus <= 0 || !d->obj) {
		snprintf(err, errlen, "cannot open the dispatcher: %s",
			 strerror(errno));
		d->obj = NULL;
		goto fail;
	}
	if (find_maps(d, err, errlen))
		goto fail;
	d->cfg.view.policy = (__u32)policy;
	d->cfg.view.migrate_gap = VZ_DSP_MIGRATE_GAP;
	d->cfg.drain_ns = VZ_DSP_DRAIN_NS;
	d->cfg.aging_ns = VZ_DSP_AGING_NS;
	set_active_cpus(d, workers);
	ret = write_config(d);
	if (!ret)
		ret = init_buckets(d);
	if (ret) {
		snprintf(err, errlen, "cannot configure the dispatcher: %s",
			 strerror(-ret));
		goto fail;
	}
	if (load_nf(d, nf_obj, err, errlen))
		goto fail;
	return d;
fail:
	vz_xdp_dispatch_close(d);
	return NULL;
}

struct bpf_object *vz_xdp_dispatch_object(struct vz_xdp_dispatch *d)
{
	return d->obj;
}

/*
 * The maps go when the last reference does: ours here, the attached
 * dispatcher's at detach (the cpumap's CPU threads stop then).
 */
void vz_xdp_dispatch_close(struct vz_xdp_dispatch *d)
{
	if (!d)
		return;
	bpf_object__close(d->obj);
	free(d->percpu);
	free(d);
}

/* Sum of a per-CPU __u64 over the CPUs; 0 when unreadable. */
static __u64 percpu_sum(struct vz_xdp_dispatch *d, int fd, __u32 key)
{
	__u64 sum = 0;
	int c;

	if (bpf_map_lookup_elem(fd, &key, d->percpu))
		return 0;
	for (c = 0; c < d->ncpus; c++)
		sum += d->percpu[c];
	return sum;
}

/* Packets of the last interval per active CPU, by where buckets go. */
static void bucket_loads(struct vz_xdp_dispatch *d, __u64 *load)
{
	__u32 b;

	memset(load, 0, sizeof(*load) * VZ_DSP_MAX_CPUS);
	for (b = 0; b < VZ_DSP_BUCKETS; b++)
		load[d->bkt_next[b] % VZ_DSP_MAX_CPUS] += d->bkt_delta[b];
}

static void move_bucket(struct vz_xdp_dispatch *d, __u32 b, __u32 cpu,
			__u64 *load)
{
	load[d->bkt_next[b]] -= d->bkt_delta[b];
	load[cpu] += d->bkt_delta[b];
	d->bkt_next[b] = cpu;
	if (!bpf_map_update_elem(d->bkt_next_fd, &b, &cpu, 0))
		d->buckets_requested++;
}

static __u32 least_loaded(const struct vz_xdp_dispatch *d, const __u64 *load)
{
	__u32 i, best = d->cfg.active[0];

	for (i = 1; i < d->cfg.view.nactive; i++)
		if (load[d->cfg.active[i]] < load[best])
			best = d->cfg.active[i];
	return best;
}

int vz_xdp_dispatch_set_active(struct vz_xdp_dispatch *d, unsigned int n)
{
	__u64 load[VZ_DSP_MAX_CPUS];
	__u32 b;
	int ret;

	if (n < 1 || n > d->workers)
		return -EINVAL;
	set_active_cpus(d, n);
	ret = write_config(d);
	if (ret || d->policy != VZ_DSP_BUCKETS_POLICY)
		return ret;
	/* only the buckets of the CPUs left out move, each to the idlest */
	bucket_loads(d, load);
	for (b = 0; b < VZ_DSP_BUCKETS; b++)
		if (!(d->cfg.active_mask >> d->bkt_next[b] & 1))
			move_bucket(d, b, least_loaded(d, load), load);
	return 0;
}

static int by_load_desc(const void *a, const void *b, void *arg)
{
	const __u64 *delta = arg;
	__u64 x = delta[*(const __u32 *)a], y = delta[*(const __u32 *)b];

	return x < y ? 1 : x > y ? -1 : 0;
}

/*
 * From CPU hi to lo: the largest of hi's buckets that fit in half the
 * difference of their loads, or if none fits, the smallest one that still
 * narrows it. Whether any moved.
 */
static bool move_buckets(struct vz_xdp_dispatch *d, __u32 hi, __u32 lo,
			 __u64 *load)
{
	__u32 cand[VZ_DSP_BUCKETS], ncand = 0, i, b;
	__u64 want = (load[hi] - load[lo]) / 2;
	bool moved = false;

	for (b = 0; b < VZ_DSP_BUCKETS; b++)
		if (d->bkt_next[b] == hi && d->bkt_delta[b])
			cand[ncand++] = b;
	qsort_r(cand, ncand, sizeof(cand[0]), by_load_desc, d->bkt_delta);
	for (i = 0; i < ncand && want; i++) {
		b = cand[i];
		if (d->bkt_delta[b] <= want) {
			want -= d->bkt_delta[b];
			move_bucket(d, b, lo, load);
			moved = true;
		}
	}
	if (moved)
		return true;
	/* all too big: the smallest, if it narrows the gap */
	for (i = ncand; i-- > 0;) {
		b = cand[i];
		if (d->bkt_delta[b] < load[hi] - load[lo]) {
			move_bucket(d, b, lo, load);
			return true;
		}
	}
	return false;
}

/*
 * RSS++: when the busiest active CPU carries more than (1 + imbalance)
 * times the mean, hand the idlest the fewest buckets that bring the two
 * closest: the largest buckets that fit in half the difference, and if
 * none fits, the smallest one that still narrows it.
 */
static void rebalance(struct vz_xdp_dispatch *d)
{
	__u64 load[VZ_DSP_MAX_CPUS], total = 0;
	__u32 i, hi, lo;

	if (d->cfg.view.nactive < 2)
		return;
	bucket_loads(d, load);
	hi = lo = d->cfg.active[0];
	for (i = 0; i < d->cfg.view.nactive; i++) {
		__u32 c = d->cfg.active[i];

		total += load[c];
		if (load[c] > load[hi])
			hi = c;
		if (load[c] < load[lo])
			lo = c;
	}
	if (!total || (double)load[hi] <= (1 + VZ_DSP_IMBALANCE) *
						  (double)total /
						  d->cfg.view.nactive)
		return;
	if (move_buckets(d, hi, lo, load))
		d->rebalances++;
}

/*
 * adaptive: place by load once the CPUs' flows differ by more than the
 * gap flow-affinity tolerates, by hash while they do not (policy.h).
 */
static void adapt(struct vz_xdp_dispatch *d)
{
	__u32 lo = ~0u, hi = 0, i;

	for (i = 0; i < d->cfg.view.nactive; i++) {
		if (d->cfg.view.load[i] < lo)
			lo = d->cfg.view.load[i];
		if (d->cfg.view.load[i] > hi)
			hi = d->cfg.view.load[i];
	}
	d->cfg.view.spread = hi - lo > d->cfg.view.migrate_gap;
}

/*
 * Live flows per CPU, from the flow map itself: the kernel's counts miss
 * the flows the LRU evicted and those that went quiet for good.
 */
static void recount_flows(struct vz_xdp_dispatch *d)
{
	static struct vz_dsp_flow_key keys[1024];
	static struct vz_dsp_flow vals[1024];
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	__s64 live[VZ_DSP_MAX_CPUS] = { 0 };
	__u64 now = vz_now_ns(), in = 0, out = 0, total = 0;
	bool first = true, done = false;
	__u32 n, i, cpu;
	int ret;

	while (!done) {
		n = sizeof(keys) / sizeof(keys[0]);
		ret = bpf_map_lookup_batch(d->flows_fd, first ? NULL : &in,
					   &out, keys, vals, &n, &opts);
		if (ret && errno != ENOENT)
			return; /* keep the kernel's counts */
		done = ret != 0;
		for (i = 0; i < n; i++) {
			cpu = vals[i].cpu % VZ_DSP_MAX_CPUS;
			if (now < vals[i].last_seen ||
			    now - vals[i].last_seen <= d->cfg.aging_ns) {
				live[cpu]++;
				total++;
			}
		}
		in = out;
		first = false;
	}
	d->flows = total;
	for (cpu = 0; cpu < VZ_DSP_MAX_CPUS; cpu++)
		d->cfg.view.load[cpu] = (__u32)live[cpu];
	if (d->policy == VZ_DSP_ADAPTIVE)
		adapt(d);
	write_config(d);
}

void vz_xdp_dispatch_tick(struct vz_xdp_dispatch *d)
{
	__u64 total;
	__u32 b;

	if (d->policy == VZ_DSP_FLOW_AFFINITY || d->policy == VZ_DSP_ADAPTIVE) {
		recount_flows(d);
		return;
	}
	if (d->policy != VZ_DSP_BUCKETS_POLICY)
		return;
	for (b = 0; b < VZ_DSP_BUCKETS; b++) {
		total = percpu_sum(d, d->bkt_pkts_fd, b);
		d->bkt_delta[b] = total - d->bkt_total[b];
		d->bkt_total[b] = total;
	}
	rebalance(d);
}

void vz_xdp_dispatch_read(struct vz_xdp_dispatch *d,
			  struct vz_xdp_dispatch_stats *s)
{
	__u32 i;

	memset(s, 0, sizeof(*s));
	s->policy = d->policy;
	s->workers = d->workers;
	s->nactive = d->cfg.view.nactive;
	for (i = 0; i < d->cfg.view.nactive; i++)
		s->active[i] = d->cfg.active[i];
	for (i = 0; i < d->workers; i++)
		s->cpu_packets[i] = percpu_sum(d, d->cpu_pkts_fd, i);
	for (i = 0; i < VZ_DSP_COUNTERS; i++)
		s->counter[i] = percpu_sum(d, d->counters_fd, i);
	s->buckets_requested = d->buckets_requested;
	s->rebalances = d->rebalances;
	s->flows = d->flows;
}

void vz_xdp_dispatch_sent(struct vz_xdp_dispatch *d, __u64 *sent)
{
	__u32 i;

	for (i = 0; i < d->workers; i++)
		sent[i] = percpu_sum(d, d->cpu_pkts_fd, i);
}
