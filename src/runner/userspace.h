/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One runner for every backend (src/runner/runner.c): the checks made
 * before anything is touched, the NF, its control socket, claiming the
 * interfaces, signals, the counters and their printing. A backend supplies
 * the port (struct vz_backend). The userspace backends (afxdp, dpdk) also
 * share the command line (src/runner/userspace_run.c), the NF's native maps
 * and the exception path that hands PASS frames to the kernel; their
 * worker loop calls vz_us_process() on each frame. The xdp backend
 * (src/xdp/xdp_backend.c) runs the NF in the kernel instead (in_kernel).
 */
#ifndef VZ_RUNNER_USERSPACE_H
#define VZ_RUNNER_USERSPACE_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include <veloz/abi.h>
#include <veloz/maps.h>
#include <veloz/nf_native.h>

#include <xdp/libxdp.h>

#include "common/iface.h"
#include "ctl/capture.h"
#include "ctl/ctl.h"
#include "ctl/nf.h"
#include "runner/counters.h"
#include "runner/take_over.h"
#include "runner/tap.h"
#include "runner/xdp_attach.h"

/* Largest --batch: frames taken from a receive ring at once. */
#define VZ_US_BATCH_MAX 256

enum vz_xsk_copy {
	VZ_XSK_AUTO, /* zero-copy if the driver offers it, else copy */
	VZ_XSK_COPY,
	VZ_XSK_ZEROCOPY,
};

struct vz_us_port {
	const char *ifname;
	int ifindex;
	__u8 mac[6];
	int mtu;
	int rx_queues; /* the interface's receive queues */
	struct vz_iface_lock lock;
	struct vz_tap tap; /* PASS goes here */
	bool gone; /* the interface vanished while running */
};

/* One run, on any backend (the userspace backends' options included). */
struct vz_us_run {
	const struct vz_backend *backend;
	struct vz_nf nf;
	struct vz_ctl ctl; /* the running NF's control socket */
	const char *ops_path; /* --ops: map operations applied before start */
	struct vz_us_port ports[VZ_MAX_PORTS];
	int nports;
	/* Options: */
	unsigned int
		workers; /* threads (afxdp) or lcores (dpdk) running the NF */
	unsigned int queues; /* queues per port, 0..queues-1 */
	unsigned int batch; /* frames per receive burst */
	bool busy_poll;
	enum vz_xsk_copy copy;
	enum xdp_attach_mode steer_mode; /* of the AF_XDP steering program */
	const char *pmd; /* dpdk: af_xdp, af_packet or "" for a named port */
	bool no_huge; /* dpdk */
	bool replace;
	gid_t ctl_gid; /* --ctl-group: may use the control socket, or
			  VZ_ROOT_ONLY */
	double ctl_idle; /* --ctl-idle-timeout: seconds */
	bool json;
	double interval;
	double duration; /* 0: until stopped */
	int dispatch; /* --dispatch: a vz_dispatch_policy, or -1 */
	bool alloc; /* --alloc: the core allocator sets the active workers */
	bool take_over; /* userspace --take-over (take_over.h) */
	char **extra_args; /* after "--": EAL arguments */
	int nextra;
	/* State: */
	bool adopted; /* the NF's maps are a running NF's: no ops applied */
	/*
	 * Per port, set by adopt(): the program on the hook that is being
	 * taken over (claiming accepts it), and whether its run still holds
	 * the port (the backend claims it once that run has left).
	 */
	unsigned int adopt_id[VZ_MAX_PORTS];
	bool claim_later[VZ_MAX_PORTS];
	volatile sig_atomic_t stop; /* workers poll it */
	/* A successor's handover: workers wait in vz_us_park() meanwhile. */
	volatile int pause;
	unsigned int parked;
	struct vz_handover handover; /* --take-over: the run that leaves */
	struct vz_worker_counters counters[VZ_MAX_WORKERS];
	/* --dispatch: the dispatcher thread's (it runs no NF) */
	struct vz_worker_counters dispatcher_counters;
	void *backend_state;
};

struct vz_backend {
	const char *name;
	/* Options the backend accepts, for usage(); NULL-terminated. */
	const char *const *options;
	/*
	 * After the common checks and before any worker runs: open the ports.
	 * Prints one line and returns non-zero on failure; teardown() is
	 * called either way.
	 */
	int (*setup)(struct vz_us_run *run);
	/* Start run->workers workers; each calls vz_us_worker_enter(). */
	int (*start)(struct vz_us_run *run);
	/* Wait for the workers, which return once run->stop is set. */
	void (*join)(struct vz_us_run *run);
	/* Release everything setup() took; safe after a partial setup. */
	void (*teardown)(struct vz_us_run *run);
	/*
	 * Frames the ports dropped before any worker saw them, since setup;
	 * called by the counting thread while workers run and after join.
	 */
	__u64 (*rx_missed)(struct vz_us_run *run);
	/* The line "attached" prints after setup: mode, queues, memory. */
	void (*describe)(struct vz_us_run *run, char *buf, size_t len);
	/*
	 * Optional: after each counter line, more lines about the run (the
	 * dispatch stage's); `summary` for the last one.
	 */
	void (*report)(struct vz_us_run *run, double t, bool summary);

