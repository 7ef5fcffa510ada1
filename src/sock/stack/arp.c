// SPDX-License-Identifier: BSD-2-Clause
/*
 * The neighbour cache, and ARP (RFC 826) for Ethernet and IPv4: answer
 * requests for our address,
 * resolve next hops for vz_stack_send (queueing a few datagrams meanwhile),
 * and keep a cache whose learned entries expire; static ones never do and
 * ARP never overwrites them (that is what they are for).
 *
 * The table is a fixed array: a flood of ARP can evict learned entries but
 * cannot grow memory. New entries are made only for those who talk to us
 * (a request for our address, a reply to us) or whom we resolve; any other
 * ARP merely refreshes an entry we already have (gratuitous ARP).
 *
 * An entry in use is refreshed before it expires (arp_probe), the way
 * Linux's STALE/DELAY/PROBE states reconfirm a neighbour while traffic
 * flows, so a busy destination does not stall on ARP once a lifetime.
 *
 * IPv6 next hops live in the same table (keys are IPv6, IPv4 mapped into
 * it): NDP (ndp.c) asks and answers, this file keeps the entries, the
 * queues and the timers for both.
 */
#include <errno.h>
#include <stdlib.h>

#include "sock/stack/stack_internal.h"

static const __u8 bcast_mac[ETH_ALEN] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

static unsigned int arp_hash(const __u8 *ip)
{
	__u32 w[4];

	memcpy(w, ip, 16);
	/* IPv4 keys differ only in the last word: it alone must spread. */
	return ((w[0] ^ w[1] ^ w[2] ^ ntohl(w[3])) * 2654435761u) >>
	       23; /* 9 bits: 512 buckets */
}

static struct vz_arp_entry *arp_find(struct vz_arp_table *t, const __u8 *ip)
{
	int i;

	for (i = t->bucket[arp_hash(ip)]; i >= 0; i = t->e[i].next)
		if (!memcmp(t->e[i].ip, ip, 16))
			return &t->e[i];
	return NULL;
}

static void arp_deadline(struct vz_arp_table *t, struct vz_arp_entry *e,
			 __u64 when)
{
	e->deadline_ns = when;
	if (when < t->next_ns)
		t->next_ns = when;
}

/* Free what waits on e; counted as dropped unless it was sent. */
static void arp_drop_queue(struct vz_stack *s, struct vz_arp_entry *e)
{
	struct vz_arp_pkt *p, *next;

	for (p = e->q_head; p; p = next) {
		next = p->next;
		s->arp.queued_bytes -= p->len;
		s->st.arp_queued--;
		if (vz_ip6_is_mapped(e->ip))
			s->st.arp_unresolved_drops++;
		else
			s->st.nd_unresolved_drops++;
		free(p);
	}
	e->q_head = e->q_tail = NULL;
	e->qlen = 0;
}

static void arp_remove(struct vz_stack *s, struct vz_arp_entry *e)
{
	struct vz_arp_table *t = &s->arp;
	int idx = (int)(e - t->e), *link = &t->bucket[arp_hash(e->ip)];

	while (*link != idx)
		link = &t->e[*link].next;
	*link = e->next;
	arp_drop_queue(s, e);
	e->state = VZ_ARP_FREE;
	e->next = t->free_head;
	t->free_head = idx;
}

/* A free slot, or the learned entry closest to expiry: never a pending
 * or static one. */
static struct vz_arp_entry *arp_alloc(struct vz_stack *s, const __u8 *ip)
{
	struct vz_arp_table *t = &s->arp;
	struct vz_arp_entry *e, *victim = NULL;
	unsigned int i, b;

	if (t->free_head < 0) {
		for (i = 0; i < VZ_ARP_SLOTS; i++) {
			e = &t->e[i];
			if (e->state == VZ_ARP_REACHABLE &&
			    (!victim || e->deadline_ns < victim->deadline_ns))
				victim = e;
		}
		if (!victim)
			return NULL;
		arp_remove(s, victim);
	}
	e = &t->e[t->free_head];
	t->free_head = e->next;
	memset(e, 0, sizeof(*e));
	memcpy(e->ip, ip, 16);
	b = arp_hash(ip);
	e->next = t->bucket[b];
	t->bucket[b] = (int)(e - t->e);
	return e;
}

