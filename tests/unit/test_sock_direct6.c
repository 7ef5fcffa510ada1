// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode's AF_INET6 sockets and the address checks of both families,
 * without a port (src/sock/direct): the stack's addresses are set as
 * vz_direct_init would set them, datagrams are handed over as the engine
 * hands them (vz_direct_deliver), and sends go to a stack whose frames are
 * captured. Bad lengths and families get Linux's errnos; a v6 socket bound
 * to :: with IPV6_V6ONLY off shares its port with IPv4 and receives IPv4
 * as v4-mapped addresses; one that is IPv6-only does not.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "sock/direct/direct.h"
#include "sock/direct/direct_internal.h"
#include "sock/stack/stack.h"

#define US4 "192.0.2.1"
#define PEER4 "192.0.2.7"
#define US6 "fd00:198:18::1"
#define PEER6 "fd00:198:18::7"

static struct sockaddr_in sin4(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((__u16)port) };

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static struct sockaddr_in6 sin6(const char *ip, int port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6,
				  .sin6_port = htons((__u16)port) };

	inet_pton(AF_INET6, ip, &a.sin6_addr);
	return a;
}

#define SA(a) ((struct sockaddr *)&(a))

/* errno of a call expected to fail; 0 if it succeeded. */
#define ERR(call) ((call) < 0 ? errno : 0)

/* A datagram as the engine of an interface queue hands it over: 0 taken
 * (or dropped by a connected socket), -1 no socket. */
static int deliver_on(unsigned int queue, const char *src, int sport,
		      const char *dst, int dport, const char *text)
{
	struct vz_dgram_meta m = { .src_port = htons((__u16)sport),
				   .dst_port = htons((__u16)dport) };
	int rc;

	if (strchr(src, ':')) {
		m.v6 = 1;
		inet_pton(AF_INET6, src, m.src_ip6);
		inet_pton(AF_INET6, dst, m.dst_ip6);
	} else {
		inet_pton(AF_INET, src, &m.src_ip);
		inet_pton(AF_INET, dst, &m.dst_ip);
	}
	pthread_mutex_lock(&vz_direct.lock);
	rc = vz_direct_deliver(&m, queue, text, strlen(text));
	pthread_mutex_unlock(&vz_direct.lock);
	return rc;
}

static int deliver(const char *src, int sport, const char *dst, int dport,
		   const char *text)
{
	return deliver_on(0, src, sport, dst, dport, text);
}

/* The next datagram on fd: its text and sender as "ADDR port" ("" when
 * none); the address length the call reported in *alen. */
static const char *recv_from(int fd, char *text, size_t tlen, char *from,
			     size_t flen, socklen_t *alen)
{
	struct sockaddr_storage ss;
	char ip[INET6_ADDRSTRLEN] = "?";
	ssize_t n;

	*alen = sizeof(ss);
	memset(&ss, 0, sizeof(ss));
	n = vz_direct_recvfrom(fd, text, tlen - 1, MSG_DONTWAIT, SA(ss), alen);
	text[n < 0 ? 0 : n] = 0;
	from[0] = 0;
	if (n < 0)
		return text;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		snprintf(from, flen, "%s %u", ip, ntohs(a->sin6_port));
	} else if (ss.ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(from, flen, "%s %u", ip, ntohs(a->sin_port));
	}
	return text;
}

static int sock6(void)
{
	return vz_direct_sock_new(AF_INET6, SOCK_DGRAM);
}

static int sock4(void)
{
	return vz_direct_sock_new(AF_INET, SOCK_DGRAM);
}

static int set_v6only(int fd, int on)
{
	return vz_direct_setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on,
				    sizeof(on));
}

