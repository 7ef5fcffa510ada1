// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/perf_event.h>

#include "dump/reader.h"

struct vz_perf_cpu {
	bool pending;
	struct vz_dump_event ev;
	uint8_t data[VZ_DUMP_SNAP_MAX];
};

/* A sample: our event, then for a frame its bytes. Frame, then verdict.
 * Perf samples are 4-byte aligned: the event is copied out, not cast. */
static void on_sample(struct vz_perf_read *r, int cpu, const void *data,
		      uint32_t size)
{
	struct vz_dump_event ev;
	struct vz_perf_cpu *pc;

	if (cpu < 0 || cpu >= r->ncpus || size < sizeof(ev))
		return;
	memcpy(&ev, data, sizeof(ev));
	pc = &r->cpus[cpu];
	if (ev.kind == VZ_DUMP_FRAME) {
		if (pc->pending)
			r->unpaired++; /* its verdict was lost */
		pc->pending = false;
		if (ev.caplen > size - sizeof(ev) ||
		    ev.caplen > VZ_DUMP_SNAP_MAX || ev.caplen > ev.len) {
			r->unpaired++;
			return;
		}
		memcpy(pc->data, (const uint8_t *)data + sizeof(ev), ev.caplen);
		pc->ev = ev;
		pc->pending = true;
	} else if (ev.kind == VZ_DUMP_VERDICT) {
		if (!pc->pending) {
			r->unpaired++; /* its frame was lost */
			return;
		}
		pc->pending = false;
		pc->ev.kind = VZ_DUMP_RECORD;
		pc->ev.action = ev.action;
		pc->ev.port = ev.port;
		r->fn(r->ctx, &pc->ev, pc->data);
	}
}

/*
 * libbpf's perf_buffer__new wakes the reader on every event: an interrupt
 * and a wakeup per frame. Wake it when a buffer is a quarter full instead;
 * vz_perf_poll reads every buffer after each wait anyway.
 */
static enum bpf_perf_event_ret on_raw(void *ctx, int cpu,
				      struct perf_event_header *h)
{
	struct {
		struct perf_event_header h;
		uint32_t size;
		char data[];
	} *s = (void *)h;
	struct vz_perf_read *r = ctx;

	if (h->type == PERF_RECORD_SAMPLE)
		on_sample(r, cpu, s->data, s->size);
	else if (h->type == PERF_RECORD_LOST)
		r->lost += ((uint64_t *)(h + 1))[1];
	return LIBBPF_PERF_EVENT_CONT;
}

int vz_perf_open(struct vz_perf_read *r, struct bpf_object *obj,
		 uint32_t snaplen, uint32_t ring_bytes, vz_frame_fn fn,
		 void *ctx, char *err, size_t errlen)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_BPF_OUTPUT,
		.sample_type = PERF_SAMPLE_RAW,
		.sample_period = 1,
		.watermark = 1,
		.wakeup_watermark = ring_bytes / 4,
	};
	struct vz_dump_conf conf = { .snaplen = snaplen };
	struct bpf_map *events, *confm, *drops;
	long page = sysconf(_SC_PAGESIZE);
	__u32 zero = 0;

	memset(r, 0, sizeof(*r));
	r->drops_fd = -1;
	r->fn = fn;
	r->ctx = ctx;
	events = bpf_object__find_map_by_name(obj, "vz_dump_events");
	confm = bpf_object__find_map_by_name(obj, "vz_dump_conf");
	drops = bpf_object__find_map_by_name(obj, "vz_dump_drops");
	if (!events || !confm || !drops) {
		snprintf(err, errlen, "not a dump build (no vz_dump_* maps)");
		return -EINVAL;
	}
	if (bpf_map_update_elem(bpf_map__fd(confm), &zero, &conf, 0)) {
		snprintf(err, errlen, "cannot set the snaplen: %s",
			 strerror(errno));
		return -errno;
	}
	r->drops_fd = bpf_map__fd(drops);
	r->ncpus = libbpf_num_possible_cpus();
	r->cpus = r->ncpus > 0 ? calloc((size_t)r->ncpus, sizeof(*r->cpus))
			       : NULL;
	if (!r->cpus) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	attr.size = sizeof(attr);
	r->pb = perf_buffer__new_raw(bpf_map__fd(events),
				     ring_bytes / (size_t)page, &attr, on_raw,
				     r, NULL);
	if (!r->pb) {
		snprintf(err, errlen, "cannot set up the capture buffers: %s",
			 strerror(errno));
		return -errno;
	}
	return 0;
}

int vz_perf_poll(struct vz_perf_read *r, int timeout_ms)
{
	int n = perf_buffer__poll(r->pb, timeout_ms);

	if (n < 0 && n != -EINTR)
		return n;
	/* buffers below their wakeup watermark are read too */
	n = perf_buffer__consume(r->pb);
	return n < 0 && n != -EINTR ? n : 0;
}

uint64_t vz_perf_dropped(struct vz_perf_read *r)
{
	uint64_t *v, sum = 0;
	__u32 zero = 0;
	int i;

	v = calloc((size_t)r->ncpus, sizeof(*v));
	if (v && !bpf_map_lookup_elem(r->drops_fd, &zero, v))
		for (i = 0; i < r->ncpus; i++)
			sum += v[i];
	free(v);
	return sum;
}

void vz_perf_close(struct vz_perf_read *r)
{
	perf_buffer__free(r->pb);
	free(r->cpus);
	memset(r, 0, sizeof(*r));
	r->drops_fd = -1;
}
