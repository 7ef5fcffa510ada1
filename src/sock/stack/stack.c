// SPDX-License-Identifier: BSD-2-Clause
/*
 * The engine's front: the config, Ethernet in and out, the timers. The
 * protocols live in arp.c, ipv4.c, reasm.c, icmp.c and udp.c; IPv6's in
 * ipv6.c, ndp.c and icmp6.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sock/stack/stack_internal.h"

static const __u8 vz_bcast[ETH_ALEN] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

static int bad_config(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	errno = EINVAL;
	return -1;
}

/* Addresses that can never be a peer's (nor ours): 0/8, loopback,
 * multicast, 240/4 and the limited broadcast. */
static bool ip4_reserved(__be32 ip)
{
	__u32 h = ntohl(ip);

	return (h >> 24) == 0 || (h >> 24) == 127 || (h >> 28) >= 0xe;
}

/* Our subnet's broadcast address (a /31 or /32 has none). */
static bool subnet_bcast(const struct vz_stack *s, __be32 ip)
{
	return s->cfg.prefix_len <= 30 && ((ip ^ s->cfg.ip4) & s->mask) == 0 &&
	       (ip | s->mask) == 0xffffffffu;
}

/* A source no honest sender uses: reserved, ours, our subnet's broadcast. */
bool vz_ip4_martian(const struct vz_stack *s, __be32 ip)
{
	return ip4_reserved(ip) || ip == s->cfg.ip4 || subnet_bcast(s, ip);
}

static int check_neigh(const struct vz_stack_config *c, char *err,
		       size_t errlen)
{
	unsigned int i, j;
	char a[INET_ADDRSTRLEN];

	if (c->nneigh > VZ_STACK_MAX_NEIGH)
		return bad_config(err, errlen, "%u static neighbours, max %d",
				  c->nneigh, VZ_STACK_MAX_NEIGH);
	for (i = 0; i < c->nneigh; i++) {
		inet_ntop(AF_INET, &c->neigh[i].ip4, a, sizeof(a));
		if (ip4_reserved(c->neigh[i].ip4) || c->neigh[i].ip4 == c->ip4)
			return bad_config(err, errlen,
					  "static neighbour %s: bad address",
					  a);
		if (vz_eth_is_multicast(c->neigh[i].mac) ||
		    vz_mac_is_zero(c->neigh[i].mac))
			return bad_config(err, errlen,
					  "static neighbour %s: bad MAC", a);
		for (j = 0; j < i; j++)
			if (c->neigh[j].ip4 == c->neigh[i].ip4)
				return bad_config(err, errlen,
						  "static neighbour %s twice",
						  a);
	}
	return 0;
}

/* A global or unique-local unicast address: what the stack may own. */
static bool ip6_unicast(const __u8 *ip)
{
	static const __u8 loop[16] = { [15] = 1 };

	return !vz_ip6_is_zero(ip) && !vz_ip6_is_multicast(ip) &&
	       memcmp(ip, loop, 16) && !vz_ip6_is_mapped(ip);
}

static bool ip6_onlink(const struct vz_stack *s, const __u8 *ip)
{
	unsigned int i;

	if (vz_ip6_is_linklocal(ip))
		return true;
	for (i = 0; i < 16; i++)
		if ((ip[i] ^ s->cfg.ip6[i]) & s->mask6[i])
			return false;
	return true;
}

static int check_config6(struct vz_stack *s, char *err, size_t errlen)
{
	struct vz_stack_config *c = &s->cfg;
	const __u8 *m = c->mac;
	unsigned int i;

	if (vz_ip6_is_zero(c->ip6)) {
		if (!vz_ip6_is_zero(c->gateway6))
			return bad_config(err, errlen,
					  "gateway6 without an ip6 address");
		return 0;
	}
	if (!ip6_unicast(c->ip6) || vz_ip6_is_linklocal(c->ip6))
		return bad_config(err, errlen,
				  "ip6: not a global or unique-local unicast "
				  "address");
	if (!c->prefix6_len)
		c->prefix6_len = 64;
	if (c->prefix6_len > 128)
		return bad_config(err, errlen, "prefix6_len %u: max 128",
				  c->prefix6_len);
	if (c->mtu < IPV6_MIN_MTU)
		return bad_config(err, errlen, "mtu %u: IPv6 needs at least %d",
				  c->mtu, IPV6_MIN_MTU);
	for (i = 0; i < 16; i++) {
		unsigned int bits =
			c->prefix6_len > i * 8 ? c->prefix6_len - i * 8 : 0;

		s->mask6[i] = bits >= 8 ? 0xff : (__u8)(0xff00 >> bits);
	}
	/* fe80::/64 and the modified EUI-64 of the MAC (RFC 4291 2.5.1) */
	memset(s->ll6, 0, 16);
	s->ll6[0] = 0xfe;
	s->ll6[1] = 0x80;
	s->ll6[8] = m[0] ^ 2;
	s->ll6[9] = m[1];
	s->ll6[10] = m[2];
	s->ll6[11] = 0xff;
	s->ll6[12] = 0xfe;
	s->ll6[13] = m[3];
	s->ll6[14] = m[4];
	s->ll6[15] = m[5];
	s->has6 = true;
	if (!vz_ip6_is_zero(c->gateway6) &&
	    (!ip6_unicast(c->gateway6) || vz_ip6_ours(s, c->gateway6) ||
	     !ip6_onlink(s, c->gateway6)))
		return bad_config(err, errlen,
				  "gateway6: not another address on-link");
	return 0;
}

