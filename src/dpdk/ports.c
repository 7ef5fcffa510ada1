// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dpdk backend's ports: their mempools (one per queue, owned by the
 * worker that serves it) and the memory those need, finding each --iface's
 * DPDK port, configuring its queues, and what net_af_packet needs besides
 * (a tcx program that keeps the kernel stack from receiving every frame
 * too, a socket filter that keeps its own frames from coming back).
 *
 * Each mbuf carries a private area of VZ_HEADROOM - RTE_PKTMBUF_HEADROOM
 * bytes right before the buffer: with it every frame has the XDP geometry
 * the NF contract promises, whatever the PMD's data offset.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dispatch/dispatch.h"
#include "dpdk/dpdk.h"
#include "dpdk/ports.h"

/*
 * Also the AF_XDP rx and tx ring sizes. The lcore's CPU may go to another
 * task until the scheduler's next tick (4 ms at HZ=250), so the rx ring
 * holds a tick of frames at 500 kpps. net_af_xdp (DPDK 22.11) posts 2048
 * buffers on its fill ring whatever the ring size: more would not help.
 */
#define RX_DESC 2048
#define TX_DESC 1024
/*
 * mbufs per (port, queue): net_af_xdp keeps 2048 on its fill ring and up
 * to a tx ring (RX_DESC) plus a completion ring (2048) of them in flight;
 * then a burst, the lcore caches and the TAP's spare.
 */
#define POOL_MBUFS 8191
#define POOL_MBUFS_COPY 2047 /* net_af_packet: a burst, caches, TAP */
#define POOL_CACHE 256
/* EAL's own allocations beside the mempools (measured: under 4 MiB) */
#define EAL_OVERHEAD (16ul << 20)

/* The kernel's tcx ingress hook (Linux 6.6), newer than our headers. */
#define VZ_TCX_INGRESS 46

#define PRIV_SIZE                                                     \
	(VZ_HEADROOM > RTE_PKTMBUF_HEADROOM                           \
		 ? RTE_ALIGN_CEIL(VZ_HEADROOM - RTE_PKTMBUF_HEADROOM, \
				  RTE_MBUF_PRIV_ALIGN)                \
		 : 0)

/* Mempool sizes, and the memory EAL must find for them. */
int dpdk_plan_memory(struct vz_us_run *run, struct dpdk *d)
{
	int mtu = 0, p, widest = 0;
	size_t frame, room, obj;

	for (p = 0; p < run->nports; p++)
		if (run->ports[p].mtu > mtu) {
			mtu = run->ports[p].mtu;
			widest = p;
		}
	/* the largest frame, tagged twice */
	frame = (size_t)RTE_MAX(mtu, RTE_ETHER_MTU) + RTE_ETHER_HDR_LEN +
		2 * RTE_VLAN_HLEN + RTE_ETHER_CRC_LEN;
	if (frame > VZ_FRAME_MAX) {
		vz_err("the MTU of %s (%d) is more than veloz's largest frame "
		       "(%d bytes) allows",
		       run->ports[widest].ifname, mtu, VZ_FRAME_MAX);
		return -EINVAL;
	}
	room = RTE_PKTMBUF_HEADROOM + frame;
	if (d->pmd == PMD_AF_XDP)
		room += 256; /* XDP_PACKET_HEADROOM, kept by the kernel */
	if (d->pmd == PMD_AF_PACKET && frame + 128 > 2048) {
		/*
		 * Past its default 2 KiB ring frames, net_af_packet would pass
		 * frames on truncated: larger ring frames (header, then data),
		 * one per block, as the PMD finds frame i at i * framesz; the
		 * mbufs must hold a ring frame's data, as the PMD checks.
		 */
		d->ring_frame = rte_align32pow2((uint32_t)frame + 128);
		d->ring_block = d->ring_frame;
		room = RTE_MAX(room, RTE_PKTMBUF_HEADROOM + d->ring_frame);
	}
	/* net_af_packet copies into mbufs and out of them: few in flight */
	d->pool_mbufs = d->pmd == PMD_AF_PACKET ? POOL_MBUFS_COPY : POOL_MBUFS;
	d->data_room = (uint16_t)RTE_ALIGN_CEIL(
		RTE_MAX(room, (size_t)RTE_MBUF_DEFAULT_BUF_SIZE), 64);
	/* object header (a cache line), mbuf, private area, buffer */
	obj = 64 + sizeof(struct rte_mbuf) + PRIV_SIZE + d->data_room;
	if (d->pmd == PMD_AF_XDP && obj > 4096) {
		/* each mbuf is a UMEM chunk, which the kernel caps at a page */
		vz_err("the MTU of %s (%d) is too large for net_af_xdp, whose "
		       "frames must fit a 4 KiB page with DPDK's headers (MTU "
		       "at most %zu)",
		       run->ports[widest].ifname, mtu,
		       (size_t)mtu - (obj - 4096));
		return -EINVAL;
	}
	d->mem_bytes = (size_t)run->nports * run->queues * d->pool_mbufs *
			       RTE_ALIGN_CEIL(obj, 128) +
		       EAL_OVERHEAD + dpdk_dispatch_memory(run);
	return 0;
}