	/*
	 * The xdp backend: the NF runs in the kernel. Its BPF maps are the
	 * ones counted and served, there is no TAP (PASS is the kernel's
	 * already) and no userspace worker counts anything.
	 */
	bool in_kernel;
	/* Optional: before the NF is opened; may pick another object. 0 or
	 * the exit code, after one line. */
	int (*prepare)(struct vz_us_run *run, const char **bpf_path);
	/* Optional: the counters, instead of reading the native maps. */
	void (*snapshot)(struct vz_us_run *run, struct vz_snapshot *s);
	/* Optional: sleep until `until`, working meanwhile. */
	void (*wait)(struct vz_us_run *run, double until);
	/* Optional: at each interval, before the counters are read. */
	void (*tick)(struct vz_us_run *run);
	/* Optional: more of each counters line (view.extra; arg: the run). */
	void (*extra)(const void *run, FILE *f, bool json);
	/* Optional: the "attached" line, instead of the one from describe(). */
	void (*attached)(struct vz_us_run *run);
	/*
	 * Optional: after the NF is opened, before its ops file: adopt the
	 * NF already running on the ports (its maps become this run's).
	 * Sets run->adopted and, per port, what claiming it expects. 0 or
	 * the exit code, after one line.
	 */
	int (*adopt)(struct vz_us_run *run);
};

/* Defaults for every option, then the options, then vz_run(). */
void vz_run_init(struct vz_us_run *run, const struct vz_backend *backend);

/*
 * The whole run, after the options: returns the exit code (0, 1, or 2 for
 * what was refused before anything was touched).
 */
int vz_run(struct vz_us_run *run, const char *bpf_path, const char *native_path,
	   char **sets, int nsets);

/* The whole `run` command of a userspace backend; its main() calls this. */
int vz_us_main(int argc, char **argv, const struct vz_backend *backend);

/* A worker thread's first call: selects its per-worker map copies. */
void vz_us_worker_enter(unsigned int worker);

/* Where a worker loop may stop for a successor's handover: at the top of
 * each round, its transmit batches flushed, no frame in its hands. */
static inline void vz_us_pause_point(struct vz_us_run *run)
{
	if (__builtin_expect(run->pause, 0))
		vz_us_park(run);
}

/*
 * Run the NF on one received frame, in place. `ctx` is filled by the
 * backend (data, data_end, data_hard_start with VZ_HEADROOM bytes of
 * headroom, ingress_port); the returned action is final:
 *   VZ_DROP, VZ_ABORTED: free the buffer;
 *   VZ_TX: send ctx->data .. ctx->data_end out of ctx->ingress_port;
 *   VZ_REDIRECT_VERDICT: ... out of ctx->redirect_port;
 *   VZ_PASS: done already (vz_us_process handed it to the kernel): free it.
 */
static inline int vz_us_process(struct vz_us_run *run, struct vz_ctx *ctx,
				struct vz_worker_counters *c)
{
	int action;

	c->rx++;
	action = run->nf.native.desc->run(ctx);
	if (action == VZ_PASS &&
	    vz_tap_send(&run->ports[ctx->ingress_port].tap, ctx->data,
			(size_t)(ctx->data_end - ctx->data)))
		c->pass_failed++;
	return action;
}

/* vz_us_process(), with the frame and its action sent while fd >= 0. */
static inline int vz_us_process_cap(struct vz_us_run *run, struct vz_ctx *ctx,
				    struct vz_worker_counters *c, int fd,
				    unsigned int worker)
{
	static __thread struct vz_capture_rec rec;
	int action;

	if (__builtin_expect(fd < 0, 1))
		return vz_us_process(run, ctx, c);
	vz_capture_copy(&rec, ctx, worker);
	action = vz_us_process(run, ctx, c);
	vz_capture_send(fd, &rec, action, ctx->redirect_port);
	return action;
}

/* The port a frame leaves by after the NF's action; -1: it does not. */
static inline int vz_us_out_port(int action, const struct vz_ctx *ctx)
{
	if (action == VZ_TX)
		return (int)ctx->ingress_port;
	if (action == VZ_REDIRECT_VERDICT)
		return (int)ctx->redirect_port;
	return -1;
}

#endif