int vz_arp_init(struct vz_stack *s)
{
	struct vz_arp_table *t = &s->arp;
	struct vz_arp_entry *e;
	unsigned int i;

	for (i = 0; i < VZ_ARP_BUCKETS; i++)
		t->bucket[i] = -1;
	for (i = 0; i < VZ_ARP_SLOTS; i++)
		t->e[i].next = i + 1 < VZ_ARP_SLOTS ? (int)i + 1 : -1;
	t->free_head = 0;
	t->next_ns = ~0ull;
	for (i = 0; i < s->cfg.nneigh; i++) {
		__u8 key[16];

		vz_ip4_mapped(key, s->cfg.neigh[i].ip4);
		e = arp_alloc(s, key);
		memcpy(e->mac, s->cfg.neigh[i].mac, ETH_ALEN);
		e->state = VZ_ARP_STATIC;
	}
	return 0;
}

void vz_arp_fini(struct vz_stack *s)
{
	unsigned int i;

	for (i = 0; i < VZ_ARP_SLOTS; i++)
		if (s->arp.e[i].state == VZ_ARP_PENDING)
			arp_drop_queue(s, &s->arp.e[i]);
}

static int arp_send(struct vz_stack *s, __u16 op, const __u8 *eth_dst,
		    const __u8 *tha, __be32 tpa)
{
	struct vz_arphdr *a = (struct vz_arphdr *)(s->frame + ETH_HLEN);

	vz_eth_header(s, eth_dst, ETH_P_ARP);
	a->ar_hrd = htons(VZ_ARP_HRD_ETHER);
	a->ar_pro = htons(ETH_P_IP);
	a->ar_hln = ETH_ALEN;
	a->ar_pln = 4;
	a->ar_op = htons(op);
	memcpy(a->ar_sha, s->cfg.mac, ETH_ALEN);
	memcpy(a->ar_sip, &s->cfg.ip4, 4);
	memcpy(a->ar_tha, tha, ETH_ALEN);
	memcpy(a->ar_tip, &tpa, 4);
	return vz_stack_tx(s, ETH_HLEN + sizeof(*a));
}

static void arp_request(struct vz_stack *s, struct vz_arp_entry *e,
			__u64 now_ns)
{
	static const __u8 unknown[ETH_ALEN];

	if (!vz_ip6_is_mapped(e->ip)) {
		if (!vz_nd_solicit(s, e->ip, NULL))
			s->st.nd_solicits_out++;
	} else if (!arp_send(s, VZ_ARP_OP_REQUEST, bcast_mac, unknown,
			     vz_get_be32(e->ip + 12))) {
		s->st.arp_requests_out++;
	}
	e->tries++;
	arp_deadline(&s->arp, e, now_ns + s->cfg.arp_retry_ms * VZ_NS_PER_MS);
}

/*
 * A datagram just went out through e: if e is near its expiry, ask its owner
 * to confirm it, and let the reply (arp_learn) renew e before anything has
 * to wait for ARP. Until then, and if no reply comes, e is used as it is and
 * expires as it would have.
 *
 * The window is the last sixth of the lifetime: 10 s of the default 60 s,
 * room for several probes at one a second, so one lost probe or reply does
 * not cost the entry (Linux gives a neighbour 5 s of DELAY then 3 probes a
 * second apart). A fixed few seconds would be all of a short configured
 * lifetime, probing on every use; a fraction scales with it.
 *
 * Unicast to the MAC we hold, as Linux does in PROBE and RFC 1122 2.3.2.1's
 * "unicast poll" suggests: it bothers no other host, and it checks the very
 * binding we use; if the address moved to another MAC the probe goes
 * unanswered, the entry expires and the broadcast request that follows
 * finds the new one. The target hardware address is left zero, as Linux
 * does; the Ethernet destination alone makes it unicast.
 *
 * At most one probe per entry per VZ_ARP_PROBE_GAP_MS (arp_retry_ms when
 * longer), tried or not: a full port must not turn every datagram into a
 * probe attempt.
 */
