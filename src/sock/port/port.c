/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * udpd's AF_XDP port. One UMEM shared by one socket per receive queue; each
 * socket has its own fill and completion rings, and its own QUEUE_FRAMES
 * frames with their free list. Received frames go back to the fill ring as
 * soon as the stack has read them (the stack copies what it keeps).
 * Transmitted frames come from the queue's free list and return to it from
 * its completion ring. A frame never moves between queues, so two threads
 * can each drive a queue of their own without a lock (direct mode's
 * engines); udpd drives all of them from one thread and sends through
 * queue 0's socket: on veth and most NICs any queue can transmit.
 *
 * Nothing of it outlives the process, however it ends: the steering program
 * hangs on a BPF link that only this process holds (never pinned), so the
 * kernel detaches it when the last descriptor closes, as it frees the
 * sockets, the UMEM and the interface lock's flock. A kill -9 leaves nothing
 * attached for the next udpd or direct process to refuse or remove.
 */
#include <errno.h>
#include <libgen.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/xsk.h>

#include "common/err.h"
#include "common/iface.h"
#include "runner/ports.h"
#include "sock/port/port.h"

#define FRAME_SIZE 2048u
#define RING 1024u /* every ring */
/* A queue's frames: its fill ring's (RING) and its transmit pool. */
#define QUEUE_FRAMES 4096u
#define BATCH 64u
/* Kicks per flush: a full ring at 32 frames a kick, and room for retries. */
#define TX_MAX_KICKS (2 * RING / 32 + 8)

struct queue {
	struct xsk_socket *xsk;
	struct xsk_ring_cons rx, comp;
	struct xsk_ring_prod tx, fill;
	int fd;
	__u64 free_frames[QUEUE_FRAMES];
	unsigned int nfree;
	unsigned int tx_pending; /* descriptors submitted, not yet kicked */
	struct vz_udpd_port_stats stats; /* the port's own counters */
};

struct vz_udpd_port {
	char ifname[IF_NAMESIZE];
	int ifindex;
	__u8 mac[6];
	bool skb_mode;
	/* one veloz per interface, as `veloz run` takes it (cli/ports.c) */
	struct vz_iface_lock lock;
	struct bpf_object *obj;
	int link_fd; /* the steering program's link: closed, it detaches */
	void *area;
	struct xsk_umem *umem;
	unsigned int nqueues;
	__u64 area_size;
	struct queue q[VZ_UDPD_MAX_QUEUES];
};

static const char *steer_object(char *buf, size_t len)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n < 0)
		return "udpd_steer.bpf.o";
	exe[n] = 0;
	snprintf(buf, len, "%s/udpd_steer.bpf.o", dirname(exe));
	return buf;
}

/* The steering program's IPv6 address (udpd_config6), if any. */
static int config6(struct vz_udpd_port *p, const __u8 *ip6)
{
	__u32 key = 0;
	int fd;

	if (!ip6)
		return 0;
	fd = bpf_object__find_map_fd_by_name(p->obj, "udpd_config6");
	if (fd < 0 || bpf_map_update_elem(fd, &key, ip6, BPF_ANY)) {
		vz_err("cannot give the steering program the IPv6 address: %s",
		       strerror(fd < 0 ? ENOENT : errno));
		return -EIO;
	}
	return 0;
}

static int open_steer(struct vz_udpd_port *p, __be32 ip4, const __u8 *ip6,
		      const char *path)
{
	__u32 key = 0, value = ip4;
	int err, fd;

	p->obj = bpf_object__open_file(path, NULL);
	err = (int)libbpf_get_error(p->obj);
	if (err) {
		p->obj = NULL;
		vz_err("cannot open udpd's steering program %s: %s", path,
		       strerror(-err));
		return err;
	}
	err = bpf_object__load(p->obj);
	if (err) {
		vz_err("cannot load udpd's steering program %s: %s", path,
		       strerror(-err));
		return err;
	}
	/* set before it is attached: no frame for us goes to the kernel */
	fd = bpf_object__find_map_fd_by_name(p->obj, "udpd_config");
	if (fd < 0 || bpf_map_update_elem(fd, &key, &value, BPF_ANY)) {
		vz_err("cannot configure udpd's steering program: %s",
		       strerror(fd < 0 ? ENOENT : errno));
		return -EIO;
	}
	return config6(p, ip6);
}

