// SPDX-License-Identifier: BSD-2-Clause
/*
 * libveloz-sock across processes and against a hostile or stuck peer
 * (sock_harness.h): children that die holding sockets, send then close,
 * garbage and corrupt rings on the control socket, listen, limits,
 * credentials, and a poller that hangs.
 */
#include "sock_harness.h"

static void child_hold(int ready)
{
	struct sockaddr_in sin = sin_of(0, 5010);
	int fd = vz_socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0 || vz_bind(fd, SA(sin), sizeof(sin)))
		_exit(1);
	if (write(ready, "A", 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

static void child_echo(int ready)
{
	struct sockaddr_in sin = sin_of(0, 5011), from;
	socklen_t len = sizeof(from);
	char buf[64];
	int fd = vz_socket(AF_INET, SOCK_DGRAM, 0);
	ssize_t n;

	if (fd < 0 || vz_bind(fd, SA(sin), sizeof(sin)))
		_exit(1);
	if (write(ready, "B", 1) != 1)
		_exit(1);
	while ((n = vz_recvfrom(fd, buf, sizeof(buf), 0, SA(from), &len)) > 0) {
		if (n == 4 && !memcmp(buf, "quit", 4))
			_exit(0);
		if (vz_sendto(fd, buf, (size_t)n, 0, SA(from), len) != n)
			_exit(1);
	}
	_exit(1);
}

static pid_t spawn(void (*fn)(int), int ready)
{
	pid_t pid = fork();

	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan if we fail */
		fn(ready);
	}
	return pid;
}

static void test_processes(void)
{
	struct vz_sock_server_stats s0 = stats();
	struct sockaddr_in sin = sin_of(0, 5010);
	int p[2], fd, st = -1;
	pid_t a, b;
	char buf[8];

	CHECK(!pipe(p), "pipe");
	a = spawn(child_hold, p[1]);
	b = spawn(child_echo, p[1]);
	close(p[1]); /* a child that fails closes the pipe */
	CHECK(read(p[0], buf, 1) == 1 && read(p[0], buf + 1, 1) == 1,
	      "children ready");
	fd = udp();
	CHECK(vz_bind(fd, SA(sin), sizeof(sin)) < 0 && errno == EADDRINUSE,
	      "the child holds 5010");
	kill(a, SIGKILL);
	waitpid(a, NULL, 0);
	CHECK(!WAIT_STAT(apps_died, s0.apps_died + 1), "death noticed");
	CHECK(!vz_bind(fd, SA(sin), sizeof(sin)), "5010 free again: %s",
	      strerror(errno));
	CHECK(send_to(fd, "ping", 4, 5011) == 4 &&
		      vz_recv(fd, buf, sizeof(buf), 0) == 4 &&
		      !memcmp(buf, "ping", 4),
	      "the other child still echoes");
	CHECK(send_to(fd, "quit", 4, 5011) == 4, "quit");
	waitpid(b, &st, 0);
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "echo child status %d", st);
	vz_close(fd);
	close(p[0]);
}

/*
 * Datagrams queued just before the socket goes must still be sent: the
 * poller sees the close (or the connection's end) and the transmit ring in
 * the same round, the close first. The server is held still (srv_lock)
 * while the application queues and leaves, so that order is certain.
 */
static void child_send_exit(int ready)
{
	struct sockaddr_in sin = sin_of(0, 0), to = sin_of(LOCAL_IP, 5013);
	int fd = vz_socket(AF_INET, SOCK_DGRAM, 0);
	char go;

	if (fd < 0 || vz_bind(fd, SA(sin), sizeof(sin)))
		_exit(1);
	if (write(ready, "C", 1) != 1 || read(ready, &go, 1) != 1)
		_exit(1);
	/* Only the ring: bound already, no round trip to the poller. */
	if (vz_sendto(fd, "last", 4, 0, SA(to), sizeof(to)) != 4)
		_exit(1);
	_exit(0); /* no close: the connection's EOF frees the socket */
}

static int raw_connect(const char *where);

