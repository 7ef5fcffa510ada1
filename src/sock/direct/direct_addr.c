// SPDX-License-Identifier: BSD-2-Clause
/*
 * Direct mode's addresses (direct_internal.h says which file holds what): the
 * sockaddrs callers pass, checked as Linux's inet and inet6 code checks
 * them (the same errno for the same mistake), and the ones handed back;
 * binding, which puts a socket in the IPv4 and/or the IPv6 port table; and
 * which socket a received datagram is for. Every address inside is IPv6,
 * an IPv4 one v4-mapped, so the rest of direct mode has one code path.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>

#include "sock/direct/direct_internal.h"
#include "sock/stack/stack.h"

/* struct sockaddr_in6 without sin6_scope_id (RFC 2133), which Linux takes */
#define SIN6_LEN_RFC2133 24

/* An AF_INET socket's address: inet_bind, ip4_datagram_connect and
 * udp_sendmsg check it so (AF_UNSPEC: the compatibility they allow). */
static int get4(const struct sockaddr *sa, socklen_t len,
		enum direct_addr_op op, struct in6_addr *ip, __be16 *port)
{
	struct sockaddr_in sin;

	if (len < sizeof(sin))
		return EINVAL;
	memcpy(&sin, sa, sizeof(sin));
	if (sin.sin_family != AF_INET &&
	    (sin.sin_family != AF_UNSPEC || op == DS_CONNECT ||
	     (op == DS_BIND && sin.sin_addr.s_addr != htonl(INADDR_ANY))))
		return EAFNOSUPPORT;
	*ip = in6_map(sin.sin_addr.s_addr);
	*port = sin.sin_port;
	return 0;
}

/* An AF_INET address given to an AF_INET6 socket: IPv4 through it, unless
 * it is IPv6-only. */
static int get4on6(const struct vz_direct_socket *s, const struct sockaddr *sa,
		   socklen_t len, enum direct_addr_op op, struct in6_addr *ip,
		   __be16 *port)
{
	if (op == DS_BIND)
		return len < SIN6_LEN_RFC2133 ? EINVAL : EAFNOSUPPORT;
	if (s->v6only)
		return op == DS_CONNECT ? EAFNOSUPPORT : ENETUNREACH;
	return get4(sa, len, op, ip, port);
}

int vz_direct_addr_get(const struct vz_direct_socket *s,
		       const struct sockaddr *sa, socklen_t len,
		       enum direct_addr_op op, struct in6_addr *ip,
		       __be16 *port)
{
	struct sockaddr_in6 sin6 = { 0 };

	if (!sa)
		return EFAULT;
	if (!s->v6)
		return get4(sa, len, op, ip, port);
	if (len < offsetof(struct sockaddr, sa_data))
		return EINVAL;
	if (sa->sa_family == AF_INET)
		return get4on6(s, sa, len, op, ip, port);
	if (len < SIN6_LEN_RFC2133)
		return EINVAL;
	if (sa->sa_family != AF_INET6)
		return op == DS_SEND ? EINVAL : EAFNOSUPPORT;
	memcpy(&sin6, sa, len < sizeof(sin6) ? len : sizeof(sin6));
	if (in6_mapped(&sin6.sin6_addr) && s->v6only)
		return op == DS_BIND ? EINVAL : ENETUNREACH;
	*ip = sin6.sin6_addr;
	*port = sin6.sin6_port;
	return 0;
}

int vz_direct_addr_put(const struct vz_direct_socket *s, struct sockaddr *sa,
		       socklen_t *len, const struct in6_addr *ip, __be16 port)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6,
				     .sin6_port = port,
				     .sin6_addr = *ip };
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = port,
				   .sin_addr.s_addr = in6_v4(ip) };
	const void *src = s->v6 ? (const void *)&sin6 : (const void *)&sin;
	socklen_t n = s->v6 ? sizeof(sin6) : sizeof(sin);

	if (!sa || !len)
		return fail(EFAULT);
	memcpy(sa, src, *len < n ? *len : n);
	*len = n;
	return 0;
}

/* Which tables binding s to ip takes: 0 with *err set when ip is not ours. */
static unsigned int tables_for(const struct vz_direct_socket *s,
			       const struct in6_addr *ip, int *err)
{
	*err = EADDRNOTAVAIL;
	if (!s->v6 || in6_mapped(ip)) {
		if (in6_v4(ip) && in6_v4(ip) != vz_direct.ip4)
			return 0;
		return ON4;
	}
	if (IN6_IS_ADDR_UNSPECIFIED(ip))
		return s->v6only ? ON6 : ON4 | ON6;
	return in6_eq(ip, &vz_direct.ip6) ? ON6 : 0;
}

static struct vz_direct_socket **slot(unsigned int table, __u16 port)
{
	return table == ON4 ? &vz_direct.by_port4[port]
			    : &vz_direct.by_port6[port];
}

static struct vz_direct_socket **next_of(struct vz_direct_socket *s,
					 unsigned int table)
{
	return table == ON4 ? &s->next4 : &s->next6;
}

/*
 * Whether s may take port in these tables: free, or held by a
 * SO_REUSEPORT group s may join (as the kernel: every member has it set,
 * on the same address, in the same tables).
 */
