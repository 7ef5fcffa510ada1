/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The stack tests' harness (test_stack_arp.c, test_stack_ip.c,
 * test_stack6.c): hosts wired back to back through callbacks, frames built
 * here by hand, and checksums computed with code of the test's own, so a
 * mistake shared with the stack cannot hide. Each test program includes it
 * once; everything is static, so each gets its own hosts and buffers.
 */
#ifndef VZ_TESTS_STACK_HARNESS_H
#define VZ_TESTS_STACK_HARNESS_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sock/stack/stack.h"

#define MAXF 512
#define MS 1000000ull
#define T0 (1000 * MS) /* a clock that does not start at 0 */

struct frame {
	size_t len;
	__u8 *data;
};

struct dgram {
	struct vz_dgram_meta m;
	size_t len;
	__u8 *data;
};

struct host {
	struct vz_stack *s;
	struct vz_stack_config cfg;
	struct frame tx[MAXF];
	unsigned int ntx, fed; /* fed: frames pump() gave the peer */
	struct dgram rx[MAXF];
	unsigned int nrx;
	int tx_full; /* refuse frames */
	__u16 closed_port; /* host order: nobody listens there */
};

static const __u8 bcast[6]
	__attribute__((unused)) = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
static __u8 mac_of[4][6]
	__attribute__((unused)) = { { 0 },
				    { 0x02, 0, 0, 0, 0, 0x01 },
				    { 0x02, 0, 0, 0, 0, 0x02 },
				    { 0x02, 0, 0, 0, 0, 0x03 } };
static __u8 frame[10000] __attribute__((unused));

static inline __be32 ip4(int a, int b, int c, int d)
{
	return htonl((__u32)a << 24 | (__u32)b << 16 | (__u32)c << 8 |
		     (__u32)d);
}

/* -------- the test's own checksum: bytes, big-endian, no tricks -------- */

static inline __u32 t_sum(__u32 sum, const __u8 *p, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		sum += (__u32)p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += (__u32)p[n - 1] << 8;
	return sum;
}

static inline __u16 t_fold(__u32 sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

static inline __u32 t_pseudo(__be32 src, __be32 dst, __u8 proto, size_t len)
{
	__u8 p[12];

	memcpy(p, &src, 4);
	memcpy(p + 4, &dst, 4);
	p[8] = 0;
	p[9] = proto;
	p[10] = (__u8)(len >> 8);
	p[11] = (__u8)len;
	return t_sum(0, p, 12);
}

static inline __u16 get16(const __u8 *p)
{
	return (__u16)(p[0] << 8 | p[1]);
}

static inline void put16(__u8 *p, __u16 v)
{
	p[0] = (__u8)(v >> 8);
	p[1] = (__u8)v;
}

/* ------------------------------ the hosts ------------------------------ */

static inline int cb_tx(void *opaque, const void *f, size_t len)
{
	struct host *h = opaque;

	if (h->tx_full || h->ntx == MAXF)
		return -1;
	h->tx[h->ntx].data = malloc(len);
	memcpy(h->tx[h->ntx].data, f, len);
	h->tx[h->ntx++].len = len;
	return 0;
}

static inline int cb_deliver(void *opaque, const struct vz_dgram_meta *m,
			     const void *payload, size_t len)
{
	struct host *h = opaque;

	if (ntohs(m->dst_port) == h->closed_port || h->nrx == MAXF)
		return -1;
	h->rx[h->nrx].m = *m;
	h->rx[h->nrx].data = malloc(len + 1);
	memcpy(h->rx[h->nrx].data, payload, len);
	h->rx[h->nrx++].len = len;
	return 0;
}

static inline void base_cfg(struct vz_stack_config *c, int n)
{
	memset(c, 0, sizeof(*c));
	memcpy(c->mac, mac_of[n], 6);
	c->ip4 = ip4(10, 0, 0, n);
	c->prefix_len = 24;
}

static inline void host_clear(struct host *h)
{
	unsigned int i;

	for (i = 0; i < h->ntx; i++)
		free(h->tx[i].data);
	for (i = 0; i < h->nrx; i++)
		free(h->rx[i].data);
	h->ntx = h->nrx = h->fed = 0;
}

/* A stack on h->cfg, or on the default config for host n when n > 0. */
static inline void host_up(struct host *h, int n)
{
	struct vz_stack_ops ops = { h, cb_tx, cb_deliver };
	char err[128] = "";

	memset(h->tx, 0, sizeof(h->tx));
	h->ntx = h->nrx = h->fed = 0;
	h->tx_full = 0;
	h->closed_port = 9;
	if (n)
		base_cfg(&h->cfg, n);
	h->s = vz_stack_new(&h->cfg, &ops, err, sizeof(err));
	if (!h->s) {
		fprintf(stderr, "vz_stack_new: %s\n", err);
		exit(1);
	}
}

static inline const struct vz_stack_stats *st(const struct host *h)
{
	return vz_stack_get_stats(h->s);
}

static inline void host_down(struct host *h, const char *test)
{
	const struct vz_stack_stats *t = st(h);

	CHECK(vz_stack_stats_outcomes(t) == t->rx_frames,
	      "%s: %llu frames but %llu outcomes", test,
	      (unsigned long long)t->rx_frames,
	      (unsigned long long)vz_stack_stats_outcomes(t));
	host_clear(h);
	vz_stack_free(h->s);
	h->s = NULL;
}

static inline void input(struct host *h, const void *f, size_t len, __u64 now)
{
	vz_stack_input(h->s, f, len, now);
}

/* New frames one way then the other until both are quiet. */
static inline void pump(struct host *a, struct host *b, __u64 now)
{
	while (a->fed < a->ntx || b->fed < b->ntx) {
		if (a->fed < a->ntx) {
			input(b, a->tx[a->fed].data, a->tx[a->fed].len, now);
			a->fed++;
		}
		if (b->fed < b->ntx) {
			input(a, b->tx[b->fed].data, b->tx[b->fed].len, now);
			b->fed++;
		}
	}
}

/* ---------------------------- frame builders ---------------------------- */

static inline size_t eth(__u8 *f, const __u8 *dst, const __u8 *src, __u16 type)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	put16(f + 12, type);
	return 14;
}

