/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The UDP/IP protocol engine of veloz's userspace stack: Ethernet, ARP
 * (answer, resolve, cache with timeout, refreshed while in use), ICMP echo,
 * IPv4 with fragmentation and reassembly (bounded memory, timeouts), UDP with
 * checksums; and IPv6 beside it: NDP (the same neighbour cache as ARP),
 * ICMPv6 echo, fragments both ways, UDP with mandatory checksums.
 *
 * It does no I/O and keeps no clock: the poller (udpd) hands it received
 * frames and the time, and it calls back to transmit a frame or deliver a
 * datagram. So the same code runs behind AF_XDP, DPDK, a unit test or a
 * fuzzer. Every frame it refuses is counted by reason, never trusted.
 */
#ifndef VZ_SOCK_STACK_STACK_H
#define VZ_SOCK_STACK_STACK_H

#include <stddef.h>
#include <linux/types.h>

#define VZ_STACK_MAX_NEIGH 64 /* static neighbours in the config */
#define VZ_STACK_MAX_UDP 65507 /* largest UDP payload over IPv4 */

struct vz_stack_neigh {
	__be32 ip4;
	__u8 mac[6];
};

struct vz_stack_config {
	__u8 mac[6];
	__be32 ip4; /* the stack's address */
	__u8 prefix_len; /* on-link prefix */
	__be32 gateway; /* 0: none; off-link destinations then unreachable */
	__u16 mtu; /* IP MTU; 0: 1500 */
	__u32 arp_timeout_ms; /* cache entry lifetime; 0: 60000 */
	__u32 arp_retry_ms; /* request resend; 0: 1000 (3 tries) */
	__u32 reasm_timeout_ms; /* 0: 30000 (RFC 791's upper bound is 60 s) */
	__u32 reasm_max_bytes; /* all partial datagrams together; 0: 4 MiB */
	__u32 reasm_max_datagrams; /* partial datagrams at once; 0: 256 */
	/* IPv6: the stack's address (all zero: no IPv6), its on-link prefix
	 * (0: 64) and a router (all zero: none). The stack also answers for
	 * its link-local address, made from the MAC (EUI-64). */
	__u8 ip6[16];
	__u8 prefix6_len;
	__u8 gateway6[16];
	unsigned int nneigh;
	struct vz_stack_neigh neigh[VZ_STACK_MAX_NEIGH]; /* never expire */
};

/* One UDP datagram's addresses, all in network byte order: IPv4 in
 * src_ip/dst_ip, or with v6 set IPv6 in src_ip6/dst_ip6 (src_ip and
 * dst_ip then 0). */
struct vz_dgram_meta {
	__be32 src_ip, dst_ip;
	__be16 src_port, dst_port;
	__u8 v6;
	__u8 src_ip6[16], dst_ip6[16];
};

struct vz_stack_ops {
	void *opaque;
	/* Send one Ethernet frame (the callee copies it). 0, or -1 when the
	 * port has no room: the frame is then counted in tx_full. */
	int (*tx)(void *opaque, const void *frame, size_t len);
	/* A datagram for this host (the callee copies the payload). 0 when a
	 * socket took it, -1 when no socket is bound to dst_port: the stack
	 * counts udp_no_port and answers ICMP port unreachable, rate-limited.
	 */
	int (*deliver)(void *opaque, const struct vz_dgram_meta *m,
		       const void *payload, size_t len);
};

/* Counters: every frame received ends in exactly one rx_* outcome. */
struct vz_stack_stats {
	__u64 rx_frames;
	__u64 rx_delivered; /* UDP datagrams handed to a socket */
	__u64 rx_not_for_us; /* other MAC, other IP, other protocols */
	__u64 rx_bad_eth; /* runt, bad ethertype framing */
	__u64 arp_requests_in, arp_replies_out, arp_replies_in;
	__u64 arp_requests_out, arp_bad, arp_unresolved_drops;
	__u64 ip_bad_header; /* version, IHL, total length, checksum */
	__u64 ip_bad_csum;
	__u64 ip_ttl_zero;
	__u64 frag_in, frag_reassembled, frag_overlap, frag_timeout;
	__u64 frag_no_memory; /* over reasm_max_bytes or _datagrams */
	__u64 frag_evicted; /* partial datagrams dropped to make room */
	__u64 frag_bad; /* offset + length beyond 65535, bad MF */
	__u64 icmp_echo_in, icmp_echo_out, icmp_bad, icmp_unreach_out;
	__u64 udp_bad_len, udp_bad_csum, udp_no_port;
	__u64 tx_frames, tx_full, tx_fragments;
	/* Added with the engine (stack.c and its siblings): */
	__u64 frag_held; /* a fragment buffered until the rest arrive */
	__u64 icmp_other; /* ICMP we take no action on (replies, errors) */
	__u64 arp_probes_out; /* unicast requests refreshing a used entry */
	/* Gauges, not counters: what is held right now. */
	__u64 reasm_datagrams; /* partial datagrams held */
	__u64 reasm_bytes; /* their memory, bookkeeping included */
	__u64 arp_queued; /* datagrams waiting for their next hop's ARP/NDP */
	/* IPv6, rx outcomes: */
	__u64 ip6_bad_header; /* version, length, martian source, chains */
	__u64 nd_solicits_in; /* a neighbour solicitation for our address */
	__u64 nd_adverts_in; /* any neighbour advertisement */
	__u64 nd_bad; /* malformed NDP: hop limit, code, length, options */
	__u64 icmp6_echo_in;
	__u64 icmp6_bad; /* short, bad checksum */
	__u64 icmp6_other; /* ICMPv6 we take no action on */
	/* IPv6, not outcomes (what was sent, or dropped after a wait): */
	__u64 nd_adverts_out, nd_solicits_out, nd_probes_out;
	__u64 nd_unresolved_drops;
	__u64 icmp6_echo_out, icmp6_unreach_out;
};

