// SPDX-License-Identifier: BSD-2-Clause
/*
 * The UDP/IP engine against frames built here by hand (the checksums too,
 * with code of the test's own, so a shared mistake cannot hide): ARP
 * answers, resolution, retries, expiry and static neighbours; ICMP echo and
 * port unreachable with its rate limit; UDP checks; reassembly in any
 * order, overlaps, floods and timeouts; fragmentation through a second
 * stack; and IPv6 beside it: NDP answers, resolution and hostile NDP,
 * ICMPv6 echo, UDP with its mandatory checksum, fragments both ways.
 * After each test every received frame must sit in one outcome.
 */
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

static const __u8 bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
static __u8 mac_of[4][6] = { { 0 },
			     { 0x02, 0, 0, 0, 0, 0x01 },
			     { 0x02, 0, 0, 0, 0, 0x02 },
			     { 0x02, 0, 0, 0, 0, 0x03 } };
static __u8 frame[10000];

static __be32 ip4(int a, int b, int c, int d)
{
	return htonl((__u32)a << 24 | (__u32)b << 16 | (__u32)c << 8 |
		     (__u32)d);
}

/* -------- the test's own checksum: bytes, big-endian, no tricks -------- */

static __u32 t_sum(__u32 sum, const __u8 *p, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		sum += (__u32)p[i] << 8 | p[i + 1];
	if (n & 1)
		sum += (__u32)p[n - 1] << 8;
	return sum;
}

static __u16 t_fold(__u32 sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

static __u32 t_pseudo(__be32 src, __be32 dst, __u8 proto, size_t len)
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

static __u16 get16(const __u8 *p)
{
	return (__u16)(p[0] << 8 | p[1]);
}

static void put16(__u8 *p, __u16 v)
{
	p[0] = (__u8)(v >> 8);
	p[1] = (__u8)v;
}

/* ------------------------------ the hosts ------------------------------ */

static int cb_tx(void *opaque, const void *f, size_t len)
{
	struct host *h = opaque;

	if (h->tx_full || h->ntx == MAXF)
		return -1;
	h->tx[h->ntx].data = malloc(len);
	memcpy(h->tx[h->ntx].data, f, len);
	h->tx[h->ntx++].len = len;
	return 0;
}

static int cb_deliver(void *opaque, const struct vz_dgram_meta *m,
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

static void base_cfg(struct vz_stack_config *c, int n)
{
	memset(c, 0, sizeof(*c));
	memcpy(c->mac, mac_of[n], 6);
	c->ip4 = ip4(10, 0, 0, n);
	c->prefix_len = 24;
}

static void host_clear(struct host *h)
{
	unsigned int i;

	for (i = 0; i < h->ntx; i++)
		free(h->tx[i].data);
	for (i = 0; i < h->nrx; i++)
		free(h->rx[i].data);
	h->ntx = h->nrx = h->fed = 0;
}

/* A stack on h->cfg, or on the default config for host n when n > 0. */
static void host_up(struct host *h, int n)
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

static const struct vz_stack_stats *st(const struct host *h)
{
	return vz_stack_get_stats(h->s);
}

static void host_down(struct host *h, const char *test)
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

static void input(struct host *h, const void *f, size_t len, __u64 now)
{
	vz_stack_input(h->s, f, len, now);
}

/* New frames one way then the other until both are quiet. */
static void pump(struct host *a, struct host *b, __u64 now)
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

static size_t eth(__u8 *f, const __u8 *dst, const __u8 *src, __u16 type)
{
	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	put16(f + 12, type);
	return 14;
}

static size_t arp_frame(__u8 *f, const __u8 *eth_dst, __u16 op, const __u8 *sha,
			__be32 spa, const __u8 *tha, __be32 tpa)
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
static void peer_asks_for_us(struct host *h, __u64 now)
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
static size_t ip_frame(__u8 *f, const struct iphdr_spec *sp, const void *l4,
		       size_t len)
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

static struct iphdr_spec spec(__u8 proto)
{
	struct iphdr_spec sp = {
		ip4(10, 0, 0, 2), ip4(10, 0, 0, 1), proto, 64, 5, 0x1234, 0
	};
	return sp;
}

/* A UDP message into u; csum 0: leave the checksum 0. */
static size_t udp_msg(__u8 *u, __be32 src, __be32 dst, __u16 sport, __u16 dport,
		      const void *payload, size_t len, int csum)
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

static size_t echo_msg(__u8 *m, __u16 id, __u16 seq, size_t datalen)
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

static size_t udp_frame(__u8 *f, __u16 dport, const void *payload, size_t len)
{
	struct iphdr_spec sp = spec(17);
	__u8 u[2048];
	size_t n = udp_msg(u, sp.src, sp.dst, 5000, dport, payload, len, 1);

	return ip_frame(f, &sp, u, n);
}

/* Feed l4 (proto, id) to h as fragments [cut[i], cut[i + 1]) in `order`. */
static void send_frags(struct host *h, __u8 proto, __u16 id, const __u8 *l4,
		       size_t len, const size_t *cut, unsigned int n,
		       const unsigned int *order, __u64 now)
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
static const __u8 *check_ip(const struct frame *f, __u8 proto, __be32 dst,
			    size_t *l4len)
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
static size_t t_reassemble(const struct host *h, unsigned int first,
			   unsigned int n, __u8 proto, __be32 dst, __u8 *out)
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

static void test_config(void)
{
	struct vz_stack_ops ops = { NULL, cb_tx, cb_deliver };
	struct vz_stack_config c;
	char err[128];

	base_cfg(&c, 1);
	c.mac[0] = 1;
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)) && errno == EINVAL,
	      "multicast MAC refused");
	base_cfg(&c, 1);
	c.ip4 = 0;
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)), "ip 0 refused");
	base_cfg(&c, 1);
	c.prefix_len = 33;
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)) && strstr(err, "33"),
	      "prefix 33 refused: %s", err);
	base_cfg(&c, 1);
	c.gateway = ip4(10, 0, 1, 1);
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)),
	      "off-link gateway refused");
	base_cfg(&c, 1);
	c.mtu = 67;
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)), "mtu 67 refused");
	base_cfg(&c, 1);
	c.nneigh = 2;
	c.neigh[0].ip4 = c.neigh[1].ip4 = ip4(10, 0, 0, 5);
	memcpy(c.neigh[0].mac, mac_of[2], 6);
	memcpy(c.neigh[1].mac, mac_of[3], 6);
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)) && strstr(err, "twice"),
	      "duplicate neighbour refused: %s", err);
	ops.tx = NULL;
	base_cfg(&c, 1);
	CHECK(!vz_stack_new(&c, &ops, err, sizeof(err)), "no tx refused");
}

