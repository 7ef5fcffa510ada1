// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-gen: paced UDP traffic out of an interface through XDP live frames
 * (BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES): the kernel runs gen.bpf.o on
 * a template frame `repeat` times per call and transmits each frame without
 * building an skb. Pacing: each call sends about a millisecond of traffic,
 * then we sleep until the schedule says the next one is due.
 *
 * Each BPF_PROG_RUN with repeat > 1 adds the program to the kernel's XDP
 * BPF dispatcher and removes it afterwards, a text patch that costs tens
 * of milliseconds on a VM and would cap a paced run at a few dozen calls a
 * second. So for
 * the run the program is also attached to lo in generic mode, which keeps it
 * in the dispatcher; there it passes every frame (it acts only on frames of
 * the generator's interface). lo is claimed with the same per-namespace lock
 * `veloz run` uses, and a copy left by a killed generator is removed.
 *
 * What was sent is what the kernel transmitted: the driver's own
 * xdp_xmit / xdp_xmit_errors counters (ethtool) where it keeps them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <veloz/csum.h>

#include "common/err.h"
#include "common/options.h"
#include "common/parse.h"
#include "gen/bpf_object.h"
#include "gen/gen.h"
#include "gen/ifstats.h"
#include "gen/live.h"
#include "gen/xsk_tx.h"
#include "common/clock.h"
#include "runner/xdp_attach.h"
#include "common/iface.h"

#define GEN_DST_PORT 9 /* discard: the default, and the sink's */
#define GEN_BASE_PORT 1024
/*
 * Frames per live-frames batch: the kernel transmits and flushes (waking
 * the receiver's NAPI) once a batch. 64 is the kernel's default
 * (NAPI_POLL_WEIGHT), 256 its most (TEST_XDP_MAX_BATCH).
 */
#define GEN_DEFAULT_BATCH 64
#define GEN_MAX_BATCH 256

struct gen {
	const char *ifname;
	int ifindex;
	__u32 size;
	__u64 rate; /* pps, 0 = as fast as possible */
	__u64 count; /* 0 = until duration */
	double duration;
	__u32 flows;
	__u16 dst_port;
	__u32 dsts; /* destinations spread over dst_range (live frames, IPv4) */
	struct in_addr dst_range;
	__u32 dst_range_len;
	bool have_dst_range;
	__u8 src_mac[ETH_ALEN], dst_mac[ETH_ALEN];
	bool src_v6, dst_v6; /* --src-ip, --dst-ip: which family */
	bool ipv6, tcp;
	bool afxdp; /* through an AF_XDP socket, not live frames */
	__u32 queue;
	__u32 batch; /* live frames per kernel batch */
	__u32 threads; /* live frames' transmit threads */
	bool fixed; /* --static: every frame the template, as built */
	bool batch_stamp; /* one clock read per kernel batch */
	struct in_addr src_ip, dst_ip;
	struct in6_addr src_ip6, dst_ip6;
	bool json;
	const char *bpf_path;
	__u16 l4_off, payload_off, csum_off;
	__u8 frame[VZ_GEN_MAX_HDR + 4096];
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* One's complement sum of 16-bit words as they lie in memory (RFC 1071). */
static __u32 sum16(const void *buf, size_t len, __u32 sum)
{
	const __u8 *p = buf;
	__u16 word;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		memcpy(&word, p + i, 2);
		sum += word;
	}
	if (len & 1) {
		word = 0;
		memcpy(&word, p + len - 1, 1);
		sum += word;
	}
	return sum;
}

/* The L4 checksum over the pseudo-header and the L4 header and payload. */
static __u16 l4_csum(const struct gen *g, const void *l4, __u32 l4_len)
{
	__u32 sum = 0;
	__u16 words[2] = { htons((__u16)(l4_len >> 16)), htons((__u16)l4_len) };
	__u16 proto = htons(g->tcp ? IPPROTO_TCP : IPPROTO_UDP);

	if (g->ipv6) {
		sum = sum16(&g->src_ip6, 16, sum);
		sum = sum16(&g->dst_ip6, 16, sum);
		sum = sum16(words, 4, sum);
	} else {
		sum = sum16(&g->src_ip, 4, sum);
		sum = sum16(&g->dst_ip, 4, sum);
		sum = sum16(&words[1], 2, sum);
	}
	sum += proto;
	return vz_csum_fold(sum16(l4, l4_len, sum));
}

/*
 * The template frame. The source port, sequence number and timestamp are
 * left zero: the XDP program writes them per frame and adds them to the
 * checksum computed here.
 */
static void build_template(struct gen *g)
{
	struct ethhdr *eth = (struct ethhdr *)g->frame;
	__u8 *l4 = g->frame + ETH_HLEN + (g->ipv6 ? 40 : 20);
	__u32 l4_len, i;

	memset(g->frame, 0, sizeof(g->frame));
	memcpy(eth->h_dest, g->dst_mac, ETH_ALEN);
	memcpy(eth->h_source, g->src_mac, ETH_ALEN);
	g->l4_off = (__u16)(l4 - g->frame);
	g->payload_off = (__u16)(g->l4_off + (g->tcp ? 20 : 8));
	l4_len = g->size - g->l4_off;
	if (g->ipv6) {
		struct ipv6hdr *ip6 = (struct ipv6hdr *)(eth + 1);

		eth->h_proto = htons(ETH_P_IPV6);
		ip6->version = 6;
		ip6->payload_len = htons((__u16)l4_len);
		ip6->nexthdr = g->tcp ? IPPROTO_TCP : IPPROTO_UDP;
		ip6->hop_limit = 64;
		ip6->saddr = g->src_ip6;
		ip6->daddr = g->dst_ip6;
	} else {
		struct iphdr *ip = (struct iphdr *)(eth + 1);

		eth->h_proto = htons(ETH_P_IP);
		ip->version = 4;
		ip->ihl = 5;
		ip->tot_len = htons((__u16)(g->size - ETH_HLEN));
		ip->frag_off = htons(0x4000); /* DF */
		ip->ttl = 64;
		ip->protocol = g->tcp ? IPPROTO_TCP : IPPROTO_UDP;
		ip->saddr = g->src_ip.s_addr;
		ip->daddr = g->dst_ip.s_addr;
		ip->check = vz_ipv4_csum(ip);
	}
	if (g->tcp) {
		struct tcphdr *tcp = (struct tcphdr *)l4;

		tcp->dest = htons(g->dst_port);
		if (g->fixed)
			tcp->source = htons(GEN_BASE_PORT);
		tcp->seq = htonl(1);
		tcp->ack_seq = htonl(1);
		tcp->doff = 5;
		tcp->ack = 1;
		tcp->psh = 1;
		tcp->window = htons(65535);
		g->csum_off =
			(__u16)(g->l4_off + offsetof(struct tcphdr, check));
	} else {
		struct udphdr *udp = (struct udphdr *)l4;

		udp->dest = htons(g->dst_port);
		udp->len = htons((__u16)l4_len);
		if (g->fixed) /* the XDP program writes no port then */
			udp->source = htons(GEN_BASE_PORT);
		/* over IPv4 a zero checksum means none; IPv6 requires one */
		g->csum_off = g->ipv6 ? (__u16)(g->l4_off +
						offsetof(struct udphdr, check))
				      : 0;
	}
	/* a recognisable filler after the sequence number and timestamp */
	for (i = g->payload_off + sizeof(struct vz_gen_payload); i < g->size;
	     i++)
		g->frame[i] = (__u8)i;
	if (g->csum_off) {
		__u16 csum = l4_csum(g, l4, l4_len);

		memcpy(g->frame + g->csum_off, &csum, 2);
	}
}

static int load_program(struct gen *g, struct bpf_object **obj)
{
	struct vz_gen_config cfg = {
		.ifindex = (__u32)g->ifindex,
		.flows = g->flows,
		.base_port = GEN_BASE_PORT,
		.threads = g->threads,
		.seq_base = 0,
		.l4_off = g->l4_off,
		.payload_off = g->payload_off,
		.csum_off = g->csum_off,
		.fixed = g->fixed,
		.stamp_every = g->batch_stamp ? g->batch : 0,
		.dsts = g->dsts,
		.dst_base = ntohl(g->dst_range.s_addr),
		.dst_mask =
			g->dst_range_len
				? (__u32)((1ull << (32 - g->dst_range_len)) - 1)
				: 0xffffffffu,
	};

	memcpy(cfg.headers, g->frame, g->payload_off);
	return vz_load_with_config(g->bpf_path, "generator", ".data.vz_gen",
				   &cfg, sizeof(cfg), obj);
}

static const char gen_usage[] =
	"usage: vz-gen --iface IF --dst-mac MAC --src-ip A --dst-ip A\n"
	"              [--src-mac MAC] [--size 60..3520] [--rate PPS]"
	" [--flows N]\n"
	"              [--count N | --duration S] [--tcp] [--json]"
	" [--bpf gen.bpf.o]\n"
	"              [--afxdp [--queue Q]] [--dsts N --dst-range CIDR]\n"
	"              [--dst-port N] [--batch 1..256] [--threads N]"
	" [--static] [--batch-stamp]\n"
	"  addresses are IPv4 or IPv6 (both the same family)\n";

/* --src-ip, --dst-ip: IPv4 or IPv6, and which one it was. */
static int opt_ip(const struct vz_option *opt, const char *text, void *dst,
		  void *cfg)
{
	struct gen *g = cfg;
	bool src = !strcmp(opt->name, "src-ip");

	(void)dst;
	if (inet_pton(AF_INET, text, src ? &g->src_ip : &g->dst_ip) == 1) {
		*(src ? &g->src_v6 : &g->dst_v6) = false;
		return 0;
	}
	if (inet_pton(AF_INET6, text, src ? &g->src_ip6 : &g->dst_ip6) == 1) {
		*(src ? &g->src_v6 : &g->dst_v6) = true;
		return 0;
	}
	vz_err("'%s' is not an IP address", text);
	return -EINVAL;
}

/* --dst-range: an IPv4 prefix with no host bits set. */
static int opt_dst_range(const struct vz_option *opt, const char *text,
			 void *dst, void *cfg)
{
	char addr[INET_ADDRSTRLEN + 1], *slash, *end;
	struct gen *g = cfg;
	unsigned long long n;

	(void)opt;
	(void)dst;
	snprintf(addr, sizeof(addr), "%s", text);
	slash = strchr(addr, '/');
	if (slash)
		*slash = '\0';
	errno = 0;
	n = slash ? strtoull(slash + 1, &end, 10) : 99;
	if (!slash || errno || *end || n > 32 ||
	    inet_pton(AF_INET, addr, &g->dst_range) != 1 ||
	    (n < 32 && (ntohl(g->dst_range.s_addr) & ((1u << (32 - n)) - 1)))) {
		vz_err("--dst-range '%s' is not an IPv4 prefix "
		       "(e.g. 198.18.128.0/17)",
		       text);
		return -EINVAL;
	}
	g->dst_range_len = (__u32)n;
	g->have_dst_range = true;
	return 0;
}

#define GEN_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct gen, member, __VA_ARGS__)

/* python/veloz/lab/gen.py checks `veloz gen`'s options by these rows. */
static struct vz_option gen_options[] = {
	GEN_OPT("iface", VZ_OPT_IFNAME, ifname, .required = true,
		.metavar = "IF", .help = "send out of this interface"),
	GEN_OPT("size", VZ_OPT_U64, size, .min = VZ_GEN_MIN_SIZE,
		.max = VZ_GEN_MAX_SIZE, .metavar = "BYTES",
		.help = "frame size without FCS"),
	GEN_OPT("rate", VZ_OPT_U64, rate, .min = 0, .max = UINT64_MAX,
		.metavar = "PPS", .help = "frames per second (0: flat out)"),
	GEN_OPT("count", VZ_OPT_U64, count, .min = 0, .max = UINT64_MAX,
		.metavar = "N", .help = "send N frames (0: for --duration)"),
	GEN_OPT("duration", VZ_OPT_SECONDS, duration, .no_default = true,
		.metavar = "S", .help = "send for S seconds (default 10)"),
	GEN_OPT("flows", VZ_OPT_U64, flows, .min = 1,
		.max = 65535 - GEN_BASE_PORT, .metavar = "N",
		.help = "distinct source ports"),
	GEN_OPT("src-mac", VZ_OPT_MAC, src_mac, .metavar = "MAC",
		.help = "default: the interface's"),
	GEN_OPT("dst-mac", VZ_OPT_MAC, dst_mac, .required = true,
		.metavar = "MAC", .help = "the next hop's MAC"),
	GEN_OPT("src-ip", VZ_OPT_CUSTOM, src_ip, .parse = opt_ip,
		.required = true, .type_name = "ip", .metavar = "A",
		.help = "IPv4 or IPv6 source"),
	GEN_OPT("dst-ip", VZ_OPT_CUSTOM, dst_ip, .parse = opt_ip,
		.required = true, .type_name = "ip", .metavar = "A",
		.help = "IPv4 or IPv6 destination (the source's family)"),
	GEN_OPT("json", VZ_OPT_FLAG, json, .help = "the result as JSON"),
	GEN_OPT("tcp", VZ_OPT_FLAG, tcp, .help = "TCP segments (ACK), not UDP"),
	GEN_OPT("afxdp", VZ_OPT_FLAG, afxdp,
		.help = "through an AF_XDP socket, not live frames"),
	GEN_OPT("queue", VZ_OPT_U64, queue, .min = 0, .max = 4095,
		.metavar = "Q", .help = "the AF_XDP socket's queue"),
	GEN_OPT("bpf", VZ_OPT_STRING, bpf_path, .metavar = "PATH",
		.help = "gen.bpf.o (default: beside this program)"),
	GEN_OPT("dsts", VZ_OPT_U64, dsts, .min = 1, .max = 65536,
		.metavar = "N",
		.help = "destinations spread over --dst-range (IPv4 live "
			"frames; frame k goes to destination k mod N)"),
	GEN_OPT("dst-range", VZ_OPT_CUSTOM, dst_range, .parse = opt_dst_range,
		.type_name = "ipv4-prefix", .metavar = "CIDR",
		.help = "where --dsts come from"),
	GEN_OPT("dst-port", VZ_OPT_U64, dst_port, .min = 1, .max = 65535,
		.metavar = "N", .help = "UDP/TCP destination port"),
	GEN_OPT("batch", VZ_OPT_U64, batch, .min = 1, .max = GEN_MAX_BATCH,
		.metavar = "N", .help = "live frames per kernel batch"),
	GEN_OPT("threads", VZ_OPT_U64, threads, .min = 1,
		.max = VZ_GEN_MAX_THREADS, .metavar = "N",
		.help = "live-frames transmit threads, one per CPU (frames "
			"numbered 0, 1, 2, ... across all of them)"),
	GEN_OPT("batch-stamp", VZ_OPT_FLAG, batch_stamp,
		.help = "one clock read per kernel batch, its frames' "
			"transmit time (they leave together)"),
	GEN_OPT("static", VZ_OPT_FLAG, fixed,
		.help = "every frame the same (no sequence number, timestamp "
			"or flows): for receivers that only count"),
	VZ_OPTION_END,
};

static const struct vz_opts gen_opts = {
	.prog = "vz-gen",
	.usage = gen_usage,
	.table = gen_options,
};

/* --batch, --threads, --static: options of live frames, and their limits. */
static int check_live_options(const struct gen *g)
{
	if (g->batch != GEN_DEFAULT_BATCH && g->afxdp) {
		vz_err("--batch is for live frames, not --afxdp");
		return -EINVAL;
	}
	if (g->batch_stamp && g->afxdp) {
		vz_err("--batch-stamp is for live frames, not --afxdp");
		return -EINVAL;
	}
	if (g->fixed && (g->afxdp || g->flows > 1 || g->dsts > 1)) {
		vz_err("--static sends one frame over and over: no --afxdp, "
		       "--flows or --dsts");
		return -EINVAL;
	}
	if (g->threads > 1 && g->afxdp) {
		vz_err("--threads is for live frames, not --afxdp");
		return -EINVAL;
	}
	/* each thread sends: a share of 0 would mean flat out, or forever */
	if ((g->rate && g->rate < g->threads) ||
	    (g->count && g->count < g->threads)) {
		vz_err("--rate and --count must be at least --threads (%u)",
		       g->threads);
		return -EINVAL;
	}
	return 0;
}

static int parse_args(struct gen *g, int argc, char **argv)
{
	__u32 min_size;

	if (vz_opts_parse(&gen_opts, g, argc, argv, NULL))
		return 2;
	if (g->src_v6 != g->dst_v6) {
		vz_err("--src-ip and --dst-ip must both be IPv4 or both IPv6");
		return 2;
	}
	g->ipv6 = g->dst_v6;
	min_size = ETH_HLEN + (g->ipv6 ? 40 : 20) + (g->tcp ? 20 : 8) +
		   (__u32)sizeof(struct vz_gen_payload);
	if (min_size < VZ_GEN_MIN_SIZE)
		min_size = VZ_GEN_MIN_SIZE;
	if (g->size < min_size) {
		vz_err("--size must be between %u and %u bytes for IPv%d/%s",
		       min_size, VZ_GEN_MAX_SIZE, g->ipv6 ? 6 : 4,
		       g->tcp ? "TCP" : "UDP");
		return 2;
	}
	if (check_live_options(g))
		return 2;
	if (g->dsts > 1 && (g->ipv6 || g->afxdp || !g->have_dst_range)) {
		vz_err("--dsts N > 1 needs IPv4 live frames (no --ipv6, no "
		       "--afxdp) and --dst-range");
		return 2;
	}
	if (g->dsts > 1 && g->dst_range_len < 32 &&
	    g->dsts > 1ull << (32 - g->dst_range_len)) {
		vz_err("--dsts %u is more than --dst-range /%u holds", g->dsts,
		       g->dst_range_len);
		return 2;
	}
	if (!g->count && g->duration <= 0)
		g->duration = 10;
	g->ifindex = (int)if_nametoindex(g->ifname);
	if (!g->ifindex) {
		vz_err("no interface '%s' in this network namespace",
		       g->ifname);
		return 2;
	}
	if (!vz_opts_given(&gen_opts, "src-mac") &&
	    vz_iface_mac(g->ifname, g->src_mac)) {
		vz_err("cannot read the MAC address of %s", g->ifname);
		return 2;
	}
	return 0;
}

/* Keep the program in the XDP dispatcher: attach it to lo (see above). */
static int keep_in_dispatcher(int prog_fd, struct vz_iface_lock *lock)
{
	int lo = (int)if_nametoindex("lo"), err;
	struct vz_xdp_attached now;
	char msg[256];

	err = vz_iface_lock(lock, lo, "lo", msg, sizeof(msg));
	if (err) {
		vz_err("%s", msg);
		return err;
	}
	if (!vz_xdp_query(lo, &now) && now.any) {
		if (!now.ours) {
			/* not ours to touch: run, with coarse pacing */
			fprintf(stderr,
				"veloz: lo has an XDP program (%s); "
				"pacing will be coarse\n",
				now.names);
			return 0;
		}
		vz_xdp_detach_all(lo); /* a killed generator's */
	}
	err = bpf_xdp_attach(lo, prog_fd,
			     XDP_FLAGS_SKB_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST,
			     NULL);
	if (err)
		fprintf(stderr,
			"veloz: cannot hold the generator on lo (%s); "
			"pacing will be coarse\n",
			strerror(-err));
	return 0;
}

static void release_dispatcher(int prog_fd, struct vz_iface_lock *lock)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = prog_fd);

	/* only if it is still our program there */
	bpf_xdp_detach((int)if_nametoindex("lo"),
		       XDP_FLAGS_SKB_MODE | XDP_FLAGS_REPLACE, &opts);
	vz_iface_unlock(lock);
}

