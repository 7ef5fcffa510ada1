// SPDX-License-Identifier: BSD-2-Clause
/*
 * IPv4 reassembly (RFC 791), as strict as RFC 5722 is for IPv6: a fragment
 * that overlaps another (or repeats it) drops the whole datagram, which
 * also defeats teardrop-style attacks and overlapping rewrites.
 *
 * Memory follows what arrived, not what a fragment claims: each fragment is
 * kept as its own piece (sorted by offset, so overlaps show at insertion)
 * and copied once into the whole datagram when the last hole fills. Every
 * byte held, bookkeeping included, counts against reasm_max_bytes; at
 * reasm_max_datagrams a new datagram is refused rather than an old one
 * evicted, so a flood cannot push out datagrams about to complete.
 *
 * IPv6 fragments (RFC 8200 4.5) go through the same table under the same
 * limits, keyed by addresses and 32-bit identifier; RFC 5722 makes the
 * overlap rule the standard there.
 */
#include <stdlib.h>

#include <veloz/csum.h>

#include "sock/stack/stack_internal.h"

int vz_reasm_init(struct vz_stack *s)
{
	struct vz_reasm_table *t = &s->reasm;

	t->nbuckets = 16;
	while (t->nbuckets < s->cfg.reasm_max_datagrams)
		t->nbuckets <<= 1;
	t->bucket = calloc(t->nbuckets, sizeof(*t->bucket));
	return t->bucket ? 0 : -1;
}

/* What identifies a datagram: IPv4's four fields, or IPv6's three. */
struct reasm_key {
	bool v6;
	__be32 src, dst;
	__be16 id;
	__u8 proto;
	const __u8 *src6, *dst6;
	__u32 id6;
};

static __u32 fold6(const __u8 *a)
{
	__u32 w[4];

	memcpy(w, a, 16);
	return w[0] ^ w[1] ^ w[2] ^ w[3];
}

static unsigned int reasm_hash(const struct vz_reasm_table *t,
			       const struct reasm_key *k)
{
	__u32 h;

	if (k->v6) {
		h = fold6(k->src6) * 0x9e3779b1u;
		h ^= fold6(k->dst6) * 0x85ebca77u;
		h ^= k->id6 * 0xc2b2ae3du;
	} else {
		h = k->src * 0x9e3779b1u;
		h ^= k->dst * 0x85ebca77u;
		h ^= ((__u32)k->id << 8 | k->proto) * 0xc2b2ae3du;
	}
	h ^= h >> 15;
	return h & (t->nbuckets - 1);
}

static bool reasm_match(const struct vz_reasm *r, const struct reasm_key *k)
{
	if (r->v6 != k->v6)
		return false;
	if (k->v6)
		return r->id6 == k->id6 && !memcmp(r->src6, k->src6, 16) &&
		       !memcmp(r->dst6, k->dst6, 16);
	return r->src == k->src && r->dst == k->dst && r->id == k->id &&
	       r->proto == k->proto;
}

static struct reasm_key reasm_key_of(const struct vz_reasm *r)
{
	return (struct reasm_key){ .v6 = r->v6,
				   .src = r->src,
				   .dst = r->dst,
				   .id = r->id,
				   .proto = r->proto,
				   .src6 = r->src6,
				   .dst6 = r->dst6,
				   .id6 = r->id6 };
}

static struct vz_reasm **reasm_link(struct vz_reasm_table *t,
				    const struct reasm_key *k)
{
	struct vz_reasm **link = &t->bucket[reasm_hash(t, k)];

	for (; *link; link = &(*link)->hnext)
		if (reasm_match(*link, k))
			break;
	return link;
}

static void reasm_account(struct vz_stack *s, long delta)
{
	s->reasm.bytes += delta;
	s->st.reasm_bytes = s->reasm.bytes;
}

static void reasm_free(struct vz_stack *s, struct vz_reasm *r)
{
	struct vz_reasm_table *t = &s->reasm;
	struct reasm_key k = reasm_key_of(r);
	struct vz_reasm **link = reasm_link(t, &k);
	struct vz_frag *f, *next;

	*link = r->hnext;
	if (r->older)
		r->older->newer = r->newer;
	else
		t->oldest = r->newer;
	if (r->newer)
		r->newer->older = r->older;
	else
		t->newest = r->older;
	for (f = r->head; f; f = next) {
		next = f->next;
		free(f);
	}
	reasm_account(s, -(long)r->mem);
	t->count--;
	s->st.reasm_datagrams = t->count;
	free(r);
}

void vz_reasm_fini(struct vz_stack *s)
{
	while (s->reasm.oldest)
		reasm_free(s, s->reasm.oldest);
	free(s->reasm.bucket);
}