/*
 * The rx outcomes, whose sum is rx_frames: a frame's outcome is decided
 * when it is processed. A fragment that is kept ends in frag_held; the one
 * that completes its datagram ends where the datagram does (rx_delivered,
 * udp_*, icmp_*); frag_overlap, frag_bad and frag_no_memory count the frame
 * that was refused (and the datagram it belonged to is dropped with it).
 * Not outcomes: frag_in (every fragment), frag_reassembled, frag_evicted and
 * frag_timeout (datagrams), arp_replies_out, arp_requests_out,
 * arp_probes_out, arp_unresolved_drops, icmp_echo_out, icmp_unreach_out and
 * tx_* (what was sent), the gauges. ARP: a request for our address ends in
 * arp_requests_in, any reply in arp_replies_in, a request for another address
 * in rx_not_for_us (it still refreshes an entry we have: gratuitous ARP). Also:
 * rx_bad_eth takes 802.3 (length, not type) frames and multicast sources;
 * rx_not_for_us VLAN-tagged frames and IPv4 sent to the link broadcast (RFC
 * 1122 3.3.6); ip_bad_header martian sources (0/8, 127/8, multicast, 240/4, our
 * own address, our subnet's broadcast); a bad header checksum ends in
 * ip_bad_csum alone; frag_no_memory also a datagram of more than 1024
 * fragments. IPv6: NDP for another target, and IPv6 to a multicast group
 * other than NDP's, end in rx_not_for_us; an IPv6 fragment is counted like
 * an IPv4 one (frag_*); UDP over IPv6 without a checksum in udp_bad_csum.
 */
static inline __u64 vz_stack_stats_outcomes(const struct vz_stack_stats *st)
{
	return st->rx_delivered + st->rx_not_for_us + st->rx_bad_eth +
	       st->arp_requests_in + st->arp_replies_in + st->arp_bad +
	       st->ip_bad_header + st->ip_bad_csum + st->ip_ttl_zero +
	       st->frag_overlap + st->frag_no_memory + st->frag_bad +
	       st->frag_held + st->icmp_echo_in + st->icmp_bad +
	       st->icmp_other + st->udp_bad_len + st->udp_bad_csum +
	       st->udp_no_port + st->ip6_bad_header + st->nd_solicits_in +
	       st->nd_adverts_in + st->nd_bad + st->icmp6_echo_in +
	       st->icmp6_bad + st->icmp6_other;
}

struct vz_stack;

/* NULL with errno EINVAL (bad config, message in err) or ENOMEM. */
struct vz_stack *vz_stack_new(const struct vz_stack_config *cfg,
			      const struct vz_stack_ops *ops, char *err,
			      size_t errlen);
void vz_stack_free(struct vz_stack *s);

/* A received frame; never fails, counts what it refuses. */
void vz_stack_input(struct vz_stack *s, const void *frame, size_t len,
		    __u64 now_ns);

/*
 * Send a datagram from m->src_port (m->src_ip 0: the stack's address) to
 * m->dst_ip:m->dst_port, fragmented above the MTU. With m->v6, from
 * m->src_ip6 (zero: the stack's, or its link-local one for a link-local
 * destination) to m->dst_ip6, the next hop found by NDP; -EAFNOSUPPORT
 * when the stack has no IPv6 address. 0, or a negative errno:
 * -EMSGSIZE (over VZ_STACK_MAX_UDP), -ENETUNREACH (off-link, no gateway),
 * -EAGAIN (the next hop's ARP is pending and its queue is full, or the port
 * is full), -EINVAL (bad address: zero, broadcast, multicast).
 * Also -EINVAL: dst_port 0, a src_ip other than 0 or the stack's, a
 * loopback destination or the stack's own address (no local loop here).
 * 0 also when the datagram was queued for ARP (up to 8 per next hop, 1 MiB
 * in all); it is dropped (arp_unresolved_drops) if resolution fails.
 * A learned next hop in the last sixth of its lifetime is sent to as usual
 * and also asked, by a unicast ARP request to its MAC (arp_probes_out, at
 * most one a second), to confirm itself: the reply renews the entry, so a
 * busy destination never waits for ARP again; no reply, and it expires.
 * ops->tx and ops->deliver must not call back into the same stack, except
 * deliver, which may call vz_stack_send.
 */
int vz_stack_send(struct vz_stack *s, const struct vz_dgram_meta *m,
		  const void *payload, size_t len, __u64 now_ns);

/* Timers: ARP retries and expiry, reassembly timeouts. Call every ms. */
void vz_stack_tick(struct vz_stack *s, __u64 now_ns);

const struct vz_stack_stats *vz_stack_get_stats(const struct vz_stack *s);

#endif