static __u64 send_live(const struct gen *g, struct bpf_object *obj, int prog_fd,
		       double *secs, int *err)
{
	struct vz_gen_live l = {
		.prog_fd = prog_fd,
		.ifindex = g->ifindex,
		.frame = g->frame,
		.size = g->size,
		.batch = g->batch,
		.threads = g->threads,
		.seq_fd = g->batch_stamp ? bpf_object__find_map_fd_by_name(
						   obj, "vz_gen_seq")
					 : -1,
		.rate = g->rate,
		.count = g->count,
		.duration = g->duration,
		.progress = isatty(STDERR_FILENO),
		.stop = &stop_signal,
	};

	return vz_gen_live_send(&l, secs, err);
}

static void report(const struct gen *g, __u64 sent, double secs,
		   const struct vz_if_xmit *before,
		   const struct vz_if_xmit *after)
{
	bool known = before->known && after->known;
	__u64 xmit = after->xmit - before->xmit;
	__u64 errors = after->errors - before->errors;
	double pps = secs > 0 ? (double)sent / secs : 0;

	if (g->json) {
		printf("{\"iface\": \"%s\", \"size\": %u, \"flows\": %u, "
		       "\"dsts\": %u, \"batch\": %u, \"threads\": %u, "
		       "\"target_pps\": %llu, \"sent\": %llu, \"seconds\": "
		       "%.6f, \"pps\": %.0f, \"bps\": %.0f",
		       g->ifname, g->size, g->flows, g->dsts, g->batch,
		       g->threads, (unsigned long long)g->rate,
		       (unsigned long long)sent, secs, pps, pps * g->size * 8);
		if (known)
			printf(", \"xmit\": %llu, \"xmit_errors\": %llu}\n",
			       (unsigned long long)xmit,
			       (unsigned long long)errors);
		else
			printf(", \"xmit\": null, \"xmit_errors\": null}\n");
		return;
	}
	printf("sent %llu frames of %u bytes out of %s in %.2f s: %.0f pps, "
	       "%.1f Mbit/s\n",
	       (unsigned long long)sent, g->size, g->ifname, secs, pps,
	       pps * g->size * 8 / 1e6);
	if (known)
		printf("driver: %llu transmitted, %llu transmit errors\n",
		       (unsigned long long)xmit, (unsigned long long)errors);
}

