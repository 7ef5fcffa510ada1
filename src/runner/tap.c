// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runner/tap.h"

static int write_sysctl(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, value, strlen(value));
	close(fd);
	return n < 0 ? -errno : 0;
}

static int set_link(const char *name, const __u8 *mac, int mtu)
{
	struct ifreq ifr = { 0 };
	int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = 0;

	if (sock < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
	if (ioctl(sock, SIOCSIFHWADDR, &ifr))
		ret = -errno;
	ifr.ifr_mtu = mtu;
	if (!ret && ioctl(sock, SIOCSIFMTU, &ifr))
		ret = -errno;
	if (!ret && ioctl(sock, SIOCGIFFLAGS, &ifr))
		ret = -errno;
	ifr.ifr_flags |= IFF_UP;
	if (!ret && ioctl(sock, SIOCSIFFLAGS, &ifr))
		ret = -errno;
	close(sock);
	return ret;
}

int vz_tap_open(struct vz_tap *tap, const char *port_ifname, const __u8 *mac,
		int mtu, char *err, size_t errlen)
{
	static const char *const quiet[][3] = {
		/* frames come from addresses routed via the port, not us */
		{ "ipv4", "rp_filter", "0" },
		/* no link-local address, so no DAD, RS or MLD of its own */
		{ "ipv6", "addr_gen_mode", "1" },
		{ "ipv6", "accept_dad", "0" },
		{ "ipv6", "accept_ra", "0" },
	};
	struct ifreq ifr = { 0 };
	char path[128];
	size_t i;
	int ret;

	tap->fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (tap->fd < 0) {
		ret = -errno;
		snprintf(err, errlen,
			 "cannot open /dev/net/tun for the PASS path: %s",
			 strerror(errno));
		return ret;
	}
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "vzt-%s", port_ifname);
	/* a DPDK port's name ("0000:3b:00.0") holds what netdev names cannot */
	for (i = 0; ifr.ifr_name[i]; i++)
		if (ifr.ifr_name[i] == ':' || ifr.ifr_name[i] == '/' ||
		    ifr.ifr_name[i] <= ' ')
			ifr.ifr_name[i] = '-';
	ret = ioctl(tap->fd, TUNSETIFF, &ifr) ? -errno : 0;
	if (ret == -EBUSY) {
		/* taken (two long names truncated alike): the kernel numbers it
		 */
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "vzt%%d");
		ret = ioctl(tap->fd, TUNSETIFF, &ifr) ? -errno : 0;
	}
	if (ret) {
		snprintf(err, errlen,
			 "cannot create TAP %s for the PASS path: %s",
			 ifr.ifr_name, strerror(-ret));
		goto fail;
	}
	snprintf(tap->name, sizeof(tap->name), "%s", ifr.ifr_name);
	/* Before it is up, so IPv6 never starts on it. */
	for (i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
		snprintf(path, sizeof(path), "/proc/sys/net/%s/conf/%s/%s",
			 quiet[i][0], tap->name, quiet[i][1]);
		ret = write_sysctl(path, quiet[i][2]);
		/* IPv6 may be disabled altogether: then there is nothing to
		 * quiet */
		if (ret && !(ret == -ENOENT && !strcmp(quiet[i][0], "ipv6")))
			goto sysctl_fail;
	}
	ret = set_link(tap->name, mac, mtu);
	if (ret) {
		snprintf(err, errlen, "cannot set up TAP %s: %s", tap->name,
			 strerror(-ret));
		goto fail;
	}
	return 0;
sysctl_fail:
	snprintf(err, errlen, "cannot configure TAP %s: %s", tap->name,
		 strerror(-ret));
fail:
	vz_tap_close(tap);
	return ret;
}

void vz_tap_close(struct vz_tap *tap)
{
	if (tap->fd >= 0)
		close(tap->fd);
	tap->fd = -1;
}

int vz_tap_send(struct vz_tap *tap, const void *frame, size_t len)
{
	return write(tap->fd, frame, len) == (ssize_t)len ? 0 : -1;
}

size_t vz_tap_recv(struct vz_tap *tap, void *buf, size_t size)
{
	ssize_t n = read(tap->fd, buf, size);

	return n > 0 ? (size_t)n : 0;
}
