// SPDX-License-Identifier: BSD-2-Clause
/* What veloz-pingpong and veloz-pktgen share. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "common/err.h"
#include "common/parse.h"

#ifdef VZ_APPS_HAVE_VELOZ
#include "veloz/sock.h"
#endif

/*
 * glibc declares the address arguments as a transparent union under
 * _GNU_SOURCE, so its functions' types differ from the table's.
 */
static int vz_k_bind(int fd, const struct sockaddr *a, socklen_t len)
{
	return bind(fd, a, len);
}

static int vz_k_connect(int fd, const struct sockaddr *a, socklen_t len)
{
	return connect(fd, a, len);
}

static ssize_t vz_k_sendto(int fd, const void *buf, size_t len, int flags,
			   const struct sockaddr *to, socklen_t tolen)
{
	return sendto(fd, buf, len, flags, to, tolen);
}

static ssize_t vz_k_recvfrom(int fd, void *buf, size_t len, int flags,
			     struct sockaddr *from, socklen_t *fromlen)
{
	return recvfrom(fd, buf, len, flags, from, fromlen);
}

static int vz_k_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	return sendmmsg(fd, v, n, flags);
}

static int vz_k_getsockname(int fd, struct sockaddr *a, socklen_t *len)
{
	return getsockname(fd, a, len);
}

static const struct vz_app_net vz_app_kernel = {
	.name = "kernel",
	.socket = socket,
	.bind = vz_k_bind,
	.connect = vz_k_connect,
	.sendto = vz_k_sendto,
	.recvfrom = vz_k_recvfrom,
	.send = send,
	.recv = recv,
	.setsockopt = setsockopt,
	.getsockname = vz_k_getsockname,
	.poll = poll,
	.close = close,
	.sendmmsg = vz_k_sendmmsg,
};

#ifdef VZ_APPS_HAVE_VELOZ
static const struct vz_app_net vz_app_veloz = {
	.name = "veloz",
	.socket = vz_socket,
	.bind = vz_bind,
	.connect = vz_connect,
	.sendto = vz_sendto,
	.recvfrom = vz_recvfrom,
	.send = vz_send,
	.recv = vz_recv,
	.setsockopt = vz_setsockopt,
	.getsockname = vz_getsockname,
	.poll = vz_poll,
	.close = vz_close,
	.sendmmsg = vz_sendmmsg,
};

static const struct vz_app_net *vz_app_veloz_stack(const char *prog, int *code)
{
	const char *path = getenv("VZ_UDPD_SOCKET");
	const char *mode = getenv("VZ_MODE");

	if (vz_sock_init(NULL) == 0)
		return &vz_app_veloz;
	if (mode && !strcmp(mode, "direct")) {
		vz_app_err(prog, "cannot start veloz in direct mode: %s",
			   strerror(errno));
		*code = 1;
		return NULL;
	}
	vz_app_err(prog, "cannot reach the veloz poller at %s: %s",
		   path && *path ? path : VZ_UDPD_DEFAULT_SOCKET,
		   strerror(errno));
	*code = 1;
	return NULL;
}
#else
static const struct vz_app_net *vz_app_veloz_stack(const char *prog, int *code)
{
	vz_app_err(prog, "built without libveloz-sock: only --stack kernel");
	*code = 1;
	return NULL;
}
#endif

const struct vz_app_net *vz_app_stack(const char *prog, const char *name,
				      int *code)
{
	if (!strcmp(name, "kernel"))
		return &vz_app_kernel;
	if (!strcmp(name, "veloz"))
		return vz_app_veloz_stack(prog, code);
	vz_app_err(prog, "--stack must be veloz or kernel (got '%s')", name);
	*code = 2;
	return NULL;
}

void vz_app_pin(const char *prog, int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		vz_app_err(prog, "--cpu %d: %s", cpu, strerror(errno));
		exit(1);
	}
}

static void vz_app_vline(const char *prog, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void vz_app_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vz_app_vline(prog, fmt, ap);
	va_end(ap);
	exit(2);
}

void vz_app_err(const char *prog, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vz_app_vline(prog, fmt, ap);
	va_end(ap);
}

int vz_app_parse_addr(const char *text, struct sockaddr_in *out)
{
	const char *colon = strrchr(text, ':');
	char ip[INET_ADDRSTRLEN];
	uint64_t port;

	if (!colon || colon == text || (size_t)(colon - text) >= sizeof(ip))
		return -1;
	memcpy(ip, text, colon - text);
	ip[colon - text] = '\0';
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	if (inet_pton(AF_INET, ip, &out->sin_addr) != 1)
		return -1;
	if (vz_app_parse_u64(colon + 1, 0, 65535, &port) < 0)
		return -1;
	out->sin_port = htons(port);
	return 0;
}