static inline size_t arp_frame(__u8 *f, const __u8 *eth_dst, __u16 op,
			       const __u8 *sha, __be32 spa, const __u8 *tha,
			       __be32 tpa)
{
	__u8 *a = f + eth(f, eth_dst, sha, 0x0806);

	put16(a, 1);
	put16(a + 2, 0x0800);
	a[4] = 6;
	a[5] = 4;
	put16(a + 6, op);
	memcpy(a + 8, sha, 6);
	memcpy(a + 14, &spa, 4);
	memcpy(a + 18, tha, 6);
	memcpy(a + 24, &tpa, 4);
	return 42;
}

/* 10.0.0.2 broadcasts an ARP request for us (10.0.0.1) at `now`: we answer
 * and learn its address from it. */
static inline void peer_asks_for_us(struct host *h, __u64 now)
{
	static const __u8 zero[6];
	size_t n = arp_frame(frame, bcast, 1, mac_of[2], ip4(10, 0, 0, 2), zero,
			     ip4(10, 0, 0, 1));

	input(h, frame, n, now);
}

struct iphdr_spec {
	__be32 src, dst;
	__u8 proto, ttl, ihl;
	__u16 id, frag; /* frag: flags and offset in 8-byte units */
};

/* Ethernet (to host 1, from host 2) + IPv4 + l4; checksum by the test. */
static inline size_t ip_frame(__u8 *f, const struct iphdr_spec *sp,
			      const void *l4, size_t len)
{
	__u8 *ip = f + eth(f, mac_of[1], mac_of[2], 0x0800);
	size_t hlen = (sp->ihl ? sp->ihl : 5) * 4;

	memset(ip, 0, hlen);
	ip[0] = (__u8)(0x40 | hlen / 4);
	put16(ip + 2, (__u16)(hlen + len));
	put16(ip + 4, sp->id);
	put16(ip + 6, sp->frag);
	ip[8] = sp->ttl;
	ip[9] = sp->proto;
	memcpy(ip + 12, &sp->src, 4);
	memcpy(ip + 16, &sp->dst, 4);
	if (hlen > 20)
		ip[20] = 1; /* options: NOPs */
	if (hlen > 21)
		memset(ip + 21, 1, hlen - 21);
	put16(ip + 10, t_fold(t_sum(0, ip, hlen)));
	memcpy(ip + hlen, l4, len);
	return 14 + hlen + len;
}

static inline struct iphdr_spec spec(__u8 proto)
{
	struct iphdr_spec sp = {
		ip4(10, 0, 0, 2), ip4(10, 0, 0, 1), proto, 64, 5, 0x1234, 0
	};
	return sp;
}

