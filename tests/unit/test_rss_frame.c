// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz_rss_hash_frame()'s flow tuple, frame by frame: what it hashes of
 * IPv4 and IPv6 (with and without ports), one VLAN tag of either kind,
 * fragments, IP options, extension headers, malformed headers and every
 * length a frame can be cut to, against a reference that reads the same
 * fields at fixed offsets, and against Microsoft's published vectors. Then
 * random frames, so that any change of what is extracted shows.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "dispatch/toeplitz.h"

#define FRAME_MAX 128

/*
 * The rules, spelled out at fixed offsets: Ethernet; one 802.1Q or 802.1ad
 * tag; IPv4 (version 4, IHL >= 5, header within the frame) or IPv6
 * (version 6, 40 bytes); source and destination address, then the TCP or
 * UDP ports when they are within the frame, the IPv4 packet is no fragment
 * (MF and offset clear) and, for IPv6, the next header is TCP or UDP
 * itself. Anything else hashes to 0.
 */
static size_t ref_input(const __u8 *p, size_t len, __u8 *in)
{
	size_t off = 14, addrs, l4;
	unsigned int proto;
	__u8 next;
	bool frag = false;

	if (len < 14)
		return 0;
	proto = (unsigned int)p[12] << 8 | p[13];
	if (proto == 0x8100 || proto == 0x88a8) {
		if (len < 18)
			return 0;
		proto = (unsigned int)p[16] << 8 | p[17];
		off = 18;
	}
	if (proto == 0x0800) {
		if (len < off + 20 || p[off] >> 4 != 4 || (p[off] & 15) < 5)
			return 0;
		memcpy(in, p + off + 12, 8);
		addrs = 8;
		next = p[off + 9];
		l4 = off + (size_t)(p[off] & 15) * 4;
		frag = ((p[off + 6] << 8 | p[off + 7]) & 0x3fff) != 0;
	} else if (proto == 0x86dd) {
		if (len < off + 40 || p[off] >> 4 != 6)
			return 0;
		memcpy(in, p + off + 8, 32);
		addrs = 32;
		next = p[off + 6];
		l4 = off + 40;
	} else {
		return 0;
	}
	if (frag || (next != 6 && next != 17) || len < l4 + 4)
		return addrs;
	memcpy(in + addrs, p + l4, 4);
	return addrs + 4;
}

static __u32 ref_hash(const __u8 *p, size_t len)
{
	__u8 in[36];
	size_t n = ref_input(p, len, in);

	return n ? vz_toeplitz(vz_rss_key, in, n) : 0;
}

/* Every length the frame can be cut to hashes as the reference says. */
static void check_cuts(const __u8 *f, size_t len, const char *what)
{
	size_t cut;

	for (cut = 0; cut <= len; cut++)
		CHECK(vz_rss_hash_frame(f, cut) == ref_hash(f, cut),
		      "%s cut to %zu bytes: %#x, the reference %#x", what, cut,
		      vz_rss_hash_frame(f, cut), ref_hash(f, cut));
}

struct shape {
	unsigned int tag; /* 0, or the TPID of one VLAN tag */
	unsigned int tag2; /* with tag: a second tag's TPID, or 0 */
	int family; /* AF_INET, AF_INET6 */
	__u8 proto; /* IPv4 protocol, or IPv6 next header */
	unsigned int ihl; /* IPv4: header words (5 without options) */
	__u16 frag; /* IPv4: flags and fragment offset, host order */
	__u8 version; /* 0: the family's own */
};

/* Microsoft's "Verifying the RSS hash calculation": the same tuples as
 * test_dispatch.c, whose hashes the frames must reproduce. */
struct vector {
	const char *src, *dst;
	__u16 sport, dport;
	__u32 with_ports, addrs_only;
};

static const struct vector v4 = {
	"66.9.149.187", "161.142.100.80", 2794, 1766, 0x51ccc178, 0x323e8fc2
};
static const struct vector v6 = { "3ffe:2501:200:1fff::7",
				  "3ffe:2501:200:3::1",
				  2794,
				  1766,
				  0x40207d3d,
				  0x2cc18cd5 };

static void put16(__u8 *p, unsigned int v)
{
	p[0] = (__u8)(v >> 8);
	p[1] = (__u8)v;
}

