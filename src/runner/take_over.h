/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --take-over on the userspace backends (afxdp, dpdk): a new run, a newer
 * build included, takes a running one's NF over with its state.
 *
 *   1. The successor opens the NF and its maps, then asks the running run
 *      on its control socket for the "handover": that run's workers stop
 *      at their next round, and its maps come back in a memfd
 *      (src/ctl/ctl_handover.c), which the successor writes into its own.
 *   2. The successor says "leave": the old run closes its ports and
 *      exits. The successor claims the ports, opens them and starts.
 *
 * Frames that arrive between the pause and the successor's first round
 * are not processed: the gap, printed by the successor, bounds the loss
 * (at R frames/s offered, about R x gap). A successor that fails before
 * "leave" hangs up, and the old run's workers go on as before.
 */
#ifndef VZ_RUNNER_TAKE_OVER_H
#define VZ_RUNNER_TAKE_OVER_H

#include <stdbool.h>

struct vz_us_run;

struct vz_handover {
	int fd; /* the old run's control connection, or -1 */
	int old_pid;
	double paused_at; /* wall-clock seconds */
	double gap_ms; /* from the pause to this run's workers' start */
};

/* Workers call this from vz_us_pause_point(): wait while paused. */
void vz_us_park(struct vz_us_run *run);
/* The control socket's pause hook (struct vz_ctl): 0 or -errno. */
int vz_us_pause(void *run, bool on);

/* Step 1, once the NF's maps exist: 0, or the exit code after one line. */
int vz_us_take_over(struct vz_us_run *run);
/* Wait until a leaving run's port locks are free (the ports marked
 * claim_later), and take them: 0 or -errno. */
int vz_claim_left_ports(struct vz_us_run *run, double until);
/* Step 2, before the ports are claimed: 0 or -1 after one line. */
int vz_us_take_over_finish(struct vz_us_run *run);
/* Once this run's workers started: the gap, on stderr. */
void vz_us_take_over_report(struct vz_us_run *run);

#endif