static void test_bad_addresses(void)
{
	int s6 = sock6(), s4 = sock4();
	struct sockaddr_in6 a6 = sin6(US6, 5000);
	struct sockaddr_in a4 = sin4(US4, 5000);
	struct sockaddr_storage odd = { .ss_family = 99 };
	char b = 0;

	REQUIRE(s6 >= 0 && s4 >= 0, "sockets (%s)", strerror(errno));
	/* AF_INET6: inet6_bind's checks */
	CHECK(ERR(vz_direct_bind(s6, NULL, sizeof(a6))) == EFAULT, "NULL");
	CHECK(ERR(vz_direct_bind(s6, SA(a6), 23)) == EINVAL, "short: EINVAL");
	CHECK(ERR(vz_direct_bind(s6, SA(a4), sizeof(a4))) == EINVAL,
	      "a sockaddr_in (16 bytes): EINVAL");
	CHECK(ERR(vz_direct_bind(s6, SA(odd), sizeof(a6))) == EAFNOSUPPORT,
	      "another family: EAFNOSUPPORT");
	CHECK(ERR(vz_direct_connect(s6, SA(a6), 1)) == EINVAL,
	      "connect, shorter than a family: EINVAL");
	CHECK(ERR(vz_direct_connect(s6, SA(a6), 20)) == EINVAL,
	      "connect, short: EINVAL");
	CHECK(ERR(vz_direct_connect(s6, SA(odd), sizeof(a6))) == EAFNOSUPPORT,
	      "connect, another family: EAFNOSUPPORT");
	CHECK(ERR(vz_direct_sendto(s6, &b, 1, 0, SA(a6), 20)) == EINVAL,
	      "sendto, short: EINVAL");
	CHECK(ERR(vz_direct_sendto(s6, &b, 1, 0, SA(odd), sizeof(a6))) ==
		      EINVAL,
	      "sendto, another family: EINVAL (udpv6_sendmsg)");
	CHECK(ERR(vz_direct_sendto(s6, &b, 1, 0, SA(a4), 8)) == EINVAL,
	      "sendto, a short sockaddr_in: EINVAL");
	odd.ss_family = AF_UNSPEC;
	CHECK(ERR(vz_direct_sendto(s6, &b, 1, 0, SA(odd), sizeof(a6))) ==
		      EDESTADDRREQ,
	      "sendto, AF_UNSPEC: no address, unconnected: EDESTADDRREQ");
	odd.ss_family = 99;
	/* AF_INET: inet_bind's */
	CHECK(ERR(vz_direct_bind(s4, SA(a4), 15)) == EINVAL, "v4 short");
	CHECK(ERR(vz_direct_bind(s4, SA(a6), sizeof(a6))) == EAFNOSUPPORT,
	      "v4 socket, sockaddr_in6: EAFNOSUPPORT");
	CHECK(ERR(vz_direct_connect(s4, SA(a6), sizeof(a6))) == EAFNOSUPPORT,
	      "v4 connect, sockaddr_in6: EAFNOSUPPORT");
	CHECK(ERR(vz_direct_sendto(s4, &b, 1, 0, SA(a6), sizeof(a6))) ==
		      EAFNOSUPPORT,
	      "v4 sendto, sockaddr_in6: EAFNOSUPPORT");
	a6 = sin6(PEER6, 5000);
	CHECK(ERR(vz_direct_bind(s6, SA(a6), sizeof(a6))) == EADDRNOTAVAIL,
	      "not our address: EADDRNOTAVAIL");
	a4 = sin4(PEER4, 5000);
	CHECK(ERR(vz_direct_bind(s4, SA(a4), sizeof(a4))) == EADDRNOTAVAIL,
	      "v4, not our address: EADDRNOTAVAIL");
	a6 = sin6(US6, 5000);
	CHECK(!vz_direct_bind(s6, SA(a6), 24),
	      "RFC 2133's 24 bytes, no scope id: taken (%s)", strerror(errno));
	CHECK(ERR(vz_direct_bind(s6, SA(a6), sizeof(a6))) == EINVAL,
	      "bound twice: EINVAL");
	CHECK(ERR(set_v6only(s6, 1)) == EINVAL, "V6ONLY once bound: EINVAL");
	CHECK(ERR(vz_direct_setsockopt(s4, IPPROTO_IPV6, IPV6_V6ONLY,
				       &(int){ 1 }, sizeof(int))) ==
		      ENOPROTOOPT,
	      "V6ONLY on AF_INET: ENOPROTOOPT");
out:
	vz_direct_close(s6);
	vz_direct_close(s4);
}

