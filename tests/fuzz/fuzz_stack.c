// SPDX-License-Identifier: BSD-2-Clause
/*
 * The UDP/IP engine under fuzzing: one stack per input, fed a sequence of
 * records made of the input's bytes, with the clock advancing:
 *
 *   0 len16 bytes...          a received frame; 4 instead of 0: with its
 *                             IPv4, UDP, ICMP and ICMPv6 checksums made
 *                             right first, so mutations reach past them
 *   1 dst port16 len16 bytes  vz_stack_send (dst: a byte picking an address,
 *                             IPv6 with its top bit set; a length past the
 *                             input sends a pattern)
 *   2 ms                      the clock moves on, vz_stack_tick
 *   3                         the port fills up (tx fails) or drains
 *
 * It must not crash or leak, every frame must end in one outcome, what it
 * sends must be well-formed (IPv4 checksum, IPv6 length, MTU), what it
 * delivers must be for us, and the reassembly memory must stay under its bound.
 * Any breach aborts. Seeds: tests/fuzz/stack_seeds.py.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <veloz/csum.h>

#include "sock/stack/stack.h"

#define MTU 1280 /* IPv6's least: fragments still come easily */
#define REASM_MAX_BYTES 32768

int LLVMFuzzerTestOneInput(const __u8 *data, size_t size);

static const __u8 our_mac[6] = { 0x02, 0, 0, 0, 0, 0x01 };
/* fd00::1/64, and the link-local address our MAC makes */
static const __u8 our_ip6[16] = { 0xfd, [15] = 1 };
static const __u8 our_ll6[16] = { 0xfe,
				  0x80, [11] = 0xff, [12] = 0xfe, [15] = 1 };
static __u8 pattern[VZ_STACK_MAX_UDP + 1], fixed[65536];

struct ctx {
	int tx_full;
};

static void fail(const char *why)
{
	fprintf(stderr, "fuzz-stack: %s\n", why);
	abort();
}

static __u16 get16(const __u8 *p)
{
	return (__u16)(p[0] << 8 | p[1]);
}

