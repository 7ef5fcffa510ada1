/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * udpd's port: one AF_XDP socket per receive queue of one interface, one
 * UMEM, and the steering program that hands them the frames for udpd's
 * address (udpd_steer.bpf.c). Each queue has frames of its own: calls on
 * different queues may run in different threads at once, calls on one
 * queue must not (udpd drives them all from its loop; direct mode has an
 * engine per queue). The whole-port calls touch every queue, or queue 0.
 */
#ifndef VZ_SOCK_PORT_PORT_H
#define VZ_SOCK_PORT_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

#define VZ_UDPD_MAX_QUEUES 16

struct vz_udpd_port_config {
	const char *ifname;
	__be32 ip4; /* what the steering program takes */
	/* and this IPv6 address (NULL: none), with its solicited-node group */
	const __u8 *ip6;
	bool skb_mode; /* generic XDP (any interface) instead of native */
	bool copy; /* force copy mode (else the kernel's choice) */
	/*
	 * Remove a veloz program that a killed udpd or run left attached
	 * through netlink (the interface lock was free); without it, such a
	 * program is refused with a line that says so. This port's own
	 * program is on a BPF link and goes with its process; one on a live
	 * link is refused either way.
	 */
	bool replace;
	/* The steering object; NULL: udpd_steer.bpf.o beside the program. */
	const char *steer_path;
};

struct vz_udpd_port_stats {
	__u64 rx_frames, rx_invalid; /* descriptors outside the UMEM */
	__u64 tx_frames, tx_full; /* no free frame or no ring slot */
	__u64 tx_kicks; /* sendto() wake-ups of the transmit ring */
	__u64 tx_kick_stalls; /* flushes that left frames on the ring */
	__u64 xsk_rx_dropped, xsk_rx_ring_full, xsk_fill_empty; /* kernel's */
};

struct vz_udpd_port;

/* NULL with a message printed (vz_err): nothing is left attached. */
struct vz_udpd_port *vz_udpd_port_open(const struct vz_udpd_port_config *cfg);
/* Detach the program (close its link), close the sockets, free the UMEM. */
void vz_udpd_port_close(struct vz_udpd_port *p);

unsigned int vz_udpd_port_queues(const struct vz_udpd_port *p);
/* Is the interface still there, under the same name? */
bool vz_udpd_port_present(const struct vz_udpd_port *p);

/* The AF_XDP sockets' descriptors (readable when frames arrive), for a
 * poller that sleeps: how many were put in fds. */
unsigned int vz_udpd_port_fds(const struct vz_udpd_port *p, int *fds,
			      unsigned int max);

/* Received frames, at most `budget` per queue, each handed to fn then
 * recycled: from every queue, or from queue qi. */
typedef void (*vz_udpd_rx_fn)(void *opaque, const void *frame, size_t len);
unsigned int vz_udpd_port_rx(struct vz_udpd_port *p, vz_udpd_rx_fn fn,
			     void *opaque, unsigned int budget);
unsigned int vz_udpd_port_rx_queue(struct vz_udpd_port *p, unsigned int qi,
				   vz_udpd_rx_fn fn, void *opaque,
				   unsigned int budget);

/* Queue one frame (copied) for transmission on queue 0, or on queue qi: 0,
 * or -1 when full. */
int vz_udpd_port_tx(struct vz_udpd_port *p, const void *frame, size_t len);
int vz_udpd_port_tx_queue(struct vz_udpd_port *p, unsigned int qi,
			  const void *frame, size_t len);
/* Kick the kernel for what was queued on queue 0 (or qi); reclaim
 * completed frames. */
void vz_udpd_port_flush(struct vz_udpd_port *p);
void vz_udpd_port_flush_queue(struct vz_udpd_port *p, unsigned int qi);

void vz_udpd_port_get_stats(struct vz_udpd_port *p,
			    struct vz_udpd_port_stats *out);

#endif