static void test_arp_answer(void)
{
	static const __u8 want[60] = {
		2, 0,	 0,    0, 0, 2, 2,  0, 0, 0, 0,
		1, 0x08, 0x06, 0, 1, 8, 0,  6, 4, 0, 2, /* reply */
		2, 0,	 0,    0, 0, 1, 10, 0, 0, 1, /* us */
		2, 0,	 0,    0, 0, 2, 10, 0, 0, 2, /* the asker */
	};
	static const __u8 zero[6];
	struct vz_dgram_meta m = { .src_ip = 0,
				   .dst_ip = ip4(10, 0, 0, 2),
				   .src_port = htons(1000),
				   .dst_port = htons(2000) };
	struct host h;
	size_t n;

	host_up(&h, 1);
	peer_asks_for_us(&h, T0);
	CHECK(h.ntx == 1 && h.tx[0].len == 60 &&
		      !memcmp(h.tx[0].data, want, 60),
	      "ARP reply, byte for byte");
	CHECK(st(&h)->arp_requests_in == 1 && st(&h)->arp_replies_out == 1,
	      "counted");
	/* the asker was learned: no request before sending to it */
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == 0, "send");
	CHECK(h.ntx == 2 && !memcmp(h.tx[1].data, mac_of[2], 6) &&
		      st(&h)->arp_requests_out == 0,
	      "sent straight to the learned MAC");
	/* a request for someone else: no answer, nothing learned */
	n = arp_frame(frame, bcast, 1, mac_of[3], ip4(10, 0, 0, 3), zero,
		      ip4(10, 0, 0, 4));
	input(&h, frame, n, T0);
	CHECK(h.ntx == 2 && st(&h)->rx_not_for_us == 1, "not for us");
	m.dst_ip = ip4(10, 0, 0, 3);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0) == 0 &&
		      st(&h)->arp_requests_out == 1,
	      "10.0.0.3 not learned from a request for another");
	/* malformed: short, bad hardware length, bad opcode, bad sender */
	input(&h, frame, 30, T0);
	n = arp_frame(frame, bcast, 1, mac_of[2], ip4(10, 0, 0, 2), zero,
		      ip4(10, 0, 0, 1));
	frame[18] = 8;
	input(&h, frame, n, T0);
	frame[18] = 6;
	frame[21] = 9;
	input(&h, frame, n, T0);
	n = arp_frame(frame, bcast, 1, mac_of[2], ip4(224, 0, 0, 1), zero,
		      ip4(10, 0, 0, 1));
	input(&h, frame, n, T0);
	n = arp_frame(frame, bcast, 2, bcast, ip4(10, 0, 0, 7), zero,
		      ip4(10, 0, 0, 1));
	memcpy(frame + 6, mac_of[2], 6); /* a sane Ethernet source */
	input(&h, frame, n, T0);
	CHECK(st(&h)->arp_bad == 5, "5 bad ARP, got %llu",
	      (unsigned long long)st(&h)->arp_bad);
	/* an ARP probe (sender 0.0.0.0) is answered, not learned */
	n = arp_frame(frame, bcast, 1, mac_of[3], 0, zero, ip4(10, 0, 0, 1));
	host_clear(&h);
	input(&h, frame, n, T0);
	CHECK(h.ntx == 1 && !memcmp(h.tx[0].data, mac_of[3], 6),
	      "probe answered");
	host_down(&h, "arp answer");
}

