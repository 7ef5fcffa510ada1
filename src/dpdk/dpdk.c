// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dpdk backend: NFs run on DPDK lcores, on frames taken from DPDK ports
 * with rte_eth_rx_burst().
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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/ethtool.h>
#include <linux/filter.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dispatch/dispatch.h"
#include "dpdk/dpdk.h"
#include "runtime/clock.h"
#include "runtime/userspace.h"
#include "runtime/xsk_stats.h"

#define RX_DESC 1024 /* also the AF_XDP rx and tx ring sizes */
#define TX_DESC 1024
/*
 * mbufs per (port, queue): net_af_xdp keeps 2048 on its fill ring and up
 * to a tx ring plus a completion ring of them in flight; then a burst, the
 * lcore caches and the TAP's spare.
 */
#define POOL_MBUFS 8191
#define POOL_MBUFS_COPY 2047 /* net_af_packet: a burst, caches, TAP */
#define POOL_CACHE 256
#define TAP_POLL_EVERY 64 /* loop iterations between looks at the TAPs */
#define TAP_BUDGET 32 /* frames taken from a TAP at a time */

#define HP_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB"
#define HP_SIZE (2ul << 20)
/* EAL's own allocations beside the mempools (measured: under 4 MiB) */
#define EAL_OVERHEAD (16ul << 20)
#define RUN_DIR "/run/veloz"
#define HP_RECORD "dpdk-hugepages-"

/* The kernel's tcx ingress hook (Linux 6.6), newer than our headers. */
#define VZ_TCX_INGRESS 46

#define PRIV_SIZE                                                     \
	(VZ_HEADROOM > RTE_PKTMBUF_HEADROOM                           \
		 ? RTE_ALIGN_CEIL(VZ_HEADROOM - RTE_PKTMBUF_HEADROOM, \
				  RTE_MBUF_PRIV_ALIGN)                \
		 : 0)

/* ---- receive ------------------------------------------------------------- */

/* One burst from port p's queue q: returns the frames received. */
static uint16_t poll_rx(struct worker *w, int p, uint16_t q,
			struct vz_worker_counters *c)
{
	struct vz_us_run *run = w->run;
	struct rte_mbuf *pkts[VZ_US_BATCH_MAX];
	uint16_t n, i;
	int action, out;

	n = rte_eth_rx_burst(w->d->ports[p].id, q, pkts, (uint16_t)run->batch);
	for (i = 0; i < n; i++) {
		struct rte_mbuf *m = pkts[i];
		struct vz_ctx ctx;
		__u8 *data;

		if (i + 1 < n)
			rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void *));
		if (!rx_valid(m, c))
			continue;
		data = rte_pktmbuf_mtod(m, __u8 *);
		ctx = (struct vz_ctx){
			.data = data,
			.data_end = data + m->data_len,
			.data_hard_start = data - VZ_HEADROOM,
			.ingress_port = (__u32)p,
		};
		action = vz_us_process(run, &ctx, c);
		if (action == VZ_TX)
			out = p;
		else if (action == VZ_REDIRECT_VERDICT)
			out = (int)ctx.redirect_port;
		else
			out = -1;
		if (out < 0) {
			rte_pktmbuf_free(m);
			continue;
		}
		if (unlikely(out >= run->nports ||
			     set_frame(m, ctx.data, ctx.data_end))) {
			c->tx_failed++;
			rte_pktmbuf_free(m);
			continue;
		}
		queue_tx(w, out, q, m, c);
	}
	return n;
}

void dpdk_drain_taps(struct worker *w, uint16_t q, struct vz_worker_counters *c)
{
	struct vz_us_run *run = w->run;
	struct rte_mbuf *m;
	size_t len;
	int p, budget;

	for (p = 0; p < run->nports; p++) {
		for (budget = TAP_BUDGET; budget; budget--) {
			m = w->spare;
			if (!m) {
				m = rte_pktmbuf_alloc(w->d->ports[p].pool[q]);
				if (!m)
					break;
			}
			len = vz_tap_recv(&run->ports[p].tap,
					  rte_pktmbuf_mtod(m, void *),
					  rte_pktmbuf_tailroom(m));
			if (!len) {
				w->spare = m;
				break;
			}
			w->spare = NULL;
			m->data_len = (uint16_t)len;
			m->pkt_len = (uint32_t)len;
			c->from_kernel++;
			queue_tx(w, p, q, m, c);
		}
	}
	flush_all(w, q, c);
}

