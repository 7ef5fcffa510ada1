// SPDX-License-Identifier: BSD-2-Clause
/*
 * The afxdp backend: NFs run in userspace on frames taken from AF_XDP
 * sockets (libxdp's xsk API).
 *
 * Each worker owns one UMEM, shared by its sockets: one per (port, queue)
 * it serves, each with its own fill and completion rings. Sharing the UMEM
 * is what lets a frame received on one port be sent on another without a
 * copy (REDIRECT). A worker's frames are all its own, so its free list
 * needs no lock. Frames are 4 KiB and the kernel puts the data 256 bytes
 * in: the NF sees the XDP frame geometry (VZ_HEADROOM) exactly.
 *
 * The steering program (steer.bpf.c) is attached to each port and sends
 * the served queues to the sockets. This file sets them up and tears them
 * down; the rx loop is packet_path.c.
 */
#include <errno.h>
#include <libgen.h>
#include <linux/if_xdp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <xdp/xsk.h>

#include "afxdp/afxdp.h"
#include "dispatch/dispatch.h"
#include "runner/xsk_stats.h"

/* ---- setup -----------------------------------------------------------------
 */

static const char *steer_object(char *buf, size_t len)
{
	const char *env = getenv("VELOZ_STEER_OBJ");
	char exe[4096];
	ssize_t n;

	if (env)
		return env;
	/* built beside this executable */
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return "steer.bpf.o";
	exe[n] = 0;
	snprintf(buf, len, "%s/steer.bpf.o", dirname(exe));
	return buf;
}

static int attach_steering(struct vz_us_run *run, struct afxdp *a)
{
	char path[4200], msg[256];
	int p, err;

	steer_object(path, sizeof(path));
	for (p = 0; p < run->nports; p++) {
		a->steer[p] = xdp_program__open_file(path, "xdp", NULL);
		err = (int)libxdp_get_error(a->steer[p]);
		if (err) {
			a->steer[p] = NULL;
			vz_err("cannot open the AF_XDP steering program %s: %s",
			       path, strerror(-err));
			return err;
		}
		err = xdp_program__attach(a->steer[p], run->ports[p].ifindex,
					  run->steer_mode, 0);
		if (err) {
			xdp_program__close(a->steer[p]);
			a->steer[p] = NULL;
			libxdp_strerror(err, msg, sizeof(msg));
			vz_err("cannot attach the AF_XDP steering program to "
			       "%s in %s mode: %s%s",
			       run->ports[p].ifname,
			       vz_xdp_mode_name(run->steer_mode), msg,
			       err == -EOPNOTSUPP ? " (try --mode skb)" : "");
			return err;
		}
	}
	return 0;
}

static int socket_options(struct vz_us_run *run, struct xsk *x)
{
	int on = 1, usecs = 20, budget = (int)run->batch;

	if (!run->busy_poll)
		return 0;
	if (setsockopt(x->fd, SOL_SOCKET, SO_PREFER_BUSY_POLL, &on,
		       sizeof(on)) ||
	    setsockopt(x->fd, SOL_SOCKET, SO_BUSY_POLL, &usecs,
		       sizeof(usecs)) ||
	    setsockopt(x->fd, SOL_SOCKET, SO_BUSY_POLL_BUDGET, &budget,
		       sizeof(budget))) {
		vz_err("--busy-poll: the kernel refused the socket options: %s",
		       strerror(errno));
		return -errno;
	}
	return 0;
}

static bool is_zero_copy(struct xsk *x)
{
	struct xdp_options opts = { 0 };
	socklen_t len = sizeof(opts);

	return !getsockopt(x->fd, SOL_XDP, XDP_OPTIONS, &opts, &len) &&
	       (opts.flags & XDP_OPTIONS_ZEROCOPY);
}

