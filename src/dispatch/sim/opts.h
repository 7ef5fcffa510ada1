/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * vz-sim's options (parsed in vz-sim.c): what the model, the workload and
 * the output read.
 */
#ifndef VZ_DISPATCH_SIM_OPTS_H
#define VZ_DISPATCH_SIM_OPTS_H

#include <stdbool.h>

#include "dispatch/dispatch.h"

#define MAX_STEPS 64

enum arrivals { ARR_POISSON, ARR_BURSTY };
enum service { SVC_EXP, SVC_CONST, SVC_HEAVY };
enum flow_sizes { FS_UNIFORM, FS_HEAVY };

/* Their names, as the options take them and the report prints them. */
extern const char *const arrival_names[];
extern const char *const service_names[];
extern const char *const flow_size_names[];

struct opts {
	enum vz_dispatch_policy policy;
	unsigned int cores;
	double loads[MAX_STEPS];
	unsigned int nsteps;
	double step_ms;
	enum arrivals arrivals;
	double burst_us;
	enum service service;
	double service_us;
	unsigned int flows;
	enum flow_sizes flow_sizes;
	double zipf_s;
	unsigned int flow_slots;
	bool alloc, prepopulate, json, verbose;
	bool progress; /* "progress DONE TOTAL" lines on stderr */
	double wake_us;
	double hold_us; /* buckets: < 0 for the library's default */
	double settle_us; /* buckets: < 0 for the library's default */
	long long max_forced; /* buckets: < 0 for the library's default */
	long long migrate_gap; /* flow-affinity: < 0 for the default */
	long long force_gap; /* < 0 for the default */
	double holdoff_us; /* allocator: < 0 for the default */
	double migrate_us; /* a moved flow's next frame costs this more */
	double dispatch_ns; /* the dispatcher's own time per frame */
	double scan_ns; /* ... and per worker it compares */
	unsigned long long queue_cap; /* frames a worker queues; 0: no bound */
	unsigned long long seed;
	unsigned long long timeline_us;
};

#endif