static int worker_main(void *arg)
{
	struct worker *w = arg;
	struct vz_us_run *run = w->run;
	struct vz_worker_counters *c = &run->counters[w->id];
	unsigned long loops = 0;
	unsigned int i;
	int p;

	vz_us_worker_enter(w->id);
	while (!run->stop) {
		for (i = 0; i < w->nqueues; i++) {
			for (p = 0; p < run->nports; p++)
				poll_rx(w, p, w->queue[i], c);
			flush_all(w, w->queue[i], c);
		}
		if (w->id == 0 && ++loops % TAP_POLL_EVERY == 0)
			dpdk_drain_taps(w, w->queue[0], c);
	}
	if (w->spare) {
		rte_pktmbuf_free(w->spare);
		w->spare = NULL;
	}
	return 0;
}

/* ---- hugepages ----------------------------------------------------------- */

static int read_ulong(const char *path, unsigned long *out)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%lu", out) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

static int write_ulong(const char *path, unsigned long value)
{
	FILE *f = fopen(path, "we");
	int ret = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%lu\n", value) < 0)
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

#define HP_LOCK RUN_DIR "/dpdk-hugepages.lock"

/*
 * Serialises the runs' changes to the pool. The lock file goes when it is
 * released, so a taker checks that the file it locked is still the one
 * of that name.
 */
static int hp_lock(void)
{
	struct stat held, named;
	int fd;

	mkdir(RUN_DIR, 0755);
	for (;;) {
		fd = open(HP_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		if (flock(fd, LOCK_EX) || fstat(fd, &held)) {
			close(fd);
			return -1;
		}
		if (!stat(HP_LOCK, &named) && named.st_ino == held.st_ino &&
		    named.st_dev == held.st_dev)
			return fd;
		close(fd);
	}
}

static void hp_unlock(int fd)
{
	if (fd < 0)
		return;
	unlink(HP_LOCK);
	close(fd);
}

/*
 * The persistent pool, what writing nr_hugepages sets. Reading it gives
 * the surplus too: pages in use when the pool was lowered, such as those
 * an AF_XDP UMEM held, which the kernel unpins only some time after the
 * process has gone.
 */
static int hp_persistent(unsigned long *out)
{
	unsigned long nr, surplus;
	int ret = read_ulong(HP_DIR "/nr_hugepages", &nr);

	if (!ret)
		ret = read_ulong(HP_DIR "/surplus_hugepages", &surplus);
	if (!ret)
		*out = nr > surplus ? nr - surplus : 0;
	return ret;
}

/* Lower the persistent pool by n (not below zero). */
static int hp_lower(unsigned long n)
{
	unsigned long nr;
	int ret = hp_persistent(&nr);

	if (ret)
		return ret;
	return write_ulong(HP_DIR "/nr_hugepages", nr > n ? nr - n : 0);
}

static bool is_live_run(int pid)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	return !strncmp(comm, "vz-dpdk", 7);
}

/* Give back what runs killed before their teardown had reserved. */
static void hp_reclaim(void)
{
	char path[PATH_MAX], *end;
	unsigned long pages;
	struct dirent *ent;
	long pid;
	DIR *dir = opendir(RUN_DIR);

	if (!dir)
		return;
	while ((ent = readdir(dir))) {
		if (strncmp(ent->d_name, HP_RECORD, strlen(HP_RECORD)))
			continue;
		pid = strtol(ent->d_name + strlen(HP_RECORD), &end, 10);
		if (*end || pid <= 0 || pid == getpid() ||
		    is_live_run((int)pid))
			continue;
		snprintf(path, sizeof(path), RUN_DIR "/%s", ent->d_name);
		if (!read_ulong(path, &pages) && pages && !hp_lower(pages))
			fprintf(stderr,
				"veloz: gave back %lu hugepages that a killed "
				"vz-dpdk run (pid %ld) had reserved\n",
				pages, pid);
		unlink(path);
	}
	closedir(dir);
}

/* Make `need` 2 MiB hugepages available, raising nr_hugepages if short. */
static int hp_reserve(struct dpdk *d, unsigned long need)
{
	unsigned long nr, free_pages, resv, avail, want, got = 0;
	int lock = hp_lock(), ret;

	if (lock < 0) {
		vz_err("cannot lock " HP_LOCK ": %s", strerror(errno));
		return -errno;
	}
	hp_reclaim();
	ret = hp_persistent(&nr);
	if (!ret)
		ret = read_ulong(HP_DIR "/free_hugepages", &free_pages);
	if (!ret)
		ret = read_ulong(HP_DIR "/resv_hugepages", &resv);
	if (ret) {
		vz_err("this kernel offers no 2 MiB hugepages (%s: %s); use "
		       "--no-huge",
		       HP_DIR, strerror(-ret));
		goto out;
	}
	avail = free_pages > resv ? free_pages - resv : 0;
	if (avail >= need)
		goto out;
	want = need - avail;
	/* recorded first: a kill right after the raise is still undone */
	snprintf(d->hp_record, sizeof(d->hp_record), RUN_DIR "/" HP_RECORD "%d",
		 (int)getpid());
	ret = write_ulong(d->hp_record, want);
	if (ret) {
		vz_err("cannot write %s: %s", d->hp_record, strerror(-ret));
		d->hp_record[0] = '\0';
		goto out;
	}
	ret = write_ulong(HP_DIR "/nr_hugepages", nr + want);
	if (ret) {
		/* read-only sysfs (a container), or no permission */
		vz_err("cannot raise " HP_DIR "/nr_hugepages to %lu: %s; "
		       "reserve hugepages beforehand or use --no-huge",
		       nr + want, strerror(-ret));
		goto out;
	}
	ret = hp_persistent(&got);
	got = !ret && got > nr ? got - nr : 0;
	d->hp_added = got;
	if (got)
		write_ulong(d->hp_record, got);
	if (got < want) {
		vz_err("cannot reserve %lu more 2 MiB hugepages (the kernel "
		       "found %lu; memory too fragmented?); free memory or "
		       "use --no-huge",
		       want, got);
		ret = -ENOMEM;
	}
out:
	hp_unlock(lock);
	return ret;
}

static void hp_release(struct dpdk *d)
{
	int lock, ret;

	if (!d->hp_record[0])
		return;
	lock = hp_lock();
	if (d->hp_added) {
		ret = hp_lower(d->hp_added);
		if (ret)
			vz_err("could not give back %lu hugepages "
			       "(nr_hugepages): %s",
			       d->hp_added, strerror(-ret));
	}
	unlink(d->hp_record);
	hp_unlock(lock);
	d->hp_record[0] = '\0';
}

/* ---- EAL arguments ------------------------------------------------------- */

static int add_arg(struct dpdk *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int add_arg(struct dpdk *d, const char *fmt, ...)
{
	va_list ap;
	char *arg;
	int n;

	if (d->nargs == MAX_EAL_ARGS - 1) {
		vz_err("too many EAL arguments");
		return -E2BIG;
	}
	va_start(ap, fmt);
	n = vasprintf(&arg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	d->args[d->nargs++] = arg;
	return 0;
}

/* Did the user's EAL arguments (after "--") give one of these options? */
static bool user_gave(const struct vz_us_run *run, const char *const *names)
{
	const char *const *name;
	size_t len;
	int i;

	for (i = 0; i < run->nextra; i++)
		for (name = names; *name; name++) {
			len = strlen(*name);
			if (strncmp(run->extra_args[i], *name, len))
				continue;
			/* "--opt", "--opt=x"; "-l", "-l0-3" */
			if (!run->extra_args[i][len] ||
			    run->extra_args[i][len] == '=' || (*name)[1] != '-')
				return true;
		}
	return false;
}

/* "(0-3,6)": the CPUs this process may run on, for the main lcore. */
static int cpu_list(const cpu_set_t *set, int *cpus, char *buf, size_t len)
{
	size_t off = 0;
	int n = 0, i, j;

	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, set))
			cpus[n++] = i;
	off += (size_t)snprintf(buf + off, len - off, "(");
	for (i = 0; i < n && off < len; i = j + 1) {
		for (j = i; j + 1 < n && cpus[j + 1] == cpus[j] + 1; j++)
			;
		if (j == i)
			off += (size_t)snprintf(buf + off, len - off, "%s%d",
						i ? "," : "", cpus[i]);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s%d-%d",
						i ? "," : "", cpus[i], cpus[j]);
	}
	if (off < len)
		snprintf(buf + off, len - off, ")");
	return n;
}

