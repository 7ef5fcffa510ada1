/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Where captured frames come from: the XDP dump build's per-CPU perf
 * buffers (perf_read.c), or a userspace run's capture socket
 * (ctl_capture.c). Both hand each frame, with its verdict, to one callback.
 */
#ifndef VZ_DUMP_READER_H
#define VZ_DUMP_READER_H

#include <stdint.h>

#include <bpf/libbpf.h>
#include <veloz/dump_abi.h>

/* ev->kind is VZ_DUMP_RECORD: the frame and its verdict. */
typedef void (*vz_frame_fn)(void *ctx, const struct vz_dump_event *ev,
			    const uint8_t *data);

struct vz_perf_cpu;

struct vz_perf_read {
	struct perf_buffer *pb;
	int drops_fd; /* vz_dump_drops: frames the buffer had no room for */
	int ncpus;
	struct vz_perf_cpu *cpus; /* a frame waiting for its verdict */
	vz_frame_fn fn;
	void *ctx;
	uint64_t lost; /* events the kernel reported lost */
	uint64_t unpaired; /* frames or verdicts whose other half was lost */
};

/* Set the snaplen and open the buffers of a loaded dump build. */
int vz_perf_open(struct vz_perf_read *r, struct bpf_object *obj,
		 uint32_t snaplen, uint32_t ring_bytes, vz_frame_fn fn,
		 void *ctx, char *err, size_t errlen);
/* Wait up to timeout_ms, then read everything there is. 0 or -errno. */
int vz_perf_poll(struct vz_perf_read *r, int timeout_ms);
/* Frames the NF could not put in the buffer (full), summed over CPUs. */
uint64_t vz_perf_dropped(struct vz_perf_read *r);
void vz_perf_close(struct vz_perf_read *r);

#endif
