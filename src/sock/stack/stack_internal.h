/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The engine's insides, shared by its files: stack.c (config, Ethernet,
 * timers), arp.c (the neighbour cache and resolution, ARP's side), ipv4.c
 * (input checks, output and fragmentation), reasm.c (reassembly, both
 * families), icmp.c and udp.c (both families); ipv6.c, ndp.c (NDP's side
 * of the cache) and icmp6.c.
 */
#ifndef VZ_SOCK_STACK_STACK_INTERNAL_H
#define VZ_SOCK_STACK_STACK_INTERNAL_H

#include <stdbool.h>
#include <string.h>
/* the C library's netinet/in.h before the uapi's linux/in.h: libc-compat.h
 * then leaves the shared definitions to the C library */
#include <arpa/inet.h>

#include <veloz/proto/arp.h>
#include <veloz/proto/icmp.h>
#include <veloz/proto/ipv4.h>
#include <veloz/proto/ipv6.h>
#include <veloz/proto/l4.h>

#include "sock/stack/stack.h"

/* Headers, EtherTypes, protocol numbers and flags are veloz/proto/'s and
 * the uapi headers'; here are the stack's own limits and defaults. */
#define VZ_IP6_HOPS 64
#define VZ_ND_HOPS 255 /* RFC 4861: NDP is only valid from on-link */

#define VZ_IP_MAXLEN 65535 /* a datagram, header included (IPv6: payload) */
#define VZ_IP_TTL 64

/* The longest frame all of whose bytes the stack may read: Ethernet, then
 * IPv6's header and largest payload (IPv4's largest datagram is shorter).
 * What follows is padding, whatever the frame's length. */
#define VZ_RX_COPY_MAX (ETH_HLEN + sizeof(vz_ipv6hdr) + VZ_IP_MAXLEN)

#define VZ_MTU_MIN 68 /* RFC 791: every host takes 68-byte datagrams */
#define VZ_MTU_MAX 9216 /* jumbo frames; also sizes the transmit buffer */

/* ARP: 64 static neighbours plus 256 learned or pending ones. */
#define VZ_ARP_SLOTS (VZ_STACK_MAX_NEIGH + 256)
#define VZ_ARP_BUCKETS 512
#define VZ_ARP_TRIES 3
#define VZ_ARP_QUEUE_MAX 8 /* datagrams waiting per next hop */
#define VZ_ARP_QUEUE_BYTES (1u << 20) /* ... and in all */
/* Refreshing a used entry: probes go out in the last 1/VZ_ARP_PROBE_FRACTION
 * of its lifetime, at most one per entry per VZ_ARP_PROBE_GAP_MS (or
 * arp_retry_ms when that is longer). See arp_probe() in arp.c for why. */
#define VZ_ARP_PROBE_FRACTION 6
#define VZ_ARP_PROBE_GAP_MS 1000

/* Reassembly: more pieces than this in one datagram is an attack. */
#define VZ_REASM_MAX_FRAGS 1024
#define VZ_REASM_MAX_DATAGRAMS 65536

/* ICMP errors: a token bucket of 100 per second, bursts of 100. */
#define VZ_ICMP_RATE 100
#define VZ_ICMP_BURST 100

#define VZ_NS_PER_MS 1000000ull

enum vz_arp_state {
	VZ_ARP_FREE,
	VZ_ARP_PENDING,
	VZ_ARP_REACHABLE,
	VZ_ARP_STATIC,
};

/* A datagram waiting for its next hop's address. */
struct vz_arp_pkt {
	struct vz_arp_pkt *next;
	struct vz_dgram_meta m;
	size_t len;
	__u8 data[];
};

/*
 * The neighbour cache holds both families: an IPv4 address as IPv4-mapped
 * IPv6 (::ffff:a.b.c.d), so ARP and NDP share the table, the queues, the
 * timers and the refresh rule; only the questions differ.
 */
struct vz_arp_entry {
	__u8 ip[16];
	__u8 mac[ETH_ALEN];
	__u8 state; /* enum vz_arp_state */
	__u8 tries; /* requests sent while pending */
	int next; /* in the bucket's chain, or the free list; -1 ends */
	__u64 deadline_ns; /* reachable: expiry; pending: next retry */
	__u64 probe_ok_ns; /* reachable: no refresh probe before this */
	struct vz_arp_pkt *q_head, *q_tail;
	unsigned int qlen;
};

struct vz_arp_table {
	struct vz_arp_entry e[VZ_ARP_SLOTS];
	int bucket[VZ_ARP_BUCKETS];
	int free_head;
	size_t queued_bytes;
	__u64 next_ns; /* no deadline falls before this */
};

/* One piece of a datagram being reassembled, in offset order. */
struct vz_frag {
	struct vz_frag *prev, *next;
	__u32 off, len;
	__u8 data[];
};

struct vz_reasm {
	struct vz_reasm *hnext; /* hash chain */
	struct vz_reasm *older, *newer; /* by arrival: timeouts in order */
	__be32 src, dst;
	__be16 id;
	__u8 proto;
	__u8 hlen; /* of hdr, 0 until the first fragment came */
	__u64 expires_ns;
	struct vz_frag *head, *tail;
	unsigned int nfrags;
	__u32 have; /* payload bytes received */
	__u32 total; /* payload length, once the last fragment came */
	bool seen_last;
	size_t mem; /* counted against reasm_max_bytes */
	__u8 hdr[60]; /* the first fragment's header, options and all */
	/* IPv6: the key's addresses and 32-bit identifier; hdr holds the
	 * fixed header (40 bytes), extension headers are not kept. */
	bool v6;
	__u8 src6[16], dst6[16];
	__u32 id6;
};

struct vz_reasm_table {
	struct vz_reasm **bucket;
	unsigned int nbuckets; /* a power of two */
	unsigned int count;
	size_t bytes;
	struct vz_reasm *oldest, *newest;
};

struct vz_stack {
	struct vz_stack_config cfg; /* defaults filled in */
	struct vz_stack_ops ops;
	struct vz_stack_stats st;
	__be32 mask; /* of the on-link prefix */
	__u16 ip_id;
	unsigned int icmp_tokens;
	__u64 icmp_refill_ns;
	struct vz_arp_table arp;
	struct vz_reasm_table reasm;
	bool has6; /* an IPv6 address is configured */
	__u8 ll6[16]; /* our link-local address, from the MAC */
	__u8 mask6[16]; /* of the on-link IPv6 prefix */
	__u32 frag6_id;
	/* what we transmit (aligned: csum.h reads the IP header by words) */
	__u8 frame[ETH_HLEN + VZ_MTU_MAX] __attribute__((aligned(8)));
	/* a received frame that starts at an odd address, copied */
	__u8 rx_copy[VZ_RX_COPY_MAX] __attribute__((aligned(8)));
};

/* A received IPv4 datagram (whole or reassembled), checked up to L4. */
struct vz_ip_pkt {
	const __u8 *src_mac; /* the frame's sender: where replies go */
	const __u8 *iph;
	size_t hlen;
	const __u8 *l4;
	size_t l4len;
	__be32 src, dst;
	/* IPv6: v6 set, src and dst 0, the addresses here (in the packet) */
	bool v6;
	const __u8 *src6, *dst6;
};

/* The L4 message, for the parsers of veloz/proto/ (which do not write:
 * the const goes only because struct vz_ctx has none). */
static inline struct vz_ctx vz_l4_ctx(const struct vz_ip_pkt *p)
{
	return (struct vz_ctx){ .data = (__u8 *)p->l4,
				.data_end = (__u8 *)p->l4 + p->l4len };
}

/* stack.c */
int vz_stack_tx(struct vz_stack *s, size_t len);
void vz_eth_header(struct vz_stack *s, const __u8 *dst_mac, __u16 type);
bool vz_ip4_martian(const struct vz_stack *s, __be32 ip);

/* arp.c */
int vz_arp_init(struct vz_stack *s);
void vz_arp_fini(struct vz_stack *s);
void vz_arp_input(struct vz_stack *s, const struct vz_ctx *ctx, __u64 now_ns);
int vz_arp_output(struct vz_stack *s, __be32 nexthop,
		  const struct vz_dgram_meta *m, const void *payload,
		  size_t len, __u64 now_ns);
void vz_arp_tick(struct vz_stack *s, __u64 now_ns);
/* The cache's side for NDP: send through an IPv6 next hop (resolving it
 * first), and learn from a solicitation or an advertisement (create: only
 * for one that talks to us; solicited: it answers our question). */
int vz_neigh_output6(struct vz_stack *s, const __u8 *nexthop,
		     const struct vz_dgram_meta *m, const void *payload,
		     size_t len, __u64 now_ns);
void vz_neigh_learn6(struct vz_stack *s, const __u8 *ip, const __u8 *mac,
		     bool create, __u64 now_ns);

/* ndp.c */
void vz_nd_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u8 hops,
		 __u64 now_ns);
