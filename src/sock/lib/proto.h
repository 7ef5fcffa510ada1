/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The control protocol between libveloz-sock and the poller, over a UNIX
 * stream socket: fixed-size messages, one request and its reply at a time.
 *
 * On accept the poller sends WELCOME (err 0, or why the application is
 * refused: EACCES, EMFILE). Then each request gets exactly one reply of the
 * same type, err 0 or a positive errno. Descriptors travel over SCM_RIGHTS:
 * SOCKET carries the application's eventfd; the replies of SOCKET and of a
 * SETOPT that resized the rings (VZ_CTL_F_SHM) carry the socket's memfd.
 *
 * Every field of a request is checked; a request that a correct library
 * never sends (unknown type, wrong length, non-zero reserved field, unknown
 * socket id, unexpected descriptors) drops the application's connection.
 */
#ifndef VZ_SOCK_LIB_PROTO_H
#define VZ_SOCK_LIB_PROTO_H

#include <linux/types.h>

#define VZ_CTL_VERSION 1
#define VZ_CTL_MAX_FDS 2 /* descriptors accepted with one message */

enum vz_ctl_type {
	VZ_CTL_WELCOME = 1, /* poller -> application, once */
	VZ_CTL_SOCKET, /* opt: domain; eventfd attached; reply: id, memfd */
	VZ_CTL_BIND, /* addr, port (0: ephemeral); reply: the bound pair */
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
};

_Static_assert(sizeof(struct vz_ctl_msg) == 44, "wire size");

#endif
