// SPDX-License-Identifier: BSD-2-Clause
/*
 * The poller's control protocol under fuzzing: any bytes, as a hostile
 * application could write them on its connection, against a live socket
 * table. Each input is one connection: its bytes are sent, the poller
 * serves them, the connection closes. Whatever was sent, the poller must
 * not crash or trip ASan/UBSan, and once the connection is gone it must
 * hold no application and no socket (a malformed request drops the
 * application; its end frees the rest).
 *
 *   fuzz-sock-ctl [libFuzzer args]
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sock/poller/server.h"

static struct vz_sock_server *srv;
static struct sockaddr_un addr = { .sun_family = AF_UNIX };

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const __u8 *data, size_t size);

static int drop_all(void *opaque, const struct vz_dgram_meta *m,
		    const void *payload, size_t len)
{
	(void)opaque;
	(void)m;
	(void)payload;
	(void)len;
	return 0;
}

static void cleanup(void)
{
	vz_sock_server_free(srv);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct vz_sock_server_config cfg = { .gid = (gid_t)-1,
					     .local_ip4 = htonl(0x0a000001),
					     .default_rcvbuf = 4096,
					     .default_sndbuf = 4096 };
	char err[256];

	(void)argc;
	(void)argv;
	snprintf(addr.sun_path, sizeof(addr.sun_path),
		 "/tmp/fuzz-sock-ctl.%d.sock", (int)getpid());
	cfg.path = addr.sun_path;
	srv = vz_sock_server_new(&cfg, err, sizeof(err));
	if (!srv) {
		fprintf(stderr, "fuzz-sock-ctl: %s\n", err);
		exit(1);
	}
	atexit(cleanup);
	return 0;
}

static void serve(void)
{
	vz_sock_server_poll(srv, drop_all, NULL, 64);
}

int LLVMFuzzerTestOneInput(const __u8 *data, size_t size)
{
	const struct vz_sock_server_stats *st = vz_sock_server_get_stats(srv);
	char buf[4096];
	size_t off = 0;
	int fd, i;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
		abort();
	while (off < size) {
		ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);

		if (n < 0)
			break; /* dropped already, or a full buffer */
		off += (size_t)n;
		serve();
		while (recv(fd, buf, sizeof(buf), 0) > 0)
			;
	}
	shutdown(fd, SHUT_WR);
	for (i = 0; i < 1000 && (st->apps || st->sockets); i++) {
		serve();
		while (recv(fd, buf, sizeof(buf), 0) > 0)
			;
	}
	close(fd);
	for (i = 0; i < 1000 && (st->apps || st->sockets); i++)
		serve();
	if (st->apps || st->sockets) {
		fprintf(stderr, "fuzz-sock-ctl: %llu apps, %llu sockets left\n",
			(unsigned long long)st->apps,
			(unsigned long long)st->sockets);
		abort();
	}
	return 0;
}
