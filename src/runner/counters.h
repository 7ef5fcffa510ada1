/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Counters of a running NF, in one shape on every backend: per verdict,
 * per redirect port, per worker (a CPU on xdp, a thread or lcore on the
 * userspace backends) and in total; printed as a table or as JSON lines.
 */
#ifndef VZ_RUNNER_COUNTERS_H
#define VZ_RUNNER_COUNTERS_H

#include <stdbool.h>
#include <stdio.h>

#include <veloz/abi.h>
#include <veloz/maps.h>

struct vz_ctl;

/* What a userspace worker counts besides the NF's per-verdict counters. */
struct vz_worker_counters {
	__u64 rx; /* frames taken from a port's receive queue */
	__u64 rx_invalid; /* received but not given to the NF (see below) */
	__u64 tx_failed; /* TX or REDIRECT verdicts the port could not send */
	__u64 pass_failed; /* PASS frames the kernel did not take */
	__u64 from_kernel; /* frames the kernel sent out through the TAP */
} __attribute__((aligned(64)));

struct vz_counts {
	struct vz_stat verdict[VZ_VERDICT_COUNT];
	struct vz_stat all; /* sum over verdicts: every frame the NF ran on */
	__u64 redirected[VZ_MAX_PORTS];
	struct vz_worker_counters rt; /* userspace backends only */
};

struct vz_snapshot {
	unsigned int nworkers;
	struct vz_counts worker[VZ_MAX_WORKERS];
	struct vz_counts total;
	/*
	 * Frames the port took off the wire but dropped before a worker saw
	 * them (AF_XDP: no free buffer or a full receive ring; DPDK: the
	 * port's imissed and rx_nombuf). Known per port, not per worker;
	 * printed as null where the backend cannot tell (XDP: the driver's
	 * own counters, ethtool -S).
	 */
	bool rx_missed_known;
	__u64 rx_missed;
};

struct vz_counter_view {
	const char *nf;
	const char *const *ports; /* interface names, by port number */
	int nports;
	bool json;
	bool runtime; /* print rx and the runtime's error counts */
	/* connections the control socket refused (not root or the group) */
	const unsigned long *ctl_refused;
	/* control sessions closed for their client's silence */
	const unsigned long *ctl_idle_closed;
	/* where each line is also kept, as JSON, for the "counters" request */
	struct vz_ctl *ctl;
	/*
	 * More of the line, or NULL: JSON keys (each with a leading ", ")
	 * before the closing brace, or table columns before the newline.
	 */
	void (*extra)(const void *arg, FILE *f, bool json);
	const void *extra_arg;
};

/* Adds worker w's counts into s->total too. */
void vz_snapshot_add(struct vz_snapshot *s, unsigned int w,
		     const struct vz_counts *c);

/*
 * One line: counts since the start, rates over [prev, now] (dt seconds).
 * The summary line has "summary": true and its rates are averages.
 */
void vz_counters_print(const struct vz_counter_view *view,
		       const struct vz_snapshot *now,
		       const struct vz_snapshot *prev, double t, double dt,
		       bool summary);

#endif