static void arp_probe(struct vz_stack *s, struct vz_arp_entry *e, __u64 now_ns)
{
	static const __u8 unknown[ETH_ALEN];
	__u64 life = s->cfg.arp_timeout_ms * VZ_NS_PER_MS;
	__u64 gap_ms = s->cfg.arp_retry_ms > VZ_ARP_PROBE_GAP_MS
			       ? s->cfg.arp_retry_ms
			       : VZ_ARP_PROBE_GAP_MS;

	if (e->state != VZ_ARP_REACHABLE ||
	    now_ns < e->deadline_ns - life / VZ_ARP_PROBE_FRACTION ||
	    now_ns < e->probe_ok_ns)
		return;
	e->probe_ok_ns = now_ns + gap_ms * VZ_NS_PER_MS;
	if (!vz_ip6_is_mapped(e->ip)) {
		if (!vz_nd_solicit(s, e->ip, e->mac))
			s->st.nd_probes_out++;
	} else if (!arp_send(s, VZ_ARP_OP_REQUEST, e->mac, unknown,
			     vz_get_be32(e->ip + 12))) {
		s->st.arp_probes_out++;
	}
}

/* The next hop answered: send what waited for it, in order. */
static void arp_flush(struct vz_stack *s, struct vz_arp_entry *e)
{
	struct vz_arp_pkt *p = e->q_head, *next;

	e->q_head = e->q_tail = NULL;
	e->qlen = 0;
	for (; p; p = next) {
		next = p->next;
		s->arp.queued_bytes -= p->len;
		s->st.arp_queued--;
		vz_udp_output(s, e->mac, &p->m, p->data, p->len);
		free(p);
	}
}

/* Learn or refresh ip -> mac; create an entry only when asked to. */
static void arp_learn(struct vz_stack *s, const __u8 *ip, const __u8 *mac,
		      bool create, __u64 now_ns)
{
	struct vz_arp_entry *e = arp_find(&s->arp, ip);
	bool was_pending;

	if (e && e->state == VZ_ARP_STATIC)
		return;
	if (!e && (!create || !(e = arp_alloc(s, ip))))
		return;
	was_pending = e->state == VZ_ARP_PENDING;
	memcpy(e->mac, mac, ETH_ALEN);
	e->state = VZ_ARP_REACHABLE;
	arp_deadline(&s->arp, e, now_ns + s->cfg.arp_timeout_ms * VZ_NS_PER_MS);
	if (was_pending)
		arp_flush(s, e);
}

/* An Ethernet/IPv4 ARP request or reply from a unicast sender, not a
 * martian; a sender of 0.0.0.0 is a probe (RFC 5227): only a request. */
static bool arp_valid(struct vz_stack *s, const struct vz_arphdr *a)
{
	__be32 spa;
	__u16 op;

	if (!a)
		return false;
	op = ntohs(a->ar_op);
	spa = vz_arp_ip(a->ar_sip);
	if ((op != VZ_ARP_OP_REQUEST && op != VZ_ARP_OP_REPLY) ||
	    vz_eth_is_multicast(a->ar_sha) || vz_mac_is_zero(a->ar_sha))
		return false;
	return spa ? !vz_ip4_martian(s, spa) : op == VZ_ARP_OP_REQUEST;
}

void vz_arp_input(struct vz_stack *s, const struct vz_ctx *ctx, __u64 now_ns)
{
	const struct vz_arphdr *a = vz_arp(ctx, ETH_HLEN);
	__be32 spa, tpa;

	if (!arp_valid(s, a)) {
		s->st.arp_bad++;
		return;
	}
	spa = vz_arp_ip(a->ar_sip);
	tpa = vz_arp_ip(a->ar_tip);
	if (spa) {
		__u8 key[16];

		vz_ip4_mapped(key, spa);
		arp_learn(s, key, a->ar_sha, tpa == s->cfg.ip4, now_ns);
	}
	if (a->ar_op == htons(VZ_ARP_OP_REPLY)) {
		s->st.arp_replies_in++;
		return;
	}
	if (tpa != s->cfg.ip4) {
		s->st.rx_not_for_us++;
		return;
	}
	s->st.arp_requests_in++;
	if (!arp_send(s, VZ_ARP_OP_REPLY, a->ar_sha, a->ar_sha, spa))
		s->st.arp_replies_out++;
}

