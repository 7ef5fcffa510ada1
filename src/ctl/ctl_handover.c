// SPDX-License-Identifier: BSD-2-Clause
/*
 * Handing a userspace run's NF state to its successor (ctl.h): the
 * "handover" request pauses the workers, writes every native map into a
 * memfd and passes it with the reply (SCM_RIGHTS); the successor maps it
 * and writes the entries into its own maps (vz_ctl_restore()).
 *
 * The memfd holds a header, then per map its geometry and its entries:
 * an array's values as one block (its layout is fixed by the geometry),
 * other maps' entries as (key, full value) pairs. Per-CPU values carry
 * every worker's copy, so counters continue where they were.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctl/ctl_internal.h"

#define SNAP_MAGIC 0x4f48435aU /* "ZCHO" */
#define SNAP_VERSION 1U
#define FLUSH_BYTES (1u << 20)

struct snap_header {
	__u32 magic, version, nmaps, pad;
};

struct snap_map {
	char name[64];
	__u32 type, key_size, value_size, max_entries, copies, pad;
	__u64 count; /* entries; for an array, the block's bytes */
};

static int write_all(int fd, const void *data, size_t len)
{
	const char *at = data;

	while (len) {
		ssize_t n = write(fd, at, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		at += n;
		len -= (size_t)n;
	}
	return 0;
}

static int flush(int fd, struct buf *b)
{
	int err = write_all(fd, b->data, b->len);

	b->len = 0;
	return err;
}

/* Small pieces gather in b; a large one (an array's block) goes at once. */
static int put(int fd, struct buf *b, const void *data, size_t len)
{
	int err;

	if (b->len + len > FLUSH_BYTES) {
		err = flush(fd, b);
		if (err)
			return err;
		if (len > FLUSH_BYTES)
			return write_all(fd, data, len);
	}
	if (vz_ctl_buf_reserve(b, len))
		return -ENOMEM;
	memcpy(b->data + b->len, data, len);
	b->len += len;
	return 0;
}

static size_t array_bytes(const struct vz_map *map)
{
	return (size_t)map->worker_stride * map->nworkers;
}

/* A hash-like map's entries, counted once written (the header after). */
static int put_entries(int fd, struct buf *b, struct vz_ctl_map *m,
		       __u64 *count)
{
	size_t vlen = vz_ctl_full_size(m);
	__u8 *key = calloc(2, m->key_size), *next = key + m->key_size;
	__u8 *value = malloc(vlen);
	const void *prev = NULL;
	int err = key && value ? 0 : -ENOMEM;

	while (!err && !vz_ctl_map_next_key(m, prev, next)) {
		memcpy(key, next, m->key_size);
		prev = key;
		if (vz_ctl_map_read(m, key, value))
			continue; /* deleted meanwhile: never while paused */
		err = put(fd, b, key, m->key_size);
		if (!err)
			err = put(fd, b, value, vlen);
		(*count)++;
	}
	free(key);
	free(value);
	return err;
}

static int put_map(int fd, struct buf *b, struct vz_ctl_map *m)
{
	struct snap_map h = { .type = m->type,
			      .key_size = m->key_size,
			      .value_size = m->value_size,
			      .max_entries = m->max_entries,
			      .copies = m->copies };
	off_t at;
	int err;

	snprintf(h.name, sizeof(h.name), "%s", m->name);
	if (vz_ctl_is_array(m->type)) {
		h.count = array_bytes(m->native);
		err = put(fd, b, &h, sizeof(h));
		return err ? err : put(fd, b, m->native->values, h.count);
	}
	/* the count is known once the entries are out: write it in place */
	err = flush(fd, b);
	if (err)
		return err;
	at = lseek(fd, 0, SEEK_CUR);
	err = put(fd, b, &h, sizeof(h));
	if (!err)
		err = put_entries(fd, b, m, &h.count);
	if (!err)
		err = flush(fd, b);
	if (!err && pwrite(fd, &h, sizeof(h), at) != (ssize_t)sizeof(h))
		err = -EIO;
	return err;
}

int vz_ctl_snapshot(struct vz_ctl *ctl, int *fd_out)
{
	struct snap_header h = { .magic = SNAP_MAGIC,
				 .version = SNAP_VERSION,
				 .nmaps = (__u32)ctl->nmaps };
	struct buf b = { 0 };
	int fd, i, err;

	fd = memfd_create("veloz-handover", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = put(fd, &b, &h, sizeof(h));
	for (i = 0; i < ctl->nmaps && !err; i++)
		err = ctl->maps[i].native ? put_map(fd, &b, &ctl->maps[i])
					  : -EINVAL;
	if (!err)
		err = flush(fd, &b);
	free(b.data);
	if (err) {
		close(fd);
		return err;
	}
	*fd_out = fd;
	return 0;
}

/* ---- the successor's side ------------------------------------------------ */

struct reader {
	const __u8 *at, *end;
};

static const void *take(struct reader *r, size_t len)
{
	const __u8 *p = r->at;

	if ((size_t)(r->end - r->at) < len)
		return NULL;
	r->at += len;
	return p;
}

/* Does the running NF's map fit ours? NULL, or why not. */
static const char *misfit(const struct vz_ctl_map *m, const struct snap_map *h)
{
	if (h->type != m->type || h->key_size != m->key_size ||
	    h->value_size != m->value_size)
		return "its type or sizes differ";
	if (h->copies != m->copies)
		return "its per-CPU copies differ (run with the same "
		       "--workers)";
	if (vz_ctl_is_array(m->type) && h->max_entries != m->max_entries)
		return "its size differs";
	if (!vz_ctl_is_array(m->type) && h->count > m->max_entries)
		return "it holds more entries than ours can";
	return NULL;
}

static int restore_map(struct vz_ctl_map *m, const struct snap_map *h,
		       struct reader *r, char *err, size_t errlen)
{
	size_t vlen = vz_ctl_full_size(m);
	const __u8 *key, *value;
	__u64 i;
	int ret;

	if (vz_ctl_is_array(m->type)) {
		value = take(r, h->count);
		if (!value || h->count != array_bytes(m->native))
			goto short_file;
		memcpy(m->native->values, value, h->count);
		return 0;
	}
	for (i = 0; i < h->count; i++) {
		key = take(r, m->key_size);
		value = take(r, vlen);
		if (!key || !value)
			goto short_file;
		ret = vz_ctl_map_write(m, key, value);
		if (ret) {
			snprintf(err, errlen, "map %s: writing an entry: %s",
				 m->name, strerror(-ret));
			return ret;
		}
	}
	return 0;
short_file:
	snprintf(err, errlen, "map %s: the handed-over state is cut short",
		 m->name);
	return -EINVAL;
}

int vz_ctl_restore(struct vz_ctl *ctl, int fd, char *err, size_t errlen)
{
	const struct snap_header *h;
	struct reader r;
	struct stat st;
	void *mem;
	__u32 i;
	int ret = -EINVAL;

	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(*h)) {
		snprintf(err, errlen, "the handed-over state is empty");
		return -EINVAL;
	}
	mem = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (mem == MAP_FAILED) {
		snprintf(err, errlen, "mapping the handed-over state: %s",
			 strerror(errno));
		return -errno;
	}
	r = (struct reader){ mem, (const __u8 *)mem + st.st_size };
	h = take(&r, sizeof(*h));
	if (h->magic != SNAP_MAGIC || h->version != SNAP_VERSION) {
		snprintf(err, errlen,
			 "the running NF's state is of another "
			 "format");
		goto out;
	}
	for (i = 0; i < h->nmaps; i++) {
		const struct snap_map *mh = take(&r, sizeof(*mh));
		struct vz_ctl_map *m;
		const char *why;

		if (!mh) {
			ret = -EINVAL;
			snprintf(err, errlen,
				 "the handed-over state is cut "
				 "short");
			goto out;
		}
		m = vz_ctl_find_map(ctl, mh->name);
		why = m ? misfit(m, mh) : "this build has no such map";
		if (why) {
			snprintf(err, errlen, "map %.64s: %s", mh->name, why);
			ret = -EINVAL;
			goto out;
		}
		ret = restore_map(m, mh, &r, err, errlen);
		if (ret)
			goto out;
	}
	ret = 0;
out:
	munmap(mem, (size_t)st.st_size);
	return ret;
}

/* ---- the request --------------------------------------------------------- */

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * "handover": the workers stop at their next frame and stay stopped; the
 * state goes with the reply, "ok PID PAUSED_AT" (wall-clock seconds). The
 * successor then says "leave", or hangs up and the workers go on.
 */
void vz_ctl_handover(struct session *s, struct buf *out)
{
	struct vz_ctl *ctl = s->ctl;
	double paused_at;
	int err, fd;

	if (!ctl->pause) {
		vz_ctl_buf_printf(out,
				  "error handover: this %s run's NF is "
				  "taken over at the hook (xdp)\n",
				  ctl->backend);
		return;
	}
	if (s->in_tx || s->handed_over) {
		vz_ctl_buf_printf(out, "error handover: %s\n",
				  s->in_tx ? "a transaction is open"
					   : "handed over already");
		return;
	}
	paused_at = wall_now();
	err = ctl->pause(ctl->pause_arg, true);
	if (err) {
		vz_ctl_buf_printf(out,
				  "error handover: the workers did not "
				  "stop: %s\n",
				  strerror(-err));
		return;
	}
	err = vz_ctl_snapshot(ctl, &fd);
	if (err) {
		ctl->pause(ctl->pause_arg, false);
		vz_ctl_buf_printf(out, "error handover: %s\n", strerror(-err));
		return;
	}
	s->handed_over = true;
	s->pass_fd = fd;
	vz_ctl_buf_printf(out, "ok %d %.6f\n", (int)getpid(), paused_at);
}
