/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The exception path of the userspace backends: PASS means "the host's
 * kernel stack gets it", but a frame a userspace worker took off the wire
 * cannot go back up the interface it came from. It goes into a TAP device
 * that wears the port's MAC address instead, so the kernel receives it as
 * if on the wire (local delivery, forwarding, ARP) and replies through its
 * routes; what the kernel sends out of the TAP itself (ARP replies, for one)
 * the backend transmits on the port.
 *
 * The TAP is not persistent: it disappears with the process, even after
 * kill -9, so nothing is ever left behind.
 */
#ifndef VZ_RUNNER_TAP_H
#define VZ_RUNNER_TAP_H

#include <linux/types.h>
#include <net/if.h>
#include <stddef.h>
#include <sys/types.h>

struct vz_tap {
	int fd; /* -1: none */
	char name[IF_NAMESIZE];
};

/*
 * Create the TAP for `port_ifname` (named vzt-<ifname>, truncated), with
 * `mac` and `mtu`, up, reverse-path filtering off and IPv6 address
 * generation off (it must not talk on its own). Returns 0 or -errno with a
 * message in err.
 */
int vz_tap_open(struct vz_tap *tap, const char *port_ifname, const __u8 *mac,
		int mtu, char *err, size_t errlen);
void vz_tap_close(struct vz_tap *tap);

/* Hand one frame to the kernel: 0, or -1 when it was not taken. */
int vz_tap_send(struct vz_tap *tap, const void *frame, size_t len);

/* One frame the kernel sent out (non-blocking): its length, or 0 if none. */
size_t vz_tap_recv(struct vz_tap *tap, void *buf, size_t size);

#endif