static struct vz_reasm *reasm_new(struct vz_stack *s, struct vz_reasm **link,
				  const struct reasm_key *k, __u64 now_ns)
{
	struct vz_reasm_table *t = &s->reasm;
	struct vz_reasm *r;

	if (t->count >= s->cfg.reasm_max_datagrams ||
	    t->bytes + sizeof(*r) > s->cfg.reasm_max_bytes)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->v6 = k->v6;
	r->src = k->src;
	r->dst = k->dst;
	r->id = k->id;
	r->proto = k->proto;
	r->id6 = k->id6;
	if (k->v6) {
		memcpy(r->src6, k->src6, 16);
		memcpy(r->dst6, k->dst6, 16);
	}
	r->expires_ns = now_ns + s->cfg.reasm_timeout_ms * VZ_NS_PER_MS;
	r->mem = sizeof(*r);
	r->hnext = *link; /* a chain's end, or what an expired entry left */
	*link = r;
	r->older = t->newest;
	if (t->newest)
		t->newest->newer = r;
	else
		t->oldest = r;
	t->newest = r;
	t->count++;
	s->st.reasm_datagrams = t->count;
	reasm_account(s, (long)r->mem);
	return r;
}

/*
 * A new datagram and the table is full: the oldest partial datagrams make
 * room (frag_evicted). Refusing the new one instead would let a fragment
 * flood hold every slot until the timeout and starve all fragmented
 * traffic; evicting the oldest leaves a flood only its own slots. Returns
 * how many were evicted.
 */
static unsigned int reasm_make_room(struct vz_stack *s)
{
	struct vz_reasm_table *t = &s->reasm;
	unsigned int n = 0;

	while (t->oldest &&
	       (t->count >= s->cfg.reasm_max_datagrams ||
		t->bytes + sizeof(struct vz_reasm) > s->cfg.reasm_max_bytes)) {
		s->st.frag_evicted++;
		reasm_free(s, t->oldest);
		n++;
	}
	return n;
}

/* The piece after which [off, end) goes, NULL for the head; overlaps of
 * its neighbours are the caller's to check. Scans from the tail: fragments
 * mostly come in order. */
static struct vz_frag *frag_before(const struct vz_reasm *r, __u32 off)
{
	struct vz_frag *f = r->tail;

	while (f && f->off >= off)
		f = f->prev;
	return f;
}

/* Why fragment [off, end) cannot join r (the counter of the reason the
 * datagram dies), NULL when it can; *prev and *next: its neighbours. */
static __u64 *frag_refused(struct vz_stack *s, const struct vz_reasm *r,
			   __u32 off, __u32 end, bool more, size_t need,
			   struct vz_frag **prev, struct vz_frag **next)
{
	/* one last fragment, nothing past it */
	if ((!more && r->seen_last) || (r->seen_last && end > r->total) ||
	    (!more && r->tail && r->tail->off + r->tail->len > end))
		return &s->st.frag_bad;
	*prev = frag_before(r, off);
	*next = *prev ? (*prev)->next : r->head;
	if ((*prev && (*prev)->off + (*prev)->len > off) ||
	    (*next && end > (*next)->off))
		return &s->st.frag_overlap;
	if (r->nfrags >= VZ_REASM_MAX_FRAGS ||
	    s->reasm.bytes + need > s->cfg.reasm_max_bytes)
		return &s->st.frag_no_memory;
	return NULL;
}

/* Add one fragment: 0, or the counter of the reason the datagram dies. */
static __u64 *reasm_add(struct vz_stack *s, struct vz_reasm *r, __u32 off,
			const __u8 *data, __u32 len, bool more, const __u8 *iph,
			size_t hlen)
{
	__u32 end = off + len;
	struct vz_frag *prev, *next, *f;
	size_t need = sizeof(*f) + len;
	__u64 *why = frag_refused(s, r, off, end, more, need, &prev, &next);

	if (why)
		return why;
	f = malloc(need);
	if (!f)
		return &s->st.frag_no_memory;
	f->off = off;
	f->len = len;
	memcpy(f->data, data, len);
	f->prev = prev;
	f->next = next;
	*(prev ? &prev->next : &r->head) = f;
	*(next ? &next->prev : &r->tail) = f;
	r->nfrags++;
	r->have += len;
	r->mem += need;
	reasm_account(s, (long)need);
	if (!off) {
		r->hlen = (__u8)hlen;
		memcpy(r->hdr, iph, hlen);
	}
	if (!more) {
		r->seen_last = true;
		r->total = end;
	}
	return NULL;
}

/* The whole datagram: the first fragment's header (options and all), made
 * to describe the whole, then the pieces. */
static __u8 *reasm_build(const struct vz_reasm *r, size_t *len)
{
	const struct vz_frag *f;
	vz_ipv6hdr *ip6;
	vz_iphdr *iph;
	__u8 *buf;

	*len = r->hlen + (size_t)r->total;
	buf = malloc(*len);
	if (!buf)
		return NULL;
	memcpy(buf, r->hdr, r->hlen);
	for (f = r->head; f; f = f->next)
		memcpy(buf + r->hlen + f->off, f->data, f->len);
	if (r->v6) { /* the fixed header, its chain cut to the payload */
		ip6 = (vz_ipv6hdr *)buf;
		ip6->payload_len = htons((__u16)r->total);
		ip6->nexthdr = r->proto;
		return buf;
	}
	iph = (vz_iphdr *)buf;
	iph->tot_len = htons((__u16)*len);
	iph->frag_off = 0;
	iph->check = 0;
	iph->check = vz_csum_fold(vz_sum32(vz_sum(0, buf, r->hlen)));
	return buf;
}

