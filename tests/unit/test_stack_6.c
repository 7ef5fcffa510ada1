// SPDX-License-Identifier: BSD-2-Clause
/*
 * The UDP/IP engine's IPv6, against frames built by hand: configuration,
 * NDP answers, resolution and hostile NDP, ICMPv6 echo, UDP with its
 * mandatory checksum, bad headers, fragments both ways.
 * After each test every received frame must sit in one outcome.
 */
#include "stack_harness.h"

static void test_nd_answer(void)
{
	__u8 us[16], peer[16], group[16], ll[16], msg[64], gmac[6];
	static const __u8 unspec[16],
		all_nodes_mac[6] = { 0x33, 0x33, 0, 0, 0, 1 };
	struct vz_dgram_meta m = { .v6 = 1,
				   .src_port = htons(1000),
				   .dst_port = htons(2000) };
	const __u8 *r, *ip;
	struct host h;
	size_t n, len;

	ip6_of(us, 1);
	ip6_of(peer, 2);
	snm_of(group, us);
	gmac[0] = gmac[1] = 0x33;
	memcpy(gmac + 2, group + 12, 4);
	host6_up(&h, 1);
	len = nd_msg(msg, 135, 0, us, 1, mac_of[2], peer, group);
	input(&h, frame, ip6_frame(frame, gmac, peer, group, 58, 255, msg, len),
	      T0);
	CHECK(h.ntx == 1 && st(&h)->nd_solicits_in == 1 &&
		      st(&h)->nd_adverts_out == 1,
	      "a solicitation answered");
	if (h.ntx == 1) {
		r = check_ip6(&h.tx[0], 58, peer, &n);
		ip = h.tx[0].data + 14;
		CHECK(!memcmp(h.tx[0].data, mac_of[2], 6) &&
			      !memcmp(h.tx[0].data + 6, mac_of[1], 6),
		      "to the asker's MAC, from ours");
		CHECK(ip[7] == 255 && !memcmp(ip + 8, us, 16),
		      "hop limit 255, from the target");
		CHECK(n == 32 && r[0] == 136 && r[1] == 0 && r[4] == 0x60 &&
			      !memcmp(r + 8, us, 16),
		      "NA, solicited and override, our target");
		CHECK(r[24] == 2 && r[25] == 1 && !memcmp(r + 26, mac_of[1], 6),
		      "target link-layer address: our MAC");
		CHECK(t_fold(t_sum(t_pseudo6(us, peer, 58, n), r, n)) == 0,
		      "ICMPv6 checksum");
	}
	/* the asker was learned: the datagram goes straight to it */
	memcpy(m.dst_ip6, peer, 16);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == 0 && h.ntx == 2 &&
		      !memcmp(h.tx[1].data, mac_of[2], 6) &&
		      st(&h)->nd_solicits_out == 0,
	      "sent to the learned MAC without asking");
	/* for our link-local address too */
	ll6_of(ll, 1);
	snm_of(group, ll);
	len = nd_msg(msg, 135, 0, ll, 1, mac_of[2], peer, group);
	input(&h, frame, ip6_frame(frame, gmac, peer, group, 58, 255, msg, len),
	      T0);
	CHECK(h.ntx == 3 && st(&h)->nd_solicits_in == 2,
	      "link-local target answered");
	/* for another target: not ours */
	ip6_of(ll, 9);
	snm_of(group, us);
	len = nd_msg(msg, 135, 0, ll, 1, mac_of[2], peer, group);
	input(&h, frame, ip6_frame(frame, gmac, peer, group, 58, 255, msg, len),
	      T0);
	CHECK(h.ntx == 3 && st(&h)->rx_not_for_us == 1, "another target");
	/* duplicate address detection: defended to all nodes, unsolicited */
	len = nd_msg(msg, 135, 0, us, 0, NULL, unspec, group);
	input(&h, frame,
	      ip6_frame(frame, gmac, unspec, group, 58, 255, msg, len), T0);
	CHECK(h.ntx == 4 && !memcmp(h.tx[3].data, all_nodes_mac, 6) &&
		      h.tx[3].data + 14 + 40 < h.tx[3].data + h.tx[3].len &&
		      h.tx[3].data[14 + 40 + 4] == 0x20,
	      "DAD probe answered to all nodes, S clear");
	host_down(&h, "nd answer");
}