/* A frame of the shape carrying the vector's tuple; its length. */
static size_t build(const struct shape *s, const struct vector *v, __u8 *f)
{
	size_t off = 12, l4;
	unsigned int ethertype = s->family == AF_INET ? 0x0800 : 0x86dd;

	memset(f, 0xee, FRAME_MAX);
	memset(f, 0x02, 12);
	if (s->tag) {
		put16(f + off, s->tag);
		put16(f + off + 2, 0x0064); /* VLAN 100 */
		off += 4;
		if (s->tag2) {
			put16(f + off, s->tag2);
			put16(f + off + 2, 0x0065);
			off += 4;
		}
	}
	put16(f + off, ethertype);
	off += 2;
	if (s->family == AF_INET) {
		f[off] = (__u8)((s->version ? s->version : 4) << 4 | s->ihl);
		put16(f + off + 6, s->frag);
		f[off + 9] = s->proto;
		inet_pton(AF_INET, v->src, f + off + 12);
		inet_pton(AF_INET, v->dst, f + off + 16);
		l4 = off + (size_t)s->ihl * 4;
	} else {
		f[off] = (__u8)((s->version ? s->version : 6) << 4);
		f[off + 6] = s->proto;
		inet_pton(AF_INET6, v->src, f + off + 8);
		inet_pton(AF_INET6, v->dst, f + off + 24);
		l4 = off + 40;
	}
	put16(f + l4, v->sport);
	put16(f + l4 + 2, v->dport);
	return l4 + 20 < FRAME_MAX ? l4 + 20 : FRAME_MAX;
}

/* What each whole frame hashes to: the vector's hash, or 0. */
enum want { PORTS, ADDRS, ZERO };

struct named_shape {
	const char *name;
	struct shape s;
	enum want want;
};

static const struct named_shape shapes[] = {
	{ "IPv4 UDP", { .family = AF_INET, .proto = 17, .ihl = 5 }, PORTS },
	{ "IPv4 TCP", { .family = AF_INET, .proto = 6, .ihl = 5 }, PORTS },
	{ "IPv4 ICMP", { .family = AF_INET, .proto = 1, .ihl = 5 }, ADDRS },
	{ "IPv4 UDP, options",
	  { .family = AF_INET, .proto = 17, .ihl = 7 },
	  PORTS },
	{ "IPv4 UDP, DF",
	  { .family = AF_INET, .proto = 17, .ihl = 5, .frag = 0x4000 },
	  PORTS },
	{ "IPv4 UDP, first fragment",
	  { .family = AF_INET, .proto = 17, .ihl = 5, .frag = 0x2000 },
	  ADDRS },
	{ "IPv4 UDP, later fragment",
	  { .family = AF_INET, .proto = 17, .ihl = 5, .frag = 0x0010 },
	  ADDRS },
	{ "IPv4 TCP, DF and an offset",
	  { .family = AF_INET, .proto = 6, .ihl = 5, .frag = 0x4001 },
	  ADDRS },
	{ "IPv4, IHL 4", { .family = AF_INET, .proto = 17, .ihl = 4 }, ZERO },
	{ "IPv4, version 6 in the header",
	  { .family = AF_INET, .proto = 17, .ihl = 5, .version = 6 },
	  ZERO },
	{ "802.1Q IPv4 UDP",
	  { .tag = 0x8100, .family = AF_INET, .proto = 17, .ihl = 5 },
	  PORTS },
	{ "802.1ad IPv4 TCP",
	  { .tag = 0x88a8, .family = AF_INET, .proto = 6, .ihl = 5 },
	  PORTS },
	{ "802.1Q IPv4 fragment",
	  { .tag = 0x8100,
	    .family = AF_INET,
	    .proto = 17,
	    .ihl = 5,
	    .frag = 0x2000 },
	  ADDRS },
	{ "two tags (one is looked through)",
	  { .tag = 0x88a8,
	    .tag2 = 0x8100,
	    .family = AF_INET,
	    .proto = 17,
	    .ihl = 5 },
	  ZERO },
	{ "a tag of another TPID",
	  { .tag = 0x9100, .family = AF_INET, .proto = 17, .ihl = 5 },
	  ZERO },
	{ "IPv6 UDP", { .family = AF_INET6, .proto = 17 }, PORTS },
	{ "IPv6 TCP", { .family = AF_INET6, .proto = 6 }, PORTS },
	{ "IPv6 ICMPv6", { .family = AF_INET6, .proto = 58 }, ADDRS },
	{ "IPv6 hop-by-hop first", { .family = AF_INET6, .proto = 0 }, ADDRS },
	{ "IPv6 fragment header", { .family = AF_INET6, .proto = 44 }, ADDRS },
	{ "802.1Q IPv6 UDP",
	  { .tag = 0x8100, .family = AF_INET6, .proto = 17 },
	  PORTS },
	{ "802.1ad IPv6 TCP",
	  { .tag = 0x88a8, .family = AF_INET6, .proto = 6 },
	  PORTS },
	{ "IPv6, version 4 in the header",
	  { .family = AF_INET6, .proto = 17, .version = 4 },
	  ZERO },
};

