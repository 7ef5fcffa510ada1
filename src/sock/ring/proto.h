/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The control protocol between libveloz-sock and the poller, over a UNIX
 * stream socket: fixed-size messages, one request and its reply at a time.
 *
 * On accept the poller sends WELCOME (err 0, or why the application is
 * refused: EACCES, EMFILE). Then each request gets exactly one reply of the
 * same type, err 0 or a positive errno. The library waits for a reply a
 * bounded time ($VZ_UDPD_TIMEOUT_MS), then hangs up: so a reply always
 * answers the one request outstanding, and needs no request id.
 * Descriptors travel over SCM_RIGHTS:
 * WELCOME (err 0) carries the poller's doorbell, an eventfd the application
 * writes after queueing a datagram when the poller said it sleeps
 * (vz_sock_shm.poller_asleep); SOCKET carries the application's eventfd; the
 * replies of SOCKET and of a SETOPT that resized the rings (VZ_CTL_F_SHM) carry
 * the socket's memfd.
 *
 * Every field of a request is checked; a request that a correct library
 * never sends (unknown type, wrong length, non-zero reserved field, unknown
 * socket id, unexpected descriptors) drops the application's connection.
 */
#ifndef VZ_SOCK_RING_PROTO_H
#define VZ_SOCK_RING_PROTO_H

#include <string.h>
#include <sys/socket.h>

#include <linux/types.h>

#define VZ_CTL_VERSION 2 /* 2: AF_INET6 (addr6) */
#define VZ_CTL_MAX_FDS 2 /* descriptors accepted with one message */

enum vz_ctl_type {
	VZ_CTL_WELCOME = 1, /* poller -> application, once */
	VZ_CTL_SOCKET, /* opt: domain; eventfd attached; reply: id, memfd */
	VZ_CTL_BIND, /* addr (addr6: AF_INET6), port (0: ephemeral); reply:
		      * the bound pair */
	VZ_CTL_CONNECT, /* addr, port; opt 1: dissolve (AF_UNSPEC) */
	VZ_CTL_SETOPT, /* opt: SO_*, val; reply: ring sizes (+ memfd) */
	VZ_CTL_CLOSE,
	VZ_CTL_TYPE_MAX,
};

#define VZ_CTL_F_SHM 1 /* reply flag: a new memfd is attached */

struct vz_ctl_msg {
	__u16 type;
	__u16 len; /* sizeof(struct vz_ctl_msg) */
	__u32 id; /* the socket, numbered per connection from 1 */
	__s32 err; /* replies: 0 or a positive errno; requests: 0 */
	__u32 opt;
	__u32 val;
	__be32 addr;
	__be16 port;
	__u16 flags; /* replies: VZ_CTL_F_*; requests: 0 */
	__u32 rcvbuf, sndbuf; /* replies: the ring sizes; WELCOME: 0 */
	__u32 reserved[2];
	/* An AF_INET6 socket's address where addr is an AF_INET one's (addr
	 * then 0); WELCOME: the stack's IPv6 address. Zero otherwise. */
	__u8 addr6[16];
};

_Static_assert(sizeof(struct vz_ctl_msg) == 60, "wire size");

/* Room for the one descriptor a message may carry. */
union vz_ctl_cmsg {
	struct cmsghdr h;
	char buf[CMSG_SPACE(sizeof(int))];
};

/* Attach fd to mh through c (which must live as long as mh); fd < 0:
 * nothing is attached. */
static inline void vz_ctl_attach_fd(struct msghdr *mh, union vz_ctl_cmsg *c,
				    int fd)
{
	if (fd < 0)
		return;
	memset(c, 0, sizeof(*c));
	mh->msg_control = c->buf;
	mh->msg_controllen = sizeof(c->buf);
	c->h.cmsg_level = SOL_SOCKET;
	c->h.cmsg_type = SCM_RIGHTS;
	c->h.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&c->h), &fd, sizeof(int));
}

#endif