static void test_names(void)
{
	int s = sock6(), d = -1, v = -1;
	struct sockaddr_in6 a = sin6(US6, 5001), got;
	struct sockaddr_in peer = sin4(PEER4, 7);
	socklen_t len = sizeof(v);
	char ip[INET6_ADDRSTRLEN];

	REQUIRE(s >= 0, "a socket (%s)", strerror(errno));
	CHECK(!vz_direct_getsockopt(s, SOL_SOCKET, SO_DOMAIN, &v, &len) &&
		      v == AF_INET6,
	      "SO_DOMAIN: AF_INET6 (%d)", v);
	len = sizeof(v);
	CHECK(!vz_direct_getsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &v, &len) &&
		      v == 0,
	      "V6ONLY off by default, as bindv6only=0");
	CHECK(!vz_direct_setsockopt(s, IPPROTO_IPV6, IPV6_MTU_DISCOVER,
				    &(int){ IP_PMTUDISC_DONT }, sizeof(int)),
	      "IPV6_MTU_DISCOVER DONT: accepted");
	CHECK(!vz_direct_bind(s, SA(a), sizeof(a)), "bind ours (%s)",
	      strerror(errno));
	len = sizeof(got);
	memset(&got, 0, sizeof(got));
	CHECK(!vz_direct_getsockname(s, SA(got), &len) && len == sizeof(got) &&
		      got.sin6_family == AF_INET6 &&
		      got.sin6_port == htons(5001) &&
		      !memcmp(&got.sin6_addr, &a.sin6_addr, 16),
	      "getsockname: the sockaddr_in6 bound");
	len = 8;
	memset(&got, 0, sizeof(got));
	CHECK(!vz_direct_getsockname(s, SA(got), &len) && len == sizeof(got) &&
		      got.sin6_port == htons(5001) && got.sin6_flowinfo == 0,
	      "a short buffer: truncated, the full length reported");
	CHECK(ERR(vz_direct_getpeername(s, SA(got), &len)) == ENOTCONN,
	      "not connected: ENOTCONN");
	CHECK(ERR(vz_direct_connect(s, SA(peer), sizeof(peer))) == ENETUNREACH,
	      "bound to an IPv6 address, connect to IPv4: ENETUNREACH");
	vz_direct_close(s);

	/* unbound, dual: connect to IPv4 autobinds to :: */
	s = sock6();
	REQUIRE(s >= 0, "a socket");
	CHECK(!vz_direct_connect(s, SA(peer), sizeof(peer)),
	      "dual socket, connect to a sockaddr_in (%s)", strerror(errno));
	len = sizeof(got);
	CHECK(!vz_direct_getpeername(s, SA(got), &len) && len == sizeof(got) &&
		      got.sin6_family == AF_INET6 &&
		      got.sin6_port == htons(7) &&
		      !strcmp(inet_ntop(AF_INET6, &got.sin6_addr, ip,
					sizeof(ip)),
			      "::ffff:" PEER4),
	      "getpeername: v4-mapped (%s)", ip);
	len = sizeof(got);
	CHECK(!vz_direct_getsockname(s, SA(got), &len) &&
		      !strcmp(inet_ntop(AF_INET6, &got.sin6_addr, ip,
					sizeof(ip)),
			      "::ffff:" US4) &&
		      ntohs(got.sin6_port) >= EPH_LO,
	      "getsockname: our IPv4 address, mapped, an ephemeral port (%s)",
	      ip);
	CHECK(!vz_direct_connect(
		      s, SA((struct sockaddr){ .sa_family = AF_UNSPEC }),
		      sizeof(struct sockaddr)),
	      "AF_UNSPEC: dissolved");
	CHECK(ERR(vz_direct_getpeername(s, SA(got), &len)) == ENOTCONN,
	      "then ENOTCONN");
	d = vz_direct_fcntl(s, F_DUPFD, 0);
	len = sizeof(got);
	CHECK(d >= 0 && !vz_direct_getsockname(d, SA(got), &len) &&
		      got.sin6_family == AF_INET6,
	      "a dup copy is the same AF_INET6 socket");
out:
	if (d >= 0)
		vz_direct_close(d);
	vz_direct_close(s);
}