int vz_app_parse_u64(const char *text, uint64_t min, uint64_t max,
		     uint64_t *out)
{
	__u64 v;

	/* a leading digit: no blanks or '+' that strtoull would skip */
	if (*text < '0' || *text > '9' || vz_strtou64(text, 10, min, max, &v))
		return -1;
	*out = v;
	return 0;
}

int vz_app_parse_seconds(const char *text, double max, double *out)
{
	if ((*text < '0' || *text > '9') && *text != '.')
		return -1;
	return vz_strtoseconds(text, max, out) ? -1 : 0;
}

const char *vz_app_addr_str(const struct sockaddr_in *a, char *buf)
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
	sprintf(buf, "%s:%u", ip, ntohs(a->sin_port));
	return buf;
}

volatile sig_atomic_t vz_app_stop;

static void vz_app_on_signal(int sig)
{
	(void)sig;
	vz_app_stop = 1;
}

/* No SA_RESTART: a blocked call returns EINTR and the loop sees the flag. */
void vz_app_catch_signals(void)
{
	struct sigaction sa = { .sa_handler = vz_app_on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

void vz_app_fill(void *buf, size_t size, const struct vz_app_hdr *h)
{
	uint32_t magic = htobe32(h->magic), stream = htobe32(h->stream);
	uint64_t seq = htobe64(h->seq);
	unsigned char *p = buf;

	memcpy(p, &magic, 4);
	memcpy(p + 4, &stream, 4);
	memcpy(p + 8, &seq, 8);
	for (size_t i = VZ_APP_HDR_SIZE; i < size; i++)
		p[i] = (unsigned char)i;
}

void vz_app_set_seq(void *buf, uint64_t seq)
{
	uint64_t be = htobe64(seq);

	memcpy((unsigned char *)buf + 8, &be, 8);
}

int vz_app_parse_hdr(const void *buf, size_t len, uint32_t magic,
		     struct vz_app_hdr *h)
{
	const unsigned char *p = buf;
	uint32_t m, stream;
	uint64_t seq;

	if (len < VZ_APP_HDR_SIZE)
		return -1;
	memcpy(&m, p, 4);
	memcpy(&stream, p + 4, 4);
	memcpy(&seq, p + 8, 8);
	if (be32toh(m) != magic)
		return -1;
	h->magic = magic;
	h->stream = be32toh(stream);
	h->seq = be64toh(seq);
	return 0;
}

uint32_t vz_app_stream_id(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint32_t)(ts.tv_nsec ^ ts.tv_sec * 2654435761u ^
			  (uint32_t)getpid() << 16);
}

int vz_app_opt_addr(const struct vz_option *opt, const char *text, void *dst,
		    void *cfg)
{
	(void)cfg;
	if (vz_app_parse_addr(text, dst) < 0) {
		vz_err("--%s wants IP:PORT (got '%s')", opt->name, text);
		return -EINVAL;
	}
	return 0;
}

int vz_app_opt_seconds(const struct vz_option *opt, const char *text, void *dst,
		       void *cfg)
{
	(void)cfg;
	if (vz_app_parse_seconds(text, VZ_APP_MAX_SECONDS, dst) < 0) {
		vz_err("--%s wants seconds > 0 (got '%s')", opt->name, text);
		return -EINVAL;
	}
	return 0;
}

int vz_app_open_udp(const char *prog, const struct vz_app_net *net,
		    const struct sockaddr_in *bind,
		    const struct sockaddr_in *peer)
{
	char a[32];
	int fd = net->socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0) {
		vz_app_err(prog, "socket: %s", strerror(errno));
		return -1;
	}
	if (bind &&
	    net->bind(fd, (const struct sockaddr *)bind, sizeof(*bind)) < 0) {
		vz_app_err(prog, "bind %s: %s", vz_app_addr_str(bind, a),
			   strerror(errno));
		goto fail;
	}
	if (peer && net->connect(fd, (const struct sockaddr *)peer,
				 sizeof(*peer)) < 0) {
		vz_app_err(prog, "connect %s: %s", vz_app_addr_str(peer, a),
			   strerror(errno));
		goto fail;
	}
	return fd;
fail:
	net->close(fd);
	return -1;
}