static int open_socket(struct vz_us_run *run, struct afxdp *a, struct worker *w,
		       int p, unsigned int slot, bool first)
{
	struct xsk_socket_config cfg = {
		.rx_size = RING_SIZE,
		.tx_size = RING_SIZE,
		/* our steering program, not libxdp's default one */
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = XDP_USE_NEED_WAKEUP,
	};
	struct xsk_umem_config ucfg = {
		.fill_size = RING_SIZE,
		.comp_size = RING_SIZE,
		.frame_size = FRAME_SIZE,
		.frame_headroom = 0,
	};
	struct vz_us_port *port = &run->ports[p];
	unsigned int queue = w->queue[slot];
	struct xsk *x = calloc(1, sizeof(*x));
	int err, map_fd;

	if (!x)
		return -ENOMEM;
	w->xsk[p][slot] = x;
	if (run->copy == VZ_XSK_COPY)
		cfg.bind_flags |= XDP_COPY;
	else if (run->copy == VZ_XSK_ZEROCOPY)
		cfg.bind_flags |= XDP_ZEROCOPY;
	if (first) {
		err = xsk_umem__create(&w->umem, w->area, w->area_size,
				       &x->fill, &x->comp, &ucfg);
		if (err) {
			vz_err_umem(err, w->area_size);
			return err;
		}
	}
	err = xsk_socket__create_shared(&x->socket, port->ifname, queue,
					w->umem, &x->rx, &x->tx, &x->fill,
					&x->comp, &cfg);
	if (err) {
		x->socket = NULL;
		if (err == -EOPNOTSUPP && run->copy == VZ_XSK_ZEROCOPY)
			vz_err("%s offers no AF_XDP zero-copy; run without "
			       "--zero-copy to use copy mode",
			       port->ifname);
		else
			vz_err("cannot open an AF_XDP socket on %s queue %u: "
			       "%s",
			       port->ifname, queue, strerror(-err));
		return err;
	}
	x->fd = xsk_socket__fd(x->socket);
	err = socket_options(run, x);
	if (err)
		return err;
	a->zero_copy = is_zero_copy(x);
	map_fd = bpf_map__fd(bpf_object__find_map_by_name(
		xdp_program__bpf_obj(a->steer[p]), "xsks_map"));
	err = xsk_socket__update_xskmap(x->socket, map_fd);
	if (err) {
		vz_err("cannot add the socket of %s queue %u to the steering "
		       "map: %s",
		       port->ifname, queue, strerror(-err));
		return err;
	}
	afxdp_refill(w, x);
	return 0;
}

static int setup_worker(struct vz_us_run *run, struct afxdp *a,
			struct worker *w)
{
	unsigned int q, nsockets, frames, i;
	int p, err;

	/* Dispatching, one thread (worker 0) owns every queue. */
	unsigned int stride = run->dispatch >= 0 ? 1 : run->workers;

