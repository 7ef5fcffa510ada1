// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gen/ifstats.h"

static int ethtool(int fd, const char *ifname, void *cmd)
{
	struct ifreq ifr = { 0 };

	strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
	ifr.ifr_data = cmd;
	return ioctl(fd, SIOCETHTOOL, &ifr);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

int vz_if_xmit_read(const char *ifname, struct vz_if_xmit *out)
{
	struct ethtool_sset_info *sset = NULL; /* + one __u32: the count */
	struct ethtool_gstrings *names = NULL;
	struct ethtool_stats *stats = NULL;
	const char *name;
	__u32 n, i;
	int fd, err = -EOPNOTSUPP;

	memset(out, 0, sizeof(*out));
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sset = calloc(1, sizeof(*sset) + sizeof(__u32));
	if (!sset)
		goto out;
	sset->cmd = ETHTOOL_GSSET_INFO;
	sset->sset_mask = 1ull << ETH_SS_STATS;
	if (ethtool(fd, ifname, sset) || !sset->sset_mask)
		goto out;
	n = sset->data[0];
	names = calloc(1, sizeof(*names) + (size_t)n * ETH_GSTRING_LEN);
	stats = calloc(1, sizeof(*stats) + (size_t)n * sizeof(__u64));
	if (!names || !stats)
		goto out;
	names->cmd = ETHTOOL_GSTRINGS;
	names->string_set = ETH_SS_STATS;
	names->len = n;
	stats->cmd = ETHTOOL_GSTATS;
	stats->n_stats = n;
	if (ethtool(fd, ifname, names) || ethtool(fd, ifname, stats))
		goto out;
	for (i = 0; i < n; i++) {
		name = (const char *)names->data + (size_t)i * ETH_GSTRING_LEN;
		if (ends_with(name, "xdp_xmit")) {
			out->xmit += stats->data[i];
			out->known = true;
		} else if (ends_with(name, "xdp_xmit_errors")) {
			out->errors += stats->data[i];
		}
	}
	err = 0;
out:
	free(sset);
	free(names);
	free(stats);
	close(fd);
	return err;
}