static int lcore_args(struct vz_us_run *run, struct dpdk *d)
{
	static const char *const lcore_opts[] = {
		"-l", "-c", "--lcores", "--main-lcore", NULL,
	};
	static char map[16384];
	static int cpus[CPU_SETSIZE];
	char all[4096];
	cpu_set_t set;
	size_t off;
	unsigned int w, first;
	int n;

	if (user_gave(run, lcore_opts)) {
		for (w = 0; w < run->workers; w++)
			d->workers[w].cpu = -1;
		d->dispatcher.cpu = -1;
		return 0;
	}
	if (sched_getaffinity(0, sizeof(set), &set)) {
		vz_err("cannot read the CPUs this process may use: %s",
		       strerror(errno));
		return -errno;
	}
	n = cpu_list(&set, cpus, all, sizeof(all));
	off = (size_t)snprintf(map, sizeof(map), "0@%s", all);
	/* Dispatching, the dispatcher comes first (the last CPU), as afxdp's.
	 */
	first = run->dispatch >= 0 ? 1 : 0;
	for (w = 0; w < run->workers && off < sizeof(map); w++) {
		d->workers[w].cpu =
			cpus[n - 1 - (int)((w + first) % (unsigned int)n)];
		off += (size_t)snprintf(map + off, sizeof(map) - off, ",%u@%d",
					w + 1, d->workers[w].cpu);
	}
	if (first && off < sizeof(map)) {
		d->dispatcher.cpu = cpus[n - 1];
		snprintf(map + off, sizeof(map) - off, ",%u@%d",
			 run->workers + 1, d->dispatcher.cpu);
	}
	return add_arg(d, "--lcores") || add_arg(d, "%s", map) ? -ENOMEM : 0;
}

