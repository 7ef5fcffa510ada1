/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The client side of a userspace run's capture (src/ctl/capture.h):
 * ask the run, through its control socket, to send its frames to an
 * abstract SOCK_SEQPACKET socket of ours, read them until *stop, switch
 * it off. Only the run may connect (SO_PEERCRED); malformed records are
 * dropped and counted.
 */
#ifndef VZ_DUMP_CTL_CAPTURE_H
#define VZ_DUMP_CTL_CAPTURE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "dump/reader.h"

struct vz_ctl_capture_result {
	uint64_t dropped; /* the run's socket was full */
	uint64_t refused; /* malformed */
};

int vz_ctl_capture(const char *ctl_path, uint32_t snaplen, vz_frame_fn fn,
		   void *ctx, void (*ready)(void *ctx),
		   volatile sig_atomic_t *stop,
		   struct vz_ctl_capture_result *res, char *err, size_t errlen);

#endif
