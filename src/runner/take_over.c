// SPDX-License-Identifier: BSD-2-Clause
/*
 * --take-over on the userspace backends (take_over.h): the successor's
 * side of the handover, and the pause the old run's workers take.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "runner/userspace.h"

/* How long the workers may take to reach their pause point. */
#define PARK_WAIT_S 2.0
/* The handover writes every map: a full routing table takes seconds. */
#define REPLY_WAIT_S 60
/* How long a run told to leave may take to close its ports. */
#define LEAVE_WAIT_S 10.0

void vz_us_park(struct vz_us_run *run)
{
	__atomic_add_fetch(&run->parked, 1, __ATOMIC_ACQ_REL);
	while (run->pause && !run->stop)
		usleep(100);
	__atomic_sub_fetch(&run->parked, 1, __ATOMIC_ACQ_REL);
}

int vz_us_pause(void *arg, bool on)
{
	struct vz_us_run *run = arg;
	double until = vz_now_s() + PARK_WAIT_S;

	if (!on) {
		run->pause = 0;
		return 0;
	}
	run->pause = 1;
	while (__atomic_load_n(&run->parked, __ATOMIC_ACQUIRE) < run->workers) {
		if (vz_now_s() > until) {
			run->pause = 0;
			return -ETIMEDOUT;
		}
		usleep(50);
	}
	return 0;
}

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the successor's side ------------------------------------------------ */

static int connect_to(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = REPLY_WAIT_S };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/*
 * Send one request and read its one-line reply into line (NUL-ended, no
 * newline); a descriptor that comes with it goes to *passed (or -1).
 */
static int ask(int fd, const char *request, char *line, size_t len, int *passed)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	size_t have = 0;

	if (passed)
		*passed = -1;
	if (send(fd, request, strlen(request), MSG_NOSIGNAL) !=
	    (ssize_t)strlen(request))
		return -errno;
	while (have + 1 < len && !memchr(line, '\n', have)) {
		struct iovec iov = { line + have, len - 1 - have };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
		struct cmsghdr *c;
		ssize_t n;

		msg.msg_control = control.buf;
		msg.msg_controllen = sizeof(control.buf);
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
			if (passed && c->cmsg_level == SOL_SOCKET &&
			    c->cmsg_type == SCM_RIGHTS)
				memcpy(passed, CMSG_DATA(c), sizeof(int));
		have += (size_t)n;
	}
	line[have] = '\0';
	line[strcspn(line, "\n")] = '\0';
	return 0;
}

/* The running run's NF must be ours; on a userspace backend. */
static int check_running(struct vz_us_run *run, int fd, const char *ifname)
{
	char line[256], nf[64], backend[32];
	int err = ask(fd, "info\n", line, sizeof(line), NULL);

	if (err || sscanf(line, "ok %63s %31s", nf, backend) != 2) {
		vz_err("--take-over: the run on %s did not answer: %s", ifname,
		       err ? strerror(-err) : line);
		return 1;
	}
	if (strcmp(nf, run->nf.name)) {
		vz_err("--take-over: %s runs %s, not %s", ifname, nf,
		       run->nf.name);
		return 2;
	}
	if (!strcmp(backend, "xdp") || !strcmp(backend, "xdp-generic")) {
		vz_err("--take-over: %s runs %s at the XDP hook; take it over "
		       "with the %s backend",
		       ifname, nf, backend);
		return 2;
	}
	return 0;
}

static int receive_state(struct vz_us_run *run, int fd)
{
	char line[256], err[512];
	int state, ret, pid;
	double at;

	ret = ask(fd, "handover\n", line, sizeof(line), &state);
	if (ret || sscanf(line, "ok %d %lf", &pid, &at) != 2 || state < 0) {
		vz_err("--take-over: no handover: %s",
		       ret ? strerror(-ret) : line);
		if (state >= 0)
			close(state);
		return 1;
	}
	ret = vz_ctl_restore(&run->ctl, state, err, sizeof(err));
	close(state);
	if (ret) {
		/* hanging up lets the old run's workers go on */
		vz_err("--take-over: the running %s's state does not fit "
		       "this build: %s",
		       run->nf.name, err);
		return 2;
	}
	run->handover.old_pid = pid;
	run->handover.paused_at = at;
	return 0;
}

