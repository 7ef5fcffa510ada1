// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "ctl/capture.h"
#include "ctl/ctl_internal.h"

int vz_capture_fd = -1;

static __u32 snaplen;
static __u64 sent, dropped;
/*
 * A socket switched off is closed only at the next switch-on or at the
 * end: a worker may still hold it from its current burst, and closing it
 * under that worker could send to whatever reused the number.
 */
static int retired = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void vz_capture_copy(struct vz_capture_rec *r, const struct vz_ctx *ctx,
		     unsigned int worker)
{
	__u32 len = (__u32)(ctx->data_end - ctx->data);
	__u32 cap = len < snaplen ? len : snaplen;

	if (cap > VZ_DUMP_SNAP_MAX)
		cap = VZ_DUMP_SNAP_MAX;
	r->ev = (struct vz_dump_event){
		.kind = VZ_DUMP_RECORD,
		.len = len + (__u32)ctx->frags_len,
		.caplen = cap,
		.ifindex = ctx->ingress_port,
		.queue = worker,
		.ts_ns = vz_now_ns(),
	};
	memcpy(r->data, ctx->data, cap);
}

/* Off, from whichever side: the client asked, or it is gone. */
static void switch_off(int fd)
{
	pthread_mutex_lock(&lock);
	if (__atomic_compare_exchange_n(&vz_capture_fd, &fd, -1, false,
					__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
		if (retired >= 0)
			close(retired);
		retired = fd;
	}
	pthread_mutex_unlock(&lock);
}

void vz_capture_send(int fd, struct vz_capture_rec *r, int action, __u32 port)
{
	r->ev.action = action;
	r->ev.port = port;
	if (send(fd, r, offsetof(struct vz_capture_rec, data) + r->ev.caplen,
		 MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
		__atomic_fetch_add(&sent, 1, __ATOMIC_RELAXED);
		return;
	}
	if (errno == EAGAIN || errno == ENOBUFS || errno == EINTR)
		__atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
	else
		switch_off(fd); /* the client hung up */
}

/* A name the replies can echo: error lines are printable text (fuzz-ctl
 * found "cannot reach" echoing a name's raw bytes). vz-dump's names are. */
static bool printable(const char *name)
{
	for (; *name; name++)
		if (*name < 0x21 || *name > 0x7e)
			return false;
	return true;
}

/* "capture @NAME SNAPLEN": connect to the client's abstract socket. */
static int switch_on(const char *name, const char *snap, struct buf *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	char *end;
	unsigned long v = strtoul(snap, &end, 10);
	int fd, bufsize = 8 << 20;

	if (name[0] != '@' || n < 2 || n > sizeof(sa.sun_path) ||
	    !printable(name) || *end || !v || v > VZ_DUMP_SNAP_MAX) {
		vz_ctl_buf_printf(out, "error capture @NAME SNAPLEN (1..%u)\n",
				  VZ_DUMP_SNAP_MAX);
		return -EINVAL;
	}
	if (__atomic_load_n(&vz_capture_fd, __ATOMIC_RELAXED) >= 0) {
		/* before connecting: a refused client sees no connection */
		vz_ctl_buf_printf(out, "error a capture is on already\n");
		return -EBUSY;
	}
	memcpy(sa.sun_path + 1, name + 1, n - 1); /* abstract: leading NUL */
	/* records, each whole or not at all, bounded by bytes rather than by
	 * a datagram queue's length (net.unix.max_dgram_qlen: 10) */
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bufsize,
				  sizeof(bufsize)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize,
			   sizeof(bufsize));
	if (fd < 0 ||
	    connect(fd, (struct sockaddr *)&sa,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n))) {
		vz_ctl_buf_printf(out, "error cannot reach %s: %s\n", name,
				  strerror(errno));
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	pthread_mutex_lock(&lock);
	if (vz_capture_fd >= 0) {
		pthread_mutex_unlock(&lock);
		close(fd);
		vz_ctl_buf_printf(out, "error a capture is on already\n");
		return -EBUSY;
	}
	if (retired >= 0)
		close(retired);
	retired = -1;
	snaplen = (__u32)v;
	sent = dropped = 0;
	__atomic_store_n(&vz_capture_fd, fd, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	vz_ctl_buf_printf(out, "ok\n");
	return 0;
}

void vz_capture_request(struct vz_ctl *ctl, char *args[4], struct buf *out)
{
	if (!ctl->backend || !strcmp(ctl->backend, "xdp") ||
	    !strcmp(ctl->backend, "xdp-generic"))
		vz_ctl_buf_printf(out, "error the NF runs in the kernel: "
				       "veloz dump swaps its dump build in\n");
	else if (args[0] && !strcmp(args[0], "off") && !args[1]) {
		switch_off(__atomic_load_n(&vz_capture_fd, __ATOMIC_RELAXED));
		/* what was sent and dropped, for the client's summary */
		vz_ctl_buf_printf(out, "ok %llu %llu\n",
				  (unsigned long long)__atomic_load_n(
					  &sent, __ATOMIC_RELAXED),
				  (unsigned long long)__atomic_load_n(
					  &dropped, __ATOMIC_RELAXED));
	} else if (args[0] && args[1] && !args[2])
		switch_on(args[0], args[1], out);
	else
		vz_ctl_buf_printf(out, "error capture @NAME SNAPLEN | capture "
				       "off\n");
}