static int attach(struct vz_udpd_port *p, const struct vz_udpd_port_config *cfg)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts);
	struct bpf_program *prog;
	char path[4200];
	int err;

	if (cfg->steer_path)
		snprintf(path, sizeof(path), "%s", cfg->steer_path);
	else
		steer_object(path, sizeof(path));
	err = open_steer(p, cfg->ip4, cfg->ip6, path);
	if (err)
		return err;
	prog = bpf_object__next_program(p->obj, NULL);
	if (!prog) {
		vz_err("%s has no XDP program", path);
		return -ENOENT;
	}
	opts.flags = p->skb_mode ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
	p->link_fd = bpf_link_create(bpf_program__fd(prog), p->ifindex, BPF_XDP,
				     &opts);
	if (p->link_fd < 0) {
		err = p->link_fd;
		p->link_fd = -1;
		vz_err("cannot attach udpd's steering program to %s in %s "
		       "mode: %s%s",
		       p->ifname, p->skb_mode ? "skb" : "native",
		       strerror(-err),
		       err == -EOPNOTSUPP ? " (try --skb-mode)" : "");
		return err;
	}
	return 0;
}

static void refill(struct queue *q)
{
	__u32 want = xsk_prod_nb_free(&q->fill, RING), idx, i;

	if (want > q->nfree)
		want = q->nfree;
	if (!want || xsk_ring_prod__reserve(&q->fill, want, &idx) != want)
		return;
	for (i = 0; i < want; i++)
		*xsk_ring_prod__fill_addr(&q->fill, idx + i) =
			q->free_frames[--q->nfree];
	xsk_ring_prod__submit(&q->fill, want);
}

static int open_queue(struct vz_udpd_port *p, unsigned int i, bool copy)
{
	struct xsk_socket_config cfg = {
		.rx_size = RING,
		.tx_size = RING,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = XDP_USE_NEED_WAKEUP | (copy ? XDP_COPY : 0),
	};
	struct xsk_umem_config ucfg = {
		.fill_size = RING,
		.comp_size = RING,
		.frame_size = FRAME_SIZE,
	};
	struct queue *q = &p->q[i];
	unsigned int tries;
	int err, map;

	for (q->nfree = 0; q->nfree < QUEUE_FRAMES; q->nfree++)
		q->free_frames[q->nfree] =
			((__u64)i * QUEUE_FRAMES + q->nfree) * FRAME_SIZE;
	if (!i) {
		err = xsk_umem__create(&p->umem, p->area, p->area_size,
				       &q->fill, &q->comp, &ucfg);
		if (err) {
			vz_err_umem(err, p->area_size);
			return err;
		}
	}
	/* A socket closed a moment ago (a udpd or direct process that just
	 * stopped) frees its queue in deferred kernel work: EBUSY until then.
	 * Wait a bounded time for it rather than fail. */
	for (tries = 0;; tries++) {
		err = xsk_socket__create_shared(&q->xsk, p->ifname, i, p->umem,
						&q->rx, &q->tx, &q->fill,
						&q->comp, &cfg);
		if (err != -EBUSY || tries >= 200)
			break;
		usleep(10000);
	}
	if (err) {
		q->xsk = NULL;
		vz_err("cannot open an AF_XDP socket on %s queue %u: %s",
		       p->ifname, i, strerror(-err));
		return err;
	}
	q->fd = xsk_socket__fd(q->xsk);
	map = bpf_object__find_map_fd_by_name(p->obj, "xsks_map");
	err = xsk_socket__update_xskmap(q->xsk, map);
	if (err) {
		vz_err("cannot add the socket of %s queue %u to the steering "
		       "map: %s",
		       p->ifname, i, strerror(-err));
		return err;
	}
	refill(q);
	return 0;
}

struct vz_udpd_port *vz_udpd_port_open(const struct vz_udpd_port_config *cfg)
{
	struct vz_udpd_port *p = calloc(1, sizeof(*p));
	unsigned int i;
	int err;