static bool port_open(const struct vz_direct_socket *s, unsigned int tables,
		      const struct in6_addr *ip, __u16 port)
{
	unsigned int t;

	for (t = ON4; t <= ON6; t <<= 1) {
		const struct vz_direct_socket *first = *slot(t, port);

		if (!(tables & t) || !first)
			continue;
		if (!s->reuseport || !first->reuseport ||
		    first->tables != tables || !in6_eq(&first->ip, ip))
			return false;
	}
	return true;
}

static bool port_free(unsigned int tables, __u16 port)
{
	return !((tables & ON4) && vz_direct.by_port4[port]) &&
	       !((tables & ON6) && vz_direct.by_port6[port]);
}

int vz_direct_bind_locked(struct vz_direct_socket *s, const struct in6_addr *ip,
			  __u16 port)
{
	struct in6_addr any = s->v6 ? in6addr_any : in6_map(0);
	unsigned int tables, i, t;
	int err;

	if (!s->refs)
		return EBADF; /* closed by another thread meanwhile */
	if (s->port)
		return EINVAL;
	if (!ip)
		ip = &any;
	tables = tables_for(s, ip, &err);
	if (!tables)
		return err;
	if (!port) {
		for (i = 0; i <= EPH_HI - EPH_LO; i++) {
			__u16 p =
				(__u16)(EPH_LO + vz_direct.eph_next++ %
							 (EPH_HI - EPH_LO + 1));

			if (port_free(tables, p)) {
				port = p;
				break;
			}
		}
		if (!port)
			return EADDRINUSE;
	} else if (!port_open(s, tables, ip, port)) {
		return EADDRINUSE;
	}
	s->ip = *ip;
	s->port = htons(port);
	s->tables = (__u8)tables;
	/* a group's members in the order they bound: the last at the end */
	for (t = ON4; t <= ON6; t <<= 1) {
		struct vz_direct_socket **at = slot(t, port);

		if (!(tables & t))
			continue;
		while (*at)
			at = next_of(*at, t);
		*at = s;
		*next_of(s, t) = NULL;
	}
	return 0;
}

void vz_direct_unbind_locked(struct vz_direct_socket *s)
{
	__u16 p = ntohs(s->port);
	unsigned int t;

	if (!s->port)
		return;
	for (t = ON4; t <= ON6; t <<= 1) {
		struct vz_direct_socket **at = slot(t, p);

		while (*at && *at != s)
			at = next_of(*at, t);
		if (*at)
			*at = *next_of(s, t);
	}
}

/*
 * A datagram's socket in the group bound to its port. The queue it came
 * on picks: with at least as many members as queues, member i serves
 * queue i modulo the queue count; with fewer, queue q goes to member q
 * modulo the member count. So a server with a thread per queue has each
 * thread served by one engine, on the CPU that runs it, and the NIC's RSS
 * hash is what spreads the flows. Among several members for one queue,
 * and on a single queue, the hash of the flow picks, so one flow's
 * datagrams all go to one member, as the kernel's reuseport selection
 * does.
 */
static struct vz_direct_socket *reuseport_pick(struct vz_direct_socket *first,
					       unsigned int table,
					       const struct in6_addr *src,
					       __be16 sport, unsigned int queue)
{
	unsigned int queues = vz_direct.nengines ? vz_direct.nengines : 1;
	__u32 h = (__u32)sport * 0x9e3779b1u, n = 0, i, pick;
	struct vz_direct_socket *s;

	if (!*next_of(first, table))
		return first;
	for (i = 0; i < 4; i++)
		h = (h ^ src->s6_addr32[i]) * 0x85ebca6bu;
	h ^= h >> 16;
	for (s = first; s; s = *next_of(s, table))
		n++;
	queue %= queues;
	if (n < queues)
		pick = queue % n;
	else /* members queue, queue + queues, ...: how many of them? */
		pick = queue + h % ((n - queue + queues - 1) / queues) * queues;
	for (s = first, i = pick; i; i--)
		s = *next_of(s, table);
	return s;
}

/* As the kernel: the socket bound to the port in the datagram's family, if
 * its address matches; a connected socket takes only its peer's. */
int vz_direct_deliver(const struct vz_dgram_meta *m, unsigned int queue,
		      const void *payload, size_t len)
{
	__u16 p = ntohs(m->dst_port);
	struct in6_addr src, dst;
	struct vz_direct_socket *s;

	if (m->v6) {
		memcpy(&src, m->src_ip6, sizeof(src));
		memcpy(&dst, m->dst_ip6, sizeof(dst));
		s = vz_direct.by_port6[p];
	} else {
		src = in6_map(m->src_ip);
		dst = in6_map(m->dst_ip);
		s = vz_direct.by_port4[p];
	}
	if (!s || (!in6_any(&s->ip) && !in6_eq(&s->ip, &dst)))
		return -1;
	s = reuseport_pick(s, m->v6 ? ON6 : ON4, &src, m->src_port, queue);
	if (s->peer_port &&
	    (!in6_eq(&s->peer_ip, &src) || s->peer_port != m->src_port))
		return 0; /* not from the peer: dropped, as the kernel does */
	if (!vz_direct_enqueue(s, &src, m->src_port, queue, payload, len))
		s->drops++;
	return 0;
}