static void test_shapes(void)
{
	__u8 f[FRAME_MAX];
	size_t i, len;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		const struct named_shape *n = &shapes[i];
		const struct vector *v = n->s.family == AF_INET ? &v4 : &v6;
		__u32 want = n->want == PORTS	? v->with_ports
			     : n->want == ADDRS ? v->addrs_only
						: 0;

		len = build(&n->s, v, f);
		CHECK(vz_rss_hash_frame(f, len) == want, "%s: %#x, not %#x",
		      n->name, vz_rss_hash_frame(f, len), want);
		check_cuts(f, len, n->name);
	}
}

static void test_not_ip(void)
{
	__u8 f[FRAME_MAX];
	static const unsigned int types[] = { 0x0806, 0x88cc, 0x0000, 0xffff };
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		memset(f, 0x45, sizeof(f));
		put16(f + 12, types[i]);
		CHECK(vz_rss_hash_frame(f, sizeof(f)) == 0, "EtherType %#x",
		      types[i]);
	}
}

/* xorshift64: the same random frames every run. */
static __u64 rnd(__u64 *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * Random frames whose bytes are random but for the fields that steer the
 * parse, drawn from the values that matter (EtherTypes, TPIDs, version
 * and IHL, fragment bits, protocols), at random lengths.
 */
static void test_random(void)
{
	static const unsigned int types[] = { 0x0800, 0x86dd, 0x8100, 0x88a8,
					      0x0806 };
	static const __u8 protos[] = { 6, 17, 1, 0, 44, 58 };
	__u64 seed = 0x9e3779b97f4a7c15ull;
	__u8 f[FRAME_MAX];
	unsigned int n, i, bad = 0;
	size_t off, len;

	for (n = 0; n < 200000; n++) {
		for (i = 0; i < FRAME_MAX; i += 8) {
			__u64 r = rnd(&seed);

			memcpy(f + i, &r, 8);
		}
		put16(f + 12, types[rnd(&seed) % 5]);
		put16(f + 16, types[rnd(&seed) % 5]);
		off = f[12] == 0x81 || f[12] == 0x88 ? 18 : 14;
		if (rnd(&seed) % 4) /* mostly a version that fits */
			f[off] = (__u8)((rnd(&seed) & 1 ? 0x40 : 0x60) |
					(rnd(&seed) % 16));
		if (f[off] >> 4 == 4) {
			if (rnd(&seed) % 2) /* often no fragment */
				f[off + 6] &= 0xc0;
			f[off + 9] = protos[rnd(&seed) % 6];
		} else {
			f[off + 6] = protos[rnd(&seed) % 6]; /* next header */
		}
		len = (size_t)(rnd(&seed) % (FRAME_MAX + 1));
		if (vz_rss_hash_frame(f, len) != ref_hash(f, len) && !bad++)
			CHECK(false,
			      "random frame %u (%zu bytes): %#x, the "
			      "reference %#x",
			      n, len, vz_rss_hash_frame(f, len),
			      ref_hash(f, len));
	}
	CHECK(!bad, "%u of the random frames differ", bad);
}

int main(void)
{
	test_shapes();
	test_not_ip();
	test_random();
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures != 0;
}
