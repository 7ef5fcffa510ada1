/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The NF API. An NF is one C file that includes this header and nothing
 * backend-specific; it is compiled twice:
 *
 *   clang -target bpf   -> a BPF object run at the XDP hook (xdp, xdp-generic)
 *   the host compiler   -> a shared object called by userspace workers and by
 *                          `veloz replay --backend native`
 *
 * Everything an NF touches goes through this header: the packet context
 * (vz_data, vz_data_end, vz_header, vz_ingress_port), the verdicts (VZ_DROP,
 * VZ_PASS, VZ_TX, VZ_REDIRECT(port)), protocol parsing (veloz/proto/:
 * Ethernet, VLAN, IPv4, IPv6, TCP/UDP), head adjustment, checksum helpers,
 * time, maps (VZ_ARRAY, VZ_PERCPU_ARRAY, VZ_HASH, VZ_PERCPU_HASH, VZ_LRU_HASH,
 * VZ_LPM) and the NF's configuration (VZ_CONFIG, VZ_CONFIG_CHECK).
 *
 * The rule that keeps both builds identical: an NF sees only the linear part
 * of a frame (at most VZ_LINEAR_MAX bytes, as XDP multi-buffer does), reaches
 * packet bytes only through vz_header(), and keeps its state in maps.
 *
 * Maps with several workers: the native maps keep the BPF maps' rules, so
 * an NF written for XDP's many CPUs is right on the userspace backends too.
 *   - Per-CPU maps (VZ_PERCPU_*) have one copy per worker: a worker thread
 *     or lcore sees its own copy, as a CPU does on XDP, and updates it with
 *     no atomics. The control plane reads and writes all copies at once.
 *   - VZ_ARRAY: one copy shared by every worker. Slots always exist; an
 *     update of a value is a plain copy, so counters shared by workers need
 *     __sync_fetch_and_add() (or a per-CPU array), exactly as in BPF.
 *   - VZ_HASH, VZ_LRU_HASH, VZ_LPM: safe for any number of concurrent
 *     workers and for the control plane writing while they run: every
 *     update and delete takes the map's lock, and so do hash and LRU
 *     lookups (LRU eviction happens under it); LPM lookups walk a DIR-24-8
 *     trie with atomic loads and no lock. A lookup returns a pointer into
 *     the map, as bpf_map_lookup_elem() does: an update in place through
 *     it is seen by the others, and once another worker or the control
 *     plane deletes that key, the slot may be reused, as a BPF hash map's
 *     preallocated elements are. Do not hold it across frames.
 */
#ifndef VELOZ_NF_H
#define VELOZ_NF_H

#include <veloz/proto.h> /* struct vz_ctx, vz_header(), the parsers */

#ifdef VZ_BUILD_NATIVE
#include <errno.h>
#include <string.h>
#include <time.h>
#include <veloz/maps.h>
#ifndef SEC
#define SEC(name)
#endif
#endif

/* ---- Maps ---------------------------------------------------------------- */

#ifdef VZ_BUILD_BPF
#define VZ__MAP(name, mtype, ktype, vtype, n, mflags) \
	struct {                                      \
		__uint(type, mtype);                  \
		__type(key, ktype);                   \
		__type(value, vtype);                 \
		__uint(max_entries, n);               \
		__uint(map_flags, mflags);            \
	} name SEC(".maps")
#define vz_map_lookup(map, key) bpf_map_lookup_elem(map, key)
#define vz_map_update(map, key, value, flags) \
	bpf_map_update_elem(map, key, value, flags)
#define vz_map_delete(map, key) bpf_map_delete_elem(map, key)
/* An IPv4 VZ_LPM map looked up by the 4 address bytes at addr4 (big
 * endian, as in the packet): a key {32, addr}. */
