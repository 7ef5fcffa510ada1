/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The socket-library tests' harness (test_sock_calls.c, test_sock_epoll.c,
 * test_sock_procs.c): libveloz-sock against the poller's socket table,
 * without a network. The server runs in a thread on a temporary path, with
 * a send callback that loops datagrams for the stack's own address back
 * through deliver() (as if they came from the stack's address) and refuses
 * any other destination with ENETUNREACH. The application side is the test
 * process, plus forked children where processes matter (death,
 * credentials). Each test program includes it once and starts its own
 * server.
 */
#ifndef VZ_TESTS_SOCK_HARNESS_H
#define VZ_TESTS_SOCK_HARNESS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "check.h"
#include "sock/ring/proto.h"
#include "sock/ring/ring.h"
#include "sock/poller/server.h"
#include "veloz/sock.h"

#define LOCAL_IP htonl(0x0a000001) /* 10.0.0.1, the stack's */
static const __u8 local_ip6[16]
	__attribute__((unused)) = { 0xfd, [15] = 1 }; /* fd00::1 */
#define MAX_SOCKETS 64

static struct vz_sock_server *srv;
static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int srv_stop;
static char dir[64], path[128];

static inline int loop_send(void *opaque, const struct vz_dgram_meta *m,
			    const void *payload, size_t len)
{
	struct vz_dgram_meta back = { .src_ip = LOCAL_IP,
				      .dst_ip = LOCAL_IP,
				      .src_port = m->src_port,
				      .dst_port = m->dst_port };

	(void)opaque;
	if (m->v6) {
		struct vz_dgram_meta back6 = { .v6 = 1,
					       .src_port = m->src_port,
					       .dst_port = m->dst_port };

		if (memcmp(m->dst_ip6, local_ip6, 16))
			return -ENETUNREACH;
		CHECK(!memcmp(m->src_ip6, local_ip6, 16) || !m->src_ip6[0],
		      "IPv6 source ours or the stack's to fill");
		memcpy(back6.src_ip6, local_ip6, 16);
		memcpy(back6.dst_ip6, local_ip6, 16);
		vz_sock_server_deliver(srv, &back6, payload, len);
		return 0;
	}
	if (m->dst_ip != LOCAL_IP)
		return -ENETUNREACH;
	CHECK(m->src_ip == LOCAL_IP && m->src_port, "source filled");
	vz_sock_server_deliver(srv, &back, payload, len);
	return 0;
}

static inline void *srv_main(void *arg)
{
	(void)arg;
	while (!srv_stop) {
		unsigned int n;

		pthread_mutex_lock(&srv_lock);
		n = vz_sock_server_poll(srv, loop_send, NULL, 256);
		pthread_mutex_unlock(&srv_lock);
		if (!n)
			usleep(200);
	}
	return NULL;
}

static inline struct vz_sock_server_stats stats(void)
{
	struct vz_sock_server_stats s;

	pthread_mutex_lock(&srv_lock);
	s = *vz_sock_server_get_stats(srv);
	pthread_mutex_unlock(&srv_lock);
	return s;
}

/* Wait (up to 2 s) until the stats counter at `off` reaches `want`. */
static inline int wait_stat(size_t off, __u64 want)
{
	double end = vz_now_s() + 2;

	while (vz_now_s() < end) {
		struct vz_sock_server_stats s = stats();

		if (*(__u64 *)((char *)&s + off) >= want)
			return 0;
		usleep(1000);
	}
	return -1;
}

#define WAIT_STAT(field, want) \
	wait_stat(offsetof(struct vz_sock_server_stats, field), (want))

static inline struct sockaddr_in sin_of(__be32 ip, __u16 port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = ip,
				   .sin_port = htons(port) };
	return sin;
}

#define SA(x) ((struct sockaddr *)&(x))

/* A socket whose blocking calls give up after 2 s, so no test hangs. */
static inline int udp(void)
{
	struct timeval tv = { 2, 0 };
	int fd = vz_socket(AF_INET, SOCK_DGRAM, 0);

	CHECK(fd >= 0, "vz_socket: %s", strerror(errno));
	CHECK(!vz_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)),
	      "SO_RCVTIMEO");
	CHECK(!vz_setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)),
	      "SO_SNDTIMEO");
	return fd;
}

static inline int bound(__u16 port)
{
	struct sockaddr_in sin = sin_of(0, port);
	int fd = udp();

	CHECK(!vz_bind(fd, SA(sin), sizeof(sin)), "bind %u: %s", port,
	      strerror(errno));
	return fd;
}

static inline __u16 port_of(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	CHECK(!vz_getsockname(fd, SA(sin), &len), "getsockname");
	return ntohs(sin.sin_port);
}

static inline ssize_t send_to(int fd, const void *buf, size_t len, __u16 port)
{
	struct sockaddr_in to = sin_of(LOCAL_IP, port);

	return vz_sendto(fd, buf, len, 0, SA(to), sizeof(to));
}

static pthread_t srv_thread;

/* The server on a fresh temporary directory, and the library connected to it.
 */
static inline int sock_harness_start(void)
{
	struct vz_sock_server_config cfg = { .gid = getgid(),
					     .local_ip4 = LOCAL_IP,
					     .local_ip6 = { 0xfd, [15] = 1 },
					     .max_sockets = MAX_SOCKETS };
	struct stat st;
	char err[256];

	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/vz-sock-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/run/udpd.sock", dir);
	cfg.path = path;
	srv = vz_sock_server_new(&cfg, err, sizeof(err));
	if (!srv) {
		fprintf(stderr, "server: %s\n", err);
		return 1;
	}
	snprintf(err, sizeof(err), "%s/run", dir);
	CHECK(!stat(err, &st) && (st.st_mode & 0777) == 0750, "dir 0750");
	CHECK(!stat(path, &st) && (st.st_mode & 0777) == 0660, "socket 0660");
	pthread_create(&srv_thread, NULL, srv_main, NULL);
	CHECK(!vz_sock_init(path), "vz_sock_init: %s", strerror(errno));
	return 0;
}

/* Disconnect, stop the server, check it removed its socket, tidy up; the
   exit status of the program. */
static inline int sock_harness_stop(void)
{
	char err[256];

	vz_sock_exit();
	srv_stop = 1;
	pthread_join(srv_thread, NULL);
	vz_sock_server_free(srv);
	CHECK(access(path, F_OK) < 0, "socket file removed");
	snprintf(err, sizeof(err), "%s/run", dir);
	rmdir(err);
	snprintf(err, sizeof(err), "%s/c", dir);
	rmdir(err);
	rmdir(dir);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}

#endif