/* V6ONLY off: one port for both; on: apart, and no IPv4 to it. */
static void test_dual_stack(void)
{
	int dual = sock6(), only = sock6(), v4 = -1, spec = sock6();
	struct sockaddr_in6 any = sin6("::", 5010);
	struct sockaddr_in a4 = sin4("0.0.0.0", 5010);
	char text[64], from[80];
	socklen_t alen;

	REQUIRE(dual >= 0 && only >= 0 && spec >= 0, "sockets");
	CHECK(!vz_direct_bind(dual, SA(any), sizeof(any)), "dual on [::]:5010");
	v4 = sock4();
	CHECK(ERR(vz_direct_bind(v4, SA(a4), sizeof(a4))) == EADDRINUSE,
	      "IPv4 on the dual socket's port: EADDRINUSE");
	CHECK(!deliver(PEER4, 40000, US4, 5010, "four") &&
		      !deliver(PEER6, 40001, US6, 5010, "six"),
	      "both families taken");
	CHECK(!strcmp(recv_from(dual, text, sizeof(text), from, sizeof(from),
				&alen),
		      "four") &&
		      !strcmp(from, "::ffff:" PEER4 " 40000") &&
		      alen == sizeof(struct sockaddr_in6),
	      "IPv4 as v4-mapped: '%s' from %s (%u)", text, from, alen);
	CHECK(!strcmp(recv_from(dual, text, sizeof(text), from, sizeof(from),
				&alen),
		      "six") &&
		      !strcmp(from, PEER6 " 40001"),
	      "IPv6: '%s' from %s", text, from);

	any.sin6_port = htons(5011);
	a4.sin_port = htons(5011);
	CHECK(!set_v6only(only, 1) &&
		      !vz_direct_bind(only, SA(any), sizeof(any)),
	      "V6ONLY on [::]:5011");
	CHECK(!vz_direct_bind(v4, SA(a4), sizeof(a4)),
	      "IPv4 beside it on 5011 (%s)", strerror(errno));
	CHECK(!deliver(PEER4, 40002, US4, 5011, "to4") &&
		      !deliver(PEER6, 40003, US6, 5011, "to6"),
	      "delivered");
	CHECK(!strcmp(recv_from(only, text, sizeof(text), from, sizeof(from),
				&alen),
		      "to6") &&
		      !strcmp(recv_from(only, text, sizeof(text), from,
					sizeof(from), &alen),
			      ""),
	      "the IPv6-only socket: IPv6 alone");
	CHECK(!strcmp(recv_from(v4, text, sizeof(text), from, sizeof(from),
				&alen),
		      "to4") &&
		      !strcmp(from, PEER4 " 40002") &&
		      alen == sizeof(struct sockaddr_in),
	      "the AF_INET socket: IPv4, a sockaddr_in ('%s' from %s)", text,
	      from);
	CHECK(ERR(vz_direct_sendto(only, "x", 1, 0, SA(a4), sizeof(a4))) ==
		      ENETUNREACH,
	      "IPv6-only, sendto a sockaddr_in: ENETUNREACH");
	a4 = sin4(PEER4, 9);
	CHECK(ERR(vz_direct_connect(only, SA(a4), sizeof(a4))) == EAFNOSUPPORT,
	      "IPv6-only, connect to a sockaddr_in: EAFNOSUPPORT");
	any = sin6("::ffff:" PEER4, 9);
	CHECK(ERR(vz_direct_connect(only, SA(any), sizeof(any))) == ENETUNREACH,
	      "IPv6-only, connect to v4-mapped: ENETUNREACH");

	/* bound to the IPv6 address: not the link-local one, not IPv4 */
	any = sin6(US6, 5012);
	CHECK(!vz_direct_bind(spec, SA(any), sizeof(any)), "bound [US6]:5012");
	CHECK(deliver("fe80::7", 40004, "fe80::1", 5012, "ll") == -1 &&
		      deliver(PEER4, 40005, US4, 5012, "v4") == -1,
	      "another destination: no socket");
	CHECK(!deliver(PEER6, 40006, US6, 5012, "ok") &&
		      !strcmp(recv_from(spec, text, sizeof(text), from,
					sizeof(from), &alen),
			      "ok"),
	      "its own address: taken");
out:
	vz_direct_close(dual);
	vz_direct_close(only);
	vz_direct_close(spec);
	if (v4 >= 0)
		vz_direct_close(v4);
}