#define vz_lpm_lookup4(map, addr4)                                     \
	({                                                             \
		struct vz_lpm4_key vz__key = { .prefixlen = 32 };      \
		_Static_assert(sizeof(*(map)->key) ==                  \
				       sizeof(struct vz_lpm4_key),     \
			       "vz_lpm_lookup4: not an IPv4 LPM map"); \
		__builtin_memcpy(vz__key.addr, (addr4), 4);            \
		bpf_map_lookup_elem(map, &vz__key);                    \
	})
#else
/*
 * A native map is a struct vz_map; a pointer to it goes into the "vz_maps"
 * section so the loader can find every map of an NF (the linker provides
 * __start_vz_maps and __stop_vz_maps).
 */
#define VZ__MAP(map_name, mtype, ktype, vtype, n, mflags)  \
	static struct vz_map map_name = {                  \
		.name = #map_name,                         \
		.type = (mtype),                           \
		.key_size = sizeof(ktype),                 \
		.value_size = sizeof(vtype),               \
		.max_entries = (n),                        \
		.flags = (mflags),                         \
	};                                                 \
	static struct vz_map *const vz__map_ref_##map_name \
		__attribute__((used, section("vz_maps"))) = &map_name
/*
 * VZ_LPM maps have their own type in the native build, struct vz_lpm_map,
 * so that the lookup is chosen at compile time: vz_map_lookup() on one is
 * the inline trie walk (vz_map_lookup_lpm() in maps.h), with no map-type
 * dispatch and no call into the runtime; on any other map it is the
 * generic vz_map_lookup_elem(). The NF's source is the same for both
 * builds: in BPF both are bpf_map_lookup_elem().
 */
struct vz_lpm_map {
	struct vz_map map;
};

VZ_INLINE void *vz__lpm_lookup(struct vz_lpm_map *m, const void *key)
{
	return vz_map_lookup_lpm(&m->map, key);
}

/*
 * vz_lpm_lookup4(&map, addr): an IPv4 VZ_LPM map looked up by the 4
 * address bytes at addr (big endian, as in the packet: &iph->daddr), the
 * same as vz_map_lookup() with a key {32, addr} in both builds. Natively
 * it builds no key at all, which is the faster fast path
 * (vz_map_lookup_lpm4() in maps.h); in BPF it builds the key. Only VZ_LPM
 * maps take it (a compile error otherwise).
 */
VZ_INLINE void *vz_lpm_lookup4(struct vz_lpm_map *m, const void *addr)
{
	return vz_map_lookup_lpm4(&m->map, addr);
}

VZ_INLINE struct vz_map *vz__lpm_base(struct vz_lpm_map *m)
{
	return &m->map;
}

VZ_INLINE struct vz_map *vz__map_base(struct vz_map *m)
{
	return m;
}

#define vz__map(map)                        \
	_Generic((map), struct vz_lpm_map * \
		 : vz__lpm_base, default    \
		 : vz__map_base)(map)
#define vz_map_lookup(map, key)             \
	_Generic((map), struct vz_lpm_map * \
		 : vz__lpm_lookup, default  \
		 : vz_map_lookup_elem)((map), (key))
#define vz_map_update(map, key, value, flags) \
	vz_map_update_elem(vz__map(map), key, value, flags)
#define vz_map_delete(map, key) vz_map_delete_elem(vz__map(map), key)
/* What an NF written against libbpf calls, the same in both builds. */
#define bpf_map_lookup_elem(map, key) vz_map_lookup(map, key)
#endif

#define VZ_ARRAY(name, vtype, n) \
	VZ__MAP(name, BPF_MAP_TYPE_ARRAY, __u32, vtype, n, 0)
#define VZ_PERCPU_ARRAY(name, vtype, n) \
	VZ__MAP(name, BPF_MAP_TYPE_PERCPU_ARRAY, __u32, vtype, n, 0)
#define VZ_HASH(name, ktype, vtype, n) \
	VZ__MAP(name, BPF_MAP_TYPE_HASH, ktype, vtype, n, 0)
#define VZ_PERCPU_HASH(name, ktype, vtype, n) \
	VZ__MAP(name, BPF_MAP_TYPE_PERCPU_HASH, ktype, vtype, n, 0)