static int find_port(struct vz_us_run *run, struct dpdk *d, int p)
{
	const char *ifname = run->ports[p].ifname;
	struct rte_eth_dev_info info;
	char name[RTE_ETH_NAME_MAX_LEN], list[1024];
	size_t off = 0;
	uint16_t id;

	if (d->pmd == PMD_AF_XDP)
		snprintf(name, sizeof(name), "net_af_xdp%d", p);
	else if (d->pmd == PMD_AF_PACKET)
		snprintf(name, sizeof(name), "net_af_packet%d", p);
	else
		snprintf(name, sizeof(name), "%s", ifname);
	if (!rte_eth_dev_get_port_by_name(name, &id)) {
		d->ports[p].id = id;
		return 0;
	}
	if (d->pmd == PMD_EAL) {
		/* a port driving a kernel interface (mlx5, net_tap, ...) */
		RTE_ETH_FOREACH_DEV(id)
		{
			if (!rte_eth_dev_info_get(id, &info) &&
			    run->ports[p].ifindex &&
			    info.if_index ==
				    (unsigned int)run->ports[p].ifindex) {
				d->ports[p].id = id;
				return 0;
			}
		}
		RTE_ETH_FOREACH_DEV(id)
		{
			if (rte_eth_dev_get_name_by_port(id, name) ||
			    off >= sizeof(list))
				continue;
			off += (size_t)snprintf(list + off, sizeof(list) - off,
						"%s%s", off ? ", " : "", name);
		}
		vz_err("no DPDK port is %s (the ports EAL found: %s); name "
		       "them with EAL arguments after --, e.g. -a PCI-ADDRESS",
		       ifname, off ? list : "none");
		return -ENODEV;
	}
	vz_err("DPDK did not create the %s port for %s (see EAL's message "
	       "above)",
	       name, ifname);
	return -ENODEV;
}

static int setup_pools(struct vz_us_run *run, struct dpdk *d, int p, int socket)
{
	struct port *port = &d->ports[p];
	char name[RTE_MEMPOOL_NAMESIZE];
	unsigned int q;

	for (q = 0; q < run->queues; q++) {
		snprintf(name, sizeof(name), "vz_p%u_q%u", (unsigned int)p & 63,
			 q & 63);
		port->pool[q] = rte_pktmbuf_pool_create(name, d->pool_mbufs,
							POOL_CACHE, PRIV_SIZE,
							d->data_room, socket);
		if (!port->pool[q]) {
			vz_err("cannot allocate %u frame buffers for %s: %s%s",
			       d->pool_mbufs, run->ports[p].ifname,
			       rte_strerror(rte_errno),
			       run->no_huge ? "" : " (try --no-huge)");
			return -ENOMEM;
		}
	}
	return 0;
}