/* An application that exits right after sendto: its datagram still goes. */
static void check_send_then_exit(int a)
{
	int sp[2], st = -1;
	char buf[8];
	pid_t pid;

	CHECK(!socketpair(AF_UNIX, SOCK_STREAM, 0, sp), "socketpair");
	pid = spawn(child_send_exit, sp[1]);
	CHECK(read(sp[0], buf, 1) == 1, "child ready");
	pthread_mutex_lock(&srv_lock);
	CHECK(write(sp[0], "G", 1) == 1, "go");
	waitpid(pid, &st, 0);
	pthread_mutex_unlock(&srv_lock);
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "child status %d", st);
	CHECK(vz_recv(a, buf, sizeof(buf), 0) == 4 && !memcmp(buf, "last", 4),
	      "sent before exit: %s", strerror(errno));
	close(sp[0]);
	close(sp[1]);
}

/* Queue "close" on the socket's TX ring, then CLOSE it over the control
 * socket in the same breath: the datagram goes before the socket does. */
static void close_behind_datagram(int fd, struct vz_ctl_msg *m, void *shm,
				  int a)
{
	struct vz_ring_rec *rec;
	struct vz_ring tx;
	char buf[8];

	vz_ring_init(&tx, &((struct vz_sock_shm *)shm)->tx,
		     (__u8 *)shm + VZ_SHM_HDR + m->rcvbuf, m->sndbuf);
	*m = (struct vz_ctl_msg){ .type = VZ_CTL_CLOSE,
				  .len = sizeof(*m),
				  .id = m->id };
	pthread_mutex_lock(&srv_lock);
	rec = vz_ring_reserve(&tx, 5);
	CHECK(rec != NULL, "reserve");
	if (rec) {
		*rec = (struct vz_ring_rec){ .len = 5,
					     .addr = LOCAL_IP,
					     .port = htons(5013) };
		memcpy(rec + 1, "close", 5);
		vz_ring_commit(&tx, 5);
	}
	CHECK(send(fd, m, sizeof(*m), 0) == sizeof(*m), "CLOSE");
	pthread_mutex_unlock(&srv_lock);
	CHECK(recv(fd, m, sizeof(*m), MSG_WAITALL) == sizeof(*m) &&
		      m->type == VZ_CTL_CLOSE && !m->err,
	      "CLOSE reply");
	CHECK(vz_recv(a, buf, sizeof(buf), 0) == 5 && !memcmp(buf, "close", 5),
	      "sent before CLOSE: %s", strerror(errno));
}

static void test_send_then_close(void)
{
	struct vz_ctl_msg m = { .type = VZ_CTL_SOCKET,
				.len = sizeof(m),
				.opt = AF_INET };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} c = { 0 };
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = c.buf,
			     .msg_controllen = sizeof(c.buf) };
	int a = bound(5013), fd, efd, memfd = -1;
	size_t len = 0;
	void *shm;

	check_send_then_exit(a);

	/* A socket of our own, by hand: SOCKET, its memfd, the rings mapped. */
	fd = raw_connect(path);
	efd = eventfd(0, EFD_NONBLOCK);
	c.h.cmsg_level = SOL_SOCKET;
	c.h.cmsg_type = SCM_RIGHTS;
	c.h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&c.h), &efd, sizeof(int));
	CHECK(sendmsg(fd, &mh, 0) == sizeof(m), "SOCKET");
	memset(c.buf, 0, sizeof(c.buf));
	mh.msg_controllen = sizeof(c.buf);
	CHECK(recvmsg(fd, &mh, MSG_WAITALL) == sizeof(m) && !m.err,
	      "SOCKET reply");
	if (mh.msg_controllen)
		memcpy(&memfd, CMSG_DATA(&c.h), sizeof(int));
	len = (size_t)VZ_SHM_HDR + m.rcvbuf + m.sndbuf;
	shm = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	CHECK(memfd >= 0 && shm != MAP_FAILED, "mmap");
	if (memfd >= 0 && shm != MAP_FAILED) {
		close_behind_datagram(fd, &m, shm, a);
		munmap(shm, len);
	}
	if (memfd >= 0)
		close(memfd);
	close(efd);
	close(fd);
	vz_close(a);
}

/* ---- hostile applications ---- */

static int raw_connect(const char *where)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 2, 0 };
	struct vz_ctl_msg m;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	CHECK(strlen(where) < sizeof(sa.sun_path), "path length");
	memcpy(sa.sun_path, where, strlen(where));
	CHECK(!connect(fd, SA(sa), sizeof(sa)), "connect");
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	CHECK(recv(fd, &m, sizeof(m), MSG_WAITALL) == sizeof(m) &&
		      m.type == VZ_CTL_WELCOME && !m.err,
	      "welcome");
	return fd;
}