static void test_nd_bad(void)
{
	__u8 us[16], peer[16], group[16], msg[64], gmac[6] = { 0x33, 0x33 };
	static const __u8 unspec[16];
	struct host h;
	size_t len;

	ip6_of(us, 1);
	ip6_of(peer, 2);
	snm_of(group, us);
	memcpy(gmac + 2, group + 12, 4);
	host6_up(&h, 1);
#define NS_IN(hops)      \
	input(&h, frame, \
	      ip6_frame(frame, gmac, peer, group, 58, hops, msg, len), T0)
	len = nd_msg(msg, 135, 0, us, 1, mac_of[2], peer, group);
	NS_IN(254); /* from beyond a router */
	CHECK(st(&h)->nd_bad == 1, "hop limit 254");
	msg[1] = 1;
	icmp6_sum(msg, len, peer, group);
	NS_IN(255);
	CHECK(st(&h)->nd_bad == 2, "code 1");
	len = nd_msg(msg, 135, 0, us, 1, mac_of[2], peer, group);
	msg[25] = 0;
	icmp6_sum(msg, len, peer, group);
	NS_IN(255);
	CHECK(st(&h)->nd_bad == 3, "option of length 0");
	msg[25] = 2; /* claims 16 bytes, 8 are there */
	icmp6_sum(msg, len, peer, group);
	NS_IN(255);
	CHECK(st(&h)->nd_bad == 4, "truncated option");
	msg[25] = 1;
	icmp6_sum(msg, 28, peer, group);
	len = 28; /* half an option */
	NS_IN(255);
	CHECK(st(&h)->nd_bad == 5, "half an option");
	len = nd_msg(msg, 135, 0, us, 0, NULL, peer, group);
	icmp6_sum(msg, 20, peer, group);
	len = 20;
	NS_IN(255);
	CHECK(st(&h)->nd_bad == 6, "shorter than 24 bytes");
	len = nd_msg(msg, 135, 0, group, 1, mac_of[2], peer, group);
	NS_IN(255);
	CHECK(st(&h)->nd_bad == 7, "multicast target");
	len = nd_msg(msg, 135, 0, us, 1, mac_of[2], unspec, group);
	input(&h, frame,
	      ip6_frame(frame, gmac, unspec, group, 58, 255, msg, len), T0);
	CHECK(st(&h)->nd_bad == 8, "DAD probe with an address option");
	len = nd_msg(msg, 135, 0, us, 1, bcast, peer, group);
	NS_IN(255);
	CHECK(st(&h)->nd_bad == 9, "broadcast link-layer address");
	len = nd_msg(msg, 136, 0x40, peer, 2, mac_of[2], peer, group);
	NS_IN(255);
	CHECK(st(&h)->nd_bad == 10, "solicited advertisement to a group");
	len = nd_msg(msg, 135, 0, us, 1, mac_of[2], peer, group);
	msg[30] ^= 1; /* checksum no longer right */
	NS_IN(255);
	CHECK(st(&h)->icmp6_bad == 1 && st(&h)->nd_bad == 10, "checksum");
#undef NS_IN
	CHECK(h.ntx == 0 && st(&h)->nd_solicits_in == 0, "nothing answered");
	host_down(&h, "nd bad");
}