/* A UDP message into u; csum 0: leave the checksum 0. */
static inline size_t udp_msg(__u8 *u, __be32 src, __be32 dst, __u16 sport,
			     __u16 dport, const void *payload, size_t len,
			     int csum)
{
	size_t ulen = 8 + len;

	put16(u, sport);
	put16(u + 2, dport);
	put16(u + 4, (__u16)ulen);
	put16(u + 6, 0);
	memcpy(u + 8, payload, len);
	if (csum)
		put16(u + 6,
		      t_fold(t_sum(t_pseudo(src, dst, 17, ulen), u, ulen)));
	return ulen;
}

static inline size_t echo_msg(__u8 *m, __u16 id, __u16 seq, size_t datalen)
{
	size_t i;

	m[0] = 8;
	m[1] = 0;
	put16(m + 2, 0);
	put16(m + 4, id);
	put16(m + 6, seq);
	for (i = 0; i < datalen; i++)
		m[8 + i] = (__u8)(i * 7 + 3);
	put16(m + 2, t_fold(t_sum(0, m, 8 + datalen)));
	return 8 + datalen;
}

static inline size_t udp_frame(__u8 *f, __u16 dport, const void *payload,
			       size_t len)
{
	struct iphdr_spec sp = spec(17);
	__u8 u[2048];
	size_t n = udp_msg(u, sp.src, sp.dst, 5000, dport, payload, len, 1);

	return ip_frame(f, &sp, u, n);
}

/* Feed l4 (proto, id) to h as fragments [cut[i], cut[i + 1]) in `order`. */
static inline void send_frags(struct host *h, __u8 proto, __u16 id,
			      const __u8 *l4, size_t len, const size_t *cut,
			      unsigned int n, const unsigned int *order,
			      __u64 now)
{
	struct iphdr_spec sp = spec(proto);
	unsigned int i, k;
	size_t fl;

	sp.id = id;
	for (i = 0; i < n; i++) {
		k = order ? order[i] : i;
		sp.frag = (__u16)(cut[k] / 8);
		if (k + 1 < n)
			sp.frag |= 0x2000;
		fl = ip_frame(frame, &sp, l4 + cut[k],
			      (k + 1 < n ? cut[k + 1] : len) - cut[k]);
		input(h, frame, fl, now);
	}
}

/* ------------------------------- checkers ------------------------------- */

/* An IPv4 frame we sent: header sane, checksum right. Its IP payload. */
static inline const __u8 *check_ip(const struct frame *f, __u8 proto,
				   __be32 dst, size_t *l4len)
{
	const __u8 *ip = f->data + 14;
	size_t tot;

	CHECK(f->len >= 60, "frame padded to 60 (%zu)", f->len);
	CHECK(get16(f->data + 12) == 0x0800, "IPv4 ethertype");
	CHECK(!memcmp(f->data + 6, mac_of[1], 6) ||
		      !memcmp(f->data + 6, mac_of[2], 6),
	      "from a stack's MAC");
	CHECK(ip[0] == 0x45, "IPv4, no options");
	tot = get16(ip + 2);
	CHECK(tot >= 20 && tot + 14 <= f->len, "total length %zu", tot);
	CHECK(t_fold(t_sum(0, ip, 20)) == 0, "IP header checksum");
	CHECK(ip[8] == 64, "ttl 64");
	CHECK(ip[9] == proto, "protocol %u", ip[9]);
	CHECK(!(get16(ip + 6) & 0x4000), "DF clear");
	CHECK(!memcmp(ip + 16, &dst, 4), "destination");
	*l4len = tot - 20;
	return ip + 20;
}

/* Reassemble frames [first, first + n) of h's tx in the test: fragments in
 * order, 8-byte multiples, one id. Returns the L4 length. */
static inline size_t t_reassemble(const struct host *h, unsigned int first,
				  unsigned int n, __u8 proto, __be32 dst,
				  __u8 *out)
{
	size_t off = 0, len;
	unsigned int i;
	const __u8 *l4, *ip;
	__u16 frag;

	for (i = 0; i < n; i++) {
		l4 = check_ip(&h->tx[first + i], proto, dst, &len);
		ip = h->tx[first + i].data + 14;
		frag = get16(ip + 6);
		CHECK((size_t)(frag & 0x1fff) * 8 == off,
		      "fragment %u at %u, want %zu", i, (frag & 0x1fff) * 8,
		      off);
		CHECK(!!(frag & 0x2000) == (i + 1 < n), "MF of fragment %u", i);
		CHECK(i + 1 == n || len % 8 == 0, "fragment %u: %zu bytes", i,
		      len);
		CHECK(get16(ip + 4) == get16(h->tx[first].data + 18), "one id");
		memcpy(out + off, l4, len);
		off += len;
	}
	return off;
}