int vz_us_take_over(struct vz_us_run *run)
{
	const char *ifname = run->ports[0].ifname;
	char path[108], err[256];
	int fd, ret, i;

	if (!run->take_over)
		return 0;
	if (vz_ctl_socket_path(ifname, path, sizeof(path), err, sizeof(err))) {
		vz_err("%s", err);
		return 1;
	}
	fd = connect_to(path);
	if (fd < 0) {
		vz_err("--take-over: no veloz run on %s to take over (%s: %s)",
		       ifname, path, strerror(-fd));
		return 2;
	}
	ret = check_running(run, fd, ifname);
	if (!ret)
		ret = receive_state(run, fd);
	if (ret) {
		close(fd);
		return ret;
	}
	run->handover.fd = fd;
	run->adopted = true;
	for (i = 0; i < run->nports; i++)
		run->claim_later[i] = true;
	return 0;
}

int vz_claim_left_ports(struct vz_us_run *run, double until)
{
	char err[256];
	int i, ret;

	for (i = 0; i < run->nports; i++) {
		if (!run->claim_later[i])
			continue;
		while ((ret = vz_iface_lock(&run->ports[i].lock,
					    run->ports[i].ifindex,
					    run->ports[i].ifname, err,
					    sizeof(err))) == -EBUSY &&
		       vz_now_s() < until)
			usleep(2000);
		if (ret)
			return ret;
		run->claim_later[i] = false;
	}
	return 0;
}

/*
 * Wait until the leaving run released the ports' locks (at its exit, or
 * a zombie's), without keeping them: claiming them after this checks
 * what is on each port, as for any run. 0 or -errno.
 */
static int wait_ports_free(struct vz_us_run *run, double until)
{
	int ret = vz_claim_left_ports(run, until), i;

	for (i = 0; i < run->nports; i++) {
		if (run->ports[i].lock.fd >= 0)
			close(run->ports[i].lock.fd); /* the file stays */
		run->ports[i].lock.fd = -1;
	}
	return ret;
}

int vz_us_take_over_finish(struct vz_us_run *run)
{
	struct vz_handover *h = &run->handover;
	char line[256];
	int ret;

	if (h->fd < 0)
		return 0;
	ret = ask(h->fd, "leave\n", line, sizeof(line), NULL);
	close(h->fd);
	h->fd = -1;
	if (ret || strncmp(line, "ok", 2)) {
		vz_err("--take-over: pid %d did not take \"leave\": %s",
		       h->old_pid, ret ? strerror(-ret) : line);
		return -1;
	}
	if (!wait_ports_free(run, vz_now_s() + LEAVE_WAIT_S))
		return 0;
	fprintf(stderr, "veloz: pid %d did not leave in %.0f s; killing it\n",
		h->old_pid, LEAVE_WAIT_S);
	kill(h->old_pid, SIGKILL);
	if (wait_ports_free(run, vz_now_s() + 2)) {
		vz_err("the ports are still held after pid %d was killed",
		       h->old_pid);
		return -1;
	}
	return 0;
}

void vz_us_take_over_report(struct vz_us_run *run)
{
	struct vz_handover *h = &run->handover;

	if (!h->old_pid)
		return;
	h->gap_ms = (wall_now() - h->paused_at) * 1e3;
	fprintf(stderr,
		"veloz: pid %d left; %s is this run's now, its state carried "
		"over; no frame was processed for %.1f ms\n",
		h->old_pid, run->nf.name, h->gap_ms);
}