static void test_arp_resolve(void)
{
	struct vz_dgram_meta m = { .src_ip = 0,
				   .dst_ip = ip4(10, 0, 0, 2),
				   .src_port = htons(1000),
				   .dst_port = htons(2000) };
	static const __u8 zero[6];
	struct host h;
	__u8 payload[8];
	size_t n, len;
	const __u8 *u;
	int i;

	host_up(&h, 1);
	for (i = 0; i < 8; i++) {
		payload[0] = (__u8)i;
		CHECK(vz_stack_send(h.s, &m, payload, 1, T0) == 0, "queued %d",
		      i);
	}
	CHECK(vz_stack_send(h.s, &m, payload, 1, T0) == -EAGAIN,
	      "9th: queue full");
	CHECK(st(&h)->arp_queued == 8, "8 queued");
	CHECK(h.ntx == 1 && !memcmp(h.tx[0].data, bcast, 6) &&
		      get16(h.tx[0].data + 12) == 0x0806 &&
		      get16(h.tx[0].data + 20) == 1 &&
		      !memcmp(h.tx[0].data + 38, &m.dst_ip, 4),
	      "one broadcast ARP request for 10.0.0.2");
	vz_stack_tick(h.s, T0 + 999 * MS);
	CHECK(h.ntx == 1, "no retry before arp_retry_ms");
	vz_stack_tick(h.s, T0 + 1000 * MS);
	CHECK(h.ntx == 2 && st(&h)->arp_requests_out == 2, "retried");
	n = arp_frame(frame, mac_of[1], 2, mac_of[2], ip4(10, 0, 0, 2),
		      mac_of[1], ip4(10, 0, 0, 1));
	input(&h, frame, n, T0 + 1500 * MS);
	CHECK(h.ntx == 10, "8 datagrams flushed (%u frames)", h.ntx);
	for (i = 0; i < 8 && h.ntx == 10; i++) {
		u = check_ip(&h.tx[2 + i], 17, m.dst_ip, &len);
		CHECK(!memcmp(h.tx[2 + i].data, mac_of[2], 6) && len == 9 &&
			      u[8] == i,
		      "datagram %d in order to the answered MAC", i);
	}
	CHECK(st(&h)->arp_queued == 0 && st(&h)->arp_replies_in == 1,
	      "queue empty, reply counted");
	vz_stack_tick(h.s, T0 + 10000 * MS);
	CHECK(h.ntx == 10, "no more requests once resolved");

	/* nobody answers 10.0.0.3: three requests, then the queue drops */
	host_clear(&h);
	m.dst_ip = ip4(10, 0, 0, 3);
	CHECK(vz_stack_send(h.s, &m, "a", 1, T0) == 0 &&
		      vz_stack_send(h.s, &m, "b", 1, T0) == 0,
	      "queued");
	vz_stack_tick(h.s, T0 + 1000 * MS);
	vz_stack_tick(h.s, T0 + 2000 * MS);
	CHECK(h.ntx == 3 && st(&h)->arp_unresolved_drops == 0,
	      "three requests (%u)", h.ntx);
	vz_stack_tick(h.s, T0 + 2999 * MS);
	CHECK(st(&h)->arp_queued == 2, "still waiting");
	vz_stack_tick(h.s, T0 + 3000 * MS);
	CHECK(h.ntx == 3 && st(&h)->arp_unresolved_drops == 2 &&
		      st(&h)->arp_queued == 0,
	      "gave up after 3 tries: 2 dropped");
	CHECK(vz_stack_send(h.s, &m, "c", 1, T0 + 4000 * MS) == 0 && h.ntx == 4,
	      "a later send asks again");
	/* a reply not addressed to us does not create an entry */
	n = arp_frame(frame, bcast, 2, mac_of[3], ip4(10, 0, 0, 9), zero,
		      ip4(10, 0, 0, 9));
	input(&h, frame, n, T0 + 4000 * MS);
	m.dst_ip = ip4(10, 0, 0, 9);
	CHECK(vz_stack_send(h.s, &m, "d", 1, T0 + 4000 * MS) == 0 && h.ntx == 5,
	      "gratuitous ARP does not create entries");
	host_down(&h, "arp resolve");
}

