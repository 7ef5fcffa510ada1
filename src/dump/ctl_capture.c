// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dump/ctl_capture.h"

#define RCVBUF (8 << 20)

struct client {
	int ctl, listen, dgram; /* dgram: one record per message */
	pid_t run_pid;
	char name[64]; /* our abstract address, without its leading NUL */
	vz_frame_fn fn;
	void *ctx;
	struct vz_ctl_capture_result *res;
	struct {
		struct vz_dump_event ev;
		uint8_t data[VZ_DUMP_SNAP_MAX];
	} rec;
};

/* One request line, one reply line (at most len - 1 bytes). */
static int request(struct client *c, const char *line, char *reply, size_t len)
{
	size_t n = strlen(line), got = 0;
	ssize_t r;

	if (send(c->ctl, line, n, MSG_NOSIGNAL) != (ssize_t)n)
		return -EIO;
	while (got + 1 < len) {
		r = recv(c->ctl, reply + got, 1, 0);
		if (r <= 0)
			return -EIO;
		if (reply[got] == '\n')
			break;
		got++;
	}
	reply[got] = '\0';
	return 0;
}

static int open_sockets(struct client *c, const char *ctl_path, char *err,
			size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	size_t n;

	c->ctl = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ctl_path);
	if (c->ctl < 0 || connect(c->ctl, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockopt(c->ctl, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
		snprintf(err, errlen, "cannot reach the run on %s: %s",
			 ctl_path, strerror(errno));
		return -errno;
	}
	c->run_pid = cred.pid;
	snprintf(c->name, sizeof(c->name), "veloz-dump-%d-%ld", (int)getpid(),
		 (long)time(NULL));
	memset(sa.sun_path, 0, sizeof(sa.sun_path));
	n = strlen(c->name);
	memcpy(sa.sun_path + 1, c->name, n);
	c->listen = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->listen < 0 ||
	    bind(c->listen, (struct sockaddr *)&sa,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
	    listen(c->listen, 1)) {
		snprintf(err, errlen, "cannot open the capture socket: %s",
			 strerror(errno));
		return -errno;
	}
	return 0;
}

/* The run has connected (before it answered ok): it, and nobody else. */
static int accept_run(struct client *c, char *err, size_t errlen)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int size = RCVBUF;

	c->dgram = accept4(c->listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (c->dgram < 0 ||
	    getsockopt(c->dgram, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
		snprintf(err, errlen, "the run did not connect: %s",
			 strerror(errno));
		return -EIO;
	}
	if (cred.pid != c->run_pid) {
		snprintf(err, errlen,
			 "process %d, not the run (%d), connected "
			 "to the capture socket",
			 (int)cred.pid, (int)c->run_pid);
		return -EPERM;
	}
	/* root may pass the rmem_max limit; anyone else gets what they get */
	if (setsockopt(c->dgram, SOL_SOCKET, SO_RCVBUFFORCE, &size,
		       sizeof(size)))
		setsockopt(c->dgram, SOL_SOCKET, SO_RCVBUF, &size,
			   sizeof(size));
	return 0;
}

/* One record: well-formed, or dropped and counted. */
static int receive(struct client *c, int flags)
{
	struct iovec iov = { .iov_base = &c->rec, .iov_len = sizeof(c->rec) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n = recvmsg(c->dgram, &m, flags);
	size_t hdr = sizeof(c->rec.ev);

	if (n < 0)
		return -errno;
	if (n == 0)
		return -ECONNRESET;
	if ((size_t)n < hdr || (m.msg_flags & MSG_TRUNC) ||
	    c->rec.ev.kind != VZ_DUMP_RECORD ||
	    c->rec.ev.caplen != (size_t)n - hdr ||
	    c->rec.ev.caplen > c->rec.ev.len) {
		c->res->refused++;
		return 0;
	}
	c->fn(c->ctx, &c->rec.ev, c->rec.data);
	return 0;
}

static int capture_loop(struct client *c, volatile sig_atomic_t *stop)
{
	struct pollfd p[2] = { { .fd = c->dgram, .events = POLLIN },
			       { .fd = c->ctl, .events = POLLIN } };
	int ret;

	while (!*stop) {
		ret = poll(p, 2, 100);
		if (ret < 0 && errno != EINTR)
			return -errno;
		if (p[1].revents)
			return -ECONNRESET; /* the run stopped */
		if (ret > 0 && (ret = receive(c, MSG_DONTWAIT)) &&
		    ret != -EAGAIN && ret != -EINTR)
			return ret;
	}
	return 0;
}

int vz_ctl_capture(const char *ctl_path, uint32_t snaplen, vz_frame_fn fn,
		   void *ctx, void (*ready)(void *ctx),
		   volatile sig_atomic_t *stop,
		   struct vz_ctl_capture_result *res, char *err, size_t errlen)
{
	struct client *c = calloc(1, sizeof(*c));
	unsigned long long sent, dropped;
	char line[160], reply[160];
	int ret;

	if (!c)
		return snprintf(err, errlen, "out of memory"), -ENOMEM;
	c->ctl = c->listen = c->dgram = -1;
	c->fn = fn;
	c->ctx = ctx;
	c->res = res;
	ret = open_sockets(c, ctl_path, err, errlen);
	if (ret)
		goto out;
	snprintf(line, sizeof(line), "capture @%s %u\n", c->name, snaplen);
	ret = request(c, line, reply, sizeof(reply));
	if (ret || strcmp(reply, "ok")) {
		snprintf(err, errlen, "the run refused the capture: %s",
			 ret ? "it hung up" : reply);
		ret = -EINVAL;
		goto out;
	}
	ret = accept_run(c, err, errlen);
	if (ret)
		goto out;
	ready(ctx);
	ret = capture_loop(c, stop);
	if (ret == -ECONNRESET) {
		snprintf(err, errlen, "the run stopped while capturing");
		goto out;
	}
	/* off first, so that what is left in our socket is final */
	if (request(c, "capture off\n", reply, sizeof(reply)) ||
	    sscanf(reply, "ok %llu %llu", &sent, &dropped) != 2) {
		snprintf(err, errlen, "the run did not switch the capture off");
		ret = -EIO;
	} else {
		res->dropped = dropped;
	}
	while (!receive(c, MSG_DONTWAIT))
		;
out:
	if (c->ctl >= 0)
		close(c->ctl);
	if (c->dgram >= 0)
		close(c->dgram);
	if (c->listen >= 0)
		close(c->listen);
	free(c);
	return ret;
}
