// SPDX-License-Identifier: BSD-2-Clause
/*
 * The UDP/IP engine's IPv4 above ARP, against frames built by hand: ICMP
 * echo and port unreachable with its rate limit; UDP checks; bad IP headers;
 * reassembly in any order, overlaps, floods and timeouts; fragmentation
 * through a second stack; send errors.
 * After each test every received frame must sit in one outcome.
 */
#include "stack_harness.h"

static void check_echo_reply(const __u8 *r, size_t rlen, const __u8 *req,
			     size_t len)
{
	CHECK(rlen == len, "reply length %zu, want %zu", rlen, len);
	if (rlen != len)
		return;
	CHECK(r[0] == 0 && r[1] == 0, "echo reply");
	CHECK(t_fold(t_sum(0, r, rlen)) == 0, "ICMP checksum over all");
	CHECK(!memcmp(r + 4, req + 4, len - 4), "same id, seq and data");
}

static void test_icmp_echo(void)
{
	size_t n, len, cut[3] = { 0, 1480, 2960 };
	unsigned int order[3] = { 2, 0, 1 };
	static __u8 msg[4000], out[4000];
	struct iphdr_spec sp = spec(1);
	const __u8 *r;
	struct host h;

	host_up(&h, 1);
	len = echo_msg(msg, 0x4242, 7, 56);
	n = ip_frame(frame, &sp, msg, len);
	input(&h, frame, n, T0);
	CHECK(h.ntx == 1 && st(&h)->icmp_echo_in == 1 &&
		      st(&h)->icmp_echo_out == 1,
	      "echo answered");
	if (h.ntx == 1) {
		r = check_ip(&h.tx[0], 1, sp.src, &n);
		CHECK(!memcmp(h.tx[0].data, mac_of[2], 6),
		      "to the asker's MAC");
		check_echo_reply(r, n, msg, len);
	}
	msg[10] ^= 1; /* data changed, checksum not */
	n = ip_frame(frame, &sp, msg, len);
	input(&h, frame, n, T0);
	CHECK(st(&h)->icmp_bad == 1 && h.ntx == 1, "bad ICMP checksum");
	msg[10] ^= 1;
	input(&h, frame, ip_frame(frame, &sp, msg, 4), T0);
	CHECK(st(&h)->icmp_bad == 2, "short ICMP");
	/* 3000 bytes, fragmented and shuffled: the reply is fragmented too */
	host_clear(&h);
	len = echo_msg(msg, 0x4243, 8, 2992);
	send_frags(&h, 1, 77, msg, len, cut, 3, order, T0);
	CHECK(st(&h)->frag_reassembled == 1 && h.ntx == 3 &&
		      st(&h)->tx_fragments == 3,
	      "3000-byte echo answered in 3 fragments (%u)", h.ntx);
	if (h.ntx == 3) {
		n = t_reassemble(&h, 0, 3, 1, sp.src, out);
		check_echo_reply(out, n, msg, len);
	}
	/* an echo reply to us: taken, not answered */
	msg[0] = 0;
	put16(msg + 2, 0);
	put16(msg + 2, t_fold(t_sum(0, msg, 64)));
	input(&h, frame, ip_frame(frame, &sp, msg, 64), T0);
	CHECK(st(&h)->icmp_other == 1 && h.ntx == 3, "echo reply ignored");
	host_down(&h, "icmp echo");
}

