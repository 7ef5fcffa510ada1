// SPDX-License-Identifier: BSD-2-Clause
/*
 * The control socket (ctl.h): one client at a time on a thread, root or
 * the --ctl-group only, each connection a session of request lines, closed
 * when its client falls silent for the idle time.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/peercred.h"

#include "common/clock.h"
#include "ctl/ctl_internal.h"

#define POLL_MS 200

/* ---- the socket ---------------------------------------------------------- */

static unsigned int idle_ms(const struct vz_ctl *ctl)
{
	return ctl->idle_ms ? ctl->idle_ms : VZ_CTL_IDLE_MS_DEFAULT;
}

/*
 * A client that stops reading fills the socket: wait for room in slices,
 * so that a stopping run is not held, and give up after the idle time
 * without progress, so that a stopped client does not hold the session.
 */
static int write_all(struct vz_ctl *ctl, int fd, const char *data, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	double limit = idle_ms(ctl) / 1e3, since = vz_now_s();

	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (ctl->stop || vz_now_s() - since > limit)
				return -1;
			poll(&pfd, 1, POLL_MS);
			continue;
		}
		if (n <= 0)
			return -1;
		data += n;
		len -= (size_t)n;
		since = vz_now_s();
	}
	return 0;
}

/* A reply with a descriptor (the handover's memfd), in one message; the
 * reply is a short line, so one sendmsg carries it whole or fails. */
static int send_with_fd(int fd, struct buf *out, int *pass_fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control = { 0 };
	struct iovec iov = { .iov_base = out->data, .iov_len = out->len };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	ssize_t n;

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), pass_fd, sizeof(int));
	n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	close(*pass_fd);
	*pass_fd = -1;
	return n == (ssize_t)out->len ? 0 : -1;
}

/* The client was silent too long: say so (if it ever reads), count it. */
static void close_idle(struct vz_ctl *ctl, int fd, bool in_tx)
{
	char msg[160];
	int n;

	n = snprintf(msg, sizeof(msg),
		     "error closed: no request for %.1f s%s\n",
		     idle_ms(ctl) / 1e3,
		     in_tx ? "; its transaction was rolled back" : "");
	if (send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* its buffer is full or it left: the hang-up says enough */
	}
	__atomic_add_fetch(&ctl->idle_closed, 1, __ATOMIC_RELAXED);
}

/* Execute the complete lines in `in`; the replies go to `out`. */
static void execute_lines(struct session *s, struct buf *in, struct buf *out)
{
	char *start = in->data, *nl;

	out->len = 0;
	while ((nl = memchr(start, '\n',
			    in->len - (size_t)(start - in->data)))) {
		*nl = '\0';
		vz_ctl_execute(s, start, out);
		start = nl + 1;
	}
	in->len -= (size_t)(start - in->data);
	memmove(in->data, start, in->len);
}

static void serve(struct vz_ctl *ctl, int fd)
{
	struct buf in = { 0 }, out = { 0 };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	double limit = idle_ms(ctl) / 1e3, heard = vz_now_s();
	struct session s;

	if (vz_ctl_session_init(&s, ctl))
		goto out;
	while (!ctl->stop) {
		ssize_t n;

		if (poll(&pfd, 1, POLL_MS) <= 0) {
			if (vz_now_s() - heard <= limit)
				continue;
			close_idle(ctl, fd, s.in_tx);
			break;
		}
		if (vz_ctl_buf_reserve(&in, 65536))
			break;
		n = read(fd, in.data + in.len, in.cap - in.len);
		if (n <= 0)
			break;
		in.len += (size_t)n;
		execute_lines(&s, &in, &out);
		if (in.len > LINE_MAX_BYTES)
			break; /* no line is that long: not our client */
		if (s.pass_fd >= 0
			    ? send_with_fd(fd, &out, &s.pass_fd)
			    : out.len && write_all(ctl, fd, out.data, out.len))
			break;
		/* the silence is the client's from our last reply on */
		heard = vz_now_s();
	}
	/* a client gone mid-transaction leaves nothing half-done */
	if (s.in_tx)
		vz_ctl_roll_back(&s);
	vz_ctl_session_free(&s);
out:
	free(in.data);
	free(out.data);
	close(fd);
}

/* Root or the configured group only, whatever the socket's mode: a
 * refused peer gets one line and the hang-up. */