/* A v4-mapped bind: IPv4 only; refused on an IPv6-only socket. */
static void test_mapped_bind(void)
{
	int s = sock6(), o = sock6(), c = sock6();
	struct sockaddr_in6 a = sin6("::ffff:" US4, 5020);
	struct sockaddr_in6 peer = sin6(PEER6, 7);
	char text[64], from[80];
	socklen_t alen;

	REQUIRE(s >= 0 && o >= 0 && c >= 0, "sockets");
	CHECK(!vz_direct_bind(s, SA(a), sizeof(a)), "bound ::ffff:US4 (%s)",
	      strerror(errno));
	CHECK(deliver(PEER6, 1, US6, 5020, "6") == -1 &&
		      !deliver(PEER4, 2, US4, 5020, "4") &&
		      !strcmp(recv_from(s, text, sizeof(text), from,
					sizeof(from), &alen),
			      "4"),
	      "IPv4 alone");
	CHECK(!set_v6only(o, 1) &&
		      ERR(vz_direct_bind(o, SA(a), sizeof(a))) == EINVAL,
	      "IPv6-only, v4-mapped bind: EINVAL");
	a = sin6("::ffff:" PEER4, 5021);
	CHECK(ERR(vz_direct_bind(c, SA(a), sizeof(a))) == EADDRNOTAVAIL,
	      "another IPv4 address, mapped: EADDRNOTAVAIL");
	/* connected: its peer's datagrams only */
	CHECK(!vz_direct_connect(c, SA(peer), sizeof(peer)), "connected");
	alen = sizeof(a);
	CHECK(!vz_direct_getsockname(c, SA(a), &alen) &&
		      !memcmp(&a.sin6_addr, &vz_direct.ip6, 16),
	      "getsockname: our IPv6 address");
	CHECK(!deliver("fd00:198:18::8", 7, US6, ntohs(a.sin6_port), "x") &&
		      !deliver(PEER6, 8, US6, ntohs(a.sin6_port), "y") &&
		      !deliver(PEER6, 7, US6, ntohs(a.sin6_port), "z"),
	      "three sent");
	CHECK(!strcmp(recv_from(c, text, sizeof(text), from, sizeof(from),
				&alen),
		      "z") &&
		      !strcmp(recv_from(c, text, sizeof(text), from,
					sizeof(from), &alen),
			      ""),
	      "only the peer's");
out:
	vz_direct_close(s);
	vz_direct_close(o);
	vz_direct_close(c);
}

/* ---- sends, into a stack whose frames are kept ---- */

static unsigned char frame[2048];
static size_t frame_len;
static unsigned int frames;

static int keep_tx(void *opaque, const void *f, size_t len)
{
	(void)opaque;
	if (len <= sizeof(frame)) {
		memcpy(frame, f, len);
		frame_len = len;
	}
	frames++;
	return 0;
}

static int no_deliver(void *opaque, const struct vz_dgram_meta *m,
		      const void *p, size_t len)
{
	(void)opaque, (void)m, (void)p, (void)len;
	return -1;
}

static unsigned int u16_at(size_t off)
{
	return (unsigned int)frame[off] << 8 | frame[off + 1];
}

