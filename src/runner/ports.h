/* SPDX-License-Identifier: BSD-2-Clause */
/* Claiming interfaces for a run, whatever the backend. */
#ifndef VZ_RUNNER_PORTS_H
#define VZ_RUNNER_PORTS_H

#include <stdbool.h>

#include "common/iface.h"
#include "ctl/nf.h"

/*
 * Take the interface's lock, then look at what XDP program it has: none,
 * or the testbed's placeholder (removed), is fine; a veloz program with the
 * lock free was left by a killed run (refused, or removed with `replace`);
 * anyone else's is refused and left alone. A program whose id is adopt_id
 * (not 0) is being adopted: kept. Prints one line on refusal.
 */
int vz_claim_port(struct vz_iface_lock *lock, int ifindex, const char *ifname,
		  bool replace, unsigned int adopt_id);

/*
 * A config field named "port" is a port number of this run (the Python
 * front end turns interface names into them): one that names no port would
 * turn every redirect into an aborted packet, so it is refused up front.
 */
int vz_check_port_fields(const struct vz_nf *nf, int nports,
			 const char *first_ifname);

#endif