static void test_arp_expiry(void)
{
	struct vz_dgram_meta m = { .src_ip = 0,
				   .dst_ip = ip4(10, 0, 0, 2),
				   .src_port = htons(1000),
				   .dst_port = htons(2000) };
	static const __u8 zero[6];
	struct host h;
	size_t n;

	base_cfg(&h.cfg, 1);
	h.cfg.arp_timeout_ms = 5000;
	host_up(&h, 0);
	peer_asks_for_us(&h, T0);
	host_clear(&h);
	/* used in its last sixth: sent, and a refresh probe (unanswered) */
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0 + 4999 * MS) == 0 &&
		      h.ntx == 2 && !memcmp(h.tx[0].data, mac_of[2], 6) &&
		      get16(h.tx[0].data + 12) == 0x0800,
	      "cached");
	CHECK(h.ntx == 2 && get16(h.tx[1].data + 12) == 0x0806 &&
		      !memcmp(h.tx[1].data, mac_of[2], 6) &&
		      st(&h)->arp_probes_out == 1,
	      "probed");
	/* gratuitous ARP: 10.0.0.2 moved to another MAC */
	n = arp_frame(frame, bcast, 1, mac_of[3], ip4(10, 0, 0, 2), zero,
		      ip4(10, 0, 0, 2));
	input(&h, frame, n, T0 + 4000 * MS);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0 + 4000 * MS) == 0 &&
		      h.ntx == 3 && !memcmp(h.tx[2].data, mac_of[3], 6),
	      "gratuitous ARP updated the entry (and refreshed it)");
	vz_stack_tick(h.s, T0 + 8999 * MS);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0 + 8999 * MS) == 0 &&
		      h.ntx == 5 && !memcmp(h.tx[3].data, mac_of[3], 6) &&
		      !memcmp(h.tx[4].data, mac_of[3], 6) &&
		      st(&h)->arp_requests_out == 0 &&
		      st(&h)->arp_probes_out == 2,
	      "refreshed at 4 s: alive at 8.999 s (and probed, at the new MAC)");
	vz_stack_tick(h.s, T0 + 9000 * MS);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0 + 9000 * MS) == 0 &&
		      h.ntx == 6 && st(&h)->arp_requests_out == 1 &&
		      get16(h.tx[5].data + 12) == 0x0806 &&
		      !memcmp(h.tx[5].data, bcast, 6) &&
		      st(&h)->arp_queued == 1,
	      "probe unanswered: expired, resolved again by broadcast");
	host_down(&h, "arp expiry");
}