/* Ask for target: multicast to its solicited-node group (dst_mac NULL),
 * or unicast to dst_mac (a refresh probe). 0, or -1 when the port is full. */
int vz_nd_solicit(struct vz_stack *s, const __u8 *target, const __u8 *dst_mac);

/* ipv6.c */
void vz_ip6_input(struct vz_stack *s, const struct vz_ctx *ctx, __u64 now_ns);
int vz_ip6_output(struct vz_stack *s, const __u8 *dst_mac, __u8 proto,
		  const __u8 *src, const __u8 *dst, __u8 hops, const void *hdr,
		  size_t hlen, const void *body, size_t blen);
/* Is ip one of ours (the address, the link-local one)? */
bool vz_ip6_ours(const struct vz_stack *s, const __u8 *ip);
/* A source no honest sender uses (multicast, loopback, ours, unspecified
 * unless allowed). */
bool vz_ip6_martian(const struct vz_stack *s, const __u8 *ip);

/* icmp6.c */
void vz_icmp6_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u8 hops,
		    __u64 now_ns);
void vz_icmp6_port_unreach(struct vz_stack *s, const struct vz_ip_pkt *p,
			   __u64 now_ns);
/* The ICMPv6 checksum of msg (its own field zero or not) over the
 * pseudo-header of src -> dst: 0 when a received one is right. */