static void test_port_unreach(void)
{
	__u8 payload[20] = "hello, nobody";
	const __u8 *r, *sent;
	struct host h;
	size_t n, len;
	int i;

	host_up(&h, 1);
	n = udp_frame(frame, 9, payload, sizeof(payload));
	input(&h, frame, n, T0);
	CHECK(st(&h)->udp_no_port == 1 && h.ntx == 1 &&
		      st(&h)->icmp_unreach_out == 1,
	      "port unreachable sent");
	if (h.ntx == 1) {
		r = check_ip(&h.tx[0], 1, ip4(10, 0, 0, 2), &len);
		sent = frame + 14;
		CHECK(len == 8 + 20 + 8, "header + 8 bytes quoted (%zu)", len);
		CHECK(r[0] == 3 && r[1] == 3, "type 3 code 3");
		CHECK(t_fold(t_sum(0, r, len)) == 0, "ICMP checksum");
		CHECK(len == 36 && !memcmp(r + 8, sent, 28),
		      "the offending header and UDP header");
	}
	for (i = 0; i < 149; i++)
		input(&h, frame, n, T0);
	CHECK(st(&h)->udp_no_port == 150 && st(&h)->icmp_unreach_out == 100,
	      "rate-limited to 100 at once (%llu)",
	      (unsigned long long)st(&h)->icmp_unreach_out);
	input(&h, frame, n, T0 + 10 * MS);
	input(&h, frame, n, T0 + 10 * MS);
	CHECK(st(&h)->icmp_unreach_out == 101, "one token per 10 ms");
	input(&h, frame, n, T0 + 5000 * MS);
	CHECK(st(&h)->icmp_unreach_out == 102 && h.ntx == 102, "refilled");
	host_down(&h, "port unreachable");
}

/* --------------------------------- UDP --------------------------------- */

static void test_udp_rx(void)
{
	struct iphdr_spec sp = spec(17);
	__u8 payload[100], u[200];
	struct host h;
	size_t n, ul;
	unsigned int i;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (__u8)(i ^ 0x5a);
	host_up(&h, 1);
	n = udp_frame(frame, 7000, payload, sizeof(payload));
	input(&h, frame, n, T0);
	CHECK(h.nrx == 1 && h.rx[0].len == 100 &&
		      !memcmp(h.rx[0].data, payload, 100),
	      "delivered");
	CHECK(h.nrx == 1 && h.rx[0].m.src_ip == sp.src &&
		      h.rx[0].m.dst_ip == sp.dst &&
		      ntohs(h.rx[0].m.src_port) == 5000 &&
		      ntohs(h.rx[0].m.dst_port) == 7000,
	      "addresses");
	frame[n - 1] ^= 0xff;
	input(&h, frame, n, T0);
	CHECK(h.nrx == 1 && st(&h)->udp_bad_csum == 1, "bad checksum dropped");
	ul = udp_msg(u, sp.src, sp.dst, 5000, 7000, payload, 10, 0);
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	CHECK(h.nrx == 2 && h.rx[1].len == 10, "zero checksum accepted");
	/* a short payload: the frame is padded to 60 and the pad ignored */
	ul = udp_msg(u, sp.src, sp.dst, 5000, 7000, payload, 2, 1);
	n = ip_frame(frame, &sp, u, ul);
	memset(frame + n, 0xee, 60 - n);
	input(&h, frame, 60, T0);
	CHECK(h.nrx == 3 && h.rx[2].len == 2, "Ethernet padding ignored");
	/* the UDP length: longer than the IP payload, shorter than 8 */
	ul = udp_msg(u, sp.src, sp.dst, 5000, 7000, payload, 10, 0);
	put16(u + 4, 19);
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	put16(u + 4, 7);
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	input(&h, frame, ip_frame(frame, &sp, u, 5), T0);
	CHECK(st(&h)->udp_bad_len == 3 && h.nrx == 3, "bad lengths dropped");
	/* shorter than the IP payload: the surplus is not the payload */
	put16(u + 4, 12);
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	CHECK(h.nrx == 4 && h.rx[3].len == 4, "UDP length wins");
	/* IP options are skipped */
	sp.ihl = 7;
	ul = udp_msg(u, sp.src, sp.dst, 5000, 7000, payload, 30, 1);
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	CHECK(h.nrx == 5 && h.rx[4].len == 30 &&
		      !memcmp(h.rx[4].data, payload, 30),
	      "options skipped");
	CHECK(st(&h)->rx_delivered == 5, "5 delivered");
	host_down(&h, "udp rx");
}