static void test_send(void)
{
	struct vz_stack_config cfg = { .mac = { 2, 0, 0, 0, 0, 1 },
				       .prefix_len = 24,
				       .prefix6_len = 64,
				       .nneigh = 1 };
	struct vz_stack_ops ops = { .tx = keep_tx, .deliver = no_deliver };
	struct sockaddr_in6 to = sin6("::ffff:" PEER4, 53), to6;
	struct sockaddr_in6 me;
	int s = sock6();
	socklen_t len = sizeof(me);
	__u8 want[16];
	char err[128];

	cfg.ip4 = vz_direct.ip4;
	memcpy(cfg.ip6, &vz_direct.ip6, 16);
	inet_pton(AF_INET, PEER4, &cfg.neigh[0].ip4);
	memcpy(cfg.neigh[0].mac, "\x02\0\0\0\0\x07", 6);
	REQUIRE(s >= 0, "a socket");
	CHECK(ERR(vz_direct_sendto(s, "x", 1, 0, SA(to), sizeof(to))) ==
		      ENETDOWN,
	      "no engine: ENETDOWN");
	vz_direct.engines[0].stack = vz_stack_new(&cfg, &ops, err, sizeof(err));
	REQUIRE(vz_direct.engines[0].stack, "a stack: %s", err);
	vz_direct.nengines = 1;
	CHECK(vz_direct_sendto(s, "hello", 5, 0, SA(to), sizeof(to)) == 5,
	      "to v4-mapped (%s)", strerror(errno));
	CHECK(!vz_direct_getsockname(s, SA(me), &len), "autobound");
	CHECK(frames == 1 && frame_len >= 14 + 20 + 8 + 5 &&
		      u16_at(12) == 0x0800 && frame[23] == IPPROTO_UDP &&
		      !memcmp(frame + 30, &cfg.neigh[0].ip4, 4) &&
		      !memcmp(frame + 26, &cfg.ip4, 4) &&
		      u16_at(34) == ntohs(me.sin6_port) && u16_at(36) == 53 &&
		      !memcmp(frame + 42, "hello", 5),
	      "IPv4 out, from our address and the socket's port");
	to6 = sin6(PEER6, 53);
	CHECK(vz_direct_sendto(s, "hi", 2, 0, SA(to6), sizeof(to6)) == 2,
	      "to IPv6 (%s)", strerror(errno));
	/* a neighbour solicitation for PEER6 goes first; the datagram
	 * waits for the advertisement */
	inet_pton(AF_INET6, PEER6, want);
	CHECK(frames == 2 && u16_at(12) == 0x86dd && frame[20] == 58 &&
		      frame[54] == 135 && !memcmp(frame + 62, want, 16) &&
		      !memcmp(frame + 22, &vz_direct.ip6, 16),
	      "IPv6 out: a solicitation for the destination, from our address");
out:
	vz_direct_close(s);
	if (vz_direct.engines[0].stack)
		vz_stack_free(vz_direct.engines[0].stack);
	vz_direct.engines[0].stack = NULL;
	vz_direct.nengines = 0;
}

/* An ARP frame from PEER4 to us (op 1 request, 2 reply). */
static size_t arp_frame(unsigned char *f, int op)
{
	static const unsigned char us[6] = { 2, 0, 0, 0, 0, 1 },
				   peer[6] = { 2, 0, 0, 0, 0, 7 };

	memset(f, 0, 60);
	memcpy(f, us, 6);
	memcpy(f + 6, peer, 6);
	f[12] = 0x08, f[13] = 0x06; /* ARP */
	f[15] = 1, f[16] = 0x08, f[18] = 6, f[19] = 4; /* Ethernet, IPv4 */
	f[21] = (unsigned char)op;
	memcpy(f + 22, peer, 6);
	inet_pton(AF_INET, PEER4, f + 28);
	memcpy(f + 32, us, 6);
	inet_pton(AF_INET, US4, f + 38);
	return 60; /* padded, as on the wire */
}

/*
 * Two engines (two interface queues), each with its stack: engine 1 asks
 * for PEER4's address and the reply comes on engine 0's queue. Engine 0
 * shares it, and engine 1 learns it at its next turn and sends the
 * datagram that waited. A request is not shared (each engine answers only
 * what came on its own queue); an NDP advertisement is.
 */
