/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What veloz-pingpong and veloz-pktgen share: the socket calls of the
 * stack under test (the kernel's or veloz's, so one binary measures both),
 * argument parsing, the clock, and the payload's header.
 */
#ifndef VZ_SOCK_APPS_COMMON_H
#define VZ_SOCK_APPS_COMMON_H

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/options.h"

/* UDPDK's range: a 64-byte frame to a full 1500-byte MTU... */
#define VZ_APP_MIN_SIZE 18
#define VZ_APP_MTU_SIZE 1472
/* ...and beyond, fragmented: the largest UDP payload over IPv4. */
#define VZ_APP_MAX_SIZE 65507

/* The socket calls, with their BSD signatures. */
struct vz_app_net {
	const char *name;
	int (*socket)(int, int, int);
	int (*bind)(int, const struct sockaddr *, socklen_t);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	ssize_t (*sendto)(int, const void *, size_t, int,
			  const struct sockaddr *, socklen_t);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
			    socklen_t *);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*close)(int);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
};

/*
 * "kernel" or "veloz" (which also connects to the poller). NULL after one
 * line on stderr: exit code 2 in *code for an unknown name, 1 when the
 * stack is unavailable.
 */
const struct vz_app_net *vz_app_stack(const char *prog, const char *name,
				      int *code);

/* One line "PROG: message" on stderr, then exit(2). */
void vz_app_usage_error(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
/* One line "PROG: message" on stderr. */
void vz_app_err(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "A.B.C.D:PORT"; 0, or -1 when malformed. */
int vz_app_parse_addr(const char *text, struct sockaddr_in *out);
/* A whole decimal number in [min, max]; 0 or -1. */
int vz_app_parse_u64(const char *text, uint64_t min, uint64_t max,
		     uint64_t *out);

/* Seconds, fractions allowed, in (0, max]; 0 or -1. */
int vz_app_parse_seconds(const char *text, double max, double *out);
#define VZ_APP_MAX_SECONDS 31536000 /* --duration: a year */

/* Option table parsers (common/options.h): IP:PORT into a sockaddr_in, and
 * --duration's seconds; one line naming the option on bad input. */
int vz_app_opt_addr(const struct vz_option *opt, const char *text, void *dst,
		    void *cfg);
int vz_app_opt_seconds(const struct vz_option *opt, const char *text, void *dst,
		       void *cfg);

/*
 * The rows both apps have, on their options struct T (fields bind, peer,
 * size, duration, stack, cpu, json): each limit written once for the two.
 * cpu is an int, -1 when not given (so no default is described).
 */
#define VZ_APP_OPTIONS(T)                                                      \
	VZ_OPTION("bind", VZ_OPT_CUSTOM, T, bind, .parse = vz_app_opt_addr,    \
		  .type_name = "ip-port", .metavar = "IP:PORT",                \
		  .help = "local address"),                                    \
		VZ_OPTION("connect", VZ_OPT_CUSTOM, T, peer,                   \
			  .parse = vz_app_opt_addr, .type_name = "ip-port",    \
			  .metavar = "IP:PORT", .help = "the peer's address"), \
		VZ_OPTION("size", VZ_OPT_U64, T, size, .min = VZ_APP_MIN_SIZE, \
			  .max = VZ_APP_MAX_SIZE, .metavar = "N",              \
			  .help = "UDP payload bytes"),                        \
		VZ_OPTION("duration", VZ_OPT_CUSTOM, T, duration,              \
			  .parse = vz_app_opt_seconds, .type_name = "seconds", \
			  .metavar = "S",                                      \
			  .help = "seconds to run, fractions allowed"),        \
		VZ_OPTION("stack", VZ_OPT_STRING, T, stack, .metavar = "NAME", \
			  .help = "whose sockets: veloz or kernel"),           \
		VZ_OPTION("cpu", VZ_OPT_U64, T, cpu, .max = 1023,              \
			  .no_default = true, .metavar = "N",                  \
			  .help = "pin to this CPU"),                          \
		VZ_OPTION("json", VZ_OPT_FLAG, T, json,                        \
			  .help = "the result as JSON")

/* "A.B.C.D:PORT" of an address; buf holds at least 22 bytes. */
const char *vz_app_addr_str(const struct sockaddr_in *a, char *buf);

/*
 * A UDP socket through NET, bound to BIND and connected to PEER where they
 * are not NULL. The descriptor, or -1 after one line naming PROG.
 */
int vz_app_open_udp(const char *prog, const struct vz_app_net *net,
		    const struct sockaddr_in *bind,
		    const struct sockaddr_in *peer);

/* --cpu N: pin the process to CPU N (exit 1 after one line if it cannot
 * be); a negative cpu does nothing. */
void vz_app_pin(const char *prog, int cpu);

/* Set by SIGINT and SIGTERM, which no longer kill the process. */
extern volatile sig_atomic_t vz_app_stop;
void vz_app_catch_signals(void);

/*
 * Every payload begins with this header, in network byte order, then a
 * fixed pattern up to its size: magic, a stream (one per sender run, so a
 * receiver tells runs apart), and the datagram's sequence number.
 */
#define VZ_APP_MAGIC_PING 0x565a5050 /* "VZPP" */
#define VZ_APP_MAGIC_GEN 0x565a5047 /* "VZPG" */
#define VZ_APP_HDR_SIZE 16

struct vz_app_hdr {
	uint32_t magic, stream;
	uint64_t seq;
};

void vz_app_fill(void *buf, size_t size, const struct vz_app_hdr *h);
/* Only the sequence number of a filled payload. */
void vz_app_set_seq(void *buf, uint64_t seq);
/* 0, or -1 when too short or another magic. */
int vz_app_parse_hdr(const void *buf, size_t len, uint32_t magic,
		     struct vz_app_hdr *h);

/* A random stream number (distinct runs, distinct streams). */
uint32_t vz_app_stream_id(void);

#endif