	if (!p) {
		vz_err("out of memory");
		return NULL;
	}
	p->lock.fd = -1;
	p->link_fd = -1;
	snprintf(p->ifname, sizeof(p->ifname), "%s", cfg->ifname);
	p->ifindex = (int)if_nametoindex(cfg->ifname);
	if (!p->ifindex) {
		vz_err("no interface %s", cfg->ifname);
		free(p);
		return NULL;
	}
	if (vz_iface_mac(cfg->ifname, p->mac)) {
		vz_err("cannot read the MAC address of %s", cfg->ifname);
		free(p);
		return NULL;
	}
	p->skb_mode = cfg->skb_mode;
	p->nqueues = (unsigned int)vz_iface_rx_queues(cfg->ifname);
	if (p->nqueues > VZ_UDPD_MAX_QUEUES) {
		vz_err("%s has %u receive queues; udpd takes at most %d",
		       cfg->ifname, p->nqueues, VZ_UDPD_MAX_QUEUES);
		free(p);
		return NULL;
	}
	p->area_size = (__u64)(p->nqueues ? p->nqueues : 1) * QUEUE_FRAMES *
		       FRAME_SIZE;
	p->area = mmap(NULL, (size_t)p->area_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->area == MAP_FAILED) {
		vz_err("cannot map %llu MiB for AF_XDP frames: %s",
		       (unsigned long long)(p->area_size >> 20),
		       strerror(errno));
		free(p);
		return NULL;
	}
	err = vz_claim_port(&p->lock, p->ifindex, p->ifname, cfg->replace, 0);
	if (!err)
		err = attach(p, cfg);
	for (i = 0; !err && i < p->nqueues; i++)
		err = open_queue(p, i, cfg->copy);
	if (err) {
		vz_udpd_port_close(p);
		return NULL;
	}
	return p;
}

void vz_udpd_port_close(struct vz_udpd_port *p)
{
	unsigned int i;

	if (!p)
		return;
	if (p->link_fd >= 0)
		close(p->link_fd); /* the only holder: the program detaches */
	bpf_object__close(p->obj);
	for (i = 0; i < p->nqueues; i++)
		if (p->q[i].xsk)
			xsk_socket__delete(p->q[i].xsk);
	if (p->umem)
		xsk_umem__delete(p->umem);
	if (p->area && p->area != MAP_FAILED)
		munmap(p->area, (size_t)p->area_size);
	vz_iface_unlock(&p->lock);
	free(p);
}

unsigned int vz_udpd_port_queues(const struct vz_udpd_port *p)
{
	return p->nqueues;
}

bool vz_udpd_port_present(const struct vz_udpd_port *p)
{
	char name[IF_NAMESIZE];

	return if_indextoname((unsigned int)p->ifindex, name) &&
	       !strcmp(name, p->ifname);
}

unsigned int vz_udpd_port_fds(const struct vz_udpd_port *p, int *fds,
			      unsigned int max)
{
	unsigned int i;

	for (i = 0; i < p->nqueues && i < max; i++)
		fds[i] = p->q[i].fd;
	return i;
}

