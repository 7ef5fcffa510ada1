// SPDX-License-Identifier: BSD-2-Clause
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "maps/nf_loader.h"

int vz_native_open(struct vz_native_nf *nf, const char *path, __u32 nworkers,
		   char *err, size_t errlen)
{
	struct vz_map *const *map;
	int ret;

	memset(nf, 0, sizeof(*nf));
	/* RTLD_LOCAL: several NFs may be open at once, each with its maps. */
	nf->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!nf->handle) {
		snprintf(err, errlen, "cannot load native NF: %s", dlerror());
		return -ENOENT;
	}
	nf->desc = dlsym(nf->handle, "vz_nf_desc");
	if (!nf->desc || nf->desc->abi != VZ_NF_ABI) {
		snprintf(err, errlen,
			 "%s is not a veloz NF (no vz_nf_desc v%d)", path,
			 VZ_NF_ABI);
		ret = -EINVAL;
		goto fail;
	}
	nf->config = dlsym(nf->handle, "vz_config");
	*(void **)&nf->config_check = dlsym(nf->handle, "vz_config_check");
	for (map = nf->desc->maps; map < nf->desc->maps_end; map++) {
		ret = vz_map_init(*map, nworkers);
		if (ret) {
			snprintf(err, errlen, "map %s: %s", (*map)->name,
				 strerror(-ret));
			goto fail;
		}
	}
	return 0;
fail:
	vz_native_close(nf);
	return ret;
}

void vz_native_close(struct vz_native_nf *nf)
{
	struct vz_map *const *map;

	if (nf->desc)
		for (map = nf->desc->maps; map < nf->desc->maps_end; map++)
			vz_map_free(*map);
	if (nf->handle)
		dlclose(nf->handle);
	memset(nf, 0, sizeof(*nf));
}

struct vz_map *vz_native_map(const struct vz_native_nf *nf, const char *name)
{
	struct vz_map *const *map;

	for (map = nf->desc->maps; map < nf->desc->maps_end; map++)
		if (!strcmp((*map)->name, name))
			return *map;
	return NULL;
}
