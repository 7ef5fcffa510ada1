// SPDX-License-Identifier: BSD-2-Clause
/*
 * The UDP/IP engine's configuration and ARP, against frames built by hand:
 * answers, resolution, retries, expiry, refresh, silent probes and static
 * neighbours.
 * After each test every received frame must sit in one outcome.
 */
#include "stack_harness.h"

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

/*
 * ARP that is not Ethernet/IPv4 (hardware type, protocol type, protocol
 * length), a frame one byte short of a whole ARP body, and ARP sent to
 * another host's MAC.
 */
static void test_arp_bad_header(void)
{
	static const __u8 zero[6];
	struct host h;
	size_t n;

	host_up(&h, 1);
	n = arp_frame(frame, bcast, 1, mac_of[2], ip4(10, 0, 0, 2), zero,
		      ip4(10, 0, 0, 1));
	put16(frame + 14, 6); /* IEEE 802 */
	input(&h, frame, n, T0);
	put16(frame + 14, 1);
	put16(frame + 16, 0x86dd);
	input(&h, frame, n, T0);
	put16(frame + 16, 0x0800);
	frame[19] = 16;
	input(&h, frame, n, T0);
	frame[19] = 4;
	input(&h, frame, 14 + 27, T0);
	CHECK(st(&h)->arp_bad == 4 && h.ntx == 0,
	      "hardware type, protocol type, protocol length, short");
	input(&h, frame, 14 + 28, T0);
	CHECK(st(&h)->arp_requests_in == 1 && h.ntx == 1,
	      "a whole body without padding: answered");
	memcpy(frame, mac_of[3], 6);
	input(&h, frame, n, T0);
	CHECK(st(&h)->rx_not_for_us == 1 && h.ntx == 1,
	      "to another MAC: not ours");
	host_down(&h, "arp bad header");
}

/* --------------------------------- ICMP --------------------------------- */

int main(void)
{
	test_config();
	test_arp_answer();
	test_arp_resolve();
	test_arp_expiry();
	test_arp_refresh();
	test_arp_probe_silent();
	test_arp_static();
	test_arp_bad_header();
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
