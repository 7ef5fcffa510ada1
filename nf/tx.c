/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* nf/tx.c: send every frame back where it came from, addresses swapped. */
#include <veloz/nf.h>

VZ_NF(tx)
{
	struct ethhdr *eth = vz_eth(ctx);

	if (!eth)
		return VZ_DROP;
	vz_eth_swap(eth);
	return VZ_TX;
}