/* The datagram k's fragments go to: the one held, else a new one (a
 * stale one, past its timer, freed first); NULL without memory. */
static struct vz_reasm *reasm_find(struct vz_stack *s,
				   const struct reasm_key *k, __u64 now_ns)
{
	struct vz_reasm **link = reasm_link(&s->reasm, k), *r = *link;

	if (r && now_ns >= r->expires_ns) { /* the timer has not run yet */
		s->st.frag_timeout++;
		reasm_free(s, r);
		r = NULL; /* *link now holds the next in the chain */
	}
	if (r)
		return r;
	if (reasm_make_room(s)) /* the eviction may have changed *link */
		link = reasm_link(&s->reasm, k);
	return reasm_new(s, link, k, now_ns);
}

/* The end of a datagram: complete (why NULL), built into *out, or dead
 * (why, its reason's counter). Counted and freed. 1: reassembled, -1:
 * refused. */
static int reasm_finish(struct vz_stack *s, struct vz_reasm *r, __u64 *why,
			__u8 **out, size_t *outlen)
{
	if (!why && (r->v6 ? 0 : r->hlen) + (size_t)r->total > VZ_IP_MAXLEN)
		why = &s->st.frag_bad; /* the first header made it too long */
	if (!why) {
		*out = reasm_build(r, outlen);
		why = *out ? &s->st.frag_reassembled : &s->st.frag_no_memory;
	}
	(*why)++;
	reasm_free(s, r);
	return why == &s->st.frag_reassembled ? 1 : -1;
}

/*
 * One fragment of a datagram for us (header checked), of key k: [off, off +
 * plen) of the payload, `more` the MF flag, hdr the header the whole will
 * carry (the first fragment's). 1: it completed the datagram, now in *out
 * (malloc'd, header and all; the caller counts its outcome). 0: held. -1:
 * refused. Both counted here. `limit`: how far the payload may reach.
 */
static int reasm_input(struct vz_stack *s, const struct reasm_key *k, __u32 off,
		       bool more, const __u8 *hdr, size_t hlen,
		       const __u8 *payload, size_t plen, size_t limit,
		       __u64 now_ns, __u8 **out, size_t *outlen)
{
	struct vz_reasm *r;
	__u64 *why;

	s->st.frag_in++;
	/* all but the last carry multiples of 8, none is empty, none ends
	 * past the largest datagram */
	if (!plen || (more && plen % 8) || off + plen > limit) {
		s->st.frag_bad++;
		return -1;
	}
	r = reasm_find(s, k, now_ns);
	if (!r) {
		s->st.frag_no_memory++;
		return -1;
	}
	why = reasm_add(s, r, off, payload, (__u32)plen, more, hdr, hlen);
	if (!why && (!r->seen_last || r->have != r->total)) {
		s->st.frag_held++;
		return 0;
	}
	return reasm_finish(s, r, why, out, outlen);
}

int vz_reasm_input(struct vz_stack *s, const vz_iphdr *iph, size_t hlen,
		   const __u8 *payload, size_t plen, __u64 now_ns, __u8 **out,
		   size_t *outlen)
{
	struct reasm_key k = { .src = iph->saddr,
			       .dst = iph->daddr,
			       .id = iph->id,
			       .proto = iph->protocol };

	/* The limit counts the header: the whole must fit IPv4's 65535. */
	return reasm_input(s, &k, vz_ipv4_frag_offset(iph) * 8,
			   vz_ipv4_frag_more(iph), (const __u8 *)iph, hlen,
			   payload, plen, VZ_IP_MAXLEN - hlen, now_ns, out,
			   outlen);
}

int vz_reasm_input6(struct vz_stack *s, const vz_ipv6hdr *ip6,
		    const struct vz_ipv6_frag *fh, const __u8 *payload,
		    size_t plen, __u64 now_ns, __u8 **out, size_t *outlen)
{
	struct reasm_key k = { .v6 = true,
			       .proto = fh->nexthdr,
			       .src6 = ip6->saddr.s6_addr,
			       .dst6 = ip6->daddr.s6_addr,
			       .id6 = fh->identification };

	/* IPv6's payload length field bounds the whole's payload. */
	return reasm_input(s, &k, vz_ipv6_frag_offset(fh) * 8,
			   vz_ipv6_frag_more(fh), (const __u8 *)ip6,
			   sizeof(*ip6), payload, plen, VZ_IP_MAXLEN, now_ns,
			   out, outlen);
}

void vz_reasm_tick(struct vz_stack *s, __u64 now_ns)
{
	while (s->reasm.oldest && now_ns >= s->reasm.oldest->expires_ns) {
		s->st.frag_timeout++;
		reasm_free(s, s->reasm.oldest);
	}
}