#define VZ_LRU_HASH(name, ktype, vtype, n) \
	VZ__MAP(name, BPF_MAP_TYPE_LRU_HASH, ktype, vtype, n, 0)
/* ktype starts with __u32 prefixlen, then the address bytes (as BPF's). */
#ifdef VZ_BUILD_BPF
#define VZ_LPM(name, ktype, vtype, n) \
	VZ__MAP(name, BPF_MAP_TYPE_LPM_TRIE, ktype, vtype, n, BPF_F_NO_PREALLOC)
#else
#define VZ_LPM(map_name, ktype, vtype, n)                        \
	static struct vz_lpm_map map_name = {                  \
		.map = {                                       \
			.name = #map_name,                     \
			.type = BPF_MAP_TYPE_LPM_TRIE,         \
			.key_size = sizeof(ktype),             \
			.value_size = sizeof(vtype),           \
			.max_entries = (n),                    \
			.flags = BPF_F_NO_PREALLOC,            \
		},                                             \
	}; \
	static struct vz_map *const vz__map_ref_##map_name       \
		__attribute__((used, section("vz_maps"))) = &map_name.map
#endif

/* ---- Configuration --------------------------------------------------------
 *
 * VZ_CONFIG(struct my_config) = { defaults };  declares the NF's config as a
 * global the NF reads as vz_config.field. The control plane finds its fields
 * by name in the BPF object's BTF and writes them into the BPF global data
 * map or the native symbol. VZ_CONFIG_CHECK(struct my_config, cfg) { ... }
 * returns NULL or a one-line complaint; it runs natively before anything is
 * attached, whatever the backend.
 */
#ifdef VZ_BUILD_BPF
#define VZ_CONFIG(type) type vz_config SEC(".data.vz_config")
#define VZ_CONFIG_CHECK(type, cfg)                                  \
	static __attribute__((unused)) const char *vz_config_check( \
		const type *cfg)
#else
#define VZ_CONFIG(type) type vz_config
#define VZ_CONFIG_CHECK(type, cfg)                    \
	const char *vz_config_check(const type *cfg); \
	const char *vz_config_check(const type *cfg)
#endif

/* ---- Maps every NF has --------------------------------------------------- */

/* Packets and bytes per final verdict, and redirected per output port. */
VZ_PERCPU_ARRAY(vz_stats, struct vz_stat, VZ_VERDICT_COUNT);
VZ_BTF_EXPORT(enum vz_verdict, verdict); /* vz_stats is by verdict */
VZ_PERCPU_ARRAY(vz_redirects, struct vz_stat, VZ_MAX_PORTS);

#ifdef VZ_BUILD_BPF
/* Port number -> ifindex, for VZ_REDIRECT (a devmap: bulk transmit). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, VZ_MAX_PORTS);
} vz_ports SEC(".maps");

/* ifindex -> port number, for vz_ingress_port(); missing means port 0. */
VZ_HASH(vz_ifports, __u32, __u32, VZ_MAX_PORTS);
#else
/* Port number -> non-zero when the port exists. */
VZ_ARRAY(vz_ports, __u32, VZ_MAX_PORTS);
#endif

/* ---- Packet context ------------------------------------------------------ */

#ifdef VZ_BUILD_BPF
VZ_INLINE __u32 vz_ingress_port(const struct vz_ctx *ctx)
{
	__u32 ifindex = ctx->xdp->ingress_ifindex;
	__u32 *port = bpf_map_lookup_elem(&vz_ifports, &ifindex);

	return port ? *port : 0;
}

/* Whole frame length, fragments included. */
VZ_INLINE __u64 vz__frame_len(const struct vz_ctx *ctx)
{
	return bpf_xdp_get_buff_len(ctx->xdp);
}

/* Grow (delta < 0) or shrink (delta > 0) the frame at its head. */
VZ_INLINE int vz_adjust_head(struct vz_ctx *ctx, int delta)
{
	return bpf_xdp_adjust_head(ctx->xdp, delta);
}