static void test_nd_resolve(void)
{
	struct vz_dgram_meta m = { .v6 = 1,
				   .src_port = htons(1000),
				   .dst_port = htons(2000) };
	__u8 us[16], peer[16], group[16], msg[64];
	const __u8 *r;
	struct host a, b;
	size_t n;
	int i;

	ip6_of(us, 1);
	ip6_of(peer, 2);
	snm_of(group, peer);
	host6_up(&a, 1);
	memcpy(m.dst_ip6, peer, 16);
	CHECK(vz_stack_send(a.s, &m, "hello", 5, T0) == 0, "queued");
	CHECK(a.ntx == 1 && st(&a)->nd_solicits_out == 1 &&
		      st(&a)->arp_queued == 1,
	      "one solicitation, the datagram waits");
	if (a.ntx == 1) {
		r = check_ip6(&a.tx[0], 58, group, &n);
		CHECK(a.tx[0].data[0] == 0x33 && a.tx[0].data[1] == 0x33 &&
			      !memcmp(a.tx[0].data + 2, group + 12, 4),
		      "to the solicited-node group's MAC");
		CHECK(a.tx[0].data[14 + 7] == 255 && r[0] == 135 &&
			      !memcmp(r + 8, peer, 16) && r[24] == 1 &&
			      !memcmp(r + 26, mac_of[1], 6),
		      "NS for the peer, with our address option");
		CHECK(t_fold(t_sum(t_pseudo6(us, group, 58, n), r, n)) == 0,
		      "NS checksum");
	}
	/* the advertisement sends what waited */
	n = nd_msg(msg, 136, 0x60, peer, 2, mac_of[2], peer, us);
	input(&a, frame, ip6_frame(frame, mac_of[1], peer, us, 58, 255, msg, n),
	      T0);
	CHECK(a.ntx == 2 && st(&a)->nd_adverts_in == 1 &&
		      st(&a)->arp_queued == 0,
	      "the datagram follows the answer");
	if (a.ntx == 2) {
		r = check_ip6(&a.tx[1], 17, peer, &n);
		CHECK(!memcmp(a.tx[1].data, mac_of[2], 6) && n == 13 &&
			      !memcmp(r + 8, "hello", 5),
		      "UDP to the peer's MAC");
		CHECK(t_fold(t_sum(t_pseudo6(us, peer, 17, n), r, n)) == 0 &&
			      get16(r + 6),
		      "UDP checksum, never 0");
	}
	/* nobody answers: 3 solicitations, then the datagram is dropped */
	ip6_of(peer, 7);
	memcpy(m.dst_ip6, peer, 16);
	CHECK(vz_stack_send(a.s, &m, "x", 1, T0) == 0, "queued for ::7");
	for (i = 1; i <= 3; i++)
		vz_stack_tick(a.s, T0 + (__u64)i * 1001 * MS);
	CHECK(st(&a)->nd_solicits_out == 4 &&
		      st(&a)->nd_unresolved_drops == 1 &&
		      st(&a)->arp_queued == 0,
	      "3 tries, then dropped (%llu, %llu)",
	      (unsigned long long)st(&a)->nd_solicits_out,
	      (unsigned long long)st(&a)->nd_unresolved_drops);
	host_down(&a, "nd resolve");
	/* two stacks: NDP both ways, then the datagram */
	host6_up(&a, 1);
	host6_up(&b, 2);
	ip6_of(peer, 2);
	memcpy(m.dst_ip6, peer, 16);
	CHECK(vz_stack_send(a.s, &m, "both", 4, T0) == 0, "send a -> b");
	pump(&a, &b, T0);
	CHECK(b.nrx == 1 && b.rx[0].m.v6 &&
		      !memcmp(b.rx[0].m.src_ip6, us, 16) &&
		      !memcmp(b.rx[0].m.dst_ip6, peer, 16) &&
		      !b.rx[0].m.src_ip && b.rx[0].len == 4 &&
		      !memcmp(b.rx[0].data, "both", 4),
	      "delivered with IPv6 addresses");
	host_down(&a, "nd a");
	host_down(&b, "nd b");
}