static void test_neighbour_answers_shared(void)
{
	struct vz_stack_config cfg = { .mac = { 2, 0, 0, 0, 0, 1 },
				       .prefix_len = 24 };
	struct vz_stack_ops ops = { .tx = keep_tx, .deliver = no_deliver };
	struct vz_dgram_meta m = { .src_port = htons(5000),
				   .dst_port = htons(53) };
	struct vz_direct_engine *e0 = &vz_direct.engines[0],
				*e1 = &vz_direct.engines[1];
	unsigned char f[80] = { 0 };
	unsigned int i;
	char err[128];

	cfg.ip4 = vz_direct.ip4;
	inet_pton(AF_INET, PEER4, &m.dst_ip);
	for (i = 0; i < 2; i++) {
		vz_direct.engines[i].stack =
			vz_stack_new(&cfg, &ops, err, sizeof(err));
		vz_direct.engines[i].wake = -1;
		vz_direct.engines[i].queue = i;
		REQUIRE(vz_direct.engines[i].stack, "a stack: %s", err);
	}
	vz_direct.nengines = 2;
	frames = 0;
	CHECK(!vz_stack_send(e1->stack, &m, "dns", 3, 1) && frames == 1 &&
		      u16_at(12) == 0x0806 && u16_at(20) == 1,
	      "engine 1 asks for its next hop");
	vz_direct_frame_in(e0, f, arp_frame(f, 1));
	CHECK(e0->ninbox == 0 && e1->ninbox == 0, "a request is not shared");
	vz_direct_frame_in(e0, f, arp_frame(f, 2));
	CHECK(e1->ninbox == 1 && e0->ninbox == 0,
	      "a reply is shared with the other engine only");
	vz_direct_engine_run(e1);
	CHECK(e1->ninbox == 0 &&
		      vz_stack_get_stats(e1->stack)->arp_replies_in == 1 &&
		      !vz_stack_get_stats(e1->stack)->arp_queued,
	      "engine 1 learns it at its next turn");
	CHECK(u16_at(12) == 0x0800 && frame[23] == IPPROTO_UDP &&
		      !memcmp(frame, "\x02\0\0\0\0\x07", 6),
	      "and sends the datagram that waited, to the peer's MAC");
	/* an IPv6 neighbour advertisement: ICMPv6 type 136 (the stack
	 * judges its checksum; sharing it is all that is checked here) */
	memset(f, 0, sizeof(f));
	f[12] = 0x86, f[13] = 0xdd, f[14] = 0x60, f[20] = 58, f[54] = 136;
	vz_direct_frame_in(e1, f, sizeof(f));
	CHECK(e0->ninbox == 1, "an NDP advertisement is shared");
out:
	vz_direct.nengines = 0;
	for (i = 0; i < 2; i++) {
		vz_direct.engines[i].ninbox = 0;
		if (vz_direct.engines[i].stack)
			vz_stack_free(vz_direct.engines[i].stack);
		vz_direct.engines[i].stack = NULL;
	}
}

static int reuseport_sock(int family, int on)
{
	int fd = vz_direct_sock_new(family, SOCK_DGRAM);

	if (fd >= 0 && on)
		vz_direct_setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on,
				     sizeof(on));
	return fd;
}

/* SO_REUSEPORT groups: members share a port, each flow goes to one of
 * them, the flows spread over them, and a member's close hands its flows
 * to the others. A socket without the option, or on another address,
 * cannot join. */
static void test_reuseport_group(void)
{
	struct sockaddr_in any = sin4("0.0.0.0", 5300), us = sin4(US4, 5300);
	int a = reuseport_sock(AF_INET, 1), b = reuseport_sock(AF_INET, 1);
	int plain = reuseport_sock(AF_INET, 0),
	    other = reuseport_sock(AF_INET, 1);
	int got_a = 0, got_b = 0, sport, on = 0;
	socklen_t olen = sizeof(on), alen;
	char text[32], from[64];

	REQUIRE(a >= 0 && b >= 0 && plain >= 0 && other >= 0, "sockets");
	CHECK(!vz_direct_bind(a, SA(any), sizeof(any)) &&
		      !vz_direct_bind(b, SA(any), sizeof(any)),
	      "two members bound to one port");
	CHECK(ERR(vz_direct_bind(plain, SA(any), sizeof(any))) == EADDRINUSE,
	      "without SO_REUSEPORT: EADDRINUSE");
	CHECK(ERR(vz_direct_bind(other, SA(us), sizeof(us))) == EADDRINUSE,
	      "another address: EADDRINUSE");
	CHECK(!vz_direct_getsockopt(a, SOL_SOCKET, SO_REUSEPORT, &on, &olen) &&
		      on == 1,
	      "SO_REUSEPORT reads back");
	for (sport = 1000; sport < 1064; sport++) {
		int i;

		for (i = 0; i < 3; i++) /* one flow, three datagrams */
			deliver(PEER4, sport, US4, 5300, "x");
		got_a += (int)!!*recv_from(a, text, sizeof(text), from,
					   sizeof(from), &alen);
		got_b += (int)!!*recv_from(b, text, sizeof(text), from,
					   sizeof(from), &alen);
		/* the flow's other two went where its first did */
		while (*recv_from(a, text, sizeof(text), from, sizeof(from),
				  &alen) ||
		       *recv_from(b, text, sizeof(text), from, sizeof(from),
				  &alen))
			i--;
		CHECK(i == 1, "flow %d: all three on one member", sport);
	}
	CHECK(got_a + got_b == 64 && got_a >= 16 && got_b >= 16,
	      "64 flows spread over two members (%d, %d)", got_a, got_b);
	CHECK(!vz_direct_close(a), "close one member");
	deliver(PEER4, 1000, US4, 5300, "y");
	deliver(PEER4, 1001, US4, 5300, "z");
	CHECK(!strcmp(recv_from(b, text, sizeof(text), from, sizeof(from),
				&alen),
		      "y") &&
		      !strcmp(recv_from(b, text, sizeof(text), from,
					sizeof(from), &alen),
			      "z"),
	      "the other member takes every flow");
	vz_direct_close(b);
	vz_direct_close(plain);
	vz_direct_close(other);
out:;
}