static void test_ip_bad(void)
{
	struct iphdr_spec sp = spec(17);
	__u8 payload[32] = { 0 }, u[64];
	struct host h;
	size_t n, ul;

	host_up(&h, 1);
	ul = udp_msg(u, sp.src, sp.dst, 5000, 7000, payload, 32, 1);
	n = ip_frame(frame, &sp, u, ul);
	input(&h, frame, 10, T0);
	CHECK(st(&h)->rx_bad_eth == 1, "runt");
	put16(frame + 12, 100);
	input(&h, frame, n, T0);
	CHECK(st(&h)->rx_bad_eth == 2, "802.3 length, not a type");
	put16(frame + 12, 0x8100);
	input(&h, frame, n, T0);
	put16(frame + 12, 0x86dd);
	input(&h, frame, n, T0);
	CHECK(st(&h)->rx_not_for_us == 2, "VLAN tag, IPv6: not ours");
	put16(frame + 12, 0x0800);
	memcpy(frame, mac_of[3], 6);
	input(&h, frame, n, T0);
	memcpy(frame, bcast, 6);
	input(&h, frame, n, T0);
	CHECK(st(&h)->rx_not_for_us == 4, "another MAC, broadcast IP");
	memcpy(frame, mac_of[1], 6);
	input(&h, frame, 14 + 19, T0);
	frame[14] = 0x65;
	input(&h, frame, n, T0);
	frame[14] = 0x44;
	input(&h, frame, n, T0);
	frame[14] = 0x45;
	input(&h, frame, n - 1, T0); /* total length past the frame */
	CHECK(st(&h)->ip_bad_header == 4, "short, v6, IHL 4, total length");
	frame[14 + 8] = 63; /* ttl changed, checksum not */
	input(&h, frame, n, T0);
	CHECK(st(&h)->ip_bad_csum == 1, "header checksum");
	sp.ttl = 0;
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	CHECK(st(&h)->ip_ttl_zero == 1, "ttl 0");
	sp = spec(17);
	sp.dst = ip4(10, 0, 0, 9);
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	sp = spec(6);
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	CHECK(st(&h)->rx_not_for_us == 6, "other IP, TCP");
	sp = spec(17);
	sp.src = ip4(10, 0, 0, 255);
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	sp.src = ip4(10, 0, 0, 1);
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	CHECK(st(&h)->ip_bad_header == 6, "martian sources");
	CHECK(h.nrx == 0 && h.ntx == 0, "nothing delivered or sent");
	host_down(&h, "ip bad");
}

/*
 * The header checks the others do not reach: a multicast Ethernet source,
 * options past the frame, a total length shorter than the header, a header
 * with no room for UDP, and a lone last fragment (held, not delivered).
 */
static void test_ip_bad_lengths(void)
{
	struct iphdr_spec sp = spec(17);
	__u8 payload[32] = { 0 }, u[64];
	struct host h;
	size_t n, ul;

	host_up(&h, 1);
	ul = udp_msg(u, sp.src, sp.dst, 5000, 7000, payload, 8, 1);
	n = ip_frame(frame, &sp, u, ul);
	frame[6] |= 1;
	input(&h, frame, n, T0);
	CHECK(st(&h)->rx_bad_eth == 1, "multicast Ethernet source");
	frame[6] &= (__u8)~1;
	frame[14] = 0x4f; /* 60 bytes of header in a 36-byte packet */
	input(&h, frame, n, T0);
	CHECK(st(&h)->ip_bad_header == 1, "IHL past the frame");
	sp.ihl = 6;
	n = ip_frame(frame, &sp, u, ul);
	put16(frame + 14 + 2, 20); /* shorter than its own 24-byte header */
	input(&h, frame, n, T0);
	CHECK(st(&h)->ip_bad_header == 2, "total length below IHL");
	put16(frame + 14 + 2, 24); /* the header alone: valid, no UDP */
	put16(frame + 14 + 10, 0);
	put16(frame + 14 + 10, t_fold(t_sum(0, frame + 14, 24)));
	input(&h, frame, n, T0);
	CHECK(st(&h)->ip_bad_header == 2 && st(&h)->udp_bad_len == 1,
	      "an empty datagram: UDP too short");
	sp = spec(17);
	sp.frag = 0x0003; /* offset 24, MF clear: a last fragment */
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	CHECK(st(&h)->frag_held == 1 && h.nrx == 0, "last fragment held");
	sp.frag = 0x2000 | 0x0001; /* MF and an offset: a middle one */
	input(&h, frame, ip_frame(frame, &sp, u, ul), T0);
	CHECK(st(&h)->frag_held == 2 && h.nrx == 0, "middle fragment held");
	CHECK(h.ntx == 0, "nothing sent");
	host_down(&h, "ip bad lengths");
}

