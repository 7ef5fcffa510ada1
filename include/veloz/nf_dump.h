/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The dump build of an NF: NAME.dump.bpf.o, compiled with
 * `-DVZ_DUMP -include veloz/nf_dump.h` (nf/meson.build). `veloz dump` loads
 * it with every map of the running NF reused and swaps it in for the NF's
 * program while it captures, then swaps the NF back (src/dump/). The
 * normal build (NAME.bpf.o) never sees this header, so it carries no hook
 * at all: capture costs the NF nothing while nobody captures, by
 * construction rather than by a branch. (xdpdump's way, fentry/fexit on the
 * running program, is refused on the kernels this runs on: EPERM.)
 *
 * Each frame makes two events on the current CPU's perf buffer: the frame
 * as it arrived (its first caplen bytes, fragments included, before the NF
 * rewrites it), then the action the NF returned. An XDP program runs to
 * completion on one CPU, so the two are adjacent in that CPU's buffer; the
 * reader pairs them. A frame whose event finds the buffer full is counted
 * in vz_dump_drops and gets no verdict event; the NF never waits.
 */
#ifndef VELOZ_NF_DUMP_H
#define VELOZ_NF_DUMP_H

#include <veloz/nf.h>
#include <veloz/dump_abi.h>

#ifdef VZ_BUILD_BPF
/* Maps of the dump build only: their names start with vz_dump_. */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} vz_dump_events SEC(".maps");

/* Set by the reader before the program is attached. */
VZ_ARRAY(vz_dump_conf, struct vz_dump_conf, 1);
/* Frames whose event the perf buffer had no room for. */
VZ_PERCPU_ARRAY(vz_dump_drops, __u64, 1);

/* Out of line: the NF's own code is verified and laid out as it is built
 * normally, the capture beside it. */
static __attribute__((noinline)) int vz__dump_frame(struct xdp_md *xdp,
						    __u64 len)
{
	struct vz_dump_event ev = { .kind = VZ_DUMP_FRAME };
	struct vz_dump_conf *conf;
	__u32 zero = 0;
	__u64 caplen, *drops;

	conf = bpf_map_lookup_elem(&vz_dump_conf, &zero);
	if (!conf)
		return 0;
	caplen = len < conf->snaplen ? len : conf->snaplen;
	if (caplen > VZ_DUMP_SNAP_MAX)
		caplen = VZ_DUMP_SNAP_MAX;
	ev.len = (__u32)len;
	ev.caplen = (__u32)caplen;
	ev.ifindex = xdp->ingress_ifindex;
	ev.queue = xdp->rx_queue_index;
	ev.ts_ns = bpf_ktime_get_ns();
	if (!bpf_perf_event_output(xdp, &vz_dump_events,
				   BPF_F_CURRENT_CPU | (caplen << 32), &ev,
				   sizeof(ev)))
		return 1;
	drops = bpf_map_lookup_elem(&vz_dump_drops, &zero);
	if (drops)
		(*drops)++;
	return 0;
}

static __attribute__((noinline)) int vz__dump_verdict(struct xdp_md *xdp,
						      int action, __u32 port)
{
	struct vz_dump_event ev = { .kind = VZ_DUMP_VERDICT };

	ev.action = action;
	ev.port = port;
	/* a lost verdict leaves its frame unpaired: the reader counts it */
	bpf_perf_event_output(xdp, &vz_dump_events, BPF_F_CURRENT_CPU, &ev,
			      sizeof(ev));
	return 0;
}

#undef VZ_NF
#define VZ_NF(nf_name)                                                       \
	VZ_INLINE int vz__nf_##nf_name(struct vz_ctx *ctx);                  \
	SEC("xdp.frags") int vz_xdp_##nf_name(struct xdp_md *xdp)            \
	{                                                                    \
		struct vz_ctx ctx = { .xdp = xdp };                          \
		__u64 frame_len = vz__frame_len(&ctx);                       \
		int kept = vz__dump_frame(xdp, frame_len);                   \
		int action =                                                 \
			vz__finish(&ctx, vz__nf_##nf_name(&ctx), frame_len); \
                                                                             \
		if (kept)                                                    \
			vz__dump_verdict(xdp, action, ctx.redirect_port);    \
		return action;                                               \
	}                                                                    \
	char vz_license[] SEC("license") = "Dual BSD/GPL";                   \
	VZ_INLINE int vz__nf_##nf_name(struct vz_ctx *ctx                    \
				       __attribute__((unused)))
#endif

#endif