/* A refresh probe: a unicast ARP request from host 1 for `target`. */
static void check_probe(const struct frame *f, const __u8 *mac, __be32 target,
			const char *test)
{
	static const __u8 zero[6];

	CHECK(f->len == 60 && get16(f->data + 12) == 0x0806 &&
		      get16(f->data + 20) == 1,
	      "%s: an ARP request", test);
	CHECK(!memcmp(f->data, mac, 6), "%s: unicast to the cached MAC", test);
	CHECK(!memcmp(f->data + 6, mac_of[1], 6) &&
		      !memcmp(f->data + 22, mac_of[1], 6) &&
		      !memcmp(f->data + 28, (__be32[]){ ip4(10, 0, 0, 1) }, 4),
	      "%s: from us", test);
	CHECK(!memcmp(f->data + 32, zero, 6) &&
		      !memcmp(f->data + 38, &target, 4),
	      "%s: for the next hop's address", test);
}

/*
 * A datagram every 100 ms for four lifetimes of the default 60 s, to a peer
 * stack that answers: after the first resolution nothing waits for ARP, and
 * exactly one probe per lifetime goes out, 10 s (a sixth) before expiry,
 * to the next hop (the gateway when the destination is off-link).
 */
static void arp_refresh_run(int via_gateway)
{
	const char *test =
		via_gateway ? "arp refresh via gateway" : "arp refresh";
	struct vz_dgram_meta m = { .src_ip = 0,
				   .dst_ip = ip4(10, 0, 0, 2),
				   .src_port = htons(1000),
				   .dst_port = htons(2000) };
	__be32 nexthop = ip4(10, 0, 0, 2);
	unsigned int k, i, nprobes = 0, delayed = 0, ndgram = 0;
	__u64 now, probe_at[8];
	struct host a, b;
	int ret;

	base_cfg(&a.cfg, 1);
	if (via_gateway) {
		a.cfg.gateway = nexthop;
		m.dst_ip = ip4(192, 168, 1, 1);
	}
	host_up(&a, 0);
	host_up(&b, 2);
	for (k = 0; k < 2400; k++) {
		now = T0 + k * 100 * MS;
		vz_stack_tick(a.s, now);
		vz_stack_tick(b.s, now);
		ret = vz_stack_send(a.s, &m, "ping", 4, now);
		CHECK(ret == 0, "%s: send at %u ms: %d", test, k * 100, ret);
		if (k == 0) { /* the first resolution: queued, answered */
			pump(&a, &b, now);
			CHECK(a.ntx == 2 && st(&a)->arp_requests_out == 1,
			      "%s: resolved first", test);
			host_clear(&a);
			host_clear(&b);
			continue;
		}
		/* sent at once, before anything else, to b's MAC */
		if (!a.ntx || get16(a.tx[0].data + 12) != 0x0800 ||
		    memcmp(a.tx[0].data, mac_of[2], 6) || st(&a)->arp_queued)
			delayed++;
		for (i = 0; i < a.ntx; i++) {
			if (get16(a.tx[i].data + 12) == 0x0800) {
				ndgram++;
				continue;
			}
			check_probe(&a.tx[i], mac_of[2], nexthop, test);
			if (nprobes < 8)
				probe_at[nprobes] = now - T0;
			nprobes++;
		}
		pump(&a, &b, now); /* b answers the probe at once */
		host_clear(&a);
		host_clear(&b);
	}
	CHECK(delayed == 0 && ndgram == 2399,
	      "%s: %u of 2399 datagrams waited for ARP (%u sent at once)", test,
	      delayed, ndgram);
	CHECK(st(&a)->arp_requests_out == 1 &&
		      st(&a)->arp_unresolved_drops == 0,
	      "%s: never resolved again (%llu requests)", test,
	      (unsigned long long)st(&a)->arp_requests_out);
	CHECK(nprobes == 4 && st(&a)->arp_probes_out == 4,
	      "%s: %u probes (%llu counted), want 4", test, nprobes,
	      (unsigned long long)st(&a)->arp_probes_out);
	for (i = 0; i < 4 && i < nprobes; i++)
		CHECK(probe_at[i] == (i + 1) * 50000 * MS,
		      "%s: probe %u at %llu ms, want %u", test, i,
		      (unsigned long long)(probe_at[i] / MS), (i + 1) * 50000);
	CHECK(st(&a)->arp_replies_in == 5 && st(&b)->arp_requests_in == 5,
	      "%s: each probe answered", test);
	host_down(&a, test);
	host_down(&b, test);
}

static void test_arp_refresh(void)
{
	arp_refresh_run(0);
	arp_refresh_run(1);
}

