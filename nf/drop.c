/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* nf/drop.c: drop every frame (the XDP paper's packet-drop benchmark). */
#include <veloz/nf.h>

VZ_NF(drop)
{
	return VZ_DROP;
}
