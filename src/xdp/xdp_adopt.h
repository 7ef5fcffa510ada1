/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Handing an NF at the XDP hook from one run to the next (xdp_adopt.c):
 * the program and its maps outlive a run started with --persist (and any
 * run killed with -9), and the next run of the same NF on the same ports
 * adopts them: it loads its own build over the running NF's maps and
 * swaps it in with one compare-and-exchange per port (XDP_FLAGS_REPLACE),
 * so no frame meets a port without a program and the NF's state (lb's
 * connections, ddos's rules and counters, the router's table) carries on.
 * With --take-over the previous run is still running: once the swap is
 * done it is told to leave (the control socket's "leave") and exits
 * without detaching.
 *
 * Each run records what a successor needs in
 * /run/veloz/persist/net<netns inode>-<IF>.json (one per port, JSON):
 * the NF, whether it persists, the run's pid and control socket, the
 * programs' ids, its config's hash and since when the data path runs.
 * Not in bpffs: `ip netns exec` gives each command a bpffs of its own,
 * gone with it; the maps need no pins, the attached program holds them.
 */
#ifndef VZ_XDP_ADOPT_H
#define VZ_XDP_ADOPT_H

#include "runner/userspace.h"

#define VZ_PERSIST_DIR "/run/veloz/persist"

/* The backend's adopt(): decide, check the NF and its maps, reuse them. */
int vz_xdp_adopt(struct vz_us_run *run);
/* The loaded program PROG_FD in, the adopted one out, on every port. */
int vz_xdp_adopt_swap(struct vz_us_run *run, int prog_fd);
/* --take-over of a live run: it leaves, its ports are claimed. 0 or -1. */
int vz_xdp_adopt_finish(struct vz_us_run *run);
/* Release what adoption held (the old programs' fds). */
void vz_xdp_adopt_close(struct vz_us_run *run);

/* This run's record on each port (once attached and listening). */
void vz_xdp_record_write(struct vz_us_run *run);
/* Remove this run's records (the NF is detached, or was never ours). */
void vz_xdp_record_remove(struct vz_us_run *run);

/* FNV-1a over the --set lines: the config's identity in a record. */
__u64 vz_xdp_config_hash(char **sets, int nsets);

#endif