/*
 * A peer that stops answering: a datagram every 10 ms from 49 s to 60 s of
 * a 60 s entry. Probes start at 50 s, one a second (even with arp_retry_ms
 * at 100 ms), the datagrams keep going to the cached MAC until 60 s, and
 * then the entry expires as it always did: a broadcast request, the
 * datagram queued, dropped when resolution gives up.
 */
static void test_arp_probe_silent(void)
{
	struct vz_dgram_meta m = { .src_ip = 0,
				   .dst_ip = ip4(10, 0, 0, 2),
				   .src_port = htons(1000),
				   .dst_port = htons(2000) };
	unsigned int k, i, nprobes = 0, early = 0, requests = 0;
	__u64 now, last = 0, probe_at[16];
	struct host h;

	base_cfg(&h.cfg, 1);
	h.cfg.arp_retry_ms = 100;
	host_up(&h, 0);
	/* learned from its request for us, at T0: expires at T0 + 60 s */
	peer_asks_for_us(&h, T0);
	host_clear(&h);
	for (k = 4900; k <= 6000; k++) {
		now = T0 + k * 10 * MS;
		vz_stack_tick(h.s, now);
		CHECK(vz_stack_send(h.s, &m, "x", 1, now) == 0, "send at %u ms",
		      k * 10);
		for (i = 0; i < h.ntx; i++) {
			if (get16(h.tx[i].data + 12) != 0x0806)
				continue;
			if (memcmp(h.tx[i].data, bcast, 6)) {
				check_probe(&h.tx[i], mac_of[2],
					    ip4(10, 0, 0, 2), "silent");
				if (nprobes < 16)
					probe_at[nprobes] = now - T0;
				CHECK(!nprobes || now - last >= 1000 * MS,
				      "probe at %u ms, %llu ms after the last",
				      k * 10,
				      (unsigned long long)((now - last) / MS));
				last = now;
				nprobes++;
			} else {
				requests++;
			}
		}
		if (k < 6000 &&
		    (h.ntx < 1 || get16(h.tx[0].data + 12) != 0x0800 ||
		     memcmp(h.tx[0].data, mac_of[2], 6)))
			early++;
		host_clear(&h);
	}
	CHECK(early == 0, "%u datagrams not sent at once before expiry", early);
	CHECK(nprobes == 10 && st(&h)->arp_probes_out == 10,
	      "10 probes, one a second from 50 s (%u, %llu counted)", nprobes,
	      (unsigned long long)st(&h)->arp_probes_out);
	for (i = 0; i < 10 && i < nprobes; i++)
		CHECK(probe_at[i] == (50000 + i * 1000) * MS,
		      "probe %u at %llu ms, want %u", i,
		      (unsigned long long)(probe_at[i] / MS), 50000 + i * 1000);
	/* expired at 60 s: as before, a broadcast request, the datagram
	 * queued, retried every 100 ms, dropped after 3 tries */
	CHECK(requests == 1 && st(&h)->arp_requests_out == 1 &&
		      st(&h)->arp_queued == 1,
	      "expired: resolved by broadcast again (%u requests)", requests);
	for (k = 1; k <= 3; k++)
		vz_stack_tick(h.s, T0 + (60000 + k * 100) * MS);
	CHECK(h.ntx == 2 && st(&h)->arp_queued == 0 &&
		      st(&h)->arp_unresolved_drops == 1 &&
		      st(&h)->arp_probes_out == 10,
	      "two broadcast retries, then the datagram dropped (%u frames)",
	      h.ntx);
	host_down(&h, "arp probe silent");

	/* the gap is arp_retry_ms when that is longer than a second */
	base_cfg(&h.cfg, 1);
	h.cfg.arp_retry_ms = 3000;
	host_up(&h, 0);
	peer_asks_for_us(&h, T0);
	host_clear(&h);
	for (k = 500; k < 600; k++)
		vz_stack_send(h.s, &m, "x", 1, T0 + k * 100 * MS);
	CHECK(st(&h)->arp_probes_out == 4, "probes at 50, 53, 56, 59 s (%llu)",
	      (unsigned long long)st(&h)->arp_probes_out);
	host_down(&h, "arp probe gap");
}

