/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The option rows every tool that opens an NF shares (vz-replay, and the
 * `run` of vz-xdp, vz-afxdp, vz-dpdk), written once: the NF's two builds
 * and its --set lines, and the runners' common switches. TYPE is the
 * tool's own struct; it names its fields as struct vz_us_run does.
 */
#ifndef VZ_COMMON_RUN_OPTIONS_H
#define VZ_COMMON_RUN_OPTIONS_H

#include "common/options.h"

/* What the command line gives to open an NF (vz_nf_open's arguments). */
struct vz_nf_args {
	const char *bpf_path, *native_path;
	struct vz_opt_list sets;
};

/* --bpf, --native, --set into ARGS (a struct vz_nf_args *). */
#define VZ_NF_OPTIONS(_args)                                                  \
	VZ_OPTION_PTR("bpf", VZ_OPT_STRING, &(_args)->bpf_path,               \
		      .required = true, .metavar = "NF.bpf.o",                \
		      .help = "the NF's kernel build"),                       \
		VZ_OPTION_PTR("native", VZ_OPT_STRING, &(_args)->native_path, \
			      .required = true, .metavar = "NF.so",           \
			      .help = "the NF's native build"),               \
		VZ_OPTION_PTR("set", VZ_OPT_LIST, &(_args)->sets,             \
			      .metavar = "KEY=VALUE",                         \
			      .help = "an NF config setting")

/* A runner's own: counters, how long, what it may replace, ctl. */
#define VZ_RUN_OPTIONS(_type)                                                  \
	VZ_OPTION("json", VZ_OPT_FLAG, _type, json,                            \
		  .help = "counters as JSON lines"),                           \
		VZ_OPTION("interval", VZ_OPT_SECONDS, _type, interval,         \
			  .metavar = "S", .help = "counters every S seconds"), \
		VZ_OPTION("duration", VZ_OPT_SECONDS, _type, duration,         \
			  .no_default = true, .metavar = "S",                  \
			  .help = "stop after S seconds"),                     \
		VZ_OPTION("replace", VZ_OPT_FLAG, _type, replace,              \
			  .help = "replace a stale veloz program"),            \
		VZ_OPTION("ops", VZ_OPT_STRING, _type, ops_path,               \
			  .metavar = "FILE",                                   \
			  .help = "map operations applied before start"),      \
		VZ_OPTION("ctl-group", VZ_OPT_GROUP, _type, ctl_gid,           \
			  .metavar = "GROUP",                                  \
			  .help = "may use the control socket besides root"),  \
		VZ_OPTION("ctl-idle-timeout", VZ_OPT_SECONDS, _type, ctl_idle, \
			  .metavar = "S",                                      \
			  .help = "close a control session silent this long"), \
		VZ_OPTION("alloc", VZ_OPT_FLAG, _type, alloc,                  \
			  .help = "the core allocator sets the active "        \
				  "workers")

#endif