static __u16 csum(__u32 sum, const __u8 *p, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		sum += (__u32)p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += (__u32)p[n - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

static void put_csum(__u8 *at, __u16 v)
{
	at[0] = (__u8)(v >> 8);
	at[1] = (__u8)v;
}

/* IPv6: the L4 checksum of a whole (unfragmented) UDP or ICMPv6 packet. */
static void fix_checksums6(__u8 *ip, size_t avail)
{
	size_t plen = get16(ip + 4), i;
	__u8 *l4 = ip + 40;
	__u32 pseudo = 0;

	if (avail < 40 || 40 + plen > avail)
		return;
	for (i = 8; i < 40; i += 2)
		pseudo += get16(ip + i);
	pseudo += ip[6] + (__u32)plen;
	if (ip[6] == 58 && plen >= 4) {
		put_csum(l4 + 2, 0);
		put_csum(l4 + 2, csum(pseudo, l4, plen));
	} else if (ip[6] == 17 && plen >= 8 && get16(l4 + 4) >= 8 &&
		   get16(l4 + 4) <= plen) {
		plen = get16(l4 + 4);
		pseudo = pseudo - get16(ip + 4) + (__u32)plen;
		put_csum(l4 + 6, 0);
		put_csum(l4 + 6, csum(pseudo, l4, plen));
	}
}

/* Make a frame's checksums right, as far as its lengths allow. */
static void fix_checksums(__u8 *f, size_t len)
{
	__u8 *ip = f + 14, *l4;
	size_t hlen, tot, l4len;
	__u32 pseudo;

	if (len >= 54 && get16(f + 12) == 0x86dd && (ip[0] >> 4) == 6) {
		fix_checksums6(ip, len - 14);
		return;
	}
	if (len < 34 || get16(f + 12) != 0x0800 || (ip[0] >> 4) != 4)
		return;
	hlen = (size_t)(ip[0] & 0xf) * 4;
	tot = get16(ip + 2);
	if (hlen < 20 || 14 + hlen > len)
		return;
	put_csum(ip + 10, 0);
	put_csum(ip + 10, csum(0, ip, hlen));
	if (tot < hlen || 14 + tot > len || (get16(ip + 6) & 0x3fff))
		return; /* a fragment's L4 checksum spans others */
	l4 = ip + hlen;
	l4len = tot - hlen;
	if (ip[9] == 1 && l4len >= 4) {
		put_csum(l4 + 2, 0);
		put_csum(l4 + 2, csum(0, l4, l4len));
	} else if (ip[9] == 17 && l4len >= 8 && get16(l4 + 4) >= 8 &&
		   get16(l4 + 4) <= l4len) {
		l4len = get16(l4 + 4);
		pseudo = (__u32)get16(ip + 12) + get16(ip + 14) +
			 get16(ip + 16) + get16(ip + 18) + 17 + (__u32)l4len;
		put_csum(l4 + 6, 0);
		put_csum(l4 + 6, csum(pseudo, l4, l4len));
	}
}

static int cb_tx(void *opaque, const void *frame, size_t len)
{
	const struct ctx *c = opaque;
	const __u8 *f = frame;
	__u16 hdr[10];

	if (len < 60 || len > 14 + MTU || memcmp(f + 6, our_mac, 6))
		fail("a frame of a bad size or from another MAC");
	if (get16(f + 12) == 0x0800) {
		memcpy(hdr, f + 14, sizeof(hdr));
		if (f[14] != 0x45 || get16(f + 16) > MTU ||
		    get16(f + 16) + 14u > len || vz_ipv4_csum(hdr))
			fail("a bad IPv4 header sent");
	} else if (get16(f + 12) == 0x86dd) {
		if (len < 54 || (f[14] >> 4) != 6 || 40 + get16(f + 18) > MTU ||
		    54u + get16(f + 18) > len)
			fail("a bad IPv6 header sent");
	} else if (get16(f + 12) != 0x0806) {
		fail("neither IPv4, IPv6 nor ARP sent");
	}
	return c->tx_full ? -1 : 0;
}

static int cb_deliver(void *opaque, const struct vz_dgram_meta *m,
		      const void *payload, size_t len)
{
	(void)opaque;
	if ((m->v6 ? memcmp(m->dst_ip6, our_ip6, 16) &&
			     memcmp(m->dst_ip6, our_ll6, 16)
		   : m->dst_ip != htonl(0x0a000001)) ||
	    len > VZ_STACK_MAX_UDP || (len && !payload))
		fail("a datagram not for us delivered");
	return ntohs(m->dst_port) & 1 ? -1 : 0; /* odd ports: closed */
}

static struct vz_stack *stack_up(struct ctx *c)
{
	struct vz_stack_ops ops = { c, cb_tx, cb_deliver };
	struct vz_stack_config cfg;
	char err[128];
	struct vz_stack *s;

	memset(&cfg, 0, sizeof(cfg));
	memcpy(cfg.mac, our_mac, 6);
	cfg.ip4 = htonl(0x0a000001); /* 10.0.0.1/24 */
	cfg.prefix_len = 24;
	cfg.gateway = htonl(0x0a0000fe);
	cfg.mtu = MTU;
	cfg.arp_timeout_ms = 200;
	cfg.arp_retry_ms = 5;
	cfg.reasm_timeout_ms = 100;
	cfg.reasm_max_bytes = REASM_MAX_BYTES;
	cfg.reasm_max_datagrams = 8;
	memcpy(cfg.ip6, our_ip6, 16);
	cfg.prefix6_len = 64;
	cfg.gateway6[0] = 0xfe;
	cfg.gateway6[1] = 0x80;
	cfg.gateway6[15] = 0xfe;
	cfg.nneigh = 1;
	cfg.neigh[0].ip4 = htonl(0x0a000002);
	memcpy(cfg.neigh[0].mac, "\x02\x00\x00\x00\x00\x02", 6);
	s = vz_stack_new(&cfg, &ops, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "fuzz-stack: %s\n", err);
		abort();
	}
	return s;
}

static __be32 pick_dst(__u8 sel)
{
	static const __u32 dst[] = {
		0x0a000002, 0x0a000003, 0x0a000004, 0x08080808, 0,
		0xffffffff, 0x0a0000ff, 0x0a000001, 0xe0000001, 0x7f000001,
	};

	if (sel < sizeof(dst) / sizeof(dst[0]))
		return htonl(dst[sel]);
	return htonl(0x0a000000 | sel); /* elsewhere on-link */
}

/* fd00::2, ::3, ::4 on-link, a peer's link-local address, an off-link
 * one (through the gateway), the unspecified, all-nodes, ours, loopback,
 * IPv4-mapped; else fd00::sel. */
static void pick_dst6(__u8 sel, __u8 *ip)
{
	static const __u8 dst[][16] = {
		{ 0xfd, [15] = 2 },
		{ 0xfd, [15] = 3 },
		{ 0xfd, [15] = 4 },
		{ 0xfe, 0x80, [15] = 2 },
		{ 0x20, 0x01, 0x0d, 0xb8, [15] = 1 },
		{ 0 },
		{ 0xff, 2, [15] = 1 },
		{ 0xfd, [15] = 1 },
		{ [15] = 1 },
		{ [10] = 0xff, [11] = 0xff, 10, 0, 0, 2 },
	};

	if (sel < sizeof(dst) / sizeof(dst[0])) {
		memcpy(ip, dst[sel], 16);
		return;
	}
	memcpy(ip, dst[0], 16);
	ip[15] = sel;
}

static void do_send(struct vz_stack *s, const __u8 **p, const __u8 *end,
		    __u64 now)
{
	struct vz_dgram_meta m = { 0 };
	const __u8 *payload;
	size_t len;

	if (end - *p < 5) {
		*p = end;
		return;
	}
	m.v6 = (*p)[0] >> 7;
	if (m.v6)
		pick_dst6((*p)[0] & 0x7f, m.dst_ip6);
	else
		m.dst_ip = pick_dst((*p)[0]);
	memcpy(&m.dst_port, *p + 1, 2);
	m.src_port = htons(4242);
	len = get16(*p + 3);
	*p += 5;
	if ((size_t)(end - *p) >= len) {
		payload = *p;
		*p += len;
	} else {
		payload = pattern;
	}
	vz_stack_send(s, &m, payload, len, now);
}

int LLVMFuzzerTestOneInput(const __u8 *data, size_t size)
{
	const __u8 *p = data, *end = data + size;
	const struct vz_stack_stats *st;
	struct ctx c = { 0 };
	__u64 now = 1000000000ull;
	struct vz_stack *s = stack_up(&c);
	const __u8 *frame;
	size_t len;
	__u8 op;

	st = vz_stack_get_stats(s);
	while (p < end) {
		now += 1000; /* 1 us a record */
		op = *p++;
		switch (op & 3) {
		case 0:
			len = end - p >= 2 ? get16(p) : 0;
			p += end - p >= 2 ? 2 : end - p;
			if (len > (size_t)(end - p))
				len = end - p;
			frame = p;
			if (op & 4) {
				memcpy(fixed, p, len);
				fix_checksums(fixed, len);
				frame = fixed;
			}
			vz_stack_input(s, frame, len, now);
			p += len;
			break;
		case 1:
			do_send(s, &p, end, now);
			break;
		case 2:
			if (p < end)
				now += (__u64)*p++ * 1000000ull;
			vz_stack_tick(s, now);
			break;
		default:
			c.tx_full = !c.tx_full;
		}
		if (vz_stack_stats_outcomes(st) != st->rx_frames)
			fail("a frame without exactly one outcome");
		if (st->reasm_bytes > REASM_MAX_BYTES)
			fail("reassembly over its memory bound");
	}
	vz_stack_free(s);
	return 0;
}