/* Send, then expect to be dropped (EOF) and the drop to be counted. */
static void expect_dropped(const void *msg, size_t len, const char *what)
{
	__u64 bad = stats().bad_requests;
	int fd = raw_connect(path);
	char buf[64];

	CHECK(send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len, "send");
	CHECK(recv(fd, buf, sizeof(buf), 0) == 0, "%s: dropped", what);
	CHECK(!WAIT_STAT(bad_requests, bad + 1), "%s: counted", what);
	close(fd);
}

/* An application that scribbles over its transmit ring's index. */
static void test_corrupt_ring(void)
{
	struct vz_ctl_msg m = { .type = VZ_CTL_SOCKET,
				.len = sizeof(m),
				.opt = AF_INET };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} c = { 0 };
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = c.buf,
			     .msg_controllen = sizeof(c.buf) };
	__u64 bad = stats().bad_requests;
	int fd = raw_connect(path), efd = eventfd(0, EFD_NONBLOCK), memfd;
	struct vz_sock_shm *shm;
	char buf[64];

	c.h.cmsg_level = SOL_SOCKET;
	c.h.cmsg_type = SCM_RIGHTS;
	c.h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&c.h), &efd, sizeof(int));
	CHECK(sendmsg(fd, &mh, 0) == sizeof(m), "SOCKET");
	memset(c.buf, 0, sizeof(c.buf));
	mh.msg_controllen = sizeof(c.buf);
	CHECK(recvmsg(fd, &mh, MSG_WAITALL) == sizeof(m) && !m.err,
	      "SOCKET reply");
	memcpy(&memfd, CMSG_DATA(&c.h), sizeof(int));
	CHECK(ftruncate(memfd, 4096) < 0, "sealed against shrinking");
	shm = mmap(NULL, VZ_SHM_HDR, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
		   0);
	CHECK(shm != MAP_FAILED, "mmap");
	__atomic_store_n(&shm->tx.head, 3u, __ATOMIC_RELEASE);
	CHECK(recv(fd, buf, sizeof(buf), 0) == 0, "dropped");
	CHECK(!WAIT_STAT(bad_requests, bad + 1), "counted");
	munmap(shm, VZ_SHM_HDR);
	close(memfd);
	close(efd);
	close(fd);
}

static void test_garbage(void)
{
	struct vz_ctl_msg m = { .type = VZ_CTL_BIND, .len = sizeof(m) };
	char junk[sizeof(m)];
	int a, b;
	char buf[4];

	memset(junk, 0xff, sizeof(junk));
	expect_dropped(junk, sizeof(junk), "garbage");
	m.id = 999;
	expect_dropped(&m, sizeof(m), "unknown socket id");
	m.type = VZ_CTL_SOCKET;
	m.id = 0;
	m.opt = AF_INET;
	expect_dropped(&m, sizeof(m), "SOCKET without an eventfd");
	test_corrupt_ring();

	a = bound(5012);
	b = udp();
	CHECK(send_to(b, "ok", 2, 5012) == 2 && vz_recv(a, buf, 4, 0) == 2,
	      "the server lives on");
	vz_close(a);
	vz_close(b);
}

/* ---- the listening socket ---- */

static void test_listen(void)
{
	struct vz_sock_server_config cfg = { .path = path,
					     .gid = (gid_t)-1,
					     .local_ip4 = LOCAL_IP };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vz_sock_server *other;
	char err[256] = "", stale[128];
	int fd;

	other = vz_sock_server_new(&cfg, err, sizeof(err));
	CHECK(!other && errno == EADDRINUSE && *err, "a second poller: %s (%s)",
	      strerror(errno), err);
	snprintf(stale, sizeof(stale), "%s/stale.sock", dir);
	memcpy(sa.sun_path, stale, strlen(stale));
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(!bind(fd, SA(sa), sizeof(sa)), "bind");
	close(fd); /* the file stays, as when a poller dies */
	cfg.path = stale;
	other = vz_sock_server_new(&cfg, err, sizeof(err));
	CHECK(other != NULL, "stale file replaced: %s", err);
	vz_sock_server_free(other);
	CHECK(access(stale, F_OK) < 0, "removed at exit");
	fd = open(stale, O_CREAT | O_WRONLY, 0600);
	close(fd);
	other = vz_sock_server_new(&cfg, err, sizeof(err));
	CHECK(!other && errno == EADDRINUSE, "a regular file is kept");
	unlink(stale);
}