static void test_icmp6_echo(void)
{
	__u8 us[16], peer[16], ll[16], msg[128];
	const __u8 *r;
	struct host h;
	size_t n, i;

	ip6_of(us, 1);
	ip6_of(peer, 2);
	ll6_of(ll, 1);
	host6_up(&h, 1);
	memset(msg, 0, sizeof(msg));
	msg[0] = 128;
	put16(msg + 4, 0x4242);
	put16(msg + 6, 7);
	for (i = 8; i < 64; i++)
		msg[i] = (__u8)(i * 3);
	icmp6_sum(msg, 64, peer, us);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 58, 64, msg, 64),
	      T0);
	CHECK(h.ntx == 1 && st(&h)->icmp6_echo_in == 1 &&
		      st(&h)->icmp6_echo_out == 1,
	      "echo answered");
	if (h.ntx == 1) {
		r = check_ip6(&h.tx[0], 58, peer, &n);
		CHECK(!memcmp(h.tx[0].data, mac_of[2], 6) && n == 64 &&
			      r[0] == 129 && !memcmp(r + 4, msg + 4, 60),
		      "echo reply: id, sequence, data");
		CHECK(t_fold(t_sum(t_pseudo6(us, peer, 58, n), r, n)) == 0,
		      "reply checksum");
	}
	/* to the link-local address: answered from it */
	icmp6_sum(msg, 64, peer, ll);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, ll, 58, 64, msg, 64),
	      T0);
	CHECK(h.ntx == 2 && !memcmp(h.tx[1].data + 14 + 8, ll, 16),
	      "link-local echo answered from the link-local address");
	msg[20] ^= 1;
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, ll, 58, 64, msg, 64),
	      T0);
	CHECK(st(&h)->icmp6_bad == 1 && h.ntx == 2, "bad checksum");
	msg[0] = 129; /* a reply: taken, not answered */
	icmp6_sum(msg, 64, peer, us);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 58, 64, msg, 64),
	      T0);
	CHECK(st(&h)->icmp6_other == 1 && h.ntx == 2, "echo reply ignored");
	host_down(&h, "icmp6 echo");
}

static size_t udp6_msg(__u8 *u, const __u8 *src, const __u8 *dst, __u16 dport,
		       const void *payload, size_t len)
{
	size_t ulen = 8 + len;

	put16(u, 5000);
	put16(u + 2, dport);
	put16(u + 4, (__u16)ulen);
	put16(u + 6, 0);
	memcpy(u + 8, payload, len);
	put16(u + 6, t_fold(t_sum(t_pseudo6(src, dst, 17, ulen), u, ulen)));
	return ulen;
}

static void test_udp6_rx(void)
{
	__u8 us[16], peer[16], u[256], all[16] = { 0xff, 2, [15] = 1 };
	const __u8 *r;
	struct host h;
	size_t n, len;

	ip6_of(us, 1);
	ip6_of(peer, 2);
	host6_up(&h, 1);
	n = udp6_msg(u, peer, us, 7000, "datagram", 8);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 17, 64, u, n),
	      T0);
	CHECK(h.nrx == 1 && h.rx[0].m.v6 && ntohs(h.rx[0].m.dst_port) == 7000 &&
		      !memcmp(h.rx[0].m.src_ip6, peer, 16) &&
		      h.rx[0].len == 8 && !memcmp(h.rx[0].data, "datagram", 8),
	      "delivered");
	put16(u + 6, 0);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 17, 64, u, n),
	      T0);
	CHECK(st(&h)->udp_bad_csum == 1 && h.nrx == 1,
	      "no checksum: refused over IPv6");
	n = udp6_msg(u, peer, us, 7000, "datagram", 8);
	u[9] ^= 1;
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 17, 64, u, n),
	      T0);
	CHECK(st(&h)->udp_bad_csum == 2, "bad checksum");
	n = udp6_msg(u, peer, us, 9, "nobody", 6);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 17, 64, u, n),
	      T0);
	CHECK(st(&h)->udp_no_port == 1 && st(&h)->icmp6_unreach_out == 1 &&
		      h.ntx == 1,
	      "port unreachable");
	if (h.ntx == 1) {
		r = check_ip6(&h.tx[0], 58, peer, &len);
		CHECK(r[0] == 1 && r[1] == 4 && len == 8 + 40 + n &&
			      !memcmp(r + 8, frame + 14, 40 + n),
		      "type 1 code 4, the packet quoted");
		CHECK(t_fold(t_sum(t_pseudo6(us, peer, 58, len), r, len)) == 0,
		      "checksum");
	}
	n = udp6_msg(u, peer, all, 7000, "group", 5);
	input(&h, frame,
	      ip6_frame(frame, (const __u8 *)"\x33\x33\0\0\0\x01", peer, all,
			17, 64, u, n),
	      T0);
	CHECK(st(&h)->rx_not_for_us == 1 && h.nrx == 1, "UDP to all nodes");
	host_down(&h, "udp6 rx");
}