/* A frame at an odd address (no port hands one in, a caller may) is taken
 * alike: delivered whole, answered, refused for the same reasons. */
static void test_odd_address(void)
{
	static __u8 buf[2048] __attribute__((aligned(8)));
	struct iphdr_spec sp = spec(17);
	__u8 payload[40], u[64];
	struct host h;
	size_t n, ul;
	unsigned int i;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (__u8)(i * 7);
	host_up(&h, 1);
	ul = udp_msg(u, sp.src, sp.dst, 5000, 7000, payload, 40, 1);
	n = ip_frame(frame, &sp, u, ul);
	memcpy(buf + 1, frame, n);
	input(&h, buf + 1, n, T0);
	CHECK(h.nrx == 1 && h.rx[0].len == 40 &&
		      !memcmp(h.rx[0].data, payload, 40),
	      "delivered from an odd address");
	ul = udp_msg(u, sp.src, sp.dst, 5000, 9, payload, 40, 1);
	n = ip_frame(frame, &sp, u, ul);
	memcpy(buf + 3, frame, n);
	input(&h, buf + 3, n, T0);
	CHECK(st(&h)->udp_no_port == 1 && st(&h)->icmp_unreach_out == 1,
	      "port unreachable from an odd address");
	memcpy(buf + 1, frame, n);
	buf[1 + 14] = 0x44;
	input(&h, buf + 1, n, T0);
	CHECK(st(&h)->ip_bad_header == 1 && h.nrx == 1, "IHL 4 refused");
	host_down(&h, "odd address");
}

/* ------------------------------ reassembly ------------------------------ */