/* Our build's steering program: $VELOZ_STEER_OBJ, or built beside us. */
static int find_steer_object(struct dpdk *d)
{
	static const char *const beside[] = { "../afxdp/steer.bpf.o",
					      "steer.bpf.o" };
	const char *env = getenv("VELOZ_STEER_OBJ");
	char exe[PATH_MAX], *dir;
	ssize_t n;
	size_t i;

	if (env) {
		snprintf(d->steer_path, sizeof(d->steer_path), "%s", env);
	} else {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = '\0';
		dir = dirname(exe);
		for (i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
			snprintf(d->steer_path, sizeof(d->steer_path), "%s/%s",
				 dir, beside[i]);
			if (!access(d->steer_path, R_OK))
				break;
		}
	}
	if (!realpath(d->steer_path, exe)) {
		vz_err("cannot find the AF_XDP steering program (%s: %s); "
		       "build veloz or set VELOZ_STEER_OBJ",
		       d->steer_path, strerror(errno));
		return -ENOENT;
	}
	snprintf(d->steer_path, sizeof(d->steer_path), "%s", exe);
	/* EAL's devargs are comma- and equals-separated */
	if (strpbrk(d->steer_path, ",= ")) {
		vz_err("the steering program's path cannot hold ',', '=' or "
		       "spaces for DPDK: %s",
		       d->steer_path);
		return -EINVAL;
	}
	return 0;
}

/* Combined channels of an interface, as net_af_xdp counts them. */
static int combined_channels(const char *ifname)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct ifreq ifr = { 0 };
	int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), n = 1;

	if (sock < 0)
		return 1;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	ifr.ifr_data = (void *)&ch;
	if (!ioctl(sock, SIOCETHTOOL, &ifr) && ch.max_combined)
		n = (int)ch.combined_count;
	close(sock);
	return n;
}

