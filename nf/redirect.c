/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * nf/redirect.c: forward every frame, unchanged, out of the port the config
 * names (L2 forwarding between two ports, the XDP paper's redirect test).
 */
#include <veloz/nf.h>

VZ_CONFIG(struct vz_redirect_config) = { .port = 1 };

VZ_CONFIG_CHECK(struct vz_redirect_config, cfg)
{
	if (cfg->port >= VZ_MAX_PORTS)
		return "port must be below 64";
	return 0;
}

VZ_NF(redirect)
{
	return VZ_REDIRECT(vz_config.port);
}