__u16 vz_icmp6_csum(const __u8 *src, const __u8 *dst, const void *hdr,
		    size_t hlen, const void *body, size_t blen);

/* ipv4.c */
void vz_ip_input(struct vz_stack *s, const struct vz_ctx *ctx, __u64 now_ns);
int vz_ip_output(struct vz_stack *s, const __u8 *dst_mac, __u8 proto,
		 __be32 dst, const void *hdr, size_t hlen, const void *body,
		 size_t blen);

/* reasm.c */
int vz_reasm_init(struct vz_stack *s);
void vz_reasm_fini(struct vz_stack *s);
int vz_reasm_input(struct vz_stack *s, const vz_iphdr *iph, size_t hlen,
		   const __u8 *payload, size_t plen, __u64 now_ns, __u8 **out,
		   size_t *outlen);
/* The same for an IPv6 fragment: ip6 the fixed header, fh the fragment
 * header, payload what follows it. *out is a fixed header (next header
 * the fragment header's, payload length the whole's) and the payload. */
int vz_reasm_input6(struct vz_stack *s, const vz_ipv6hdr *ip6,
		    const struct vz_ipv6_frag *fh, const __u8 *payload,
		    size_t plen, __u64 now_ns, __u8 **out, size_t *outlen);
void vz_reasm_tick(struct vz_stack *s, __u64 now_ns);

/* icmp.c */
bool vz_icmp_token(struct vz_stack *s, __u64 now_ns);
void vz_icmp_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u64 now_ns);
void vz_icmp_port_unreach(struct vz_stack *s, const struct vz_ip_pkt *p,
			  __u64 now_ns);

/* udp.c */
void vz_udp_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u64 now_ns);
int vz_udp_output(struct vz_stack *s, const __u8 *dst_mac,
		  const struct vz_dgram_meta *m, const void *payload,
		  size_t len);

/* One's-complement sum of a buffer starting at an even offset of the
 * checksummed data, in memory order (as csum.h's helpers). */