static int port_args(struct vz_us_run *run, struct dpdk *d)
{
	struct vz_us_port *port;
	char extra[64] = "";
	int p, ret = 0;

	for (p = 0; p < run->nports && !ret; p++) {
		port = &run->ports[p];
		if (d->pmd == PMD_AF_PACKET) {
			if (d->ring_frame)
				snprintf(extra, sizeof(extra),
					 ",framesz=%u,blocksz=%u",
					 d->ring_frame, d->ring_block);
			ret = add_arg(d, "--vdev") ||
			      add_arg(d, "net_af_packet%d,iface=%s,qpairs=%u%s",
				      p, port->ifname, run->queues, extra);
			continue;
		}
		if ((unsigned int)combined_channels(port->ifname) <
		    run->queues) {
			vz_err("--queues %u: net_af_xdp (DPDK 22.11) needs as "
			       "many combined channels on %s, which has %d "
			       "(veth has none: one queue); use --pmd "
			       "af_packet, or the afxdp backend",
			       run->queues, port->ifname,
			       combined_channels(port->ifname));
			return -EINVAL;
		}
		snprintf(extra, sizeof(extra), ",busy_budget=%u%s",
			 run->busy_poll ? run->batch : 0,
			 run->copy == VZ_XSK_COPY ? ",force_copy=1" : "");
		ret = add_arg(d, "--vdev") ||
		      add_arg(d,
			      "net_af_xdp%d,iface=%s,start_queue=0,"
			      "queue_count=%u,xdp_prog=%s%s",
			      p, port->ifname, run->queues, d->steer_path,
			      extra);
	}
	return ret ? -ENOMEM : 0;
}

/* Mempool sizes, and the memory EAL must find for them. */
static int plan_memory(struct vz_us_run *run, struct dpdk *d)
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

static int memory_args(struct vz_us_run *run, struct dpdk *d)
{
	static const char *const mem_opts[] = { "-m", "--socket-mem", NULL };
	int ret;

	if (run->no_huge) {
		ret = add_arg(d, "--no-huge") || add_arg(d, "--no-shconf");
		if (!ret && !user_gave(run, mem_opts))
			ret = add_arg(d, "-m") ||
			      add_arg(d, "%zu", (d->mem_bytes >> 20) + 1);
		return ret ? -ENOMEM : 0;
	}
	ret = hp_reserve(d, (d->mem_bytes + HP_SIZE - 1) / HP_SIZE);
	if (ret)
		return ret;
	return add_arg(d, "--in-memory") ? -ENOMEM : 0;
}

/* "0000:3b:00.0" or "3b:00.0": a PCI address, as EAL's -a takes it. */
static bool is_pci_address(const char *name)
{
	unsigned int domain, bus, dev, fn;
	int end = 0;

	if (sscanf(name, "%x:%x:%x.%x%n", &domain, &bus, &dev, &fn, &end) ==
		    4 &&
	    !name[end])
		return true;
	end = 0;
	return sscanf(name, "%x:%x.%x%n", &bus, &dev, &fn, &end) == 3 &&
	       !name[end];
}

/*
 * --pmd eal without the user's own -a/-b: probe the PCI devices the
 * --iface options name, and no other (EAL would otherwise try every
 * device of the machine, the one carrying its SSH session included).
 */
static int pci_allow_args(struct vz_us_run *run, struct dpdk *d)
{
	int p, named = 0;

	for (p = 0; p < run->nports; p++) {
		if (!is_pci_address(run->ports[p].ifname))
			continue;
		named++;
		if (add_arg(d, "-a") || add_arg(d, "%s", run->ports[p].ifname))
			return -ENOMEM;
	}
	return !named && add_arg(d, "--no-pci") ? -ENOMEM : 0;
}