unsigned int vz_udpd_port_rx_queue(struct vz_udpd_port *p, unsigned int qi,
				   vz_udpd_rx_fn fn, void *opaque,
				   unsigned int budget)
{
	struct queue *q = &p->q[qi];
	__u64 lo = (__u64)qi * QUEUE_FRAMES * FRAME_SIZE;
	__u32 idx, n, k;

	n = xsk_ring_cons__peek(&q->rx, budget < BATCH ? budget : BATCH, &idx);
	for (k = 0; k < n; k++) {
		const struct xdp_desc *d =
			xsk_ring_cons__rx_desc(&q->rx, idx + k);
		__u64 addr = xsk_umem__extract_addr(d->addr);

		/* only this queue's frames come back on its ring */
		if (addr < lo ||
		    addr + d->len > lo + (__u64)QUEUE_FRAMES * FRAME_SIZE ||
		    d->len > FRAME_SIZE) {
			q->stats.rx_invalid++;
			continue; /* not ours to recycle either */
		}
		fn(opaque, xsk_umem__get_data(p->area, d->addr), d->len);
		q->free_frames[q->nfree++] = addr & ~(__u64)(FRAME_SIZE - 1);
	}
	if (n)
		xsk_ring_cons__release(&q->rx, n);
	q->stats.rx_frames += n;
	refill(q);
	if (xsk_ring_prod__needs_wakeup(&q->fill))
		recvfrom(q->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
	return n;
}

unsigned int vz_udpd_port_rx(struct vz_udpd_port *p, vz_udpd_rx_fn fn,
			     void *opaque, unsigned int budget)
{
	unsigned int i, total = 0;

	for (i = 0; i < p->nqueues; i++)
		total += vz_udpd_port_rx_queue(p, i, fn, opaque, budget);
	return total;
}

static void complete(struct queue *q)
{
	__u32 idx, n, k;

	n = xsk_ring_cons__peek(&q->comp, RING, &idx);
	for (k = 0; k < n; k++)
		q->free_frames[q->nfree++] =
			*xsk_ring_cons__comp_addr(&q->comp, idx + k);
	if (n)
		xsk_ring_cons__release(&q->comp, n);
}

int vz_udpd_port_tx_queue(struct vz_udpd_port *p, unsigned int qi,
			  const void *frame, size_t len)
{
	struct queue *q = &p->q[qi];
	__u32 idx;
	__u64 addr;

	if (len > FRAME_SIZE || !len) {
		q->stats.tx_full++;
		return -1;
	}
	if (!q->nfree)
		complete(q);
	/* keep frames back for the fill ring, or receive would starve */
	if (q->nfree <= RING || xsk_ring_prod__reserve(&q->tx, 1, &idx) != 1) {
		vz_udpd_port_flush_queue(p, qi);
		if (q->nfree <= RING ||
		    xsk_ring_prod__reserve(&q->tx, 1, &idx) != 1) {
			q->stats.tx_full++;
			return -1;
		}
	}
	addr = q->free_frames[--q->nfree];
	memcpy(xsk_umem__get_data(p->area, addr), frame, len);
	xsk_ring_prod__tx_desc(&q->tx, idx)->addr = addr;
	xsk_ring_prod__tx_desc(&q->tx, idx)->len = (__u32)len;
	xsk_ring_prod__submit(&q->tx, 1);
	q->tx_pending++;
	q->stats.tx_frames++;
	return 0;
}

int vz_udpd_port_tx(struct vz_udpd_port *p, const void *frame, size_t len)
{
	return vz_udpd_port_tx_queue(p, 0, frame, len);
}

/* Descriptors on the transmit ring that the kernel has not taken yet. */
static __u32 tx_outstanding(struct queue *q)
{
	return RING - xsk_prod_nb_free(&q->tx, RING);
}

/*
 * Send everything submitted, in this round. In copy mode one kick
 * (sendto) transmits at most 32 frames (the kernel's TX_BATCH_SIZE) and
 * then answers EAGAIN; it also stops early when the completion ring is
 * full. So kick until the ring is drained, reaping completions between
 * kicks. In zero-copy mode the driver drains the ring itself once woken
 * (needs_wakeup clears): one kick is enough. Bounded, so a device that
 * refuses frames (EBUSY, ENOBUFS, ENETDOWN) cannot hold the loop: what is
 * left goes with the next flush.
 */
void vz_udpd_port_flush_queue(struct vz_udpd_port *p, unsigned int qi)
{
	struct queue *q = &p->q[qi];
	unsigned int kicks;

	if (!q->tx_pending && !tx_outstanding(q)) {
		complete(q);
		return;
	}
	for (kicks = 0; kicks < TX_MAX_KICKS; kicks++) {
		if (!tx_outstanding(q) || !xsk_ring_prod__needs_wakeup(&q->tx))
			break;
		if (sendto(q->fd, NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 &&
		    errno != EAGAIN && errno != EBUSY && errno != ENOBUFS &&
		    errno != EINTR)
			break;
		q->stats.tx_kicks++;
		complete(q);
	}
	if (tx_outstanding(q) && xsk_ring_prod__needs_wakeup(&q->tx))
		q->stats.tx_kick_stalls++;
	q->tx_pending = 0;
	complete(q);
}

void vz_udpd_port_flush(struct vz_udpd_port *p)
{
	vz_udpd_port_flush_queue(p, 0);
}

void vz_udpd_port_get_stats(struct vz_udpd_port *p,
			    struct vz_udpd_port_stats *out)
{
	struct xdp_statistics x;
	socklen_t len = sizeof(x);
	unsigned int i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < p->nqueues; i++) {
		const struct vz_udpd_port_stats *q = &p->q[i].stats;

		out->rx_frames += q->rx_frames;
		out->rx_invalid += q->rx_invalid;
		out->tx_frames += q->tx_frames;
		out->tx_full += q->tx_full;
		out->tx_kicks += q->tx_kicks;
		out->tx_kick_stalls += q->tx_kick_stalls;
		if (getsockopt(p->q[i].fd, SOL_XDP, XDP_STATISTICS, &x, &len))
			continue;
		out->xsk_rx_dropped += x.rx_dropped;
		out->xsk_rx_ring_full += x.rx_ring_full;
		out->xsk_fill_empty += x.rx_fill_ring_empty_descs;
	}
}
