/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `veloz dump` on the userspace backends (afxdp, dpdk): a capture switched
 * on through the run's control socket ("capture @NAME SNAPLEN", "capture
 * off"). The run connects a SOCK_SEQPACKET socket to the client's abstract
 * address NAME; while that is on, each frame the NF runs on is sent there,
 * as it arrived, with its final action (struct vz_dump_event, kind
 * VZ_DUMP_RECORD, then the bytes), without blocking: a full socket drops
 * the record and counts it. A client that hangs up switches it off.
 *
 * Workers read vz_capture_fd once per burst, and with it off they run the
 * frame exactly as before: one predicted branch on a register per frame.
 */
#ifndef VZ_RUNTIME_CAPTURE_H
#define VZ_RUNTIME_CAPTURE_H

#include <stdbool.h>

#include <veloz/dump_abi.h>

#include "runtime/userspace.h"

/* The socket the capture goes to, or -1: off. */
extern int vz_capture_fd;

/* Once per burst: the capture's socket, or -1. */
static inline int vz_capture_burst(void)
{
	return __atomic_load_n(&vz_capture_fd, __ATOMIC_RELAXED);
}

/* A frame's record, copied before the NF may rewrite it. */
struct vz_capture_rec {
	struct vz_dump_event ev;
	__u8 data[VZ_DUMP_SNAP_MAX];
};

void vz_capture_copy(struct vz_capture_rec *r, const struct vz_ctx *ctx,
		     unsigned int worker);
void vz_capture_send(int fd, struct vz_capture_rec *r, int action, __u32 port);

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

struct buf;
/* The "capture" request of the control socket (ctl_session.c). */
void vz_capture_request(struct vz_ctl *ctl, char *args[4], struct buf *out);

#endif
