/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Structures and constants shared by NFs (BPF and native builds), the C
 * control plane and the Python lab. Fixed-width types only, so the BPF and
 * the x86-64 layouts are identical. Python repeats none of it: every map
 * key and value layout, enum and map size it needs is read from the built
 * NF object's BTF (python/veloz/control/abi.py), the few plain numbers from
 * this file's #defines.
 */
#ifndef VELOZ_ABI_H
#define VELOZ_ABI_H

#include <linux/types.h>

/*
 * VZ_BTF_EXPORT(enum vz_lb_counter, lb_counter): puts a type into the NF
 * object's BTF, where python/veloz/control/abi.py reads its names and
 * values. An enum used only for its constants is otherwise absent from BTF.
 * The variable sits in a section libbpf skips (neither a map nor data), so
 * nothing is loaded for it; `used` keeps the compiler from dropping it.
 */
#define VZ_BTF_EXPORT(type, name) \
	static type vz_btf_##name __attribute__((section(".vz_btf"), used))

/* Verdicts. The values are the XDP actions, so the BPF build maps them 1:1. */
enum vz_verdict {
	VZ_ABORTED = 0, /* NF error or failed redirect: dropped, counted */
	VZ_DROP = 1,
	VZ_PASS = 2, /* hand the packet to the host's kernel stack */
	VZ_TX = 3, /* send back out of the ingress port */
	VZ_REDIRECT_VERDICT =
		4, /* out of ctx's redirect port, see VZ_REDIRECT() */
	VZ_VERDICT_COUNT = 5,
};

/* Per-verdict counters, one per CPU (BPF) or worker (native). */
struct vz_stat {
	__u64 packets;
	__u64 bytes;
};

/* Ports are a run's interfaces, numbered in the order they were given. */
#define VZ_MAX_PORTS 64

/*
 * Frame geometry, mirroring the kernel's XDP buffers so that both builds see
 * the same bytes: 256 bytes of headroom (XDP_PACKET_HEADROOM), of which the
 * first VZ_FRAME_RESERVE hold the kernel's struct xdp_frame and cannot be
 * claimed by vz_adjust_head(); and at most VZ_LINEAR_MAX bytes in the linear
 * part of a frame (one 4 KiB page minus headroom and skb_shared_info), the
 * rest being fragments that an NF does not see through vz_header().
 */
#define VZ_HEADROOM 256
#define VZ_FRAME_RESERVE 40
#define VZ_LINEAR_MAX 3520
#define VZ_FRAME_MAX 9216

/* Largest offset and length vz_header() accepts: keeps the verifier happy. */
#define VZ_HEADER_OFF_MAX 4096
#define VZ_HEADER_LEN_MAX 512

/* ---- NF configurations --------------------------------------------------- */

/* nf/redirect.c: every packet goes out of this port. */
struct vz_redirect_config {
	__u32 port;
};

/* nf/memaccess.c: the eBPF cost study's synthetic load. */
#define VZ_MEMACCESS_MAX 16384
#define VZ_MEMACCESS_SLOTS 4096
struct vz_memaccess_config {
	__u32 accesses; /* reads+writes of the table per packet */
	__u32 reflect; /* then 1: send it back, as tx does (a costly tx) */
};

/* 16 KiB: fits a per-CPU map value and the L1 cache of any server core. */
struct vz_memaccess_table {
	__u32 slot[VZ_MEMACCESS_SLOTS];
};

/* ---- Keys of LPM maps: prefix length, then the address (network order) ----
 */
struct vz_lpm4_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct vz_lpm6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/* ---- nf/router.c --------------------------------------------------------- */

/* Room for a full internet table (752,138 IPv4 routes in the XDP paper). */
#define VZ_ROUTER_ROUTES4 1048576
#define VZ_ROUTER_ROUTES6 262144
#define VZ_ROUTER_NEXTHOPS 4096 /* next hops and groups share the slots */

struct vz_router_config {
	__u32 fib; /* 1: the kernel's FIB through bpf_fib_lookup (xdp only) */
	__u32 table; /* enum vz_router_table: which IPv4 table answers */
};