static bool refuse(struct vz_ctl *ctl, int fd)
{
	static const char msg[] = "error permission denied: root or the "
				  "run's --ctl-group only\n";
	uid_t uid;

	if (vz_peer_allowed(fd, ctl->gid, &uid))
		return false;
	__atomic_add_fetch(&ctl->refused, 1, __ATOMIC_RELAXED);
	if (send(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* it left already */
	}
	return true;
}

static void *server_thread(void *arg)
{
	struct vz_ctl *ctl = arg;
	struct pollfd pfd = { .fd = ctl->listen_fd, .events = POLLIN };

	while (!ctl->stop) {
		int fd;

		if (poll(&pfd, 1, POLL_MS) <= 0)
			continue;
		fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (refuse(ctl, fd))
			close(fd);
		else
			serve(ctl, fd);
	}
	return NULL;
}

/*
 * The directory is 0755 whoever runs: it is shared by every run on the
 * machine, each with its own group or none, so the sockets' modes (and
 * refuse()) guard them, not the directory's.
 */
static int make_dirs(const char *dir)
{
	char path[108];
	char *slash;

	snprintf(path, sizeof(path), "%s", dir);
	for (slash = strchr(path + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			return -errno;
		*slash = '/';
	}
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	return chmod(path, 0755) ? -errno : 0;
}

int vz_ctl_socket_path(const char *port, char *path, size_t len, char *err,
		       size_t errlen)
{
	const char *dir = getenv("VELOZ_CTL_DIR");
	struct sockaddr_un addr;
	struct stat ns;
	int ret;

	if (!dir || !*dir)
		dir = "/run/veloz/ctl";
	if (stat("/proc/self/ns/net", &ns)) {
		snprintf(err, errlen, "control socket: no network namespace");
		return -EINVAL;
	}
	ret = snprintf(path, len, "%s/net%lu-%s.sock", dir,
		       (unsigned long)ns.st_ino, port);
	if (ret < 0 || (size_t)ret >= len ||
	    (size_t)ret >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "control socket path too long in %s",
			 dir);
		return -ENAMETOOLONG;
	}
	return 0;
}

int vz_ctl_listen(struct vz_ctl *ctl, gid_t gid, char *err, size_t errlen)
{
	const char *dir = getenv("VELOZ_CTL_DIR");
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd, ret;

	if (!dir || !*dir)
		dir = "/run/veloz/ctl";
	if (!ctl->nports) {
		snprintf(err, errlen, "control socket: no port");
		return -EINVAL;
	}
	ret = vz_ctl_socket_path(ctl->ports[0], ctl->path, sizeof(ctl->path),
				 err, errlen);
	if (ret) {
		ctl->path[0] = '\0';
		return ret;
	}
	ret = make_dirs(dir);
	if (ret) {
		snprintf(err, errlen, "cannot create %s: %s", dir,
			 strerror(-ret));
		ctl->path[0] = '\0';
		return ret;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(addr.sun_path, ctl->path, strlen(ctl->path) + 1);
	/* The port is ours (claimed before this), so a file here is stale. */
	unlink(ctl->path);
	ctl->gid = gid;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    (gid != VZ_ROOT_ONLY && chown(ctl->path, 0, gid)) ||
	    chmod(ctl->path, gid != VZ_ROOT_ONLY ? 0660 : 0600) ||
	    listen(fd, 8)) {
		ret = -errno;
		snprintf(err, errlen, "control socket %s: %s", ctl->path,
			 strerror(errno));
		close(fd);
		unlink(ctl->path);
		ctl->path[0] = '\0';
		return ret;
	}
	ctl->listen_fd = fd;
	ctl->stop = 0;
	ret = pthread_create(&ctl->thread, NULL, server_thread, ctl);
	if (ret) {
		snprintf(err, errlen, "control socket thread: %s",
			 strerror(ret));
		vz_ctl_close(ctl);
		return -ret;
	}
	ctl->serving = true;
	return 0;
}

void vz_ctl_publish_counters(struct vz_ctl *ctl, const char *line, size_t len)
{
	char *copy;

	if (ctl->listen_fd < 0)
		return;
	while (len && line[len - 1] == '\n')
		len--;
	copy = malloc(len + 1);
	if (!copy)
		return; /* the reader sees the line before: stale, not wrong */
	memcpy(copy, line, len);
	copy[len] = '\0';
	pthread_mutex_lock(&ctl->counters_lock);
	free(ctl->counters);
	ctl->counters = copy;
	ctl->counters_len = len;
	pthread_mutex_unlock(&ctl->counters_lock);
}

void vz_ctl_close(struct vz_ctl *ctl)
{
	ctl->stop = 1;
	/* wakes the server thread's poll on it now, not at its timeout */
	if (ctl->listen_fd >= 0)
		shutdown(ctl->listen_fd, SHUT_RDWR);
	if (ctl->serving)
		pthread_join(ctl->thread, NULL);
	ctl->serving = false;
	if (ctl->listen_fd >= 0)
		close(ctl->listen_fd);
	ctl->listen_fd = -1;
	if (ctl->path[0])
		unlink(ctl->path);
	ctl->path[0] = '\0';
	pthread_mutex_lock(&ctl->counters_lock);
	free(ctl->counters);
	ctl->counters = NULL;
	ctl->counters_len = 0;
	pthread_mutex_unlock(&ctl->counters_lock);
}
