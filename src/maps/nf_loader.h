/* SPDX-License-Identifier: BSD-2-Clause */
/* Loading an NF's native build (NAME.so) and driving it from userspace. */
#ifndef VZ_MAPS_NF_LOADER_H
#define VZ_MAPS_NF_LOADER_H

#include <stddef.h>
#include <veloz/abi.h>
#include <veloz/nf_native.h>

struct vz_native_nf {
	void *handle;
	const struct vz_nf_desc *desc;
	void *config; /* the NF's vz_config, or NULL */
	const char *(*config_check)(const void *config);
};

/* Open path, initialise every map for nworkers. 0 or -errno, err says why. */
int vz_native_open(struct vz_native_nf *nf, const char *path, __u32 nworkers,
		   char *err, size_t errlen);
void vz_native_close(struct vz_native_nf *nf);
struct vz_map *vz_native_map(const struct vz_native_nf *nf, const char *name);

/* Run one frame described by ctx; returns the final action (enum vz_verdict).
 */
static inline int vz_native_run(const struct vz_native_nf *nf,
				struct vz_ctx *ctx)
{
	return nf->desc->run(ctx);
}

#endif