static void test_ip6_bad(void)
{
	__u8 us[16], peer[16], other[16], u[64];
	static const __u8 loop[16] = { [15] = 1 }, group[16] = { 0xff, 2 };
	struct host h;
	size_t n, f;

	ip6_of(us, 1);
	ip6_of(peer, 2);
	ip6_of(other, 9);
	host6_up(&h, 1);
	n = udp6_msg(u, peer, us, 7000, "x", 1);
	f = ip6_frame(frame, mac_of[1], peer, us, 17, 64, u, n);
	input(&h, frame, 14 + 39, T0);
	frame[14] = 0x40;
	input(&h, frame, f, T0);
	frame[14] = 0x60;
	input(&h, frame, f - 1, T0); /* payload length past the frame */
	input(&h, frame, ip6_frame(frame, mac_of[1], loop, us, 17, 64, u, n),
	      T0);
	input(&h, frame, ip6_frame(frame, mac_of[1], us, us, 17, 64, u, n), T0);
	input(&h, frame, ip6_frame(frame, mac_of[1], group, us, 17, 64, u, n),
	      T0);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 17, 64, u, 4),
	      T0); /* a fragment header cut short is the next case */
	CHECK(st(&h)->ip6_bad_header == 6,
	      "short, version, length, loopback/own/multicast source (%llu)",
	      (unsigned long long)st(&h)->ip6_bad_header);
	CHECK(st(&h)->udp_bad_len == 1, "UDP header cut short");
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 44, 64, u, 4),
	      T0);
	CHECK(st(&h)->ip6_bad_header == 7, "fragment header cut short");
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, other, 17, 64, u, n),
	      T0);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 0, 64, u, n),
	      T0);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 6, 64, u, n),
	      T0);
	CHECK(st(&h)->rx_not_for_us == 3,
	      "another address, hop-by-hop options, TCP: not ours");
	CHECK(h.ntx == 0 && h.nrx == 0, "nothing delivered or sent");
	host_down(&h, "ip6 bad");
	/* a stack without IPv6 takes none of it */
	host_up(&h, 1);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 17, 64, u, n),
	      T0);
	CHECK(st(&h)->rx_not_for_us == 1, "no IPv6 configured");
	host_down(&h, "ip6 none");
}

/*
 * What ipv6.c decides on the way in that the others do not reach: other
 * extension headers, a Fragment header carrying TCP or sent to a group,
 * a lone non-first fragment, bytes past the payload length, ICMPv6 too
 * short for its header or for an echo.
 */
static void test_ip6_edges(void)
{
	__u8 us[16], peer[16], u[64], fr[64], msg[16];
	static const __u8 all[16] = { 0xff, 2, [15] = 1 };
	static const __u8 all_mac[6] = { 0x33, 0x33, 0, 0, 0, 1 };
	struct host h;
	size_t n, f;

	ip6_of(us, 1);
	ip6_of(peer, 2);
	host6_up(&h, 1);
	n = udp6_msg(u, peer, us, 7000, "x", 1);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 43, 64, u, n),
	      T0);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 60, 64, u, n),
	      T0);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 59, 64, u, n),
	      T0);
	CHECK(st(&h)->rx_not_for_us == 3,
	      "routing, destination options, no next header: not ours");
	memset(fr, 0, sizeof(fr));
	fr[0] = 6;
	memcpy(fr + 8, u, n);
	input(&h, frame,
	      ip6_frame(frame, mac_of[1], peer, us, 44, 64, fr, 8 + n), T0);
	fr[0] = 17;
	input(&h, frame,
	      ip6_frame(frame, all_mac, peer, all, 44, 64, fr, 8 + n), T0);
	CHECK(st(&h)->rx_not_for_us == 5 && st(&h)->frag_in == 0,
	      "fragmented TCP, a fragment to a group: not ours");
	put16(fr + 2, 8); /* offset 8, M clear: a last fragment alone */
	input(&h, frame,
	      ip6_frame(frame, mac_of[1], peer, us, 44, 64, fr, 8 + n), T0);
	CHECK(st(&h)->frag_held == 1 && h.nrx == 0, "last fragment held");
	/* trailing bytes past the payload length are not the datagram's */
	f = ip6_frame(frame, mac_of[1], peer, us, 17, 64, u, n);
	memset(frame + f, 0xee, 6);
	input(&h, frame, f + 6, T0);
	CHECK(h.nrx == 1 && h.rx[0].len == 1, "trailing bytes ignored");
	memset(msg, 0, sizeof(msg));
	msg[0] = 128;
	icmp6_sum(msg, 3, peer, us);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 58, 64, msg, 3),
	      T0);
	CHECK(st(&h)->icmp6_bad == 1, "ICMPv6 shorter than 4 bytes");
	icmp6_sum(msg, 6, peer, us);
	input(&h, frame, ip6_frame(frame, mac_of[1], peer, us, 58, 64, msg, 6),
	      T0);
	CHECK(st(&h)->icmp6_bad == 2 && st(&h)->icmp6_echo_in == 0,
	      "an echo request shorter than 8 bytes");
	CHECK(h.ntx == 0, "nothing sent");
	host_down(&h, "ip6 edges");
}

