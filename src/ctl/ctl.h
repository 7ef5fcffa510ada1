/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The control plane's hands on a running NF: its maps, changed through text
 * lines (the protocol is described in python/veloz/control/client.py), from
 * an ops file before anything is attached or from a Unix socket while the NF
 * runs. The same lines work on every backend: the maps are BPF maps on xdp
 * and xdp-generic, native maps (src/maps/maps.c) on afxdp and dpdk.
 */
#ifndef VZ_CTL_CTL_H
#define VZ_CTL_CTL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <bpf/libbpf.h>
#include <veloz/maps.h>

#include "maps/nf_loader.h"

#define VZ_CTL_MAX_MAPS 64
/*
 * A session whose client sends nothing for this long is closed, and its
 * open transaction rolled back, as if the client had died: a client that
 * is stopped (SIGSTOP, a debugger, a hung terminal) would otherwise hold
 * the NF's one session for ever. The clock runs on the client's silence
 * only, from the server's last reply: lb's ctl commands compute a Maglev
 * ring (65,537 slots, about 0.1-0.2 s here, seconds on a loaded machine)
 * between reading the maps and writing the changes, so 30 s leaves them a
 * wide margin. `veloz run --ctl-idle-timeout S` changes it.
 */
#define VZ_CTL_IDLE_MS_DEFAULT 30000

struct vz_ctl_map {
	char name[64]; /* a copy: bpf_map__reuse_fd() frees libbpf's */
	__u32 type; /* enum bpf_map_type */
	__u32 key_size;
	__u32 value_size;
	__u32 max_entries;
	__u32 copies; /* per-CPU maps: CPUs or workers; else 1 */
	struct bpf_map *bpf; /* xdp backends */
	struct vz_map *native; /* userspace backends */
};

struct vz_ctl {
	struct vz_ctl_map maps[VZ_CTL_MAX_MAPS];
	int nmaps;
	const char *nf;
	const char *backend;
	const char *ports[64];
	int nports;
	/* The socket server: */
	int listen_fd;
	gid_t gid; /* allowed besides root; (gid_t)-1: none */
	unsigned long refused; /* connections from anyone else */
	unsigned int idle_ms; /* 0: VZ_CTL_IDLE_MS_DEFAULT */
	unsigned long idle_closed; /* sessions closed for their silence */
	char path[108];
	pthread_t thread;
	bool serving;
	volatile int stop;
	/*
	 * "leave": a successor took the NF over (`veloz run --take-over`);
	 * the run stops without detaching it. stop_run is the run's stop
	 * flag, NULL where the NF cannot outlive its process (userspace).
	 */
	volatile sig_atomic_t *stop_run;
	volatile sig_atomic_t leave;
	/*
	 * Userspace runs: stop (on) or restart (off) the workers, for a
	 * successor's "handover" (ctl_handover.c). 0 or -errno. NULL on xdp,
	 * where a successor takes the maps at the hook instead.
	 */
	int (*pause)(void *arg, bool on);
	void *pause_arg;
	/*
	 * The runner's latest counters line (JSON, no newline) for the
	 * "counters" request: `veloz status` and `--metrics` read it here
	 * rather than parsing the runner's stdout, which is the user's.
	 */
	pthread_mutex_t counters_lock;
	char *counters;
	size_t counters_len;
};

/* The NF's maps in a BPF object, loaded or not (an ops file applied before
 * the load creates the maps and hands them to libbpf to reuse). */
void vz_ctl_init_bpf(struct vz_ctl *ctl, struct bpf_object *obj, const char *nf,
		     const char *backend);
void vz_ctl_init_native(struct vz_ctl *ctl, const struct vz_native_nf *nf,
			const char *backend);
void vz_ctl_add_port(struct vz_ctl *ctl, const char *ifname);

/* Apply an ops file as one transaction: all of it, or nothing and err. */
int vz_ctl_apply_file(struct vz_ctl *ctl, const char *path, char *err,
		      size_t errlen);

/*
 * Run `text` (request lines) as one client's session would on the socket,
 * and hang up: a transaction still open is rolled back. *reply (malloc'd,
 * *reply_len bytes, not NUL-terminated; free it) holds the replies. For the
 * tests and the fuzzer; 0 or -ENOMEM.
 */
int vz_ctl_run_text(struct vz_ctl *ctl, const char *text, size_t len,
		    char **reply, size_t *reply_len);

/*
 * Listen on $VELOZ_CTL_DIR (default /run/veloz/ctl)/net<netns inode>-<first
 * port>.sock and serve one client at a time on a thread: root only (mode
 * 0600), or root and the members of gid (root:gid, 0660). Anyone else
 * who connects is refused, whatever the file's mode, and counted. A
 * session silent for ctl->idle_ms is closed (see VZ_CTL_IDLE_MS_DEFAULT)
 * after one line, "error closed: ...", and counted in ctl->idle_closed.
 */
int vz_ctl_listen(struct vz_ctl *ctl, gid_t gid, char *err, size_t errlen);
/*
 * Keep a copy of line (len bytes, one JSON object) as the reply to the
 * "counters" request. The main loop calls it, the server thread reads it.
 * Nothing is kept while the socket is not listening.
 */
void vz_ctl_publish_counters(struct vz_ctl *ctl, const char *line, size_t len);
/* The control socket's path for a run whose first port is PORT, in this
 * network namespace: 0, or -errno with err set. */
int vz_ctl_socket_path(const char *port, char *path, size_t len, char *err,
		       size_t errlen);
/*
 * A successor's take-over of a userspace run (ctl_handover.c): the
 * running NF's maps, written into a memfd (*fd, 0 or -errno), and written
 * from one into this run's maps (0, or -errno and err).
 */
int vz_ctl_snapshot(struct vz_ctl *ctl, int *fd);
int vz_ctl_restore(struct vz_ctl *ctl, int fd, char *err, size_t errlen);
/* Stop serving, remove the socket. Safe to call when not listening. */
void vz_ctl_close(struct vz_ctl *ctl);

#endif