VZ_INLINE __u64 vz_time_ns(void)
{
	return bpf_ktime_get_ns();
}

#else /* native */

VZ_INLINE __u32 vz_ingress_port(const struct vz_ctx *ctx)
{
	return ctx->ingress_port;
}

VZ_INLINE __u64 vz__frame_len(const struct vz_ctx *ctx)
{
	return (__u64)(ctx->data_end - ctx->data) + ctx->frags_len;
}

/*
 * The checks of the kernel's bpf_xdp_adjust_head(), on offsets from the
 * buffer's start (no pointer ever leaves the buffer).
 */
VZ_INLINE int vz_adjust_head(struct vz_ctx *ctx, int delta)
{
	long data = (long)(ctx->data - ctx->data_hard_start) + delta;
	long end = (long)(ctx->data_end - ctx->data_hard_start);

	if (data < VZ_FRAME_RESERVE || data > end - ETH_HLEN)
		return -EINVAL;
	ctx->data = ctx->data_hard_start + data;
	return 0;
}

VZ_INLINE __u64 vz_time_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* bpf_ktime_get_ns()'s clock */
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

#endif

/* The whole frame's length, fragments beyond the linear part included. */
VZ_INLINE __u64 vz_frame_len(const struct vz_ctx *ctx)
{
	return vz__frame_len(ctx);
}

/* ---- Verdicts --------------------------------------------------------------
 * An NF returns VZ_DROP, VZ_PASS, VZ_TX or VZ_REDIRECT(port).
 */
#define VZ_REDIRECT(port) vz_redirect(ctx, (port))

VZ_INLINE int vz_redirect(struct vz_ctx *ctx, __u32 port)
{
	ctx->redirect_port = port;
	return VZ_REDIRECT_VERDICT;
}

/* A redirect to a port that does not exist becomes VZ_ABORTED. */
VZ_INLINE int vz__redirect_action(struct vz_ctx *ctx)
{
#ifdef VZ_BUILD_BPF
	return (int)bpf_redirect_map(&vz_ports, ctx->redirect_port, VZ_ABORTED);
#else
	__u32 *present = vz_map_lookup(&vz_ports, &ctx->redirect_port);

	return present && *present ? VZ_REDIRECT_VERDICT : VZ_ABORTED;
#endif
}

/* Turn the NF's verdict into the final action and count it. */
VZ_INLINE int vz__finish(struct vz_ctx *ctx, int verdict, __u64 frame_len)
{
	struct vz_stat *stat;
	__u32 action;

	switch (verdict) {
	case VZ_DROP:
	case VZ_PASS:
	case VZ_TX:
		action = (__u32)verdict;
		break;
	case VZ_REDIRECT_VERDICT:
		action = (__u32)vz__redirect_action(ctx);
		break;
	default:
		action = VZ_ABORTED;
	}
	stat = vz_map_lookup(&vz_stats, &action);
	if (stat) {
		stat->packets++;
		stat->bytes += frame_len;
	}
	if (action == VZ_REDIRECT_VERDICT) {
		stat = vz_map_lookup(&vz_redirects, &ctx->redirect_port);
		if (stat) {
			stat->packets++;
			stat->bytes += frame_len;
		}
	}
	return (int)action;
}

/* ---- Declaring the NF ------------------------------------------------------
 *
 *   VZ_NF(name) { ... return VZ_DROP; }
 *
 * defines the NF body, a function of `struct vz_ctx *ctx`, and the entry point
 * of the build: the XDP program vz_xdp_<name> (frags-aware, so jumbo frames
 * reach it), or the native descriptor vz_nf_desc.
 */