static inline __u64 vz_sum(__u64 sum, const void *buf, size_t len)
{
	const __u8 *b = buf;
	__u32 w32;
	__u16 w16;

	for (; len >= 4; b += 4, len -= 4) {
		memcpy(&w32, b, 4);
		sum += w32;
	}
	if (len >= 2) {
		memcpy(&w16, b, 2);
		sum += w16;
		b += 2;
		len -= 2;
	}
	if (len) {
		__u8 last[2] = { b[0], 0 };

		memcpy(&w16, last, 2);
		sum += w16;
	}
	return sum;
}

/* Fold a 64-bit sum to the 32 bits vz_csum_fold() takes. */
static inline __u32 vz_sum32(__u64 sum)
{
	sum = (sum & 0xffffffffu) + (sum >> 32);
	sum = (sum & 0xffffffffu) + (sum >> 32);
	return (__u32)sum;
}

/* The UDP/TCP pseudo-header, in memory order. */
static inline __u64 vz_sum_pseudo(__be32 src, __be32 dst, __u8 proto, __u16 len)
{
	__u8 tail[4] = { 0, proto, (__u8)(len >> 8), (__u8)len };

	return vz_sum(vz_sum(vz_sum(0, &src, 4), &dst, 4), tail, 4);
}

/* Copy [off, off + n) of the message made of hdr then body (fragments). */
static inline void vz_copy_range(__u8 *to, const __u8 *hdr, size_t hlen,
				 const __u8 *body, size_t off, size_t n)
{
	size_t k;

	if (off < hlen) {
		k = hlen - off < n ? hlen - off : n;
		memcpy(to, hdr + off, k);
		to += k;
		off += k;
		n -= k;
	}
	if (n)
		memcpy(to, body + (off - hlen), n);
}

/* IPv6's pseudo-header (RFC 8200 8.1), in memory order. */
static inline __u64 vz_sum_pseudo6(const __u8 *src, const __u8 *dst, __u8 proto,
				   __u32 len)
{
	__u8 tail[8] = { (__u8)(len >> 24),
			 (__u8)(len >> 16),
			 (__u8)(len >> 8),
			 (__u8)len,
			 0,
			 0,
			 0,
			 proto };

	return vz_sum(vz_sum(vz_sum(0, src, 16), dst, 16), tail, 8);
}

static inline bool vz_ip6_is_zero(const __u8 *a)
{
	static const __u8 zero[16];

	return !memcmp(a, zero, 16);
}

static inline bool vz_ip6_is_multicast(const __u8 *a)
{
	return a[0] == 0xff;
}

static inline bool vz_ip6_is_linklocal(const __u8 *a)
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}

/* IPv4 as the neighbour cache keys it: ::ffff:a.b.c.d. */
static inline void vz_ip4_mapped(__u8 *out, __be32 ip)
{
	memset(out, 0, 10);
	out[10] = out[11] = 0xff;
	memcpy(out + 12, &ip, 4);
}

static inline bool vz_ip6_is_mapped(const __u8 *a)
{
	static const __u8 pfx[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};

	return !memcmp(a, pfx, 12);
}

/* The solicited-node group of ip (RFC 4291 2.7.1) and its MAC. */
static inline void vz_ip6_snm(__u8 *out, const __u8 *ip)
{
	static const __u8 pfx[13] = { 0xff, 2, 0, 0, 0, 0,   0,
				      0,    0, 0, 0, 1, 0xff };

	memcpy(out, pfx, 13);
	memcpy(out + 13, ip + 13, 3);
}

static inline void vz_ip6_mcast_mac(__u8 *mac, const __u8 *group)
{
	mac[0] = mac[1] = 0x33;
	memcpy(mac + 2, group + 12, 4);
}

static inline __u16 vz_get16(const __u8 *p)
{
	return (__u16)(p[0] << 8 | p[1]);
}

static inline void vz_put16(__u8 *p, __u16 v)
{
	p[0] = (__u8)(v >> 8);
	p[1] = (__u8)v;
}

static inline __be32 vz_get_be32(const __u8 *p)
{
	__be32 v;

	memcpy(&v, p, 4);
	return v;
}

static inline bool vz_mac_is_zero(const __u8 *mac)
{
	static const __u8 zero[ETH_ALEN];

	return !memcmp(mac, zero, ETH_ALEN);
}

#endif