static void test_reasm_orders(void)
{
	static __u8 payload[3000], u[3100];
	unsigned int order[10], i, k, j, t;
	size_t cut[10], ul;
	struct host h;
	__be32 src = ip4(10, 0, 0, 2), dst = ip4(10, 0, 0, 1);

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (__u8)(i * 13);
	ul = udp_msg(u, src, dst, 5000, 7000, payload, sizeof(payload), 1);
	for (i = 0; i < 10; i++)
		cut[i] = i * 304; /* 10 pieces, the last 272 bytes */
	srand(7);
	host_up(&h, 1);
	for (k = 0; k < 3; k++) {
		for (i = 0; i < 10; i++)
			order[i] = k == 1 ? 9 - i : i;
		for (i = 9; k == 2 && i > 0; i--) {
			j = (unsigned int)rand() % (i + 1);
			t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		send_frags(&h, 17, (__u16)(100 + k), u, ul, cut, 10, order, T0);
		CHECK(h.nrx == k + 1 && h.rx[k].len == sizeof(payload) &&
			      !memcmp(h.rx[k].data, payload, sizeof(payload)),
		      "order %u: delivered whole", k);
	}
	CHECK(st(&h)->frag_in == 30 && st(&h)->frag_held == 27 &&
		      st(&h)->frag_reassembled == 3,
	      "30 in, 27 held, 3 whole");
	CHECK(st(&h)->reasm_datagrams == 0 && st(&h)->reasm_bytes == 0,
	      "nothing left held");
	host_down(&h, "reasm orders");
}

static void test_reasm_overlap(void)
{
	static __u8 payload[2000], u[2100];
	__be32 src = ip4(10, 0, 0, 2), dst = ip4(10, 0, 0, 1);
	size_t ul, cut[3] = { 0, 800, 1600 };
	struct iphdr_spec sp = spec(17);
	struct host h;
	size_t n;

	ul = udp_msg(u, src, dst, 5000, 7000, payload, sizeof(payload), 1);
	host_up(&h, 1);
	/* [0, 800) then [792, end): 8 bytes overlap */
	sp.id = 1;
	sp.frag = 0x2000;
	input(&h, frame, ip_frame(frame, &sp, u, 800), T0);
	sp.frag = 792 / 8;
	input(&h, frame, ip_frame(frame, &sp, u + 792, ul - 792), T0);
	CHECK(st(&h)->frag_overlap == 1 && st(&h)->reasm_datagrams == 0,
	      "overlap drops the datagram");
	/* the rest of it cannot resurrect it */
	sp.frag = 800 / 8;
	input(&h, frame, ip_frame(frame, &sp, u + 800, ul - 800), T0);
	CHECK(h.nrx == 0 && st(&h)->reasm_datagrams == 1, "not delivered");
	/* a clean one goes through; a repeated fragment is an overlap */
	send_frags(&h, 17, 2, u, ul, cut, 3, NULL, T0);
	CHECK(h.nrx == 1, "clean one delivered");
	sp.id = 3;
	sp.frag = 0x2000 | 100;
	n = ip_frame(frame, &sp, u + 800, 800);
	input(&h, frame, n, T0);
	input(&h, frame, n, T0);
	CHECK(st(&h)->frag_overlap == 2 && st(&h)->reasm_datagrams == 1,
	      "duplicate dropped");
	/* teardrop: [0, 24), then [8, 16) inside it */
	sp.id = 4;
	sp.frag = 0x2000;
	input(&h, frame, ip_frame(frame, &sp, u, 24), T0);
	sp.frag = 0x2000 | 1;
	input(&h, frame, ip_frame(frame, &sp, u, 8), T0);
	CHECK(st(&h)->frag_overlap == 3 && st(&h)->reasm_datagrams == 1,
	      "teardrop refused");
	/* a last fragment ending before data already held */
	sp.id = 5;
	sp.frag = 0x2000;
	input(&h, frame, ip_frame(frame, &sp, u, 24), T0);
	sp.frag = 1;
	input(&h, frame, ip_frame(frame, &sp, u, 4), T0);
	sp.id = 6;
	sp.frag = 0x2000 | 4;
	input(&h, frame, ip_frame(frame, &sp, u, 24), T0);
	sp.frag = 1;
	input(&h, frame, ip_frame(frame, &sp, u, 8), T0);
	CHECK(st(&h)->frag_bad == 2 && st(&h)->reasm_datagrams == 1,
	      "ends before held data");
	/* MF with a length not a multiple of 8; past 65535 */
	sp.id = 7;
	sp.frag = 0x2000;
	input(&h, frame, ip_frame(frame, &sp, u, 12), T0);
	sp.frag = 8189; /* 65512 + 20 + 8 > 65535 */
	input(&h, frame, ip_frame(frame, &sp, u, 8), T0);
	CHECK(st(&h)->frag_bad == 4, "bad fragments: %llu",
	      (unsigned long long)st(&h)->frag_bad);
	CHECK(h.nrx == 1, "only the clean datagram delivered");
	host_down(&h, "reasm overlap");
}

static void test_reasm_limits(void)
{
	__u8 u[1480] = { 0 };
	struct iphdr_spec sp = spec(17);
	struct host h;
	unsigned int i;

	base_cfg(&h.cfg, 1);
	h.cfg.reasm_max_datagrams = 4;
	h.cfg.reasm_max_bytes = 64 * 1024;
	host_up(&h, 0);
	sp.frag = 0x2000;
	for (i = 0; i < 10; i++) {
		sp.id = (__u16)i;
		input(&h, frame, ip_frame(frame, &sp, u, 8), T0);
	}
	/* a flood: each new datagram evicts the oldest, nothing is refused */
	CHECK(st(&h)->frag_held == 10 && st(&h)->frag_evicted == 6 &&
		      st(&h)->frag_no_memory == 0 &&
		      st(&h)->reasm_datagrams == 4,
	      "4 datagrams held, 6 evicted");
	/* so a datagram whose fragments come after the flood completes */
	sp.id = 100;
	input(&h, frame, ip_frame(frame, &sp, u, 8), T0);
	sp.frag = 1;
	input(&h, frame, ip_frame(frame, &sp, u, 8), T0);
	CHECK(st(&h)->frag_reassembled == 1 && st(&h)->frag_evicted == 7,
	      "reassembled after the flood (one more evicted for it)");
	sp.frag = 0x2000;
	/* a fragment claiming the end of a 64 KiB datagram costs its size */
	sp.id = 1;
	sp.frag = 8000;
	input(&h, frame, ip_frame(frame, &sp, u, 8), T0);
	CHECK(st(&h)->reasm_bytes < 2048, "memory follows what arrived: %llu",
	      (unsigned long long)st(&h)->reasm_bytes);
	host_down(&h, "reasm datagrams");

	base_cfg(&h.cfg, 1);
	h.cfg.reasm_max_bytes = 8000;
	host_up(&h, 0);
	sp.id = 1;
	for (i = 0; i < 20; i++) {
		sp.frag = (__u16)(0x2000 | (i * 1480 / 8));
		input(&h, frame, ip_frame(frame, &sp, u, 1480), T0);
		CHECK(st(&h)->reasm_bytes <= 8000, "bounded: %llu",
		      (unsigned long long)st(&h)->reasm_bytes);
	}
	CHECK(st(&h)->frag_no_memory >= 1 && st(&h)->frag_held >= 4,
	      "byte limit hit");
	CHECK(st(&h)->frag_held + st(&h)->frag_no_memory == 20, "accounted");
	host_down(&h, "reasm bytes");
}

static void test_reasm_timeout(void)
{
	struct iphdr_spec sp = spec(17);
	__u8 u[64] = { 0 };
	struct host h;

	base_cfg(&h.cfg, 1);
	h.cfg.reasm_timeout_ms = 2000;
	host_up(&h, 0);
	sp.frag = 0x2000;
	input(&h, frame, ip_frame(frame, &sp, u, 64), T0);
	sp.id++;
	input(&h, frame, ip_frame(frame, &sp, u, 64), T0 + 500 * MS);
	vz_stack_tick(h.s, T0 + 1999 * MS);
	CHECK(st(&h)->reasm_datagrams == 2, "held until the timeout");
	vz_stack_tick(h.s, T0 + 2000 * MS);
	CHECK(st(&h)->reasm_datagrams == 1 && st(&h)->frag_timeout == 1,
	      "the first timed out");
	vz_stack_tick(h.s, T0 + 2500 * MS);
	CHECK(st(&h)->reasm_datagrams == 0 && st(&h)->reasm_bytes == 0 &&
		      st(&h)->frag_timeout == 2,
	      "all freed");
	/* the rest of a timed-out datagram starts afresh, and is held */
	sp.frag = 8;
	input(&h, frame, ip_frame(frame, &sp, u, 64), T0 + 3000 * MS);
	CHECK(h.nrx == 0 && st(&h)->reasm_datagrams == 1, "not delivered");
	host_down(&h, "reasm timeout");
}

/* ------------------------------- sending ------------------------------- */

static void test_send_fragments(void)
{
	struct vz_dgram_meta m = { .src_ip = 0,
				   .dst_ip = ip4(10, 0, 0, 2),
				   .src_port = htons(1234),
				   .dst_port = htons(4321) };
	static __u8 payload[VZ_STACK_MAX_UDP], out[70000];
	size_t n, i;
	struct host a, b;
	unsigned int first;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (__u8)(i * 31 + (i >> 8));
	host_up(&a, 1);
	host_up(&b, 2);
	CHECK(vz_stack_send(a.s, &m, payload, 4000, T0) == 0, "send 4000");
	pump(&a, &b, T0); /* ARP request, reply, then the datagram */
	CHECK(a.ntx == 4 && b.ntx == 1, "ARP + 3 fragments (%u, %u)", a.ntx,
	      b.ntx);
	CHECK(st(&a)->tx_fragments == 3, "3 fragments counted");
	if (a.ntx == 4) {
		n = t_reassemble(&a, 1, 3, 17, m.dst_ip, out);
		CHECK(n == 4008 && get16(out + 4) == 4008, "UDP length");
		CHECK(get16(a.tx[1].data + 16) == 1500 &&
			      get16(a.tx[3].data + 16) == 20 + 1048,
		      "1480 + 1480 + 1048");
		CHECK(t_fold(t_sum(t_pseudo(ip4(10, 0, 0, 1), m.dst_ip, 17, n),
				   out, n)) == 0,
		      "UDP checksum");
		CHECK(!memcmp(out + 8, payload, 4000), "payload");
	}
	CHECK(b.nrx == 1 && b.rx[0].len == 4000 &&
		      !memcmp(b.rx[0].data, payload, 4000),
	      "the second stack reassembled it");
	CHECK(b.nrx == 1 && b.rx[0].m.src_ip == ip4(10, 0, 0, 1) &&
		      ntohs(b.rx[0].m.src_port) == 1234 &&
		      ntohs(b.rx[0].m.dst_port) == 4321,
	      "addresses");
	/* the largest datagram: 45 fragments */
	first = a.ntx;
	CHECK(vz_stack_send(a.s, &m, payload, VZ_STACK_MAX_UDP, T0) == 0,
	      "send the largest");
	pump(&a, &b, T0);
	CHECK(a.ntx - first == 45 && b.nrx == 2 &&
		      b.rx[1].len == VZ_STACK_MAX_UDP &&
		      !memcmp(b.rx[1].data, payload, VZ_STACK_MAX_UDP),
	      "65507 bytes across (%u frames, %u delivered)", a.ntx - first,
	      b.nrx);
	CHECK(get16(a.tx[first].data + 18) != get16(a.tx[1].data + 18),
	      "a new IP id per datagram");
	/* and an empty one, unfragmented */
	CHECK(vz_stack_send(a.s, &m, NULL, 0, T0) == 0, "empty datagram");
	pump(&a, &b, T0);
	CHECK(b.nrx == 3 && b.rx[2].len == 0, "empty delivered");
	host_down(&a, "send a");
	host_down(&b, "send b");
}

static void test_send_errors(void)
{
	struct vz_dgram_meta m = { .src_ip = 0,
				   .dst_ip = ip4(10, 0, 0, 2),
				   .src_port = htons(1),
				   .dst_port = htons(2) };
	static __u8 payload[VZ_STACK_MAX_UDP + 1];
	__be32 bad[] = { 0,
			 ip4(255, 255, 255, 255),
			 ip4(224, 0, 0, 1),
			 ip4(10, 0, 0, 255),
			 ip4(10, 0, 0, 1),
			 ip4(127, 0, 0, 1) };
	struct host h;
	unsigned int i;

	host_up(&h, 1);
	CHECK(vz_stack_send(h.s, &m, payload, sizeof(payload), T0) == -EMSGSIZE,
	      "too big");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m.dst_ip = bad[i];
		CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -EINVAL,
		      "bad destination %u", i);
	}
	m.dst_ip = ip4(10, 0, 0, 2);
	m.dst_port = 0;
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -EINVAL, "port 0");
	m.dst_port = htons(2);
	m.src_ip = ip4(10, 0, 0, 7);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -EINVAL, "not our source");
	m.src_ip = 0;
	m.dst_ip = ip4(192, 168, 1, 1);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -ENETUNREACH,
	      "off-link without a gateway");
	CHECK(h.ntx == 0, "nothing sent");
	host_down(&h, "send errors");
}