/*
 * Port p's configuration from what the device offers: queues enough, and
 * for --pmd eal RSS to spread frames over them (and the hash --dispatch
 * reads), and the MAC address and MTU of a port with no kernel interface.
 */
static int port_conf(struct vz_us_run *run, struct dpdk *d, int p,
		     const struct rte_eth_dev_info *info,
		     struct rte_eth_conf *conf)
{
	struct port *port = &d->ports[p];
	const char *ifname = run->ports[p].ifname;
	struct rte_ether_addr mac;
	uint16_t mtu;

	if (info->max_rx_queues < run->queues ||
	    info->max_tx_queues < run->queues) {
		vz_err("--queues %u: DPDK port %s (%s) has at most %u",
		       run->queues, ifname, port->driver,
		       RTE_MIN(info->max_rx_queues, info->max_tx_queues));
		return -EINVAL;
	}
	if (d->pmd != PMD_EAL)
		return 0;
	if (run->queues > 1) {
		conf->rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf->rx_adv_conf.rss_conf.rss_hf =
			(RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) &
			info->flow_type_rss_offloads;
		if (!conf->rx_adv_conf.rss_conf.rss_hf) {
			vz_err("--queues %u: DPDK port %s (%s) cannot spread "
			       "frames over queues (no RSS)",
			       run->queues, ifname, port->driver);
			return -EINVAL;
		}
	}
	if (run->dispatch >= 0)
		dpdk_dispatch_port_conf(info, conf);
	/* a port with no kernel interface: the run learns its address */
	if (!rte_eth_macaddr_get(port->id, &mac))
		memcpy(run->ports[p].mac, mac.addr_bytes, 6);
	if (!rte_eth_dev_get_mtu(port->id, &mtu))
		run->ports[p].mtu = mtu;
	return 0;
}

/* Every queue of port p, each receiving into its own mempool. */
static int setup_queues(struct vz_us_run *run, struct dpdk *d, int p,
			int socket)
{
	struct port *port = &d->ports[p];
	uint16_t rxd = RX_DESC, txd = TX_DESC, q;
	int ret;

	rte_eth_dev_adjust_nb_rx_tx_desc(port->id, &rxd, &txd);
	for (q = 0; q < run->queues; q++) {
		ret = rte_eth_rx_queue_setup(port->id, q, rxd,
					     (unsigned int)socket, NULL,
					     port->pool[q]);
		if (!ret)
			ret = rte_eth_tx_queue_setup(
				port->id, q, txd, (unsigned int)socket, NULL);
		if (ret) {
			vz_err("cannot set up queue %u of DPDK port %s (%s): "
			       "%s (see the PMD's message above)",
			       q, run->ports[p].ifname, port->driver,
			       strerror(-ret));
			return ret;
		}
	}
	return 0;
}

int dpdk_setup_port(struct vz_us_run *run, struct dpdk *d, int p)
{
	struct port *port = &d->ports[p];
	const char *ifname = run->ports[p].ifname;
	struct rte_eth_conf conf = { 0 };
	struct rte_eth_dev_info info;
	int socket, ret;

	ret = find_port(run, d, p);
	if (ret)
		return ret;
	ret = rte_eth_dev_info_get(port->id, &info);
	if (ret) {
		vz_err("cannot read DPDK port %s: %s", ifname, strerror(-ret));
		return ret;
	}
	snprintf(port->driver, sizeof(port->driver), "%s", info.driver_name);
	ret = port_conf(run, d, p, &info, &conf);
	if (ret)
		return ret;
	socket = rte_eth_dev_socket_id(port->id);
	if (socket < 0)
		socket = (int)rte_socket_id();
	ret = setup_pools(run, d, p, socket);
	if (ret)
		return ret;
	ret = rte_eth_dev_configure(port->id, (uint16_t)run->queues,
				    (uint16_t)run->queues, &conf);
	if (ret) {
		vz_err("cannot configure DPDK port %s: %s", ifname,
		       strerror(-ret));
		return ret;
	}
	port->configured = true;
	return setup_queues(run, d, p, socket);
}