static int build_eal_args(struct vz_us_run *run, struct dpdk *d)
{
	static const char *const pci_opts[] = { "-a", "--allow", "-b",
						"--block", NULL };
	static const char *const iova_opts[] = { "--iova-mode", NULL };
	int ret, i;

	ret = add_arg(d, "vz-dpdk");
	if (!ret)
		ret = memory_args(run, d);
	if (ret)
		return ret;
	/*
	 * No telemetry socket (left in /var/run/dpdk by kill -9). EAL's notices
	 * and warnings (hugepage sizes it finds none of, PCI devices it cannot
	 * use) only when asked with --log-level; the PMDs' warnings stay.
	 */
	if (add_arg(d, "--no-telemetry") || add_arg(d, "--log-level=warning") ||
	    add_arg(d, "--log-level=lib.eal:error"))
		return -ENOMEM;
	ret = lcore_args(run, d);
	if (ret)
		return ret;
	if (d->pmd == PMD_EAL && !user_gave(run, pci_opts)) {
		/* the PCI devices named with --iface, and no others */
		ret = pci_allow_args(run, d);
		if (ret)
			return ret;
	}
	if (d->pmd != PMD_EAL) {
		/* vdevs only: leave the PCI devices (the host's NIC) alone */
		if (!user_gave(run, pci_opts) && add_arg(d, "--no-pci"))
			return -ENOMEM;
		/* mempools in one piece of virtual memory: one UMEM */
		if (!user_gave(run, iova_opts) && add_arg(d, "--iova-mode=va"))
			return -ENOMEM;
		ret = port_args(run, d);
		if (ret)
			return ret;
	}
	for (i = 0; i < run->nextra; i++)
		if (add_arg(d, "%s", run->extra_args[i]))
			return -ENOMEM;
	d->args[d->nargs] = NULL;
	return 0;
}

static int eal_init(struct dpdk *d)
{
	char *argv[MAX_EAL_ARGS];
	sigset_t stop_sigs, old;
	char line[2048];
	size_t off = 0;
	double start;
	int i, ret, out;

	/* rte_eal_init() permutes its argv: ours stays intact for errors */
	memcpy(argv, d->args, sizeof(argv[0]) * (size_t)(d->nargs + 1));
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGINT);
	sigaddset(&stop_sigs, SIGTERM);
	sigaddset(&stop_sigs, SIGHUP);
	sigaddset(&stop_sigs, SIGPIPE);
	/* EAL's threads inherit the mask: signals go to the main thread */
	pthread_sigmask(SIG_BLOCK, &stop_sigs, &old);
	rte_openlog_stream(stderr);
	/* EAL prints its usage on stdout: keep that for the counters */
	fflush(stdout);
	out = dup(STDOUT_FILENO);
	if (out >= 0)
		dup2(STDERR_FILENO, STDOUT_FILENO);
	start = vz_now_s();
	ret = rte_eal_init(d->nargs, argv);
	d->eal_seconds = vz_now_s() - start;
	fflush(stdout);
	if (out >= 0) {
		dup2(out, STDOUT_FILENO);
		close(out);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret < 0) {
		for (i = 1; i < d->nargs && off < sizeof(line); i++)
			off += (size_t)snprintf(line + off, sizeof(line) - off,
						" %s", d->args[i]);
		vz_err("DPDK's EAL did not start: %s (EAL arguments:%s)",
		       rte_strerror(rte_errno), line);
		return -1;
	}
	d->eal_up = true;
	snprintf(d->runtime_dir, sizeof(d->runtime_dir), "%s",
		 rte_eal_get_runtime_dir());
	return 0;
}

/* ---- ports --------------------------------------------------------------- */

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

static int setup_port(struct vz_us_run *run, struct dpdk *d, int p)
{
	struct port *port = &d->ports[p];
	const char *ifname = run->ports[p].ifname;
	struct rte_eth_conf conf = { 0 };
	struct rte_eth_dev_info info;
	struct rte_ether_addr mac;
	uint16_t rxd = RX_DESC, txd = TX_DESC, q, mtu;
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
	if (info.max_rx_queues < run->queues ||
	    info.max_tx_queues < run->queues) {
		vz_err("--queues %u: DPDK port %s (%s) has at most %u",
		       run->queues, ifname, port->driver,
		       RTE_MIN(info.max_rx_queues, info.max_tx_queues));
		return -EINVAL;
	}
	if (run->queues > 1 && d->pmd == PMD_EAL) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf =
			(RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP) &
			info.flow_type_rss_offloads;
		if (!conf.rx_adv_conf.rss_conf.rss_hf) {
			vz_err("--queues %u: DPDK port %s (%s) cannot spread "
			       "frames over queues (no RSS)",
			       run->queues, ifname, port->driver);
			return -EINVAL;
		}
	}
	if (run->dispatch >= 0 && d->pmd == PMD_EAL)
		dpdk_dispatch_port_conf(&info, &conf);
	if (d->pmd == PMD_EAL) {
		/* a port with no kernel interface: the run learns its address
		 */
		if (!rte_eth_macaddr_get(port->id, &mac))
			memcpy(run->ports[p].mac, mac.addr_bytes, 6);
		if (!rte_eth_dev_get_mtu(port->id, &mtu))
			run->ports[p].mtu = mtu;
	}
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
			       q, ifname, port->driver, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/*
 * net_af_packet only taps the interface: the kernel stack would receive
 * every frame too. A tcx ingress program (after the taps, before the stack)
 * drops them for the kernel; PASS still reaches it through the TAP. A tcx
 * link belongs to this process: it goes when the process does.
 */
