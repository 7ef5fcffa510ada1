// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dpdk backend's EAL arguments, and EAL's start. They say which
 * lcores run where (worker w is lcore w + 1, pinned from the last CPU
 * down; the main lcore floats), how much memory (--in-memory on hugepages,
 * or --no-huge), which ports (a net_af_xdp or net_af_packet vdev per
 * --iface, or for --pmd eal the PCI devices the --iface options name), and
 * then whatever the user gave after "--", which EAL reads last.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>

#include "dpdk/dpdk.h"
#include "dpdk/eal_args.h"
#include "dpdk/hugepages.h"
#include "common/clock.h"

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
bool dpdk_user_gave(const struct vz_us_run *run, const char *const *names)
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

	if (dpdk_user_gave(run, lcore_opts)) {
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
int dpdk_find_steer_object(struct dpdk *d)
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

static int memory_args(struct vz_us_run *run, struct dpdk *d)
{
	static const char *const mem_opts[] = { "-m", "--socket-mem", NULL };
	int ret;

	if (run->no_huge) {
		ret = add_arg(d, "--no-huge") || add_arg(d, "--no-shconf");
		if (!ret && !dpdk_user_gave(run, mem_opts))
			ret = add_arg(d, "-m") ||
			      add_arg(d, "%zu", (d->mem_bytes >> 20) + 1);
		return ret ? -ENOMEM : 0;
	}
	ret = dpdk_hp_reserve(d, (d->mem_bytes + HP_SIZE - 1) / HP_SIZE);
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

/*
 * Which devices EAL probes: for --pmd eal the PCI devices named with
 * --iface (unless the user chose), else our vdevs and no PCI device.
 */
static int device_args(struct vz_us_run *run, struct dpdk *d)
{
	static const char *const pci_opts[] = { "-a", "--allow", "-b",
						"--block", NULL };
	static const char *const iova_opts[] = { "--iova-mode", NULL };

	if (d->pmd == PMD_EAL)
		return dpdk_user_gave(run, pci_opts) ? 0
						     : pci_allow_args(run, d);
	/* vdevs only: leave the PCI devices (the host's NIC) alone */
	if (!dpdk_user_gave(run, pci_opts) && add_arg(d, "--no-pci"))
		return -ENOMEM;
	/* mempools in one piece of virtual memory: one UMEM */
	if (!dpdk_user_gave(run, iova_opts) && add_arg(d, "--iova-mode=va"))
		return -ENOMEM;
	return port_args(run, d);
}

int dpdk_build_eal_args(struct vz_us_run *run, struct dpdk *d)
{
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
	if (!ret)
		ret = device_args(run, d);
	if (ret)
		return ret;
	/* the user's, last: EAL takes the last of a repeated option */
	for (i = 0; i < run->nextra; i++)
		if (add_arg(d, "%s", run->extra_args[i]))
			return -ENOMEM;
	d->args[d->nargs] = NULL;
	return 0;
}

int dpdk_eal_init(struct dpdk *d)
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