enum vz_router_table {
	VZ_ROUTER_TABLE_TRIE = 0, /* router_routes4, the LPM trie */
	VZ_ROUTER_TABLE_DIR24 = 1, /* router_tbl24 + router_tbl8 (DIR-24-8) */
};

/*
 * DIR-24-8 (Gupta, Lin, McKeown 1998; DPDK's rte_lpm): router_tbl24 holds
 * one entry per /24, router_tbl8 256-entry groups for /24s that hold longer
 * prefixes. An entry is 0 (no route), a group (VZ_DIR24_GROUP | index), or a
 * route: VZ_DIR24_ROUTE | depth << 24 | kind << 16 | nexthop. The depth (the
 * prefix length that wrote it) lets the control plane add and delete a
 * prefix by rewriting only the entries that prefix owns (controlled prefix
 * expansion); the data path ignores it. router_tbl8_owner[g] is the /24
 * index + 1 of group g, 0 when free: the control plane's allocation, never
 * read by the NF. Both IPv4 tables are always written; the config picks one.
 */
#define VZ_ROUTER_TBL24 (1u << 24)
#define VZ_ROUTER_TBL8_GROUPS 8192
#define VZ_DIR24_GROUP 0x80000000u
#define VZ_DIR24_ROUTE 0x40000000u
#define VZ_DIR24_DEPTH_SHIFT 24
#define VZ_DIR24_KIND_SHIFT 16
#define VZ_DIR24_INDEX_MASK 0x00ffffffu
#define VZ_DIR24_NEXTHOP_MASK 0x0000ffffu

enum vz_route_kind {
	VZ_ROUTE_FORWARD = 0, /* to nexthop */
	VZ_ROUTE_LOCAL = 1, /* an address of this host: PASS */
	VZ_ROUTE_KERNEL = 2, /* e.g. a connected subnet: the kernel resolves */
	VZ_ROUTE_BLACKHOLE = 3, /* DROP */
};

/* The value of a route in router_routes4 / router_routes6. */
struct vz_route {
	__u32 kind; /* enum vz_route_kind */
	__u32 nexthop; /* index into router_nexthops */
};

#define VZ_NEXTHOP_USED 1u
#define VZ_NEXTHOP_RESOLVED 2u /* dmac is the neighbour's: forward */
/* a multipath route's slot: its members are router_groups[slot] */
#define VZ_NEXTHOP_GROUP 4u

/*
 * A next-hop group (multipath route): buckets entries of member[] name next
 * hops (router_nexthops slots, never groups); a frame takes
 * member[flow hash % buckets], the flow hash being nf/lb.c's
 * (include/veloz/jhash.h). A next hop named k times takes k shares of the
 * flows: weights are repeated members. At most VZ_ROUTER_GROUP_MEMBERS
 * distinct next hops, VZ_ROUTER_GROUP_BUCKETS entries. refs counts the
 * routes pointing to the group, for the control plane only.
 */
#define VZ_ROUTER_GROUP_MEMBERS 16
#define VZ_ROUTER_GROUP_BUCKETS 64

struct vz_nexthop_group {
	__u32 buckets; /* entries of member[] in use, at least 1 */
	__u32 refs;
	__u16 member[VZ_ROUTER_GROUP_BUCKETS];
};

struct vz_nexthop {
	__u32 flags;
	__u32 port; /* egress */
	__u8 dmac[6]; /* the neighbour's MAC */
	__u8 smac[6]; /* the egress port's MAC */
	__u32 family; /* 4 or 6: of addr, the gateway (for the control plane) */
	__u8 addr[16];
};

enum vz_router_counter {
	VZ_ROUTER_FORWARDED,
	VZ_ROUTER_LOCAL, /* for this host: PASS */
	VZ_ROUTER_NO_ROUTE, /* PASS: the kernel answers (ICMP unreachable) */
	VZ_ROUTER_TTL_EXPIRED, /* PASS: the kernel sends time exceeded */
	VZ_ROUTER_UNRESOLVED, /* next hop without a MAC: PASS, the kernel ARPs
			       */
	VZ_ROUTER_TO_KERNEL, /* kernel routes, multicast, link-local, non-IP */
	VZ_ROUTER_BLACKHOLE,
	VZ_ROUTER_MALFORMED, /* DROP */
	VZ_ROUTER_COUNTERS,
};

