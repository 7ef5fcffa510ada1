/* SPDX-License-Identifier: BSD-2-Clause */
/* An NF as the control plane opens it: both builds and one configuration. */
#ifndef VZ_CTL_NF_H
#define VZ_CTL_NF_H

#include <bpf/libbpf.h>

#include "common/err.h"
#include "common/parse.h"
#include "ctl/nf_config.h"
#include "maps/nf_loader.h"

/* Most --set KEY=VALUE settings a run takes. */
#define VZ_MAX_SETS 64

/* An NF as the control plane holds it: both builds and one configuration. */
struct vz_nf {
	const char *name;
	struct bpf_object *obj; /* opened, not loaded */
	struct vz_native_nf native; /* loaded: runs VZ_CONFIG_CHECK too */
	struct vz_nf_config cfg;
};

/*
 * Open NAME.bpf.o and NAME.so, apply the "key=value" settings and check
 * them with the NF's own rules. Nothing is loaded into the kernel yet, so a
 * bad config is refused before anything is attached. Prints the reason.
 */
int vz_nf_open(struct vz_nf *nf, const char *bpf_path, const char *native_path,
	       char **sets, int nsets, __u32 nworkers);
void vz_nf_close(struct vz_nf *nf);

/* First XDP program of the object. */
struct bpf_program *vz_nf_program(struct vz_nf *nf);

/* Verdict words, as in JSON output: drop, pass, tx, redirect, aborted. */
const char *vz_verdict_name(int verdict);

#endif
