/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Direct mode's inside (direct.h is its API), shared by:
 *
 *   direct.c       set-up (udpd's port in this process) and the data
 *                  path: sendto, recvfrom
 *   direct_engine.c the engines, one per queue: a stack each on its queue
 *                  of the port, a turn of one, the neighbour answers they
 *                  share
 *   direct_sock.c  the socket calls: socket, close, dup, bind, connect,
 *                  the names, the options, fcntl; a socket's references
 *   direct_wait.c  waiting: the background thread, poll/select, the spin
 *                  before epoll_wait, fork
 *   direct_addr.c  addresses: the callers' sockaddrs of either family,
 *                  checked as the kernel checks them, and written back;
 *                  binding (the port tables); which socket a datagram is for
 *
 * Both families share one code path: a socket's and a datagram's addresses
 * are IPv6, an IPv4 one v4-mapped (::ffff:A.B.C.D), whatever the socket's
 * family. An AF_INET socket sits in the IPv4 port table; an AF_INET6 one in
 * the IPv6 table, and also in the IPv4 one when bound to :: (or unbound)
 * with IPV6_V6ONLY off, where it receives IPv4 as v4-mapped addresses.
 *
 * An engine per queue of the interface (struct vz_direct_engine): its own
 * stack (neighbour cache, reassembly, timers), its queue's AF_XDP socket,
 * its background thread, and a lock over them, so queues are served on
 * different CPUs at once. One more lock (vz_direct.lock) serialises the
 * sockets: their tables, receive queues and references. An engine's lock
 * may be held while taking the sockets' lock, never the other way round,
 * and no thread holds two engines' locks except shutdown, in order.
 *
 * A thread's waits turn the engines of the queues its datagrams came on
 * (every engine until it received one), and its sends go out on the queue
 * of the last one. So the threads of a SO_REUSEPORT group, whose members
 * are fed by queue, each turn their own engine, and a flow's request and
 * answer keep to one queue; a thread that serves every queue (one socket
 * for all) turns them all. A thread that received nothing sends on an
 * engine chosen by its socket.
 *
 * A socket's eventfd is readable exactly while its queue holds a datagram
 * (written on empty to non-empty, drained on non-empty to empty, both
 * under vz_direct.lock), so the kernel's poll, select and epoll answer for
 * it unchanged.
 */
#ifndef VZ_SOCK_DIRECT_DIRECT_INTERNAL_H
#define VZ_SOCK_DIRECT_DIRECT_INTERNAL_H

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <linux/types.h>

#include "common/clock.h"
#include "sock/port/port.h"

#define VZ_DIRECT_HIDDEN __attribute__((visibility("hidden")))

#define QLEN 256 /* datagrams queued per socket before drops */
#define MAX_FD 65536
#define EPH_LO 32768u
#define EPH_HI 60999u
/* A blocking call's spin unless $VZ_BUSY_POLL_US says otherwise. Waking
 * from poll() on an AF_XDP socket (veth, copy mode) takes tens of us: with
 * a spin shorter than that, two ping-ponging ends fall into sleeping on
 * every round trip and stay there, each round trip paying two wake-ups;
 * 200 us keeps them spinning. */
#define DEFAULT_BUSY_US 200
/* The background thread's longest sleep while its stack waits on a timer
 * (an ARP or NDP answer, a datagram's missing fragments): the stack's
 * timers tick in ms. */
#define TICK_MS 1
/* Its longest sleep otherwise: what is left to time (entries expiring,
 * ARP retries of seconds) takes no harm from being this late, and an idle
 * engine wakes 20 times a second, not a thousand. A frame wakes it at
 * once either way. */
#define IDLE_MS 50

/* The port tables a socket is in. */
#define ON4 1u
#define ON6 2u

struct dgram {
	struct in6_addr addr; /* the sender; IPv4 v4-mapped */
	__be16 port;
	unsigned int queue; /* the interface queue it came on */
	size_t len;
	unsigned char data[];
};

struct vz_direct_socket {
	int fd; /* one of its descriptors: the eventfd the engine writes */
	int refs; /* descriptors naming it (dup); 0: closed */
	int users; /* calls in progress holding it (hold/put) */
	bool nonblock;
	/*
	 * Handed to epoll_ctl, poll or select once: its eventfd is then kept
	 * readable while a datagram is queued. Until then nobody looks at it
	 * (a blocking receive waits on the port), and a datagram costs no
	 * eventfd write and read, two system calls, on the round trip.
	 */
	bool watched;
	/* Threads asleep in poll() or select() on it: its eventfd is kept as
	 * when watched for as long as one sleeps. */
	int sleepers;
	bool v6; /* AF_INET6 */
	bool v6only; /* IPV6_V6ONLY */
	__u8 tables; /* ON4, ON6: which port tables hold it (bound) */
	/* SO_REUSEPORT: sockets bound to one port with it set all form a
	 * group, the table holding its first and each the next (per table);
	 * a datagram goes to a member chosen by the queue it came on, and
	 * among several for that queue by its flow's hash (direct_addr.c). */
	bool reuseport;
	struct vz_direct_socket *next4, *next6;
	/* the bound address (any: :: or ::ffff:0.0.0.0) and the peer's;
	 * IPv4 v4-mapped */
	struct in6_addr ip, peer_ip;
	__be16 port, peer_port; /* network order; 0: unbound/unconnected */
	__u32 busy_us;
	struct timeval rcvtimeo;
	struct dgram *q[QLEN];
	unsigned int head, tail; /* free-running */
	__u64 drops;
};

/* Neighbour answers an engine keeps for the others, and their size: an
 * ARP reply or an NDP advertisement is under 100 bytes. */
#define INBOX 16
#define INBOX_FRAME 256

/* One queue of the interface and the stack that serves it. */
struct vz_direct_engine {
	pthread_mutex_t lock; /* the stack, this queue of the port, last_* */
	/* Its reassembly too: RSS hashes a fragment on its addresses alone,
	 * so a datagram's fragments come on one queue. */
	struct vz_stack *stack;
	unsigned int queue;
	int xfd; /* the queue's AF_XDP socket: readable when frames come */
	__u64 last_run, last_tick;
	int spinners; /* application threads spinning on it, theirs */
	/* Threads spinning on engines of their own that turn this one too
	 * while none of its own spins (direct_wait.c). */
	int helpers;
	int wake; /* an eventfd: its background thread's doorbell */
	pthread_t bg;
	bool bg_running;
	/*
	 * ARP replies and NDP advertisements that came on another queue:
	 * every engine's stack learns its neighbours from them, whichever
	 * queue the answer to its question came on (a NIC hashes ARP to one
	 * queue). Under inbox_lock, a leaf lock.
	 */
	pthread_mutex_t inbox_lock;
	unsigned int ninbox;
	unsigned short inbox_len[INBOX];
	unsigned char inbox[INBOX][INBOX_FRAME];
};

struct vz_direct_state {
	pthread_mutex_t lock; /* the sockets: tables, queues, references */
	struct vz_udpd_port *port;
	struct vz_direct_engine engines[VZ_UDPD_MAX_QUEUES];
	unsigned int nengines; /* the interface's receive queues */
	struct vz_direct_socket *by_port4[65536]; /* host order */
	struct vz_direct_socket *by_port6[65536];
	struct vz_direct_socket *by_fd[MAX_FD];
	__u32 eph_next;
	__be32 ip4;
	struct in6_addr ip6; /* all zero: no IPv6 (AF_INET6 is EAFNOSUPPORT) */
	bool v6only; /* new AF_INET6 sockets' IPV6_V6ONLY (the sysctl's) */
	__u32 busy_us; /* a wait's spin: $VZ_BUSY_POLL_US or the default */
	/* Threads spinning in a wait now, and how many may: half the CPUs
	 * the process may run on (at least one). */
	int wait_spinners, max_wait_spinners;
	int max_fd; /* the highest descriptor by_fd ever held */
	pid_t pid; /* whose port this is: a forked child's calls fail */
	volatile int stop;
	int init_err; /* positive errno once init failed */
	bool ready;
};

VZ_DIRECT_HIDDEN extern struct vz_direct_state vz_direct;

static inline int fail(int rc)
{
	errno = rc;
	return -1;
}

/*
 * The socket fd names, held against a close in another thread until put():
 * NULL with errno EBADF, or ENOTSUP in a child after fork() (the port and
 * its rings are the parent's).
 */
VZ_DIRECT_HIDDEN struct vz_direct_socket *vz_direct_hold(int fd);
VZ_DIRECT_HIDDEN void vz_direct_put(struct vz_direct_socket *s);
static inline struct vz_direct_socket *hold(int fd)
{
	return vz_direct_hold(fd);
}

static inline void put(struct vz_direct_socket *s)
{
	vz_direct_put(s);
}

/* Whether this process is a child forked from the port's owner (with one
 * line on stderr the first time). */
VZ_DIRECT_HIDDEN bool vz_direct_forked(void);
/* Set up fork handling, once (direct_wait.c). */
VZ_DIRECT_HIDDEN void vz_direct_atfork(void);

/* Under e->lock: take what e's queue has, run its timers, send
 * (direct_engine.c; nothing without a port). */
VZ_DIRECT_HIDDEN unsigned int vz_direct_engine_run(struct vz_direct_engine *e);
/* Under e->lock: a frame that came on e's queue, into its stack (and a
 * neighbour answer into the other engines' inboxes). */
VZ_DIRECT_HIDDEN void vz_direct_frame_in(struct vz_direct_engine *e,
					 const void *frame, size_t len);
/* Every engine (a bit each). */
VZ_DIRECT_HIDDEN __u32 vz_direct_all_engines(void);
/* The engines this thread turns: of the queues its datagrams came on, or
 * all of them (a bit each). */
VZ_DIRECT_HIDDEN __u32 vz_direct_my_engines(void);
/* A turn of each engine in the set: waiting for one another thread is
 * turning, or (wait false) leaving it to that thread. */
VZ_DIRECT_HIDDEN void vz_direct_turn(__u32 engines, bool wait);
/* Whether the stack takes this configuration (else why, in err). */
struct vz_stack_config;
VZ_DIRECT_HIDDEN bool vz_direct_config_ok(const struct vz_stack_config *cfg,
					  char *err, size_t errlen);
/* An engine per queue of vz_direct.port: 0, or -1 with a line on stderr.
 * Free their stacks. */
VZ_DIRECT_HIDDEN int vz_direct_engines_new(const struct vz_stack_config *cfg);
VZ_DIRECT_HIDDEN void vz_direct_engines_free(void);
/* The background threads (direct_wait.c), one per engine: start, stop. */
VZ_DIRECT_HIDDEN int vz_direct_bg_start(void);
VZ_DIRECT_HIDDEN void vz_direct_bg_stop(void);
/* Around an application thread's spin on a set of engines: their
 * background threads stay off their queues meanwhile. */
VZ_DIRECT_HIDDEN void vz_direct_spinning(__u32 engines, bool on);

/* poll()'s answer for a set of direct sockets only, from their queues: no
 * system call (direct_sock.c). */
VZ_DIRECT_HIDDEN int vz_direct_poll_ready(struct pollfd *fds, nfds_t n);
/* Around a sleep in poll() on such a set: their eventfds follow their
 * queues while it sleeps (asleep true), then stop (false). */
VZ_DIRECT_HIDDEN void vz_direct_sleep(const struct pollfd *fds, nfds_t n,
				      bool asleep);

/* Whether s's eventfd must follow its queue (watched, or slept on). */
static inline bool vz_direct_efd_kept(const struct vz_direct_socket *s)
{
	return s->watched || s->sleepers;
}

/* Add one to an eventfd's counter; empty it (direct_wait.c). */
VZ_DIRECT_HIDDEN void vz_direct_efd_ring(int fd);
VZ_DIRECT_HIDDEN void vz_direct_efd_drain(int fd);
/* libc's poll (the shim's would look at every descriptor). */
VZ_DIRECT_HIDDEN int vz_direct_sys_poll(struct pollfd *p, nfds_t n, int ms);

/* A socket without the engine's set-up (socket() after vz_direct_init):
 * its descriptor, or -1 with errno. */
VZ_DIRECT_HIDDEN int vz_direct_sock_new(int domain, int type);
/* Under vz_direct.lock: queue a datagram that came on an interface queue
 * on s (false: full, dropped). */
VZ_DIRECT_HIDDEN bool vz_direct_enqueue(struct vz_direct_socket *s,
					const struct in6_addr *addr,
					__be16 port, unsigned int queue,
					const void *data, size_t len);
/* Under vz_direct.lock: a datagram the engine of `queue` received, onto
 * its socket's queue; -1 when no socket is bound to it (direct_addr.c). */
struct vz_dgram_meta;
VZ_DIRECT_HIDDEN int vz_direct_deliver(const struct vz_dgram_meta *m,
				       unsigned int queue, const void *payload,
				       size_t len);

/* ---- addresses (direct_addr.c) ---- */

static inline bool in6_mapped(const struct in6_addr *a)
{
	return IN6_IS_ADDR_V4MAPPED(a);
}

static inline __be32 in6_v4(const struct in6_addr *a)
{
	return a->s6_addr32[3];
}

static inline struct in6_addr in6_map(__be32 ip)
{
	struct in6_addr a = { 0 };

	a.s6_addr32[2] = htonl(0xffff);
	a.s6_addr32[3] = ip;
	return a;
}

/* :: or ::ffff:0.0.0.0 */
static inline bool in6_any(const struct in6_addr *a)
{
	return IN6_IS_ADDR_UNSPECIFIED(a) || (in6_mapped(a) && !in6_v4(a));
}

static inline bool in6_eq(const struct in6_addr *a, const struct in6_addr *b)
{
	return !memcmp(a, b, sizeof(*a));
}

/* What a caller's address is for: the kernel checks each differently. */
enum direct_addr_op { DS_BIND, DS_CONNECT, DS_SEND };

/* The address a caller passes to s: 0 or a positive errno, as Linux's
 * inet/inet6 bind, connect and sendmsg give them. */
VZ_DIRECT_HIDDEN int vz_direct_addr_get(const struct vz_direct_socket *s,
					const struct sockaddr *sa,
					socklen_t len, enum direct_addr_op op,
					struct in6_addr *ip, __be16 *port);
/* Copy an address out in s's family, as the kernel does. */
VZ_DIRECT_HIDDEN int vz_direct_addr_put(const struct vz_direct_socket *s,
					struct sockaddr *sa, socklen_t *len,
					const struct in6_addr *ip, __be16 port);
/* Under vz_direct.lock: bind s to ip (NULL: any), port 0 for an ephemeral
 * one: 0 or a positive errno. */
VZ_DIRECT_HIDDEN int vz_direct_bind_locked(struct vz_direct_socket *s,
					   const struct in6_addr *ip,
					   __u16 port);
/* Under vz_direct.lock: take s out of the port tables. */
VZ_DIRECT_HIDDEN void vz_direct_unbind_locked(struct vz_direct_socket *s);

#endif