	w->run = run;
	for (q = w->id; q < run->queues; q += stride) {
		if (w->nqueues == MAX_QUEUES_PER_WORKER) {
			vz_err("at most %d queues per worker; raise --workers",
			       MAX_QUEUES_PER_WORKER);
			return -EINVAL;
		}
		w->queue[w->nqueues++] = q;
	}
	nsockets = w->nqueues * (unsigned int)run->nports;
	frames = nsockets * FRAMES_PER_SOCKET;
	w->area_size = (size_t)frames * FRAME_SIZE;
	w->area = mmap(NULL, w->area_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (w->area == MAP_FAILED) {
		w->area = NULL;
		vz_err("cannot allocate %zu MiB of AF_XDP frames: %s",
		       w->area_size >> 20, strerror(errno));
		return -ENOMEM;
	}
	w->free_frames = calloc(frames, sizeof(*w->free_frames));
	if (!w->free_frames)
		return -ENOMEM;
	for (i = 0; i < frames; i++)
		w->free_frames[w->nfree++] =
			(__u64)(frames - 1 - i) * FRAME_SIZE;
	for (q = 0; q < w->nqueues; q++)
		for (p = 0; p < run->nports; p++) {
			err = open_socket(run, a, w, p, q, !q && !p);
			if (err)
				return err;
		}
	return 0;
}

/* Threads with sockets: every worker, or the dispatcher alone. */
static unsigned int socket_owners(const struct vz_us_run *run)
{
	return run->dispatch >= 0 ? 1 : run->workers;
}

static int afxdp_setup(struct vz_us_run *run)
{
	struct afxdp *a = calloc(1, sizeof(*a));
	unsigned int i;
	int err;

	if (!a)
		return -ENOMEM;
	run->backend_state = a;
	err = attach_steering(run, a);
	if (err)
		return err;
	for (i = 0; i < socket_owners(run); i++) {
		a->workers[i].id = i;
		err = setup_worker(run, a, &a->workers[i]);
		if (err)
			return err;
	}
	if (run->dispatch >= 0) {
		err = afxdp_dispatch_setup(run, a);
		if (err)
			return err;
	}
	if (a->zero_copy || run->copy != VZ_XSK_AUTO)
		return 0;
	fprintf(stderr,
		"veloz: %s offer%s no AF_XDP zero-copy: running in copy mode\n",
		run->nports > 1 ? "the ports" : run->ports[0].ifname,
		run->nports > 1 ? "" : "s");
	return 0;
}

int afxdp_start_thread(pthread_t *thread, void *(*fn)(void *), void *arg,
		       int cpu, const char *what, unsigned int id)
{
	cpu_set_t cpus;
	int err = pthread_create(thread, NULL, fn, arg);

	if (err) {
		vz_err("cannot start %s %u: %s", what, id, strerror(err));
		return -err;
	}
	CPU_ZERO(&cpus);
	CPU_SET(cpu, &cpus);
	pthread_setaffinity_np(*thread, sizeof(cpus), &cpus);
	return 0;
}

static int afxdp_start(struct vz_us_run *run)
{
	struct afxdp *a = run->backend_state;
	long ncpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int i;
	int err;

	if (a->dispatch)
		return afxdp_dispatch_start(run, a);
	for (i = 0; i < run->workers; i++) {
		struct worker *w = &a->workers[i];

		/* one CPU each, from the last one down: CPU 0 takes the rest */
		err = afxdp_start_thread(
			&w->thread, afxdp_worker_main, w,
			(int)((ncpus - 1 - (long)i % ncpus + ncpus) % ncpus),
			"worker", i);
		if (err)
			return err;
		w->running = true;
	}
	return 0;
}

static void afxdp_join(struct vz_us_run *run)
{
	struct afxdp *a = run->backend_state;
	unsigned int i;

	if (a && a->dispatch) {
		afxdp_dispatch_join(run, a);
		return;
	}
	for (i = 0; a && i < run->workers; i++)
		if (a->workers[i].running) {
			pthread_join(a->workers[i].thread, NULL);
			a->workers[i].running = false;
		}
}

static void afxdp_teardown(struct vz_us_run *run)
{
	struct afxdp *a = run->backend_state;
	unsigned int i, q;
	int p, err;

	if (!a)
		return;
	/* Program first: no frame is steered to a socket about to close. */
	for (p = 0; p < run->nports; p++) {
		if (!a->steer[p])
			continue;
		err = xdp_program__detach(a->steer[p], run->ports[p].ifindex,
					  run->steer_mode, 0);
		if (err)
			err = vz_xdp_detach_all(run->ports[p].ifindex);
		if (err && err != -ENODEV)
			vz_err("could not detach the steering program from "
			       "%s: %s",
			       run->ports[p].ifname, strerror(-err));
		xdp_program__close(a->steer[p]);
	}
	afxdp_dispatch_teardown(a);
	for (i = 0; i < socket_owners(run); i++) {
		struct worker *w = &a->workers[i];

		for (q = 0; q < MAX_QUEUES_PER_WORKER; q++)
			for (p = 0; p < VZ_MAX_PORTS; p++) {
				if (!w->xsk[p][q])
					continue;
				if (w->xsk[p][q]->socket)
					xsk_socket__delete(
						w->xsk[p][q]->socket);
				free(w->xsk[p][q]);
			}
		if (w->umem)
			xsk_umem__delete(w->umem);
		if (w->area)
			munmap(w->area, w->area_size);
		free(w->free_frames);
	}
	free(a);
	run->backend_state = NULL;
}

static __u64 afxdp_rx_missed(struct vz_us_run *run)
{
	struct afxdp *a = run->backend_state;
	__u64 missed = 0;
	unsigned int i, q;
	int p;

	if (!a)
		return 0;
	/* Dispatching, a frame can also be lost at a full worker queue. */
	missed = afxdp_dispatch_missed(a);
	for (i = 0; i < socket_owners(run); i++)
		for (q = 0; q < MAX_QUEUES_PER_WORKER; q++)
			for (p = 0; p < VZ_MAX_PORTS; p++)
				if (a->workers[i].xsk[p][q] &&
				    a->workers[i].xsk[p][q]->socket)
					missed += vz_xsk_missed(
						a->workers[i].xsk[p][q]->fd);
	return missed;
}

static void afxdp_describe(struct vz_us_run *run, char *buf, size_t len)
{
	struct afxdp *a = run->backend_state;

	char dispatch[96] = "";

	if (run->dispatch >= 0)
		snprintf(dispatch, sizeof(dispatch),
			 ", dispatcher thread with %s%s",
			 vz_dispatch_policy_name(
				 (enum vz_dispatch_policy)run->dispatch),
			 run->alloc ? " and the core allocator" : "");
	snprintf(buf, len,
		 "afxdp: %u worker%s, %u queue%s per port, %s mode, "
		 "steering program in %s mode, batch %u%s%s",
		 run->workers, run->workers == 1 ? "" : "s", run->queues,
		 run->queues == 1 ? "" : "s",
		 a->zero_copy ? "zero-copy" : "copy",
		 vz_xdp_mode_name(run->steer_mode), run->batch,
		 run->busy_poll ? ", busy-poll" : "", dispatch);
}

static const char *const afxdp_options[] = {
	"[--copy|--zero-copy]",
	"[--busy-poll]",
	"[--mode native|skb]",
	"[--dispatch rss-mod|flow-affinity|buckets [--alloc]]",
	NULL,
};

static const struct vz_backend afxdp_backend = {
	.name = "afxdp",
	.options = afxdp_options,
	.setup = afxdp_setup,
	.start = afxdp_start,
	.join = afxdp_join,
	.teardown = afxdp_teardown,
	.rx_missed = afxdp_rx_missed,
	.describe = afxdp_describe,
	.report = afxdp_dispatch_report,
	.extra = afxdp_dispatch_extra,
};

int main(int argc, char **argv)
{
	return vz_us_main(argc, argv, &afxdp_backend);
}
