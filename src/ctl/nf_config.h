/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An NF's configuration, described once: the struct behind VZ_CONFIG() is
 * read from the BPF object's BTF (field names, offsets, sizes), its defaults
 * from the object's .data.vz_config section. The same bytes then go into the
 * BPF global data map (xdp backends) or the native vz_config symbol.
 */
#ifndef VZ_CTL_NF_CONFIG_H
#define VZ_CTL_NF_CONFIG_H

#include <stdbool.h>
#include <stdio.h>
#include <bpf/libbpf.h>

#include "maps/nf_loader.h"

#define VZ_CONFIG_MAX_FIELDS 32
#define VZ_CONFIG_SECTION ".data.vz_config"

struct vz_config_field {
	char name[64];
	__u32 offset;
	__u32 size; /* 1, 2, 4 or 8 */
	bool is_signed;
};

struct vz_nf_config {
	struct bpf_map *map; /* NULL: the NF takes no configuration */
	__u32 size; /* of the struct */
	__u32 section_size; /* of the BPF data section holding it */
	__u32 nfields;
	struct vz_config_field fields[VZ_CONFIG_MAX_FIELDS];
	__u8 *bytes; /* current values, from the object's defaults */
};

int vz_config_open(struct vz_nf_config *cfg, struct bpf_object *obj, char *err,
		   size_t errlen);
void vz_config_close(struct vz_nf_config *cfg);
/* Apply one "name=value"; a bad name or value is refused with a reason. */
int vz_config_set(struct vz_nf_config *cfg, const char *assignment, char *err,
		  size_t errlen);
/* Run the NF's own VZ_CONFIG_CHECK on the values (through its native build). */
int vz_config_check(const struct vz_nf_config *cfg,
		    const struct vz_native_nf *nf, char *err, size_t errlen);
/* Before bpf_object__load(): the values become the map's initial contents. */
int vz_config_apply_bpf(const struct vz_nf_config *cfg);
void vz_config_apply_native(const struct vz_nf_config *cfg,
			    const struct vz_native_nf *nf);
__u64 vz_config_get(const struct vz_nf_config *cfg,
		    const struct vz_config_field *field);
void vz_config_print_json(const struct vz_nf_config *cfg, FILE *out);

#endif