/*
 * Through an AF_XDP socket: what was sent is what the kernel completed
 * (the driver's XDP counters do not see these frames).
 */
static int send_afxdp(const struct gen *g)
{
	struct vz_xsk_tx t = {
		.ifname = g->ifname,
		.queue = g->queue,
		.frame = g->frame,
		.size = g->size,
		.l4_off = g->l4_off,
		.payload_off = g->payload_off,
		.csum_off = g->csum_off,
		.flows = g->flows,
		.base_port = GEN_BASE_PORT,
		.rate = g->rate,
		.count = g->count,
		.duration = g->duration,
		.stop = &stop_signal,
	};
	struct vz_if_xmit before = { .known = true }, after = { .known = true };
	double secs;
	int err;

	after.xmit = vz_xsk_tx_send(&t, &secs, &err);
	if (err)
		return 1;
	report(g, after.xmit, secs, &before, &after);
	return 0;
}

int main(int argc, char **argv)
{
	struct gen g = { .size = 64,
			 .rate = 100000,
			 .flows = 1,
			 .dsts = 1,
			 .batch = GEN_DEFAULT_BATCH,
			 .threads = 1,
			 .dst_port = GEN_DST_PORT };
	struct sigaction sa = { .sa_handler = on_signal };
	struct vz_iface_lock lo_lock = { .fd = -1 };
	struct vz_if_xmit before, after;
	struct bpf_object *obj = NULL;
	char default_bpf[4096];
	double secs;
	__u64 sent;
	int prog_fd, ret, err;

	vz_check_stdout_at_exit(); /* a result that never reached stdout fails
				    */
	ret = parse_args(&g, argc, argv);
	if (ret)
		return ret;
	if (!g.bpf_path) {
		vz_beside_executable("gen.bpf.o", default_bpf,
				     sizeof(default_bpf));
		g.bpf_path = default_bpf;
	}
	if (geteuid() != 0) {
		vz_err("generating traffic needs root (CAP_BPF, CAP_NET_ADMIN)");
		return 1;
	}
	build_template(&g);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (g.afxdp)
		return send_afxdp(&g);
	prog_fd = load_program(&g, &obj);
	if (prog_fd < 0) {
		bpf_object__close(obj);
		return 1;
	}
	if (keep_in_dispatcher(prog_fd, &lo_lock)) {
		bpf_object__close(obj);
		return 1;
	}
	vz_if_xmit_read(g.ifname, &before);
	sent = send_live(&g, obj, prog_fd, &secs, &err);
	usleep(20000); /* the last bulk leaves the driver */
	vz_if_xmit_read(g.ifname, &after);
	release_dispatcher(prog_fd, &lo_lock);
	bpf_object__close(obj);
	if (err) {
		fprintf(stderr,
			"veloz: transmit failed on %s after %llu "
			"frames: %s\n",
			g.ifname, (unsigned long long)sent, strerror(-err));
		return 1;
	}
	report(&g, sent, secs, &before, &after);
	return 0;
}
