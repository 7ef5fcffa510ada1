// SPDX-License-Identifier: BSD-2-Clause
/*
 * The userspace backends' capture (src/ctl/capture.c), through the
 * control socket's "capture" request: bad requests refused in one line, a
 * frame's record as it arrived with its action, a full socket counted and
 * never waited for, a reader that hangs up switching it off.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <veloz/abi.h>

#include "check.h"
#include "ctl/capture.h"
#include "ctl/ctl.h"
#include "ctl_ask.h"

static void expect(struct vz_ctl *ctl, const char *req, const char *prefix)
{
	char *r = ask(ctl, req);

	CHECK(!strncmp(r, prefix, strlen(prefix)), "%s-> '%s', not '%s...'",
	      req, r, prefix);
	free(r);
}

static int listener(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	memcpy(sa.sun_path + 1, name, n);
	if (fd < 0 ||
	    bind(fd, (struct sockaddr *)&sa,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) ||
	    listen(fd, 1))
		return -1;
	return fd;
}

/* One frame through the capture, as a worker sends it. */
static void send_frame(__u8 *buf, size_t len, int action)
{
	static struct vz_capture_rec rec;
	struct vz_ctx ctx = { .data = buf,
			      .data_end = buf + len,
			      .ingress_port = 1 };

	vz_capture_copy(&rec, &ctx, 3);
	buf[0] ^= 0xff; /* the NF rewrites it: the record keeps the original */
	vz_capture_send(vz_capture_burst(), &rec, action, 2);
}

static void round_trip(struct vz_ctl *ctl)
{
	static struct vz_capture_rec got;
	char name[64], req[96], *r;
	unsigned long long sent, dropped;
	__u8 frame[100];
	int l, c, i;
	ssize_t n;

	snprintf(name, sizeof(name), "vz-test-capture-%d", (int)getpid());
	l = listener(name);
	CHECK(l >= 0, "listener");
	snprintf(req, sizeof(req), "capture @%s 60\n", name);
	expect(ctl, req, "ok\n");
	expect(ctl, req, "error a capture is on already");
	c = accept(l, NULL, NULL);
	memset(frame, 0x5a, sizeof(frame));
	send_frame(frame, sizeof(frame), VZ_TX);
	n = recv(c, &got, sizeof(got), 0);
	CHECK(n == (ssize_t)(sizeof(got.ev) + 60), "record of %zd bytes", n);
	CHECK(got.ev.kind == VZ_DUMP_RECORD && got.ev.len == 100 &&
		      got.ev.caplen == 60 && got.ev.action == VZ_TX &&
		      got.ev.ifindex == 1 && got.ev.queue == 3 &&
		      got.ev.port == 2 && got.data[0] == 0x5a,
	      "record fields");
	/* nobody reads: the socket fills, the rest is dropped and counted */
	for (i = 0; i < 200000 && vz_capture_burst() >= 0; i++)
		send_frame(frame, sizeof(frame), VZ_DROP);
	r = ask(ctl, "capture off\n");
	CHECK(sscanf(r, "ok %llu %llu", &sent, &dropped) == 2 && sent > 1 &&
		      dropped > 0 &&
		      sent + dropped == (unsigned long long)i + 1,
	      "sent and dropped: '%s'", r);
	free(r);
	CHECK(vz_capture_burst() < 0, "off");
	expect(ctl, "capture off\n", "ok ");
	/* on again, then the reader hangs up: the next frame switches it off */
	expect(ctl, req, "ok\n");
	close(accept(l, NULL, NULL));
	send_frame(frame, sizeof(frame), VZ_DROP);
	CHECK(vz_capture_burst() < 0, "still on after the reader left");
	close(c);
	close(l);
}

int main(void)
{
	struct vz_ctl ctl;
	char *r;

	memset(&ctl, 0, sizeof(ctl));
	ctl.listen_fd = -1;
	ctl.nf = "test";
	ctl.backend = "afxdp";
	expect(&ctl, "capture\n", "error capture @NAME SNAPLEN");
	expect(&ctl, "capture x 64\n", "error capture @NAME SNAPLEN");
	expect(&ctl, "capture @x 0\n", "error capture @NAME SNAPLEN");
	expect(&ctl, "capture @x 99999\n", "error capture @NAME SNAPLEN");
	expect(&ctl, "capture @x 64 extra\n", "error capture @NAME SNAPLEN");
	/* a name the error could not echo as text (found by fuzz-ctl) */
	expect(&ctl, "capture @=ll\x92\x99 64\n",
	       "error capture @NAME SNAPLEN");
	expect(&ctl, "capture @vz-test-nobody-listens 64\n",
	       "error cannot reach");
	round_trip(&ctl);
	r = ask(&ctl, "capture off\n");
	CHECK(!strncmp(r, "ok ", 3), "off when off: '%s'", r);
	free(r);
	ctl.backend = "xdp";
	expect(&ctl, "capture @x 64\n", "error the NF runs in the kernel");
	return failures ? 1 : 0;
}