/* Which of sockets fds[0..n) a datagram of flow sport arriving on an
 * interface queue went to: its index, or -1. */
static int member_for(const int *fds, int n, unsigned int queue, int sport)
{
	char text[32], from[64];
	socklen_t alen;
	int i, got = -1;

	deliver_on(queue, PEER4, sport, US4, 5400, "q");
	for (i = 0; i < n; i++)
		if (*recv_from(fds[i], text, sizeof(text), from, sizeof(from),
			       &alen))
			got = got < 0 ? i : -2; /* -2: more than one */
	return got;
}

/*
 * With an engine per interface queue, a group's member is picked by the
 * queue a datagram came on: as many members as queues, one each; more
 * members, those of a queue share its flows by hash; fewer members, the
 * queues are shared out over them.
 */
static void test_reuseport_by_queue(void)
{
	struct sockaddr_in any = sin4("0.0.0.0", 5400);
	int fds[3], i, sport, seen[3] = { 0 };
	bool exact = true;

	for (i = 0; i < 3; i++) {
		fds[i] = reuseport_sock(AF_INET, 1);
		REQUIRE(fds[i] >= 0 &&
				!vz_direct_bind(fds[i], SA(any), sizeof(any)),
			"member %d", i);
	}
	vz_direct.nengines = 3;
	for (sport = 2000; sport < 2032; sport++)
		for (i = 0; i < 3; i++)
			exact &=
				member_for(fds, 3, (unsigned int)i, sport) == i;
	CHECK(exact, "three queues, three members: queue i to member i");
	vz_direct.nengines = 2;
	for (sport = 2000; sport < 2064; sport++) {
		int q0 = member_for(fds, 3, 0, sport);

		exact &= member_for(fds, 3, 1, sport) == 1;
		exact &= q0 == member_for(fds, 3, 0, sport);
		if (q0 >= 0)
			seen[q0]++;
	}
	CHECK(exact && !seen[1] && seen[0] >= 16 && seen[2] >= 16,
	      "two queues, three members: queue 1 to member 1; queue 0's "
	      "flows, each to one place, over members 0 and 2 (%d, %d)",
	      seen[0], seen[2]);
	vz_direct.nengines = 5;
	CHECK(member_for(fds, 3, 3, 2000) == 0 &&
		      member_for(fds, 3, 4, 2000) == 1,
	      "five queues, three members: queue 3 to member 0, 4 to 1");
out:
	vz_direct.nengines = 0;
	for (i = 0; i < 3; i++)
		vz_direct_close(fds[i]);
}

int main(void)
{
	/* the addresses vz_direct_init takes from the environment */
	inet_pton(AF_INET, US4, &vz_direct.ip4);
	inet_pton(AF_INET6, US6, &vz_direct.ip6);
	test_bad_addresses();
	test_names();
	test_dual_stack();
	test_mapped_bind();
	test_send();
	test_reuseport_group();
	test_reuseport_by_queue();
	test_neighbour_answers_shared();
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	return failures != 0;
}