/* ---- nf/ddos.c ----------------------------------------------------------- */

/*
 * Allow-lists (LPM by source prefix, value VZ_DDOS_ALLOWED) are checked
 * first; then the rules, in slot order, first match wins. A slot is live
 * when `used` is set and the slot is below vz_ddos_meta.end; the control
 * plane writes a rule with used = 0, then flips used (see nf/ddos.c).
 */
#define VZ_DDOS_RULES_MAX 64
#define VZ_DDOS_ALLOW_MAX 16384 /* prefixes per address family */
#define VZ_DDOS_BUCKETS_MAX 65536 /* (rule, source) token buckets, LRU */
#define VZ_DDOS_ALLOWED 1
#define VZ_DDOS_BURST_MAX 1000000000u /* tokens; keeps burst * 1e9 in __u64 */

enum vz_ddos_action {
	VZ_DDOS_DROP = 1,
	VZ_DDOS_LIMIT = 2, /* per-source token bucket: rate pps, burst */
	VZ_DDOS_ALLOW = 3, /* pass, skip the rules after it */
};

/* TCP flag bits as in byte 13 of the TCP header. */
#define VZ_TCP_FIN 0x01
#define VZ_TCP_SYN 0x02
#define VZ_TCP_RST 0x04
#define VZ_TCP_PSH 0x08
#define VZ_TCP_ACK 0x10
#define VZ_TCP_URG 0x20
#define VZ_TCP_ECE 0x40
#define VZ_TCP_CWR 0x80

struct vz_ddos_rule {
	__u8 used; /* 0: empty slot */
	__u8 family; /* 4 or 6: src is addr/prefixlen; 0: any source */
	__u8 prefixlen;
	__u8 proto; /* IPPROTO_*; 0: any */
	__u8 action; /* enum vz_ddos_action */
	__u8 tcp_mask; /* match when (flags & tcp_mask) == tcp_value */
	__u8 tcp_value;
	__u8 pad0;
	__be16 dport; /* 0: any (needs proto TCP or UDP) */
	__u16 pad1;
	__u32 gen; /* new per rule written to a slot: resets its buckets */
	__u32 rate; /* VZ_DDOS_LIMIT: tokens per second; 0: never refill */
	__u32 burst; /* VZ_DDOS_LIMIT: bucket size, 1..VZ_DDOS_BURST_MAX */
	__u8 addr[16]; /* network order, host bits zero; IPv4 in addr[0..3] */
};

/* Rules live in slots [0, end): the data path looks no further. */
struct vz_ddos_meta {
	__u32 end;
};

struct vz_ddos_bucket_key {
	__u32 rule; /* slot */
	__u8 family; /* 4 or 6 */
	__u8 pad[3];
	__u8 addr[16]; /* the packet's source; IPv4 in addr[0..3], rest zero */
};

struct vz_ddos_bucket {
	__u64 tokens; /* in billionths of a token: 1 ns at 1 pps adds 1 */
	__u64 last_ns; /* vz_time_ns() of the last refill */
	__u32 gen; /* the rule's gen when this bucket was filled */
	__u32 pad;
};

struct vz_ddos_rule_stat {
	__u64 packets; /* matched */
	__u64 bytes;
	__u64 dropped; /* by a drop rule or an empty bucket */
};

/* Packets that matched no rule, indexes of the ddos_totals counters. */
enum vz_ddos_total {
	VZ_DDOS_ALLOWLISTED = 0, /* source in an allow-list: passed */
	VZ_DDOS_PASSED = 1, /* IP, no rule matched: passed */
	VZ_DDOS_NOT_IP = 2, /* neither IPv4 nor IPv6: passed */
	VZ_DDOS_MALFORMED = 3, /* bad or truncated IP or L4 header: dropped */
	VZ_DDOS_TOTAL_COUNT = 4,
};

/* ---- nf/lb.c ------------------------------------------------------------- */