static void test_arp_static(void)
{
	struct vz_dgram_meta m = { .src_ip = 0,
				   .dst_ip = ip4(10, 0, 0, 5),
				   .src_port = htons(1000),
				   .dst_port = htons(2000) };
	struct host h;
	size_t n;

	base_cfg(&h.cfg, 1);
	h.cfg.nneigh = 1;
	h.cfg.neigh[0].ip4 = ip4(10, 0, 0, 5);
	memcpy(h.cfg.neigh[0].mac, mac_of[3], 6);
	h.cfg.arp_timeout_ms = 1000;
	host_up(&h, 0);
	n = arp_frame(frame, mac_of[1], 2, mac_of[2], ip4(10, 0, 0, 5),
		      mac_of[1], ip4(10, 0, 0, 1));
	input(&h, frame, n, T0);
	vz_stack_tick(h.s, T0 + 3600000 * MS);
	CHECK(vz_stack_send(h.s, &m, "x", 1, T0 + 3600000 * MS) == 0 &&
		      h.ntx == 1 && !memcmp(h.tx[0].data, mac_of[3], 6),
	      "static: not overwritten by ARP, not expired");
	host_down(&h, "arp static");
}

/* --------------------------------- ICMP --------------------------------- */

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
	static __u8 payload[VZ_STACK_MAX_UDP + 1], out[4000];
	__be32 bad[] = { 0,
			 ip4(255, 255, 255, 255),
			 ip4(224, 0, 0, 1),
			 ip4(10, 0, 0, 255),
			 ip4(10, 0, 0, 1),
			 ip4(127, 0, 0, 1) };
	struct vz_stack_neigh gw = { ip4(10, 0, 0, 254),
				     { 2, 0, 0, 0, 0, 0xfe } };
	struct host h;
	__u8 chk[2];
	unsigned int i;
	const __u8 *u;
	size_t len;

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

/* -------------------------------- IPv6 -------------------------------- */

/* fd00:198:18::n, and host n's link-local address from its MAC */
static void ip6_of(__u8 *a, int n)
{
	memset(a, 0, 16);
	a[0] = 0xfd;
	a[2] = 0x01;
	a[3] = 0x98;
	a[5] = 0x18;
	a[15] = (__u8)n;
}

static void ll6_of(__u8 *a, int n)
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

static void snm_of(__u8 *g, const __u8 *a)
{
	static const __u8 pfx[13] = { 0xff, 2, 0, 0, 0, 0,   0,
				      0,    0, 0, 0, 1, 0xff };

	memcpy(g, pfx, 13);
	memcpy(g + 13, a + 13, 3);
}

static void host6_up(struct host *h, int n)
{
	base_cfg(&h->cfg, n);
	ip6_of(h->cfg.ip6, n);
	host_up(h, 0);
}

static __u32 t_pseudo6(const __u8 *src, const __u8 *dst, __u8 proto, size_t len)
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
static size_t ip6_frame(__u8 *f, const __u8 *dst_mac, const __u8 *src,
			const __u8 *dst, __u8 nh, __u8 hops, const void *l4,
			size_t len)
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
static void icmp6_sum(__u8 *m, size_t len, const __u8 *src, const __u8 *dst)
{
	put16(m + 2, 0);
	put16(m + 2, t_fold(t_sum(t_pseudo6(src, dst, 58, len), m, len)));
}

/* NS (135) or NA (136) for target, with a link-layer option of `mac` (opt
 * 1 or 2; 0: none); flags: NA's. Checksum set. The length. */
static size_t nd_msg(__u8 *m, __u8 type, __u8 flags, const __u8 *target,
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
static const __u8 *check_ip6(const struct frame *f, __u8 nh, const __u8 *dst,
			     size_t *l4len)
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
	test_config();
	test_arp_answer();
	test_arp_resolve();
	test_arp_expiry();
	test_arp_refresh();
	test_arp_probe_silent();
	test_arp_static();
	test_icmp_echo();
	test_port_unreach();
	test_udp_rx();
	test_ip_bad();
	test_reasm_orders();
	test_reasm_overlap();
	test_reasm_limits();
	test_reasm_timeout();
	test_send_fragments();
	test_send_errors();
	test_config6();
	test_nd_answer();
	test_nd_bad();
	test_nd_resolve();
	test_icmp6_echo();
	test_udp6_rx();
	test_ip6_bad();
	test_frag6();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