/* Feed l4 (next header nh, id) as IPv6 fragments [cut[i], cut[i + 1]). */
static void send_frags6(struct host *h, __u8 nh, __u32 id, const __u8 *l4,
			size_t len, const size_t *cut, unsigned int n,
			const unsigned int *order)
{
	static __u8 fr[2000];
	__u8 us[16], peer[16];
	unsigned int i, k;
	size_t piece;

	ip6_of(us, 1);
	ip6_of(peer, 2);
	for (i = 0; i < n; i++) {
		k = order ? order[i] : i;
		piece = (k + 1 < n ? cut[k + 1] : len) - cut[k];
		fr[0] = nh;
		fr[1] = 0;
		put16(fr + 2, (__u16)(cut[k] | (k + 1 < n ? 1 : 0)));
		put16(fr + 4, (__u16)(id >> 16));
		put16(fr + 6, (__u16)id);
		memcpy(fr + 8, l4 + cut[k], piece);
		input(h, frame,
		      ip6_frame(frame, mac_of[1], peer, us, 44, 64, fr,
				8 + piece),
		      T0);
	}
}

/* One IPv6 fragment of a UDP datagram to host 1 from host 2. */
static void frag6_one(struct host *h, __u32 id, size_t off, bool more,
		      const __u8 *data, size_t len)
{
	static __u8 fr[2000];
	__u8 us[16], peer[16];

	ip6_of(us, 1);
	ip6_of(peer, 2);
	fr[0] = 17;
	fr[1] = 0;
	put16(fr + 2, (__u16)(off | (more ? 1 : 0)));
	put16(fr + 4, (__u16)(id >> 16));
	put16(fr + 6, (__u16)id);
	memcpy(fr + 8, data, len);
	input(h, frame,
	      ip6_frame(frame, mac_of[1], peer, us, 44, 64, fr, 8 + len), T0);
}