/*
 * Every address in these structs is 16 bytes with a family beside it (4 or
 * 6): an IPv6 address, or an IPv4 address in the first 4 bytes and zeros
 * after. Addresses and ports are in network order, as packets carry them.
 *
 * Maps (python/veloz/control/lb.py fills them):
 *   lb_vips      hash   vz_lb_vip_key -> vz_lb_vip
 *   lb_ring      array  vip index * VZ_LB_RING_SIZE + slot -> backend id
 *   lb_backends  array  backend id -> vz_lb_backend
 *   lb_conns     LRU    vz_lb_flow -> backend id (__u32)
 *   lb_self      array  [0] -> vz_lb_self
 *   lb_vip_stats, lb_backend_stats  per-CPU vz_stat by vip index / backend id
 *   lb_counters  per-CPU __u64 by enum vz_lb_counter
 */
#define VZ_LB_MAX_VIPS 64
#define VZ_LB_RING_SIZE 65537 /* Maglev's M: a prime */
#define VZ_LB_RING_ENTRIES (VZ_LB_MAX_VIPS * VZ_LB_RING_SIZE)
#define VZ_LB_MAX_BACKENDS 4096 /* ids 1..4095; id 0 is "none" */
#define VZ_LB_MAX_CONNS 262144 /* loads in tens of ms on xdp; 1M: 4x that */
/* The flow hash's jhash seed (include/veloz/jhash.h). */
#define VZ_LB_HASH_SEED 0x5a17b00cu

struct vz_lb_vip_key {
	__u8 addr[16];
	__be16 port;
	__u8 proto; /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 family; /* 4 or 6 */
};

/*
 * A VIP whose ring slot names no valid backend (none configured, or every
 * one drained by the health checks) drops the frame, or with this flag
 * passes it to the kernel (lb's config: on_all_down = "pass").
 */
#define VZ_LB_VIP_PASS_ALL_DOWN 0x1

struct vz_lb_vip {
	__u32 index; /* 0..VZ_LB_MAX_VIPS-1: its ring and its counters */
	__u32 flags; /* VZ_LB_VIP_* */
};

/*
 * A backend id belongs to one VIP. Removal clears VALID and keeps the rest
 * (a tombstone), so connections pinned to it fall back to the ring. The
 * health checks drain a failed backend the same way but set DOWN: its id
 * is kept for its return (same id, same Maglev slots), never reused. The
 * data path reads VALID only.
 */
#define VZ_LB_BACKEND_VALID 0x1
#define VZ_LB_BACKEND_DOWN 0x2

struct vz_lb_backend {
	__u8 addr[16];
	__u32 vip; /* index of the VIP it serves */
	__u16 weight; /* read by the control plane only (Maglev turns) */
	__u8 family; /* 4 or 6; 0: the id was never used */
	__u8 flags; /* VZ_LB_BACKEND_* */
};

/* A flow: the key of lb_conns, and the words the flow hash covers. */
struct vz_lb_flow {
	__u8 src[16];
	__u8 dst[16];
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;
	__u8 pad[2]; /* zero */
};

/* What the encapsulated frames are sent with. */
struct vz_lb_self {
	__u8 mac[6]; /* Ethernet source */
	__u8 next_hop_mac[6]; /* Ethernet destination */
	__u8 source4[4]; /* outer IPv4 source */
	__u8 source6[16]; /* outer IPv6 source */
};

enum vz_lb_counter {
	VZ_LB_MALFORMED = 0, /* bad or truncated IP/L4 header: dropped */
	VZ_LB_FRAGMENT = 1, /* IPv4 TCP/UDP or IPv6 fragments: passed */
	VZ_LB_NO_BACKEND = 2, /* no valid backend in the ring slot: dropped */
	VZ_LB_ENCAP_FAILED = 3, /* no headroom for the outer header */
	VZ_LB_CONN_HIT = 4, /* backend taken from lb_conns */
	VZ_LB_CONN_STALE = 5, /* lb_conns named a backend no longer valid */
	VZ_LB_RING = 6, /* backend taken from the ring (new flow or SYN) */
	VZ_LB_ALL_DOWN_PASS = 7, /* the same with PASS_ALL_DOWN: passed */
	VZ_LB_COUNTERS = 8,
};

#endif /* VELOZ_ABI_H */
