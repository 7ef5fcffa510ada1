/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The LPM table's writer side (lpm.c). The layout, the rules readers rely
 * on and the lookup itself are in <veloz/lpm.h>, public because NFs inline
 * the lookup.
 */
#ifndef VZ_MAPS_LPM_H
#define VZ_MAPS_LPM_H

#include <veloz/lpm.h>

/* leaf_scale: see <veloz/lpm.h> (1 for a table used on its own) */
int vz_lpm_init(struct vz_lpm *t, __u32 data_bytes, __u32 max_rules,
		__u32 leaf_scale);
void vz_lpm_free(struct vz_lpm *t);
/* Add a rule not in the table yet; 0 or -ENOMEM (nothing changed). */
int vz_lpm_add(struct vz_lpm *t, const __u8 *addr, __u32 depth, __u32 rule);
/* Remove a rule; repl is the longest rule shorter than depth covering addr
 * (it takes over the addresses rule had), or VZ_LPM_NONE. */
void vz_lpm_delete(struct vz_lpm *t, const __u8 *addr, __u32 depth, __u32 rule,
		   __u32 repl);

/* A read-only first level of 2^24 VZ_LPM_GROUP entries, shared by the
 * process: vz_map_lookup_lpm4()'s for maps with no IPv4 one (maps.h).
 * NULL if it cannot be had. */
const __u32 *vz_lpm4_elsewhere(void);

static inline __u32 vz_lpm_depth(const struct vz_lpm *t, __u32 rule)
{
	return t->depth[rule];
}

#endif /* VZ_MAPS_LPM_H */
