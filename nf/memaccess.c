/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nf/memaccess.c: N reads and writes per packet into a map-backed table,
 * then drop: the synthetic program of the eBPF/XDP cost study (seed 002),
 * which measured throughput and latency for N up to 3200. With reflect=1 it
 * sends the frame back as tx does: a tx whose cost per frame is set, so the
 * dispatch experiment's workers, not the port, are what saturates.
 *
 * The walk starts at a slot chosen by the packet's first byte and strides by
 * an odd number, so it visits distinct slots and cannot be folded away by
 * the compiler. The table is per CPU, so workers never share cache lines.
 */
#include <veloz/nf.h>

VZ_CONFIG(struct vz_memaccess_config) = { .accesses = 0, .reflect = 0 };

VZ_CONFIG_CHECK(struct vz_memaccess_config, cfg)
{
	if (cfg->accesses > VZ_MEMACCESS_MAX)
		return "accesses must be between 0 and 16384";
	if (cfg->reflect > 1)
		return "reflect must be 0 or 1";
	return 0;
}

VZ_PERCPU_ARRAY(memaccess_table, struct vz_memaccess_table, 1);

VZ_NF(memaccess)
{
	struct vz_memaccess_table *table;
	__u8 *first = vz_header(ctx, 0, 1);
	__u32 key = 0, n = vz_config.accesses, slot, i;

	table = vz_map_lookup(&memaccess_table, &key);
	if (!table || !first)
		return VZ_DROP;
	slot = *first;
	for (i = 0; i < VZ_MEMACCESS_MAX; i++) {
		if (i >= n)
			break;
		slot = (slot + 2654435761u) & (VZ_MEMACCESS_SLOTS - 1);
		table->slot[slot] += i;
	}
	if (vz_config.reflect) {
		struct ethhdr *eth = vz_eth(ctx);

		if (!eth)
			return VZ_DROP;
		vz_eth_swap(eth);
		return VZ_TX;
	}
	return VZ_DROP;
}
