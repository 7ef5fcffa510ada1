/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The xdp backend (xdp_backend.c): an NF at the XDP hook, native or generic,
 * loaded and attached through libxdp, counted from its own per-CPU maps; a
 * struct vz_backend run by the one runner (src/runner/runner.c), as afxdp
 * and dpdk are. With --dispatch the interfaces run the dispatch stage
 * (src/dispatch/xdp_stage.h) and the NF's cpumap build runs behind it.
 */
#ifndef VZ_XDP_BACKEND_H
#define VZ_XDP_BACKEND_H

#include <stdbool.h>
#include <sys/types.h>

#include <xdp/libxdp.h>

#include "dispatch/xdp_alloc.h"
#include "dispatch/xdp_stage.h"
#include "runner/userspace.h"

/* vz-xdp's options (src/xdp/xdp_run.c fills them) and the backend's state. */
struct vz_xdp_run {
	/* Options: */
	struct {
		const char *ifname;
	} ports[VZ_MAX_PORTS];
	int nports;
	enum xdp_attach_mode mode;
	const char *ops_path;
	bool json;
	bool replace;
	gid_t ctl_gid; /* --ctl-group, or VZ_ROOT_ONLY */
	double ctl_idle; /* --ctl-idle-timeout: seconds */
	double interval;
	double duration; /* 0: until stopped */
	int policy; /* --dispatch, or -1 */
	unsigned int workers; /* --workers: CPUs behind the dispatcher */
	bool workers_given;
	bool alloc; /* --alloc */
	bool persist; /* --persist: left attached when the run stops */
	bool take_over; /* --take-over: adopt a running run's NF */
	__u64 config_hash; /* of the --set lines (xdp_adopt.h) */
	/* State: */
	/*
	 * Attached without libxdp (--persist, or adopted): the program alone
	 * on the hook, so a successor finds it whatever bpffs it sees.
	 */
	bool direct;
	int prog_fd; /* direct: the NF's program */
	__u32 attached_id[VZ_MAX_PORTS]; /* on the hook once attached */
	/* Adoption (xdp_adopt.c): the program on each port taken over. */
	int old_fd[VZ_MAX_PORTS]; /* -1: none */
	__u32 old_id[VZ_MAX_PORTS];
	int old_pid; /* --take-over: the run that leaves, or 0 */
	char old_ctl[108]; /* its control socket */
	double since; /* the data path's start (carried over adoptions) */
	char cpumap_path[4096]; /* --dispatch: the NF's cpumap build */
	struct xdp_program *prog;
	bool attached[VZ_MAX_PORTS];
	int ncpus;
	struct vz_stat *percpu;
	int stats_fd;
	int redirects_fd;
	struct vz_xdp_dispatch *dsp;
	struct vz_xdp_dispatch_stats dsp_stats;
	struct vz_xdp_alloc xa;
};

/* Defaults of every option, before they are parsed. */
void vz_xdp_run_defaults(struct vz_xdp_run *x);

/*
 * The run, after the options: the runner with the xdp backend (or
 * xdp-generic for --mode skb). Returns the exit code.
 */
int vz_xdp_run(struct vz_xdp_run *x, const char *bpf_path,
	       const char *native_path, char **sets, int nsets);

#endif