static int arp_enqueue(struct vz_stack *s, struct vz_arp_entry *e,
		       const struct vz_dgram_meta *m, const void *payload,
		       size_t len)
{
	struct vz_arp_pkt *p = malloc(sizeof(*p) + len);

	if (!p)
		return -ENOMEM;
	p->next = NULL;
	p->m = *m;
	p->len = len;
	if (len)
		memcpy(p->data, payload, len);
	if (e->q_tail)
		e->q_tail->next = p;
	else
		e->q_head = p;
	e->q_tail = p;
	e->qlen++;
	s->arp.queued_bytes += len;
	s->st.arp_queued++;
	return 0;
}

void vz_neigh_learn6(struct vz_stack *s, const __u8 *ip, const __u8 *mac,
		     bool create, __u64 now_ns)
{
	arp_learn(s, ip, mac, create, now_ns);
}

static int neigh_output(struct vz_stack *s, const __u8 *nexthop,
			const struct vz_dgram_meta *m, const void *payload,
			size_t len, __u64 now_ns)
{
	struct vz_arp_entry *e = arp_find(&s->arp, nexthop);
	int ret;

	if (e && e->state == VZ_ARP_REACHABLE && now_ns >= e->deadline_ns) {
		arp_remove(s, e); /* expired, the timer has not run yet */
		e = NULL;
	}
	if (e && e->state != VZ_ARP_PENDING) {
		ret = vz_udp_output(s, e->mac, m, payload, len);
		if (!ret) /* the datagram first: it is what waits */
			arp_probe(s, e, now_ns);
		return ret;
	}
	if ((e && e->qlen >= VZ_ARP_QUEUE_MAX) ||
	    s->arp.queued_bytes + len > VZ_ARP_QUEUE_BYTES)
		return -EAGAIN;
	if (!e) {
		e = arp_alloc(s, nexthop);
		if (!e)
			return -EAGAIN; /* every slot pending or static */
		e->state = VZ_ARP_PENDING;
	}
	ret = arp_enqueue(s, e, m, payload, len);
	if (ret) {
		if (!e->qlen)
			arp_remove(s, e);
		return ret;
	}
	if (!e->tries)
		arp_request(s, e, now_ns);
	return 0;
}

int vz_arp_output(struct vz_stack *s, __be32 nexthop,
		  const struct vz_dgram_meta *m, const void *payload,
		  size_t len, __u64 now_ns)
{
	__u8 key[16];

	vz_ip4_mapped(key, nexthop);
	return neigh_output(s, key, m, payload, len, now_ns);
}

int vz_neigh_output6(struct vz_stack *s, const __u8 *nexthop,
		     const struct vz_dgram_meta *m, const void *payload,
		     size_t len, __u64 now_ns)
{
	return neigh_output(s, nexthop, m, payload, len, now_ns);
}

void vz_arp_tick(struct vz_stack *s, __u64 now_ns)
{
	struct vz_arp_table *t = &s->arp;
	struct vz_arp_entry *e;
	unsigned int i;

	if (now_ns < t->next_ns)
		return;
	t->next_ns = ~0ull;
	for (i = 0; i < VZ_ARP_SLOTS; i++) {
		e = &t->e[i];
		if (e->state != VZ_ARP_PENDING && e->state != VZ_ARP_REACHABLE)
			continue;
		if (now_ns < e->deadline_ns) {
			arp_deadline(t, e, e->deadline_ns);
			continue;
		}
		if (e->state == VZ_ARP_PENDING && e->tries < VZ_ARP_TRIES)
			arp_request(s, e, now_ns);
		else
			arp_remove(s, e); /* expired, or gave up */
	}
}
