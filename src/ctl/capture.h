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
 * frame exactly as before: one predicted branch on a register per frame
 * (vz_us_process_cap(), src/runner/userspace.h).
 */
#ifndef VZ_CTL_CAPTURE_H
#define VZ_CTL_CAPTURE_H

#include <stdbool.h>

#include <veloz/dump_abi.h>
#include <veloz/nf_native.h>

struct vz_ctl;

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

struct buf;
/* The "capture" request of the control socket (ctl_session.c). */
void vz_capture_request(struct vz_ctl *ctl, char *args[4], struct buf *out);

#endif
