// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-udpd's counters: one line a person reads, or one JSON line (every
 * counter of the stack, the socket table, the loop and the port) that
 * `veloz udpd --json`, `veloz status` and the metrics read.
 */
#include <string.h>

#include "sock/udpd/stats.h"

#define F(x) (unsigned long long)(x)

/* The counters a person watches, on one line. */
static void print_stats_text(const struct vz_stack_stats *s,
			     const struct vz_sock_server_stats *v, FILE *f,
			     double t)
{
	fprintf(f,
		"%8.1fs rx %llu delivered %llu tx %llu | arp in %llu "
		"out %llu | icmp echo %llu | frags %llu reasm %llu | "
		"drops: ip %llu udp %llu no-port %llu ring-full %llu "
		"| apps %llu sockets %llu\n",
		t, F(s->rx_frames), F(s->rx_delivered), F(s->tx_frames),
		F(s->arp_requests_in), F(s->arp_replies_out),
		F(s->icmp_echo_out), F(s->frag_in), F(s->frag_reassembled),
		F(s->ip_bad_header + s->ip_bad_csum),
		F(s->udp_bad_len + s->udp_bad_csum), F(s->udp_no_port),
		F(v->rx_ring_full), F(v->apps), F(v->sockets));
}

/* The JSON line's "stack" object (Ethernet, ARP, IPv4, ICMP, UDP). */
static void print_stack_json(const struct vz_stack_stats *s, FILE *f)
{
	fprintf(f,
		"\"stack\": {"
		"\"rx_frames\": %llu, \"rx_delivered\": %llu, "
		"\"rx_not_for_us\": %llu, \"rx_bad_eth\": %llu, "
		"\"arp_requests_in\": %llu, \"arp_replies_out\": %llu, "
		"\"arp_replies_in\": %llu, \"arp_requests_out\": %llu, "
		"\"arp_probes_out\": %llu, "
		"\"arp_bad\": %llu, \"arp_unresolved_drops\": %llu, "
		"\"ip_bad_header\": %llu, \"ip_bad_csum\": %llu, "
		"\"ip_ttl_zero\": %llu, \"frag_in\": %llu, "
		"\"frag_reassembled\": %llu, \"frag_overlap\": %llu, "
		"\"frag_timeout\": %llu, \"frag_no_memory\": %llu, "
		"\"frag_evicted\": %llu, "
		"\"frag_bad\": %llu, \"icmp_echo_in\": %llu, "
		"\"icmp_echo_out\": %llu, \"icmp_bad\": %llu, "
		"\"icmp_unreach_out\": %llu, \"udp_bad_len\": %llu, "
		"\"udp_bad_csum\": %llu, \"udp_no_port\": %llu, "
		"\"tx_frames\": %llu, \"tx_full\": %llu, "
		"\"tx_fragments\": %llu}, ",
		F(s->rx_frames), F(s->rx_delivered), F(s->rx_not_for_us),
		F(s->rx_bad_eth), F(s->arp_requests_in), F(s->arp_replies_out),
		F(s->arp_replies_in), F(s->arp_requests_out),
		F(s->arp_probes_out), F(s->arp_bad), F(s->arp_unresolved_drops),
		F(s->ip_bad_header), F(s->ip_bad_csum), F(s->ip_ttl_zero),
		F(s->frag_in), F(s->frag_reassembled), F(s->frag_overlap),
		F(s->frag_timeout), F(s->frag_no_memory), F(s->frag_evicted),
		F(s->frag_bad), F(s->icmp_echo_in), F(s->icmp_echo_out),
		F(s->icmp_bad), F(s->icmp_unreach_out), F(s->udp_bad_len),
		F(s->udp_bad_csum), F(s->udp_no_port), F(s->tx_frames),
		F(s->tx_full), F(s->tx_fragments));
}