static void test_frag6(void)
{
	struct vz_dgram_meta m = { .v6 = 1,
				   .src_port = htons(1234),
				   .dst_port = htons(4321) };
	static __u8 payload[VZ_STACK_MAX_UDP], u[4000], msg[64];
	size_t cut[3] = { 0, 1232, 2464 }, n, i;
	unsigned int order[3] = { 2, 0, 1 };
	__u8 us[16], peer[16], group[16], gmac[6] = { 0x33, 0x33 };
	struct host a, b;
	unsigned int first;

	ip6_of(us, 1);
	ip6_of(peer, 2);
	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (__u8)(i * 31 + (i >> 8));
	/* hand-made fragments, shuffled */
	host6_up(&a, 1);
	n = udp6_msg(u, peer, us, 7000, payload, 3000);
	send_frags6(&a, 17, 0xabcdef01, u, n, cut, 3, order);
	CHECK(a.nrx == 1 && a.rx[0].len == 3000 &&
		      !memcmp(a.rx[0].data, payload, 3000) &&
		      st(&a)->frag_reassembled == 1 && st(&a)->frag_held == 2,
	      "3 fragments reassembled");
	/* overlapping: the datagram dies (RFC 5722) */
	frag6_one(&a, 3, 0, true, u, 1232);
	frag6_one(&a, 3, 1224, false, u + 1224, 64); /* 8 bytes over */
	CHECK(st(&a)->frag_overlap == 1 && a.nrx == 1 &&
		      st(&a)->reasm_datagrams == 0,
	      "overlap refused, nothing held");
	/* an atomic fragment is a whole packet */
	cut[0] = 0;
	n = udp6_msg(u, peer, us, 7000, "atom", 4);
	send_frags6(&a, 17, 4, u, n, cut, 1, NULL);
	CHECK(a.nrx == 2 && a.rx[1].len == 4, "atomic fragment delivered");
	/* NDP in a fragment is refused (RFC 6980) */
	snm_of(group, us);
	memcpy(gmac + 2, group + 12, 4);
	n = nd_msg(msg, 135, 0, us, 1, mac_of[2], peer, us);
	send_frags6(&a, 58, 5, msg, n, cut, 1, NULL);
	CHECK(st(&a)->nd_bad == 1 && st(&a)->nd_solicits_in == 0,
	      "fragmented NDP refused");
	host_down(&a, "frag6 in");

	/* two stacks: 4000 bytes in 4 fragments of at most 1500 */
	host6_up(&a, 1);
	host6_up(&b, 2);
	memcpy(m.dst_ip6, peer, 16);
	CHECK(vz_stack_send(a.s, &m, payload, 4000, T0) == 0, "send 4000");
	pump(&a, &b, T0);
	CHECK(st(&a)->tx_fragments == 3 && b.nrx == 1 && b.rx[0].len == 4000 &&
		      !memcmp(b.rx[0].data, payload, 4000),
	      "4000 bytes across in 3 fragments (%llu)",
	      (unsigned long long)st(&a)->tx_fragments);
	for (i = 0; i < a.ntx; i++)
		CHECK(a.tx[i].len <= 14 + 1500, "frame %zu within the MTU", i);
	first = a.ntx;
	CHECK(vz_stack_send(a.s, &m, payload, VZ_STACK_MAX_UDP, T0) == 0,
	      "send the largest");
	pump(&a, &b, T0);
	CHECK(b.nrx == 2 && b.rx[1].len == VZ_STACK_MAX_UDP &&
		      !memcmp(b.rx[1].data, payload, VZ_STACK_MAX_UDP),
	      "65507 bytes across (%u frames)", a.ntx - first);
	host_down(&a, "frag6 a");
	host_down(&b, "frag6 b");
}

static void test_config6(void)
{
	struct vz_stack_ops ops = { NULL, cb_tx, cb_deliver };
	struct vz_stack_config c;
	struct vz_dgram_meta m = { .v6 = 1, .dst_port = htons(1) };
	struct host h;
	char err[128];

	base_cfg(&c, 1);
	c.ip6[0] = 0xff;
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)) && strstr(err, "ip6"),
	      "multicast ip6 refused: %s", err);
	base_cfg(&c, 1);
	ip6_of(c.ip6, 1);
	c.mtu = 1000;
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)) && strstr(err, "1280"),
	      "mtu below 1280 refused: %s", err);
	base_cfg(&c, 1);
	ip6_of(c.ip6, 1);
	c.gateway6[0] = 0x20;
	c.gateway6[15] = 1;
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)) &&
		      strstr(err, "gateway6"),
	      "off-link gateway refused: %s", err);
	base_cfg(&c, 1);
	c.prefix6_len = 129;
	ip6_of(c.ip6, 1);
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)), "prefix 129 refused");
	/* sending */
	host_up(&h, 1);
	ip6_of(m.dst_ip6, 2);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -EAFNOSUPPORT,
	      "no IPv6 address: EAFNOSUPPORT");
	host_down(&h, "no ip6");
	host6_up(&h, 1);
	m.dst_ip6[0] = 0xff;
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -EINVAL, "to a group");
	ip6_of(m.dst_ip6, 1);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -EINVAL, "to ourselves");
	m.dst_ip6[0] = 0x20;
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -ENETUNREACH,
	      "off-link, no gateway");
	ip6_of(m.dst_ip6, 2);
	m.src_ip6[0] = 0xfd;
	m.src_ip6[15] = 5;
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -EINVAL,
	      "a source not ours");
	host_down(&h, "send6 errors");
}

int main(void)
{
	test_config6();
	test_nd_answer();
	test_nd_bad();
	test_nd_resolve();
	test_icmp6_echo();
	test_udp6_rx();
	test_ip6_bad();
	test_ip6_edges();
	test_frag6();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