static void test_limits(void)
{
	int fds[MAX_SOCKETS + 1], n = 0, i;

	while (n <= MAX_SOCKETS) {
		fds[n] = vz_socket(AF_INET, SOCK_DGRAM, 0);
		if (fds[n] < 0)
			break;
		n++;
	}
	CHECK(n == MAX_SOCKETS && errno == ENOBUFS, "ENOBUFS after %d: %s", n,
	      strerror(errno));
	CHECK(stats().sockets == MAX_SOCKETS, "at the limit");
	for (i = 0; i < n; i++)
		vz_close(fds[i]);
	CHECK(!WAIT_STAT(sockets, 0) || stats().sockets == 0, "all freed");
	CHECK(stats().sockets == 0, "%llu left",
	      (unsigned long long)stats().sockets);
}

/* ---- credentials (root only: children become nobody) ---- */

static int child_creds(const char *where, gid_t extra, int want_errno)
{
	gid_t g = extra;
	struct sockaddr_in sin = sin_of(0, 80);
	int fd;

	if (setgroups(extra ? 1 : 0, &g) || setgid(65534) || setuid(65534))
		return 2;
	if (want_errno)
		return vz_sock_init(where) < 0 && errno == want_errno ? 0 : 3;
	if (vz_sock_init(where))
		return 4;
	fd = vz_socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		return 5;
	/* Below 1024 needs root, as in the kernel. */
	return vz_bind(fd, SA(sin), sizeof(sin)) < 0 && errno == EACCES ? 0 : 6;
}

static void test_creds(void)
{
	struct vz_sock_server_config cfg = { .gid = 4242,
					     .local_ip4 = LOCAL_IP };
	struct vz_sock_server *s3;
	char p3[160], err[256];
	pid_t pid[2];
	int i;

	if (geteuid() != 0) {
		fprintf(stderr, "test_creds: skipped (not root)\n");
		return;
	}
	snprintf(p3, sizeof(p3), "%s/c/udpd.sock", dir);
	cfg.path = p3;
	s3 = vz_sock_server_new(&cfg, err, sizeof(err));
	CHECK(s3 != NULL, "server: %s", err);
	if (!s3)
		return;
	/* Let nobody reach the socket: the credentials must refuse it. */
	chmod(dir, 0755);
	snprintf(err, sizeof(err), "%s/c", dir);
	chmod(err, 0755);
	chmod(p3, 0666);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		if (!pid[i]) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			_exit(child_creds(p3, i ? 4242 : 0, i ? 0 : EACCES));
		}
	}
	for (i = 0; i < 2; i++) {
		double end = vz_now_s() + 5;
		int st = -1;

		while (!waitpid(pid[i], &st, WNOHANG) && vz_now_s() < end) {
			vz_sock_server_poll(s3, loop_send, NULL, 16);
			usleep(500);
		}
		CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "creds child %d: %d",
		      i, WEXITSTATUS(st));
	}
	CHECK(vz_sock_server_get_stats(s3)->apps_refused == 1 &&
		      vz_sock_server_get_stats(s3)->apps_total == 1,
	      "one refused, one accepted");
	vz_sock_server_free(s3);
}

/* ---- a hung poller (stopped or stuck): every wait is bounded ---- */

static struct vz_sock_server *hung_srv;
static pthread_mutex_t hung_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int hung_paused, hung_stop;

static int no_send(void *opaque, const struct vz_dgram_meta *m,
		   const void *payload, size_t len)
{
	(void)opaque, (void)m, (void)payload, (void)len;
	return -ENETUNREACH;
}

/* The child's poller; while hung_paused it does nothing, as if stopped. */
static void *hung_main(void *arg)
{
	(void)arg;
	while (!hung_stop) {
		unsigned int n = 0;

		pthread_mutex_lock(&hung_lock);
		if (!hung_paused)
			n = vz_sock_server_poll(hung_srv, no_send, NULL, 64);
		pthread_mutex_unlock(&hung_lock);
		if (!n)
			usleep(200);
	}
	return NULL;
}