/* What a zero (unset) field of the configuration means. */
static void config_defaults(struct vz_stack_config *c)
{
	if (!c->mtu)
		c->mtu = 1500;
	if (!c->arp_timeout_ms)
		c->arp_timeout_ms = 60000;
	if (!c->arp_retry_ms)
		c->arp_retry_ms = 1000;
	if (!c->reasm_timeout_ms)
		c->reasm_timeout_ms = 30000;
	if (!c->reasm_max_bytes)
		c->reasm_max_bytes = 4u << 20;
	if (!c->reasm_max_datagrams)
		c->reasm_max_datagrams = 256;
}

static int check_config(struct vz_stack *s, char *err, size_t errlen)
{
	struct vz_stack_config *c = &s->cfg;

	if (vz_eth_is_multicast(c->mac) || vz_mac_is_zero(c->mac))
		return bad_config(err, errlen, "mac: not a unicast address");
	if (ip4_reserved(c->ip4))
		return bad_config(err, errlen, "ip4: not a unicast address");
	if (c->prefix_len > 32)
		return bad_config(err, errlen, "prefix_len %u: max 32",
				  c->prefix_len);
	s->mask = c->prefix_len ? htonl(~0u << (32 - c->prefix_len)) : 0;
	if (c->gateway && (ip4_reserved(c->gateway) || c->gateway == c->ip4 ||
			   ((c->gateway ^ c->ip4) & s->mask)))
		return bad_config(err, errlen,
				  "gateway: not another address on-link");
	config_defaults(c);
	if (c->mtu < VZ_MTU_MIN || c->mtu > VZ_MTU_MAX)
		return bad_config(err, errlen, "mtu %u: not in [%d, %d]",
				  c->mtu, VZ_MTU_MIN, VZ_MTU_MAX);
	if (c->reasm_max_datagrams > VZ_REASM_MAX_DATAGRAMS)
		return bad_config(err, errlen, "reasm_max_datagrams %u: max %d",
				  c->reasm_max_datagrams,
				  VZ_REASM_MAX_DATAGRAMS);
	if (check_config6(s, err, errlen))
		return -1;
	return check_neigh(c, err, errlen);
}