#ifdef VZ_BUILD_BPF
#define VZ_NF(nf_name)                                                      \
	VZ_INLINE int vz__nf_##nf_name(struct vz_ctx *ctx);                 \
	SEC("xdp.frags") int vz_xdp_##nf_name(struct xdp_md *xdp)           \
	{                                                                   \
		struct vz_ctx ctx = { .xdp = xdp };                         \
		__u64 frame_len = vz__frame_len(&ctx);                      \
		return vz__finish(&ctx, vz__nf_##nf_name(&ctx), frame_len); \
	}                                                                   \
	char vz_license[] SEC("license") = "Dual BSD/GPL";                  \
	VZ_INLINE int vz__nf_##nf_name(struct vz_ctx *ctx                   \
				       __attribute__((unused)))
#else
extern struct vz_map *const __start_vz_maps[];
extern struct vz_map *const __stop_vz_maps[];

#define VZ_NF(nf_name)                                                    \
	VZ_INLINE int vz__nf_##nf_name(struct vz_ctx *ctx);               \
	static int vz__run_##nf_name(struct vz_ctx *ctx)                  \
	{                                                                 \
		__u64 frame_len = vz__frame_len(ctx);                     \
		return vz__finish(ctx, vz__nf_##nf_name(ctx), frame_len); \
	}                                                                 \
	const struct vz_nf_desc vz_nf_desc = {                            \
		.abi = VZ_NF_ABI,                                         \
		.name = #nf_name,                                         \
		.run = vz__run_##nf_name,                                 \
		.maps = __start_vz_maps,                                  \
		.maps_end = __stop_vz_maps,                               \
	};                                                                \
	VZ_INLINE int vz__nf_##nf_name(struct vz_ctx *ctx                 \
				       __attribute__((unused)))
#endif

/* ---- The host kernel's FIB ------------------------------------------------
 *
 * vz_fib_lookup() asks the kernel's routing and neighbour tables where a
 * packet to dst goes (bpf_fib_lookup(), as the XDP paper's router does):
 * 0 and the egress port with both MACs; -ENOENT when the kernel has no
 * usable answer (no route, no neighbour entry yet, forwarding off, or an
 * egress device that is not one of the run's ports); -EOPNOTSUPP in the
 * native build, which cannot reach the kernel's FIB per packet.
 */
struct vz_fib {
	__u32 port;
	__u8 smac[ETH_ALEN];
	__u8 dmac[ETH_ALEN];
};

#ifdef VZ_BUILD_BPF
VZ_INLINE int vz_fib_lookup(struct vz_ctx *ctx, int ipv6, const void *src,
			    const void *dst, struct vz_fib *out)
{
	struct bpf_fib_lookup params = {};
	__u32 ifindex, *port;

	params.ifindex = ctx->xdp->ingress_ifindex;
	if (ipv6) {
		params.family = 10; /* AF_INET6 */
		__builtin_memcpy(params.ipv6_src, src, 16);
		__builtin_memcpy(params.ipv6_dst, dst, 16);
	} else {
		params.family = 2; /* AF_INET */
		__builtin_memcpy(&params.ipv4_src, src, 4);
		__builtin_memcpy(&params.ipv4_dst, dst, 4);
	}
	if (bpf_fib_lookup(ctx->xdp, &params, sizeof(params), 0) !=
	    BPF_FIB_LKUP_RET_SUCCESS)
		return -2; /* -ENOENT */
	ifindex = params.ifindex;
	port = bpf_map_lookup_elem(&vz_ifports, &ifindex);
	if (!port)
		return -2;
	out->port = *port;
	__builtin_memcpy(out->smac, params.smac, ETH_ALEN);
	__builtin_memcpy(out->dmac, params.dmac, ETH_ALEN);
	return 0;
}
#else
VZ_INLINE int vz_fib_lookup(struct vz_ctx *ctx __attribute__((unused)),
			    int ipv6 __attribute__((unused)),
			    const void *src __attribute__((unused)),
			    const void *dst __attribute__((unused)),
			    struct vz_fib *out __attribute__((unused)))
{
	return -EOPNOTSUPP;
}
#endif

/* Protocol parsing (veloz/proto/) is included at the top. */
#include <veloz/csum.h>

#endif /* VELOZ_NF_H */