static __u64 hung_sockets(void)
{
	__u64 n;

	pthread_mutex_lock(&hung_lock);
	n = vz_sock_server_get_stats(hung_srv)->sockets;
	pthread_mutex_unlock(&hung_lock);
	return n;
}

/* In a child (the parent's link is to the main poller): 0, or the step
 * that failed. */
static int child_hung(const char *silent, const char *where)
{
	struct vz_sock_server_config cfg = { .path = where,
					     .gid = (gid_t)-1,
					     .local_ip4 = LOCAL_IP };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sockaddr_in sin = sin_of(0, 0);
	char err[256];
	pthread_t th;
	double t0, took, end;
	int lfd, fd1, fd2, fd3;

	setenv("VZ_UDPD_TIMEOUT_MS", "300", 1);
	/* A poller that never accepts: connect() succeeds on its backlog and
	 * the welcome never comes. */
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (strlen(silent) >= sizeof(sa.sun_path))
		return 2;
	memcpy(sa.sun_path, silent, strlen(silent) + 1);
	if (lfd < 0 || bind(lfd, SA(sa), sizeof(sa)) || listen(lfd, 4))
		return 2;
	t0 = vz_now_s();
	if (!vz_sock_init(silent) || errno != ETIMEDOUT)
		return 3;
	took = vz_now_s() - t0;
	if (took < 0.25 || took > 3)
		return 4;
	close(lfd);
	unlink(silent);

	hung_srv = vz_sock_server_new(&cfg, err, sizeof(err));
	if (!hung_srv)
		return 5;
	pthread_create(&th, NULL, hung_main, NULL);
	if (vz_sock_init(where))
		return 6;
	fd1 = vz_socket(AF_INET, SOCK_DGRAM, 0);
	if (fd1 < 0)
		return 7;
	/* Stopped: the request times out and the link is dropped. */
	pthread_mutex_lock(&hung_lock); /* not in the middle of a poll */
	hung_paused = 1;
	pthread_mutex_unlock(&hung_lock);
	t0 = vz_now_s();
	fd2 = vz_socket(AF_INET, SOCK_DGRAM, 0);
	if (fd2 >= 0 || errno != ETIMEDOUT) {
		fprintf(stderr, "hung poller: socket() gave %d (%s)\n", fd2,
			strerror(errno));
		return 8;
	}
	if (vz_now_s() - t0 > 3)
		return 9;
	/* fd1 lived on that link: said at once, and close still closes. */
	if (!vz_bind(fd1, SA(sin), sizeof(sin)) || errno != ECONNRESET)
		return 10;
	if (vz_close(fd1) || vz_is_socket(fd1))
		return 11;
	/* Running again: the next socket reconnects and works, and the
	 * poller has freed what the dropped link held. */
	hung_paused = 0;
	fd3 = vz_socket(AF_INET, SOCK_DGRAM, 0);
	if (fd3 < 0 || vz_bind(fd3, SA(sin), sizeof(sin)))
		return 12;
	end = vz_now_s() + 2;
	while (hung_sockets() != 1 && vz_now_s() < end)
		usleep(1000);
	if (hung_sockets() != 1)
		return 13;
	vz_close(fd3);
	vz_sock_exit();
	hung_stop = 1;
	pthread_join(th, NULL);
	vz_sock_server_free(hung_srv);
	return 0;
}

static void test_hung_poller(void)
{
	char silent[160], where[160];
	double end = vz_now_s() + 20;
	int st = -1;
	pid_t pid;

	snprintf(silent, sizeof(silent), "%s/silent.sock", dir);
	snprintf(where, sizeof(where), "%s/h/udpd.sock", dir);
	pid = fork();
	if (!pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(child_hung(silent, where));
	}
	while (!waitpid(pid, &st, WNOHANG) && vz_now_s() < end)
		usleep(10000);
	if (vz_now_s() >= end) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "hung poller: step %d",
	      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	unlink(silent);
	snprintf(silent, sizeof(silent), "%s/h", dir);
	rmdir(silent);
}

int main(void)
{
	if (sock_harness_start())
		return 1;
	test_processes();
	test_send_then_close();
	test_garbage();
	test_listen();
	test_limits();
	test_creds();
	test_hung_poller();
	return sock_harness_stop();
}
