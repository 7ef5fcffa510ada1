/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Inside the control plane (ctl.h): what its parts share. ctl_map.c does
 * the map operations on either kind of map; ctl_session.c parses request
 * lines and keeps a transaction's undo log; ctl_file.c applies an ops
 * file, ctl_server.c serves the socket. Not for use outside them.
 */
#ifndef VZ_CTL_CTL_INTERNAL_H
#define VZ_CTL_CTL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "ctl/ctl.h"

/* Longest request line, on the socket and in an ops file. */
#define LINE_MAX_BYTES (1u << 20)

/* ---- growable byte buffers ---------------------------------------------- */

struct buf {
	char *data;
	size_t len, cap;
};

int vz_ctl_buf_reserve(struct buf *b, size_t more);
void vz_ctl_buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void vz_ctl_buf_hex(struct buf *b, const __u8 *bytes, size_t n);
int vz_ctl_unhex(const char *text, __u8 *out, size_t max, size_t *n);

/* ---- map operations, BPF or native (ctl_map.c) --------------------------- */

bool vz_ctl_is_percpu(__u32 type);
bool vz_ctl_is_array(__u32 type);
__u32 vz_ctl_stride(const struct vz_ctl_map *m);
size_t vz_ctl_full_size(const struct vz_ctl_map *m);
struct vz_ctl_map *vz_ctl_find_map(struct vz_ctl *ctl, const char *name);
int vz_ctl_map_read(struct vz_ctl_map *m, const void *key, void *value);
int vz_ctl_map_write(struct vz_ctl_map *m, const void *key, const void *value);
int vz_ctl_map_delete(struct vz_ctl_map *m, const void *key);
int vz_ctl_map_run(struct vz_ctl_map *m, __u32 first, __u32 count, void *values,
		   bool write);
int vz_ctl_map_write_run(struct vz_ctl_map *m, __u32 first, __u32 count,
			 const void *values);
int vz_ctl_map_next_key(struct vz_ctl_map *m, const void *key, void *next);

/* ---- a session: requests, replies, transactions (ctl_session.c) ---------- */

struct undo {
	struct vz_ctl_map *map;
	bool had_value;
	__u32 run; /* a fill: entries from index *key on, else 0 */
	__u8 *key; /* key, then the old full value (run values for a fill) */
};

struct session {
	struct vz_ctl *ctl;
	bool in_tx;
	bool failed; /* in_tx: an operation failed; the rest are skipped */
	char first_error[256];
	char last_error[256];
	struct undo *undo;
	size_t nundo, cap_undo;
	__u8 *key, *value, *old; /* scratch, of the largest sizes */
	size_t key_cap, value_cap;
	/* "handover": the state's memfd, sent with the next reply (or -1),
	 * and whether this client keeps the workers paused until "leave" */
	int pass_fd;
	bool handed_over;
};

int vz_ctl_session_init(struct session *s, struct vz_ctl *ctl);
void vz_ctl_session_free(struct session *s);
void vz_ctl_roll_back(struct session *s);
void vz_ctl_execute(struct session *s, char *line, struct buf *out);
void vz_ctl_handover(struct session *s, struct buf *out);

#endif