/*
 * net_af_packet only taps the interface: the kernel stack would receive
 * every frame too. A tcx ingress program (after the taps, before the stack)
 * drops them for the kernel; PASS still reaches it through the TAP. A tcx
 * link belongs to this process: it goes when the process does.
 */
void dpdk_shield(struct vz_us_run *run, struct dpdk *d, int p)
{
	static const struct bpf_insn drop[] = {
		/* r0 = TC_ACT_SHOT; exit */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K,
		  .dst_reg = BPF_REG_0,
		  .imm = 2 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type =
			    (enum bpf_attach_type)VZ_TCX_INGRESS);
	struct port *port = &d->ports[p];

	port->shield_prog =
		bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "vz_dpdk_shield",
			      "Dual BSD/GPL", drop, 2, &opts);
	if (port->shield_prog >= 0)
		port->shield_link = bpf_link_create(
			port->shield_prog, run->ports[p].ifindex,
			(enum bpf_attach_type)VZ_TCX_INGRESS, NULL);
	if (port->shield_link >= 0)
		return;
	if (port->shield_prog >= 0)
		close(port->shield_prog);
	port->shield_prog = -1;
	d->shield_missing = true;
	fprintf(stderr,
		"veloz: %s: this kernel has no tcx (Linux 6.6): its stack "
		"also receives every frame net_af_packet takes\n",
		run->ports[p].ifname);
}

/* The PMD keeps its AF_XDP sockets to itself: look among our descriptors. */
const char *dpdk_xsk_mode(void)
{
	struct xdp_options opts;
	socklen_t len;
	struct dirent *ent;
	bool copy = false, zc = false;
	char *end;
	long fd;
	DIR *dir = opendir("/proc/self/fd");

	if (!dir)
		return "unknown";
	while ((ent = readdir(dir))) {
		fd = strtol(ent->d_name, &end, 10);
		if (*end || end == ent->d_name)
			continue;
		len = sizeof(opts);
		if (getsockopt((int)fd, SOL_XDP, XDP_OPTIONS, &opts, &len))
			continue;
		if (opts.flags & XDP_OPTIONS_ZEROCOPY)
			zc = true;
		else
			copy = true;
	}
	closedir(dir);
	return zc && copy ? "mixed copy and zero-copy"
	       : zc	  ? "zero-copy"
	       : copy	  ? "copy"
			  : "unknown";
}

/*
 * A packet socket also receives what its interface sends: the kernel's own
 * frames (ARP, replies to PASS) would come back to the NF as if received.
 * net_af_packet does not ask the kernel to leave them out, and joins its
 * sockets to a fanout group, whose hook PACKET_IGNORE_OUTGOING no longer
 * reaches; a socket filter still does. Its sockets are found among our
 * descriptors (the process opens no other packet socket).
 */
int dpdk_skip_outgoing(void)
{
	static struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0),
		BPF_STMT(BPF_RET | BPF_K, 0xffffffff),
	};
	struct sock_fprog prog = { .len = 4, .filter = code };
	struct dirent *ent;
	int domain, n = 0;
	socklen_t len;
	char *end;
	long fd;
	DIR *dir = opendir("/proc/self/fd");

	if (!dir)
		return -errno;
	while ((ent = readdir(dir))) {
		fd = strtol(ent->d_name, &end, 10);
		len = sizeof(domain);
		if (*end || end == ent->d_name ||
		    getsockopt((int)fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) ||
		    domain != AF_PACKET)
			continue;
		if (setsockopt((int)fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog,
			       sizeof(prog))) {
			n = -errno;
			break;
		}
		n++;
	}
	closedir(dir);
	return n;
}
