/* SPDX-License-Identifier: BSD-2-Clause */
/* The dpdk backend's EAL arguments and EAL's start (eal_args.c). */
#ifndef VZ_DPDK_EAL_ARGS_H
#define VZ_DPDK_EAL_ARGS_H

#include <stdbool.h>

#include "runner/userspace.h"

struct dpdk;

/* Did the user's EAL arguments (after "--") give one of these options? */
bool dpdk_user_gave(const struct vz_us_run *run, const char *const *names);
/* Our build's steering program: $VELOZ_STEER_OBJ, or built beside us. */
int dpdk_find_steer_object(struct dpdk *d);
/* d->args from the run (after dpdk_plan_memory()): 0 or -errno, said. */
int dpdk_build_eal_args(struct vz_us_run *run, struct dpdk *d);
/* rte_eal_init() on d->args, signals kept for the main thread: 0 or -1. */
int dpdk_eal_init(struct dpdk *d);

#endif