/* --------------------------------- ARP --------------------------------- */

/* fd00:198:18::n, and host n's link-local address from its MAC */
static inline void ip6_of(__u8 *a, int n)
{
	memset(a, 0, 16);
	a[0] = 0xfd;
	a[2] = 0x01;
	a[3] = 0x98;
	a[5] = 0x18;
	a[15] = (__u8)n;
}

static inline void ll6_of(__u8 *a, int n)
{
	memset(a, 0, 16);
	a[0] = 0xfe;
	a[1] = 0x80;
	a[8] = mac_of[n][0] ^ 2;
	a[9] = mac_of[n][1];
	a[10] = mac_of[n][2];
	a[11] = 0xff;
	a[12] = 0xfe;
	a[13] = mac_of[n][3];
	a[14] = mac_of[n][4];
	a[15] = mac_of[n][5];
}

static inline void snm_of(__u8 *g, const __u8 *a)
{
	static const __u8 pfx[13] = { 0xff, 2, 0, 0, 0, 0,   0,
				      0,    0, 0, 0, 1, 0xff };

	memcpy(g, pfx, 13);
	memcpy(g + 13, a + 13, 3);
}

static inline void host6_up(struct host *h, int n)
{
	base_cfg(&h->cfg, n);
	ip6_of(h->cfg.ip6, n);
	host_up(h, 0);
}

static inline __u32 t_pseudo6(const __u8 *src, const __u8 *dst, __u8 proto,
			      size_t len)
{
	__u8 p[40] = { 0 };

	memcpy(p, src, 16);
	memcpy(p + 16, dst, 16);
	p[34] = (__u8)(len >> 8);
	p[35] = (__u8)len;
	p[39] = proto;
	return t_sum(0, p, 40);
}

/* Ethernet + IPv6 + l4 (next header nh), to dst_mac from host 2's MAC. */
static inline size_t ip6_frame(__u8 *f, const __u8 *dst_mac, const __u8 *src,
			       const __u8 *dst, __u8 nh, __u8 hops,
			       const void *l4, size_t len)
{
	__u8 *ip = f + eth(f, dst_mac, mac_of[2], 0x86dd);

	memset(ip, 0, 40);
	ip[0] = 0x60;
	put16(ip + 4, (__u16)len);
	ip[6] = nh;
	ip[7] = hops;
	memcpy(ip + 8, src, 16);
	memcpy(ip + 24, dst, 16);
	memcpy(ip + 40, l4, len);
	return 14 + 40 + len;
}

/* Set an ICMPv6 message's checksum (m[2..3]) for src -> dst. */
static inline void icmp6_sum(__u8 *m, size_t len, const __u8 *src,
			     const __u8 *dst)
{
	put16(m + 2, 0);
	put16(m + 2, t_fold(t_sum(t_pseudo6(src, dst, 58, len), m, len)));
}

/* NS (135) or NA (136) for target, with a link-layer option of `mac` (opt
 * 1 or 2; 0: none); flags: NA's. Checksum set. The length. */
static inline size_t nd_msg(__u8 *m, __u8 type, __u8 flags, const __u8 *target,
			    __u8 opt, const __u8 *mac, const __u8 *src,
			    const __u8 *dst)
{
	size_t len = 24;

	memset(m, 0, 32);
	m[0] = type;
	m[4] = flags;
	memcpy(m + 8, target, 16);
	if (opt) {
		m[24] = opt;
		m[25] = 1;
		memcpy(m + 26, mac, 6);
		len = 32;
	}
	icmp6_sum(m, len, src, dst);
	return len;
}

/* An IPv6 frame we sent: its header checked; its l4 and length. */
static inline const __u8 *check_ip6(const struct frame *f, __u8 nh,
				    const __u8 *dst, size_t *l4len)
{
	const __u8 *ip = f->data + 14;

	CHECK(get16(f->data + 12) == 0x86dd, "IPv6 ethertype");
	CHECK(ip[0] == 0x60, "version 6");
	CHECK(ip[6] == nh, "next header %u, want %u", ip[6], nh);
	CHECK(!memcmp(ip + 24, dst, 16), "destination");
	*l4len = get16(ip + 4);
	CHECK(14 + 40 + *l4len <= f->len, "payload length within the frame");
	return ip + 40;
}

#endif