/* Off-link through the gateway: its MAC, the zero checksum sent as 0xffff,
 * fragments at a small MTU, and a full port. */
static void test_send_gateway(void)
{
	struct vz_dgram_meta m = { .src_port = htons(1), .dst_port = htons(2) };
	static __u8 payload[3000], out[4000];
	struct vz_stack_neigh gw = { ip4(10, 0, 0, 254),
				     { 2, 0, 0, 0, 0, 0xfe } };
	struct host h;
	__u8 chk[2];
	unsigned int i;
	const __u8 *u;
	size_t len;

	base_cfg(&h.cfg, 1);
	h.cfg.gateway = gw.ip4;
	h.cfg.nneigh = 1;
	h.cfg.neigh[0] = gw;
	h.cfg.mtu = 1002; /* 982 bytes of room: fragments carry 976 */
	host_up(&h, 0);
	/* a payload whose checksum comes out 0: sent as 0xffff */
	memset(payload, 0, 4);
	m.dst_ip = ip4(192, 168, 1, 1);
	CHECK(vz_stack_send(h.s, &m, payload, 4, T0) == 0 && h.ntx == 1,
	      "off-link: through the gateway");
	if (h.ntx == 1) {
		u = check_ip(&h.tx[0], 17, m.dst_ip, &len);
		CHECK(!memcmp(h.tx[0].data, gw.mac, 6), "to the gateway's MAC");
		memcpy(chk, u + 6, 2);
		memcpy(payload + 2, chk, 2); /* cancels the sum */
		host_clear(&h);
		CHECK(vz_stack_send(h.s, &m, payload, 4, T0) == 0 && h.ntx == 1,
		      "sent");
		u = check_ip(&h.tx[0], 17, m.dst_ip, &len);
		CHECK(get16(u + 6) == 0xffff, "checksum 0 sent as 0xffff");
		CHECK(t_fold(t_sum(
			      t_pseudo(ip4(10, 0, 0, 1), m.dst_ip, 17, len), u,
			      len)) == 0,
		      "and valid");
	}
	host_clear(&h);
	for (i = 0; i < 3000; i++)
		payload[i] = (__u8)i;
	CHECK(vz_stack_send(h.s, &m, payload, 3000, T0) == 0 && h.ntx == 4,
	      "3000 bytes at MTU 1002: 4 fragments (%u)", h.ntx);
	if (h.ntx == 4) {
		len = t_reassemble(&h, 0, 4, 17, m.dst_ip, out);
		CHECK(len == 3008 && get16(h.tx[0].data + 16) == 996 &&
			      !memcmp(out + 8, payload, 3000),
		      "976 * 3 + 80");
		CHECK(t_fold(t_sum(
			      t_pseudo(ip4(10, 0, 0, 1), m.dst_ip, 17, len),
			      out, len)) == 0,
		      "UDP checksum over the fragments");
	}
	h.tx_full = 1;
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == -EAGAIN &&
		      st(&h)->tx_full == 1,
	      "port full: -EAGAIN");
	host_down(&h, "send gateway");
}

int main(void)
{
	test_icmp_echo();
	test_port_unreach();
	test_udp_rx();
	test_ip_bad();
	test_ip_bad_lengths();
	test_odd_address();
	test_reasm_orders();
	test_reasm_overlap();
	test_reasm_limits();
	test_reasm_timeout();
	test_send_fragments();
	test_send_errors();
	test_send_gateway();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