struct vz_stack *vz_stack_new(const struct vz_stack_config *cfg,
			      const struct vz_stack_ops *ops, char *err,
			      size_t errlen)
{
	struct vz_stack *s;

	if (!cfg || !ops || !ops->tx || !ops->deliver) {
		bad_config(err, errlen, "no config or no tx/deliver callback");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->cfg = *cfg;
	s->ops = *ops;
	if (check_config(s, err, errlen)) {
		free(s);
		return NULL;
	}
	s->icmp_tokens = VZ_ICMP_BURST;
	if (vz_arp_init(s) || vz_reasm_init(s)) {
		vz_stack_free(s);
		errno = ENOMEM;
		return NULL;
	}
	return s;
}

void vz_stack_free(struct vz_stack *s)
{
	if (!s)
		return;
	vz_arp_fini(s);
	vz_reasm_fini(s);
	free(s);
}

/* Transmit s->frame (len bytes, padded to the Ethernet minimum). */
int vz_stack_tx(struct vz_stack *s, size_t len)
{
	if (len < ETH_ZLEN) {
		memset(s->frame + len, 0, ETH_ZLEN - len);
		len = ETH_ZLEN;
	}
	if (s->ops.tx(s->ops.opaque, s->frame, len)) {
		s->st.tx_full++;
		return -1;
	}
	s->st.tx_frames++;
	return 0;
}

void vz_eth_header(struct vz_stack *s, const __u8 *dst_mac, __u16 type)
{
	struct ethhdr *eth = (struct ethhdr *)s->frame;

	memcpy(eth->h_dest, dst_mac, ETH_ALEN);
	memcpy(eth->h_source, s->cfg.mac, ETH_ALEN);
	eth->h_proto = htons(type);
}

/*
 * The parsers of veloz/proto/ read headers through types with the 2-byte
 * alignment frames have in a port's buffers (veloz/proto/ctx.h). A frame
 * at an odd address is read from an aligned copy of the bytes that can
 * matter, so any buffer a caller hands in works, and alike.
 */
static struct vz_ctx rx_ctx(struct vz_stack *s, const void *frame, size_t len)
{
	if ((uintptr_t)frame & 1) {
		if (len > sizeof(s->rx_copy))
			len = sizeof(s->rx_copy);
		memcpy(s->rx_copy, frame, len);
		frame = s->rx_copy;
	}
	/* the parsers read through the context and write nothing */
	return (struct vz_ctx){ .data = (__u8 *)frame,
				.data_end = (__u8 *)frame + len };
}

void vz_stack_input(struct vz_stack *s, const void *frame, size_t len,
		    __u64 now_ns)
{
	struct vz_ctx ctx = rx_ctx(s, frame, len);
	const struct ethhdr *eth = vz_eth(&ctx);
	bool bcast, to_us;

	s->st.rx_frames++;
	/* a type, not an 802.3 length: Ethernet II, not LLC */
	if (!eth || vz_eth_is_multicast(eth->h_source) ||
	    !vz_eth_is_type(eth->h_proto)) {
		s->st.rx_bad_eth++;
		return;
	}
	bcast = !memcmp(eth->h_dest, vz_bcast, ETH_ALEN);
	to_us = !memcmp(eth->h_dest, s->cfg.mac, ETH_ALEN);
	if (eth->h_proto == htons(ETH_P_ARP) && (bcast || to_us)) {
		vz_arp_input(s, &ctx, now_ns);
		return;
	}
	/* IPv6 to us, or to a group (33:33:...): ipv6.c sorts out which. */
	if (eth->h_proto == htons(ETH_P_IPV6) && s->has6 &&
	    (to_us || (eth->h_dest[0] == 0x33 && eth->h_dest[1] == 0x33))) {
		vz_ip6_input(s, &ctx, now_ns);
		return;
	}
	/* RFC 1122 3.3.6: IP in a link broadcast is not for one host; VLAN
	 * tags are someone else's (the port should not hand them to us). */
	if (eth->h_proto != htons(ETH_P_IP) || !to_us) {
		s->st.rx_not_for_us++;
		return;
	}
	vz_ip_input(s, &ctx, now_ns);
}

static int send6(struct vz_stack *s, const struct vz_dgram_meta *m,
		 const void *payload, size_t len, __u64 now_ns)
{
	struct vz_dgram_meta out = *m;
	const __u8 *nexthop = out.dst_ip6;

	if (!s->has6)
		return -EAFNOSUPPORT;
	if (len > VZ_STACK_MAX_UDP)
		return -EMSGSIZE;
	if (vz_ip6_is_zero(out.src_ip6))
		memcpy(out.src_ip6,
		       vz_ip6_is_linklocal(out.dst_ip6) ? s->ll6 : s->cfg.ip6,
		       16);
	if (!vz_ip6_ours(s, out.src_ip6) || !out.dst_port ||
	    !ip6_unicast(out.dst_ip6) || vz_ip6_ours(s, out.dst_ip6) ||
	    (len && !payload))
		return -EINVAL;
	out.src_ip = out.dst_ip = 0;
	if (!ip6_onlink(s, out.dst_ip6)) {
		if (vz_ip6_is_zero(s->cfg.gateway6))
			return -ENETUNREACH;
		nexthop = s->cfg.gateway6;
	}
	return vz_neigh_output6(s, nexthop, &out, payload, len, now_ns);
}

int vz_stack_send(struct vz_stack *s, const struct vz_dgram_meta *m,
		  const void *payload, size_t len, __u64 now_ns)
{
	struct vz_dgram_meta out = *m;
	__be32 nexthop;

	if (m->v6)
		return send6(s, m, payload, len, now_ns);
	if (len > VZ_STACK_MAX_UDP)
		return -EMSGSIZE;
	if (!out.src_ip)
		out.src_ip = s->cfg.ip4;
	if (out.src_ip != s->cfg.ip4 || !out.dst_port ||
	    vz_ip4_martian(s, out.dst_ip) || (len && !payload))
		return -EINVAL;
	nexthop = out.dst_ip;
	if ((nexthop ^ s->cfg.ip4) & s->mask) {
		if (!s->cfg.gateway)
			return -ENETUNREACH;
		nexthop = s->cfg.gateway;
	}
	return vz_arp_output(s, nexthop, &out, payload, len, now_ns);
}

void vz_stack_tick(struct vz_stack *s, __u64 now_ns)
{
	vz_arp_tick(s, now_ns);
	vz_reasm_tick(s, now_ns);
}

const struct vz_stack_stats *vz_stack_get_stats(const struct vz_stack *s)
{
	return &s->st;
}