/* "stack6": IPv6, neighbour discovery, ICMPv6. */
static void print_stack6_json(const struct vz_stack_stats *s, FILE *f)
{
	fprintf(f,
		"\"stack6\": {\"ip6_bad_header\": %llu, \"nd_solicits_in\": %llu, "
		"\"nd_adverts_in\": %llu, \"nd_bad\": %llu, "
		"\"nd_adverts_out\": %llu, \"nd_solicits_out\": %llu, "
		"\"nd_probes_out\": %llu, \"nd_unresolved_drops\": %llu, "
		"\"icmp6_echo_in\": %llu, \"icmp6_echo_out\": %llu, "
		"\"icmp6_bad\": %llu, \"icmp6_other\": %llu, "
		"\"icmp6_unreach_out\": %llu}, ",
		F(s->ip6_bad_header), F(s->nd_solicits_in), F(s->nd_adverts_in),
		F(s->nd_bad), F(s->nd_adverts_out), F(s->nd_solicits_out),
		F(s->nd_probes_out), F(s->nd_unresolved_drops),
		F(s->icmp6_echo_in), F(s->icmp6_echo_out), F(s->icmp6_bad),
		F(s->icmp6_other), F(s->icmp6_unreach_out));
}

/* "sockets" (the poller's socket table) and "poller". */
static void print_sockets_json(const struct vz_sock_server_stats *v,
			       __u64 sleeps, FILE *f)
{
	fprintf(f,
		"\"sockets\": {\"apps\": %llu, \"apps_total\": %llu, "
		"\"apps_refused\": %llu, \"apps_died\": %llu, "
		"\"sockets\": %llu, \"rx_queued\": %llu, "
		"\"rx_ring_full\": %llu, \"tx_sent\": %llu, "
		"\"tx_errors\": %llu, \"bad_requests\": %llu}, ",
		F(v->apps), F(v->apps_total), F(v->apps_refused),
		F(v->apps_died), F(v->sockets), F(v->rx_queued),
		F(v->rx_ring_full), F(v->tx_sent), F(v->tx_errors),
		F(v->bad_requests));
	fprintf(f, "\"poller\": {\"sleeps\": %llu}, ", F(sleeps));
}

/* "port": the AF_XDP port's counters, the line's last object. */
static void print_port_json(const struct vz_udpd_port_stats *p, FILE *f)
{
	fprintf(f,
		"\"port\": {\"rx_frames\": %llu, \"rx_invalid\": %llu, "
		"\"tx_frames\": %llu, \"tx_full\": %llu, "
		"\"tx_kicks\": %llu, \"tx_kick_stalls\": %llu, "
		"\"xsk_rx_dropped\": %llu, \"xsk_rx_ring_full\": %llu, "
		"\"xsk_fill_empty\": %llu}}\n",
		F(p->rx_frames), F(p->rx_invalid), F(p->tx_frames),
		F(p->tx_full), F(p->tx_kicks), F(p->tx_kick_stalls),
		F(p->xsk_rx_dropped), F(p->xsk_rx_ring_full),
		F(p->xsk_fill_empty));
}

void vz_udpd_print_stats(const struct vz_udpd_counters *c, FILE *f,
			 const char *event, bool json, double t)
{
	const struct vz_stack_stats *s = vz_stack_get_stats(c->stack);
	const struct vz_sock_server_stats *v =
		vz_sock_server_get_stats(c->server);
	struct vz_udpd_port_stats p;

	vz_udpd_port_get_stats(c->port, &p);
	if (!json) {
		print_stats_text(s, v, f, t);
		fflush(f);
		return;
	}
	fprintf(f, "{\"event\": \"%s\", %s\"t\": %.3f, ", event,
		strcmp(event, "summary") ? "" : "\"summary\": true, ", t);
	print_stack_json(s, f);
	print_stack6_json(s, f);
	print_sockets_json(v, c->sleeps, f);
	print_port_json(&p, f);
	fflush(f);
}

#undef F