static void shield(struct vz_us_run *run, struct dpdk *d, int p)
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
static const char *xsk_mode(void)
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
static int skip_outgoing(void)
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

/* ---- the backend --------------------------------------------------------- */

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

static int dpdk_setup(struct vz_us_run *run)
{
	struct dpdk *d = calloc(1, sizeof(*d));
	unsigned int w, lcore;
	int p, ret;

	if (!d)
		return -ENOMEM;
	run->backend_state = d;
	for (p = 0; p < VZ_MAX_PORTS; p++) {
		d->ports[p].shield_prog = -1;
		d->ports[p].shield_link = -1;
	}
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
	if (run->no_huge ||
	    user_gave(run, (const char *const[]){ "--no-huge", NULL }))
		run->no_huge = true;
	ret = plan_workers(run, d);
	if (!ret && d->pmd == PMD_AF_XDP)
		ret = find_steer_object(d);
	if (ret)
		return ret;
	ret = plan_memory(run, d);
	if (!ret)
		ret = build_eal_args(run, d);
	if (ret)
		return ret;
	ret = eal_init(d);
	if (ret)
		return ret;
	/* one lcore per worker and the dispatcher, besides the main one */
	lcore = rte_get_next_lcore(-1, 1, 0);
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
	for (p = 0; p < run->nports; p++) {
		ret = setup_port(run, d, p);
		if (ret)
			return ret;
		if (d->pmd == PMD_AF_PACKET)
			shield(run, d, p);
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
		d->xsk_mode = xsk_mode();
	ret = skip_outgoing();
	if (ret < 0) {
		vz_err("cannot keep net_af_packet from receiving what its "
		       "interface sends: %s",
		       strerror(-ret));
		return ret;
	}
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

		ret = rte_eal_remote_launch(worker_main, wk, wk->lcore);
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
	hp_release(d);
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

static void dpdk_describe(struct vz_us_run *run, char *buf, size_t len)
{
	struct dpdk *d = run->backend_state;
	char memory[128], lcores[128] = "", ports[256] = "", dispatch[128] = "";
	size_t off = 0;
	unsigned int w;
	int p;

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
	if (d->pmd == PMD_AF_XDP) {
		snprintf(ports, sizeof(ports), "net_af_xdp (%s mode)",
			 d->xsk_mode);
	} else if (d->pmd == PMD_AF_PACKET) {
		snprintf(ports, sizeof(ports), "net_af_packet (%s)",
			 d->shield_missing
				 ? "the kernel stack sees every frame too"
				 : "kernel stack kept off by tcx");
	} else {
		off = (size_t)snprintf(ports, sizeof(ports), "EAL ports");
		for (p = 0; p < run->nports && off < sizeof(ports); p++)
			off += (size_t)snprintf(
				ports + off, sizeof(ports) - off, "%s%s",
				p ? ", " : " (", d->ports[p].driver);
		if (off < sizeof(ports))
			snprintf(ports + off, sizeof(ports) - off, ")");
	}
	if (run->no_huge)
		snprintf(memory, sizeof(memory), "--no-huge (%zu MiB)",
			 (d->mem_bytes >> 20) + 1);
	else if (d->hp_added)
		snprintf(memory, sizeof(memory),
			 "2 MiB hugepages (%lu reserved by veloz until exit)",
			 d->hp_added);
	else
		snprintf(memory, sizeof(memory), "2 MiB hugepages");
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
};

int main(int argc, char **argv)
{
	return vz_us_main(argc, argv, &dpdk_backend);
}
