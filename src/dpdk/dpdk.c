// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dpdk backend: NFs run on DPDK lcores, on frames taken from DPDK ports
 * with rte_eth_rx_burst().
 *
 * This file is the backend (struct vz_backend: setup, start, join,
 * teardown, describe). What setup does is beside it, a file per concern:
 * eal_args.c (EAL's arguments and start), hugepages.c (the hugepage pool),
 * ports.c (ports, queues, mempools); packet_path.c is the workers' loop,
 * src/dpdk/dispatcher.c the port operations of the loop with --dispatch
 * (src/dispatch/dispatcher.c).
 *
 * Ports. By default (--pmd af_xdp) each --iface becomes a net_af_xdp vdev
 * that loads veloz's own steering program (src/afxdp/steer.bpf.c, through
 * the PMD's xdp_prog= devarg), so that a program left by a killed run is
 * recognised as veloz's and removed with --replace. --pmd af_packet makes a
 * net_af_packet vdev instead, with a tcx ingress program that keeps the
 * kernel stack from also receiving every frame (AF_PACKET only taps them).
 * With --pmd eal the ports are whatever EAL probes from the arguments after
 * "--" (a PCI NIC given with -a, a vdev given with --vdev): each --iface is
 * matched to a DPDK port by device name (rte_eth_dev_get_port_by_name), or
 * by the kernel interface it drives (rte_eth_dev_info.if_index).
 *
 * Memory. EAL runs --in-memory: hugepages come from memfd, so nothing is
 * left in a hugetlbfs or /var/run/dpdk when the process dies, even by
 * kill -9. When too few 2 MiB hugepages are free, nr_hugepages is raised by
 * what is missing and lowered by as much at exit; each reservation is
 * recorded in /run/veloz/dpdk-hugepages-PID, so that the next vz-dpdk gives
 * back what a killed run had reserved. --no-huge uses ordinary memory
 * (EAL's legacy mode with --no-shconf, as --in-memory needs hugepages).
 *
 * Frames. Each (port, queue) has its mempool, owned by the worker that
 * serves the queue. Its mbufs carry a private area of VZ_HEADROOM -
 * RTE_PKTMBUF_HEADROOM bytes, right before the buffer: with it every frame
 * has the XDP geometry the NF contract promises (VZ_HEADROOM bytes before
 * the data, in memory that belongs to this mbuf alone), whatever the PMD's
 * data offset. The NF sees exactly VZ_HEADROOM of headroom, as on XDP, even
 * where there is more (net_af_xdp puts data 384 bytes in).
 *
 * Lcores. The main lcore (counters, control) floats over the CPUs the
 * process may use; worker w is lcore w + 1, pinned like the afxdp workers
 * (from the last CPU down), several lcores sharing a CPU when there are
 * more workers than CPUs. EAL's threads are created with the stop signals
 * blocked, so a signal always reaches the main thread.
 */

#include <errno.h>
#include <libgen.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>

#include "dispatch/dispatch.h"
#include "dpdk/dpdk.h"
#include "dpdk/eal_args.h"
#include "dpdk/hugepages.h"
#include "dpdk/ports.h"
#include "runner/userspace.h"
#include "runner/xsk_stats.h"

/* Worker wk serves queues first, first + stride, ... */
static int plan_worker(struct vz_us_run *run, struct dpdk *d, struct worker *wk,
		       unsigned int id, unsigned int first, unsigned int stride)
{
	unsigned int q;

	wk->id = id;
	wk->run = run;
	wk->d = d;
	for (q = first; stride && q < run->queues; q += stride) {
		if (wk->nqueues == MAX_QUEUES_PER_WORKER) {
			vz_err("at most %d queues per worker; raise --workers",
			       MAX_QUEUES_PER_WORKER);
			return -EINVAL;
		}
		wk->queue[wk->nqueues++] = (uint16_t)q;
	}
	wk->tx = calloc((size_t)run->nports, sizeof(*wk->tx));
	return wk->tx ? 0 : -ENOMEM;
}

static int plan_workers(struct vz_us_run *run, struct dpdk *d)
{
	bool dispatch = run->dispatch >= 0;
	unsigned int w;
	int ret;

	/* Dispatching, the dispatcher alone owns every queue. */
	for (w = 0; w < run->workers; w++) {
		ret = plan_worker(run, d, &d->workers[w], w, w,
				  dispatch ? 0 : run->workers);
		if (ret)
			return ret;
	}
	return dispatch ? plan_worker(run, d, &d->dispatcher, 0, 0, 1) : 0;
}

/* --pmd: which ports EAL makes; --busy-poll is net_af_xdp's alone. */
static int choose_pmd(struct vz_us_run *run, struct dpdk *d)
{
	if (!strcmp(run->pmd, "af_xdp")) {
		d->pmd = PMD_AF_XDP;
	} else if (!strcmp(run->pmd, "af_packet")) {
		d->pmd = PMD_AF_PACKET;
	} else if (!run->pmd[0] || !strcmp(run->pmd, "eal")) {
		d->pmd = PMD_EAL;
	} else {
		vz_err("--pmd must be af_xdp, af_packet or eal, not '%s'",
		       run->pmd);
		return -EINVAL;
	}
	if (run->busy_poll && d->pmd != PMD_AF_XDP) {
		vz_err("--busy-poll is for --pmd af_xdp");
		return -EINVAL;
	}
	return 0;
}

/* One lcore per worker and the dispatcher, besides the main one. */
static int assign_lcores(struct vz_us_run *run, struct dpdk *d)
{
	unsigned int w, lcore = rte_get_next_lcore(-1, 1, 0);

	for (w = 0; w < run->workers + (run->dispatch >= 0); w++) {
		struct worker *wk =
			w < run->workers ? &d->workers[w] : &d->dispatcher;

		if (lcore >= RTE_MAX_LCORE) {
			vz_err("--workers %u%s needs %u lcores besides the "
			       "main one; the EAL arguments gave %u",
			       run->workers,
			       run->dispatch >= 0 ? " --dispatch" : "",
			       run->workers + (run->dispatch >= 0),
			       rte_lcore_count() - 1);
			return -EINVAL;
		}
		wk->lcore = lcore;
		if (wk->cpu < 0)
			wk->cpu = rte_lcore_to_cpu_id((int)lcore);
		lcore = rte_get_next_lcore(lcore, 1, 0);
	}
	return 0;
}

/* Set every port up, then start them, then look at what the PMD made. */
static int start_ports(struct vz_us_run *run, struct dpdk *d)
{
	int p, ret;

	for (p = 0; p < run->nports; p++) {
		ret = dpdk_setup_port(run, d, p);
		if (ret)
			return ret;
		if (d->pmd == PMD_AF_PACKET)
			dpdk_shield(run, d, p);
	}
	for (p = 0; p < run->nports; p++) {
		ret = rte_eth_dev_start(d->ports[p].id);
		if (ret) {
			vz_err("cannot start DPDK port %s (%s): %s",
			       run->ports[p].ifname, d->ports[p].driver,
			       strerror(-ret));
			return ret;
		}
		d->ports[p].started = true;
	}
	if (d->pmd == PMD_AF_XDP)
		d->xsk_mode = dpdk_xsk_mode();
	ret = dpdk_skip_outgoing();
	if (ret < 0) {
		vz_err("cannot keep net_af_packet from receiving what its "
		       "interface sends: %s",
		       strerror(-ret));
		return ret;
	}
	return 0;
}

static int dpdk_setup(struct vz_us_run *run)
{
	struct dpdk *d = calloc(1, sizeof(*d));
	int p, ret;

	if (!d)
		return -ENOMEM;
	run->backend_state = d;
	for (p = 0; p < VZ_MAX_PORTS; p++) {
		d->ports[p].shield_prog = -1;
		d->ports[p].shield_link = -1;
	}
	ret = choose_pmd(run, d);
	if (ret)
		return ret;
	if (run->no_huge ||
	    dpdk_user_gave(run, (const char *const[]){ "--no-huge", NULL }))
		run->no_huge = true;
	ret = plan_workers(run, d);
	if (!ret && d->pmd == PMD_AF_XDP)
		ret = dpdk_find_steer_object(d);
	if (!ret)
		ret = dpdk_plan_memory(run, d);
	if (!ret)
		ret = dpdk_build_eal_args(run, d);
	if (!ret)
		ret = dpdk_eal_init(d);
	if (!ret)
		ret = assign_lcores(run, d);
	if (!ret)
		ret = start_ports(run, d);
	if (ret)
		return ret;
	return run->dispatch >= 0 ? dpdk_dispatch_setup(run, d) : 0;
}

static int dpdk_start(struct vz_us_run *run)
{
	struct dpdk *d = run->backend_state;
	unsigned int w;
	int ret;

	if (d->dispatch)
		return dpdk_dispatch_start(run, d);
	for (w = 0; w < run->workers; w++) {
		struct worker *wk = &d->workers[w];

		ret = rte_eal_remote_launch(dpdk_worker_main, wk, wk->lcore);
		if (ret) {
			vz_err("cannot start worker %u on lcore %u: %s", w,
			       wk->lcore, strerror(-ret));
			return ret;
		}
		wk->launched = true;
	}
	return 0;
}

static void dpdk_join(struct vz_us_run *run)
{
	struct dpdk *d = run->backend_state;
	unsigned int w;

	if (d && d->dispatch)
		dpdk_dispatch_join(run, d);
	for (w = 0; d && w < run->workers; w++)
		if (d->workers[w].launched) {
			rte_eal_wait_lcore(d->workers[w].lcore);
			d->workers[w].launched = false;
		}
}

static void dpdk_teardown(struct vz_us_run *run)
{
	struct dpdk *d = run->backend_state;
	char name[IF_NAMESIZE];
	unsigned int w;
	int p, i;

	if (!d)
		return;
	dpdk_dispatch_teardown(d); /* its rings hold mbufs of the ports */
	for (p = 0; p < run->nports; p++) {
		struct port *port = &d->ports[p];

		/*
		 * Closing a net_af_xdp port detaches its XDP program. If the
		 * interface is gone, so is the program, and the PMD's complaint
		 * that it could not detach it would only confuse: the runner
		 * has said what happened.
		 */
		if (port->configured && run->ports[p].ifindex &&
		    !if_indextoname((unsigned int)run->ports[p].ifindex, name))
			rte_log_set_level_pattern("pmd.net.af_xdp*",
						  RTE_LOG_EMERG);
		if (port->started)
			rte_eth_dev_stop(port->id);
		if (port->configured)
			rte_eth_dev_close(port->id);
		if (port->shield_link >= 0)
			close(port->shield_link);
		if (port->shield_prog >= 0)
			close(port->shield_prog);
	}
	if (d->eal_up) {
		rte_eal_cleanup();
		/* empty, even with --in-memory; another process's is not */
		if (d->runtime_dir[0] && !rmdir(d->runtime_dir))
			rmdir(dirname(d->runtime_dir));
	}
	dpdk_hp_release(d);
	for (w = 0; w < VZ_MAX_WORKERS; w++)
		free(d->workers[w].tx);
	free(d->dispatcher.tx);
	for (i = 0; i < d->nargs; i++)
		free(d->args[i]);
	free(d);
	run->backend_state = NULL;
}

static __u64 dpdk_rx_missed(struct vz_us_run *run)
{
	struct dpdk *d = run->backend_state;
	struct rte_eth_stats st;
	bool af_xdp = false;
	__u64 missed = 0;
	int p;

	for (p = 0; d && p < run->nports; p++) {
		if (!d->ports[p].started ||
		    rte_eth_stats_get(d->ports[p].id, &st))
			continue;
		/* no mbuf to receive into: every PMD counts this one */
		missed += st.rx_nombuf;
		if (!strcmp(d->ports[p].driver, "net_af_xdp"))
			af_xdp = true; /* its sockets say more than imissed */
		else
			missed += st.imissed;
	}
	/* Dispatching, a frame can also be lost at a full worker queue. */
	if (d && d->dispatch)
		missed += dpdk_dispatch_missed(d);
	return missed + (af_xdp ? vz_xsk_missed_all() : 0);
}

/* "net_af_xdp (copy mode)", "EAL ports (mlx5_pci, ...)", ... */
static void describe_ports(struct vz_us_run *run, struct dpdk *d, char *ports,
			   size_t len)
{
	size_t off;
	int p;

	if (d->pmd == PMD_AF_XDP) {
		snprintf(ports, len, "net_af_xdp (%s mode)", d->xsk_mode);
	} else if (d->pmd == PMD_AF_PACKET) {
		snprintf(ports, len, "net_af_packet (%s)",
			 d->shield_missing
				 ? "the kernel stack sees every frame too"
				 : "kernel stack kept off by tcx");
	} else {
		off = (size_t)snprintf(ports, len, "EAL ports");
		for (p = 0; p < run->nports && off < len; p++)
			off += (size_t)snprintf(ports + off, len - off, "%s%s",
						p ? ", " : " (",
						d->ports[p].driver);
		if (off < len)
			snprintf(ports + off, len - off, ")");
	}
}

static void describe_memory(struct vz_us_run *run, struct dpdk *d, char *memory,
			    size_t len)
{
	if (run->no_huge)
		snprintf(memory, len, "--no-huge (%zu MiB)",
			 (d->mem_bytes >> 20) + 1);
	else if (d->hp_added)
		snprintf(memory, len,
			 "2 MiB hugepages (%lu reserved by veloz until exit)",
			 d->hp_added);
	else
		snprintf(memory, len, "2 MiB hugepages");
}

static void dpdk_describe(struct vz_us_run *run, char *buf, size_t len)
{
	struct dpdk *d = run->backend_state;
	char memory[128], lcores[128] = "", ports[256] = "", dispatch[128] = "";
	size_t off = 0;
	unsigned int w;

	for (w = 0; w < run->workers && off < sizeof(lcores); w++)
		off += (size_t)snprintf(lcores + off, sizeof(lcores) - off,
					"%s%u@%d", w ? "," : "",
					d->workers[w].lcore, d->workers[w].cpu);
	if (run->dispatch >= 0)
		snprintf(dispatch, sizeof(dispatch),
			 ", dispatcher lcore %u@%d with %s%s",
			 d->dispatcher.lcore, d->dispatcher.cpu,
			 vz_dispatch_policy_name(
				 (enum vz_dispatch_policy)run->dispatch),
			 run->alloc ? " and the core allocator" : "");
	describe_ports(run, d, ports, sizeof(ports));
	describe_memory(run, d, memory, sizeof(memory));
	snprintf(buf, len,
		 "dpdk: %u worker%s (lcore@CPU %s), %u queue%s per port, %s, "
		 "batch %u%s, %s, EAL up in %.2f s%s",
		 run->workers, run->workers == 1 ? "" : "s", lcores,
		 run->queues, run->queues == 1 ? "" : "s", ports, run->batch,
		 run->busy_poll ? ", busy-poll" : "", memory, d->eal_seconds,
		 dispatch);
}

static const char *const dpdk_options[] = {
	"[--pmd af_xdp|af_packet|eal]",
	"[--no-huge]",
	"[--busy-poll]",
	"[--copy]",
	"[--dispatch rss-mod|flow-affinity|buckets [--alloc]]",
	"[-- EAL-ARGUMENTS...]",
	NULL,
};

static const struct vz_backend dpdk_backend = {
	.name = "dpdk",
	.options = dpdk_options,
	.setup = dpdk_setup,
	.start = dpdk_start,
	.join = dpdk_join,
	.teardown = dpdk_teardown,
	.rx_missed = dpdk_rx_missed,
	.describe = dpdk_describe,
	.report = dpdk_dispatch_report,
	.extra = dpdk_dispatch_extra,
};

int main(int argc, char **argv)
{
	return vz_us_main(argc, argv, &dpdk_backend);
}
