// SPDX-License-Identifier: BSD-2-Clause
/*
 * Map operations from an ops file or a control socket (see ctl.h). Every
 * request line gets one reply line; a transaction (begin ... commit) keeps
 * an undo log of the values it replaced, so a failure part-way (a full
 * table, a bad key) leaves the running NF as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "runtime/ctl.h"
#include "common/peercred.h"

#define LINE_MAX_BYTES (1u << 20)
#define POLL_MS 200

/* ---- growable byte buffers ---------------------------------------------- */

struct buf {
	char *data;
	size_t len, cap;
};

static int buf_reserve(struct buf *b, size_t more)
{
	size_t cap = b->cap ? b->cap : 4096;
	char *data;

	if (b->len + more <= b->cap)
		return 0;
	while (cap < b->len + more)
		cap *= 2;
	data = realloc(b->data, cap);
	if (!data)
		return -ENOMEM;
	b->data = data;
	b->cap = cap;
	return 0;
}

static void buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n + 1))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void buf_hex(struct buf *b, const __u8 *bytes, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	if (buf_reserve(b, 2 * n + 1))
		return;
	for (i = 0; i < n; i++) {
		b->data[b->len++] = digits[bytes[i] >> 4];
		b->data[b->len++] = digits[bytes[i] & 15];
	}
}

static int unhex(const char *text, __u8 *out, size_t max, size_t *n)
{
	size_t len = strlen(text), i;

	if (len % 2 || len / 2 > max)
		return -EINVAL;
	for (i = 0; i < len / 2; i++) {
		unsigned int v;

		if (sscanf(text + 2 * i, "%2x", &v) != 1 ||
		    !strchr("0123456789abcdefABCDEF", text[2 * i]) ||
		    !strchr("0123456789abcdefABCDEF", text[2 * i + 1]))
			return -EINVAL;
		out[i] = (__u8)v;
	}
	*n = len / 2;
	return 0;
}

/* ---- the maps ----------------------------------------------------------- */

static bool is_percpu(__u32 type)
{
	return type == BPF_MAP_TYPE_PERCPU_ARRAY ||
	       type == BPF_MAP_TYPE_PERCPU_HASH ||
	       type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

static bool is_array(__u32 type)
{
	return type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_ARRAY;
}

static __u32 stride(const struct vz_ctl_map *m)
{
	return (m->value_size + 7) / 8 * 8;
}

/* Bytes of a full value: every copy, one stride apart. */
static size_t full_size(const struct vz_ctl_map *m)
{
	return is_percpu(m->type) ? (size_t)stride(m) * m->copies
				  : m->value_size;
}

void vz_ctl_init_bpf(struct vz_ctl *ctl, struct bpf_object *obj, const char *nf,
		     const char *backend)
{
	struct bpf_map *map;
	int ncpus = libbpf_num_possible_cpus();

	memset(ctl, 0, sizeof(*ctl));
	ctl->listen_fd = -1;
	pthread_mutex_init(&ctl->counters_lock, NULL);
	ctl->nf = nf;
	ctl->backend = backend;
	bpf_object__for_each_map (map, obj) {
		struct vz_ctl_map *m = &ctl->maps[ctl->nmaps];

		/* internal maps (.data, .bss, .rodata) are the config's */
		if (strchr(bpf_map__name(map), '.') ||
		    ctl->nmaps == VZ_CTL_MAX_MAPS)
			continue;
		snprintf(m->name, sizeof(m->name), "%s", bpf_map__name(map));
		m->type = bpf_map__type(map);
		m->key_size = bpf_map__key_size(map);
		m->value_size = bpf_map__value_size(map);
		m->max_entries = bpf_map__max_entries(map);
		m->copies = is_percpu(m->type) && ncpus > 0 ? (__u32)ncpus : 1;
		m->bpf = map;
		ctl->nmaps++;
	}
}

void vz_ctl_init_native(struct vz_ctl *ctl, const struct vz_native_nf *nf,
			const char *backend)
{
	struct vz_map *const *ref;

	memset(ctl, 0, sizeof(*ctl));
	ctl->listen_fd = -1;
	pthread_mutex_init(&ctl->counters_lock, NULL);
	ctl->nf = nf->desc->name;
	ctl->backend = backend;
	for (ref = nf->desc->maps;
	     ref < nf->desc->maps_end && ctl->nmaps < VZ_CTL_MAX_MAPS; ref++) {
		struct vz_ctl_map *m = &ctl->maps[ctl->nmaps++];

		snprintf(m->name, sizeof(m->name), "%s", (*ref)->name);
		m->type = (*ref)->type;
		m->key_size = (*ref)->key_size;
		m->value_size = (*ref)->value_size;
		m->max_entries = (*ref)->max_entries;
		m->copies = (*ref)->nworkers ? (*ref)->nworkers : 1;
		m->native = *ref;
	}
}

void vz_ctl_add_port(struct vz_ctl *ctl, const char *ifname)
{
	if (ctl->nports < 64)
		ctl->ports[ctl->nports++] = ifname;
}

static struct vz_ctl_map *find_map(struct vz_ctl *ctl, const char *name)
{
	int i;

	for (i = 0; i < ctl->nmaps; i++)
		if (!strcmp(ctl->maps[i].name, name))
			return &ctl->maps[i];
	return NULL;
}

/*
 * The map's fd. Before the object is loaded (an ops file applied before
 * attaching), create the map now and let libbpf reuse it at load time, so
 * the NF starts with its state in place.
 */
static int bpf_fd(struct vz_ctl_map *m)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts,
		    .map_flags = bpf_map__map_flags(m->bpf));
	int fd = bpf_map__fd(m->bpf), err;

	if (fd >= 0)
		return fd;
	fd = bpf_map_create(m->type, m->name, m->key_size, m->value_size,
			    m->max_entries, &opts);
	if (fd < 0)
		return -errno;
	err = bpf_map__reuse_fd(m->bpf, fd);
	close(fd); /* libbpf holds its own copy */
	return err ? err : bpf_map__fd(m->bpf);
}

static int map_read(struct vz_ctl_map *m, const void *key, void *value)
{
	int fd;

	if (m->native)
		return vz_map_read(m->native, key, value);
	fd = bpf_fd(m);
	if (fd < 0)
		return fd;
	return bpf_map_lookup_elem(fd, key, value) ? -errno : 0;
}

static int map_write(struct vz_ctl_map *m, const void *key, const void *value)
{
	int fd;

	if (m->native)
		return vz_map_write(m->native, key, value, BPF_ANY);
	fd = bpf_fd(m);
	if (fd < 0)
		return fd;
	return bpf_map_update_elem(fd, key, value, BPF_ANY) ? -errno : 0;
}

static int map_delete(struct vz_ctl_map *m, const void *key)
{
	int fd;

	if (is_array(m->type))
		return -EINVAL; /* as BPF: array slots always exist */
	if (m->native)
		return vz_map_delete_elem(m->native, key);
	fd = bpf_fd(m);
	if (fd < 0)
		return fd;
	return bpf_map_delete_elem(fd, key) ? -errno : 0;
}

/*
 * Runs of consecutive entries of an array map (fill, read): one batch
 * syscall for a BPF map, so a router's DIR-24-8 table (16 M entries) loads in
 * seconds rather than minutes of one syscall per entry.
 */
static int map_run(struct vz_ctl_map *m, __u32 first, __u32 count, void *values,
		   bool write)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	__u32 *keys, i, done = 0, n;
	int fd, err = 0;

	if (m->native) {
		for (i = 0; i < count && !err; i++) {
			__u32 key = first + i;
			__u8 *v = (__u8 *)values + (size_t)i * m->value_size;

			err = write ? vz_map_write(m->native, &key, v, BPF_ANY)
				    : vz_map_read(m->native, &key, v);
		}
		return err;
	}
	fd = bpf_fd(m);
	if (fd < 0)
		return fd;
	keys = malloc((size_t)count * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (i = 0; i < count; i++)
		keys[i] = first + i;
	if (write) {
		while (!err && done < count) {
			n = count - done;
			if (bpf_map_update_batch(fd, keys + done,
						 (__u8 *)values +
							 (size_t)done *
								 m->value_size,
						 &n, &opts))
				err = -errno;
			done += n;
		}
	} else {
		/* an array's lookup batch starts after the key in_batch holds
		 */
		while (!err && done < count) {
			__u32 prev = first + done - 1, next;

			n = count - done;
			if (bpf_map_lookup_batch(
				    fd, first + done ? &prev : NULL, &next,
				    keys + done,
				    (__u8 *)values +
					    (size_t)done * m->value_size,
				    &n, &opts) &&
			    (errno != ENOENT || !n))
				err = -errno;
			done += n;
		}
	}
	free(keys);
	return err;
}

static int map_write_run(struct vz_ctl_map *m, __u32 first, __u32 count,
			 const void *values)
{
	return map_run(m, first, count, (void *)values, true);
}

static int map_next_key(struct vz_ctl_map *m, const void *key, void *next)
{
	int fd;

	if (m->native)
		return vz_map_next_key(m->native, key, next);
	fd = bpf_fd(m);
	if (fd < 0)
		return fd;
	return bpf_map_get_next_key(fd, key, next) ? -errno : 0;
}

/* ---- a session: requests, replies, transactions -------------------------- */

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
};

static const char *map_error(int err)
{
	switch (err) {
	case -E2BIG:
	case -ENOSPC:
		return "the map is full";
	case -ENOENT:
		return "no such entry";
	case -EEXIST:
		return "the entry exists";
	default:
		return strerror(-err);
	}
}

/* "error MSG" as the reply; MSG is kept for a transaction's commit. */
static void reply_error(struct session *s, struct buf *out, const char *fmt,
			...) __attribute__((format(printf, 3, 4)));

static void reply_error(struct session *s, struct buf *out, const char *fmt,
			...)
{
	va_list ap;
	char *c;

	va_start(ap, fmt);
	vsnprintf(s->last_error, sizeof(s->last_error), fmt, ap);
	va_end(ap);
	/* messages quote the client's words: one printable line, always */
	for (c = s->last_error; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	buf_printf(out, "error %s\n", s->last_error);
}

static int session_init(struct session *s, struct vz_ctl *ctl)
{
	size_t key = 8, value = 8;
	int i;

	memset(s, 0, sizeof(*s));
	s->ctl = ctl;
	for (i = 0; i < ctl->nmaps; i++) {
		if (ctl->maps[i].key_size > key)
			key = ctl->maps[i].key_size;
		if (full_size(&ctl->maps[i]) > value)
			value = full_size(&ctl->maps[i]);
	}
	s->key_cap = key;
	s->value_cap = value;
	s->key = malloc(key);
	s->value = malloc(value);
	s->old = malloc(value);
	return s->key && s->value && s->old ? 0 : -ENOMEM;
}

static void forget_undo(struct session *s)
{
	size_t i;

	for (i = 0; i < s->nundo; i++)
		free(s->undo[i].key);
	s->nundo = 0;
}

static void session_free(struct session *s)
{
	forget_undo(s);
	free(s->undo);
	free(s->key);
	free(s->value);
	free(s->old);
}

/*
 * Whether an LPM map holds exactly `key`. Its lookup cannot tell: it returns
 * the longest prefix that covers the key, maybe a shorter one. But next_key
 * after an absent key starts over at the first key (in the kernel's trie as
 * in ours), and after a present one it moves on or reaches the end.
 */
static int lpm_holds(struct vz_ctl_map *m, const void *key)
{
	__u8 first[64], next[64];
	int err;

	if (m->key_size > sizeof(first))
		return -EINVAL;
	err = map_next_key(m, NULL, first);
	if (err)
		return err == -ENOENT ? 0 : err; /* empty */
	err = map_next_key(m, key, next);
	if (err == -ENOENT)
		return 1; /* the last key */
	if (err)
		return err;
	return memcmp(first, next, m->key_size) != 0;
}

/* Remember what key held before a change, to put it back on failure. */
static int remember(struct session *s, struct vz_ctl_map *m)
{
	size_t full = full_size(m);
	struct undo *u;
	int err;

	if (!s->in_tx)
		return 0;
	if (s->nundo == s->cap_undo) {
		size_t cap = s->cap_undo ? s->cap_undo * 2 : 256;
		struct undo *more = realloc(s->undo, cap * sizeof(*more));

		if (!more)
			return -ENOMEM;
		s->undo = more;
		s->cap_undo = cap;
	}
	u = &s->undo[s->nundo];
	u->map = m;
	u->run = 0; /* one entry: the undo array is reused, never zeroed */
	u->key = malloc(m->key_size + full);
	if (!u->key)
		return -ENOMEM;
	memcpy(u->key, s->key, m->key_size);
	err = map_read(m, s->key, u->key + m->key_size);
	if (!err && m->type == BPF_MAP_TYPE_LPM_TRIE) {
		err = lpm_holds(m, s->key);
		err = err == 1 ? 0 : err == 0 ? -ENOENT : err;
	}
	u->had_value = !err;
	if (err && err != -ENOENT) {
		free(u->key);
		return err;
	}
	s->nundo++;
	return 0;
}

static void roll_back(struct session *s)
{
	while (s->nundo) {
		struct undo *u = &s->undo[--s->nundo];

		if (u->run)
			map_write_run(u->map, *(__u32 *)u->key, u->run,
				      u->key + u->map->key_size);
		else if (u->had_value)
			map_write(u->map, u->key, u->key + u->map->key_size);
		else
			map_delete(u->map, u->key);
		free(u->key);
	}
}

/* Parse "MAP KEYHEX": the map and s->key. */
static struct vz_ctl_map *parse_target(struct session *s, char *map_name,
				       char *key_hex, struct buf *out)
{
	struct vz_ctl_map *m;
	size_t n;

	if (!map_name || !key_hex) {
		reply_error(s, out, "expected MAP KEYHEX");
		return NULL;
	}
	m = find_map(s->ctl, map_name);
	if (!m) {
		reply_error(s, out, "%s has no map '%s'", s->ctl->nf, map_name);
		return NULL;
	}
	if (unhex(key_hex, s->key, s->key_cap, &n) || n != m->key_size) {
		reply_error(s, out, "%s: the key must be %u bytes of hex",
			    m->name, m->key_size);
		return NULL;
	}
	return m;
}

/* The full value from hex: one copy (written to every CPU) or all copies. */
static int parse_value(struct session *s, struct vz_ctl_map *m, const char *hex,
		       struct buf *out)
{
	size_t n, full = full_size(m), c;

	if (!hex || unhex(hex, s->old, s->value_cap, &n) ||
	    (n != m->value_size && n != full)) {
		reply_error(s, out, "%s: the value must be %u bytes of hex",
			    m->name, m->value_size);
		return -EINVAL;
	}
	memset(s->value, 0, full);
	if (n == full) {
		memcpy(s->value, s->old, full);
		return 0;
	}
	for (c = 0; c < (is_percpu(m->type) ? m->copies : 1); c++)
		memcpy(s->value + c * stride(m), s->old, m->value_size);
	return 0;
}

static void do_change(struct session *s, char *verb, char *args[4],
		      struct buf *out)
{
	bool update = !strcmp(verb, "update");
	size_t undo_before = s->nundo;
	struct vz_ctl_map *m;
	int err;

	m = parse_target(s, args[0], args[1], out);
	if (!m)
		goto failed;
	if (update && parse_value(s, m, args[2], out))
		goto failed;
	if (args[update ? 3 : 2]) {
		reply_error(s, out, "%s takes MAP KEYHEX%s", verb,
			    update ? " VALUEHEX" : "");
		goto failed;
	}
	if (s->failed) {
		buf_printf(out, "error skipped after an earlier error\n");
		return;
	}
	err = remember(s, m);
	if (!err)
		err = update ? map_write(m, s->key, s->value)
			     : map_delete(m, s->key);
	if (err) {
		if (s->nundo > undo_before) /* nothing changed after all */
			free(s->undo[--s->nundo].key);
		reply_error(s, out, "%s %s: %s", verb, m->name, map_error(err));
		goto failed;
	}
	buf_printf(out, "ok\n");
	return;
failed:
	if (s->in_tx && !s->failed) {
		memcpy(s->first_error, s->last_error, sizeof(s->first_error));
		s->failed = true;
	}
}

/*
 * "fill MAP KEYHEX COUNT VALUEHEX": COUNT entries of an array from index KEY
 * on get one value; "read MAP KEYHEX COUNT" answers "ok HEX" of COUNT
 * values. For tables built of runs (a router's DIR-24-8: a /16 is 256 equal
 * entries), where a line per entry would be millions of lines.
 */
static struct vz_ctl_map *parse_run(struct session *s, char *args[4],
				    __u32 *first, __u32 *count, struct buf *out)
{
	struct vz_ctl_map *m = parse_target(s, args[0], args[1], out);
	unsigned long n;
	char *end;

	if (!m)
		return NULL;
	if (m->type != BPF_MAP_TYPE_ARRAY) {
		reply_error(s, out, "%s: runs are for arrays (not per-CPU)",
			    m->name);
		return NULL;
	}
	*first = *(__u32 *)s->key;
	errno = 0;
	n = args[2] && args[2][0] != '-' ? strtoul(args[2], &end, 10) : 0;
	if (!n || errno || *end || *first >= m->max_entries ||
	    n > m->max_entries - *first) {
		reply_error(s, out, "%s: COUNT must be 1 to %u from index %u",
			    m->name, m->max_entries - *first, *first);
		return NULL;
	}
	*count = (__u32)n;
	return m;
}

static void do_fill(struct session *s, char *args[4], struct buf *out)
{
	struct vz_ctl_map *m;
	__u32 first, count, i;
	__u8 *values = NULL;
	struct undo *u = NULL;
	int err;

	m = parse_run(s, args, &first, &count, out);
	if (!m)
		goto failed;
	if (parse_value(s, m, args[3], out))
		goto failed;
	if (s->failed) {
		buf_printf(out, "error skipped after an earlier error\n");
		return;
	}
	values = malloc((size_t)count * m->value_size);
	if (!values) {
		reply_error(s, out, "fill %s: out of memory", m->name);
		goto failed;
	}
	if (s->in_tx) {
		if (s->nundo == s->cap_undo) {
			size_t cap = s->cap_undo ? s->cap_undo * 2 : 256;
			struct undo *more =
				realloc(s->undo, cap * sizeof(*more));

			if (!more) {
				reply_error(s, out, "fill: out of memory");
				goto failed;
			}
			s->undo = more;
			s->cap_undo = cap;
		}
		u = &s->undo[s->nundo];
		u->map = m;
		u->had_value = true;
		u->run = count;
		u->key = malloc(m->key_size + (size_t)count * m->value_size);
		if (!u->key) {
			reply_error(s, out, "fill: out of memory");
			goto failed;
		}
		memcpy(u->key, &first, sizeof(first));
		err = map_run(m, first, count, u->key + m->key_size, false);
		if (err) {
			free(u->key);
			reply_error(s, out, "fill %s: %s", m->name,
				    map_error(err));
			goto failed;
		}
		s->nundo++;
	}
	for (i = 0; i < count; i++)
		memcpy(values + (size_t)i * m->value_size, s->value,
		       m->value_size);
	err = map_write_run(m, first, count, values);
	if (err) {
		/* the undo entry stays: part of the run may be written */
		reply_error(s, out, "fill %s: %s", m->name, map_error(err));
		goto failed;
	}
	free(values);
	buf_printf(out, "ok\n");
	return;
failed:
	free(values);
	if (s->in_tx && !s->failed) {
		memcpy(s->first_error, s->last_error, sizeof(s->first_error));
		s->failed = true;
	}
}

static void do_read(struct session *s, char *args[4], struct buf *out)
{
	struct vz_ctl_map *m;
	__u32 first, count;
	__u8 *values;
	int err;

	m = parse_run(s, args, &first, &count, out);
	if (!m)
		return;
	values = malloc((size_t)count * m->value_size);
	if (!values) {
		reply_error(s, out, "read %s: out of memory", m->name);
		return;
	}
	err = map_run(m, first, count, values, false);
	if (err) {
		reply_error(s, out, "read %s: %s", m->name, map_error(err));
	} else {
		buf_printf(out, "ok ");
		buf_hex(out, values, (size_t)count * m->value_size);
		buf_printf(out, "\n");
	}
	free(values);
}

/* "holds MAP KEYHEX": "ok 1" if an LPM map holds exactly that prefix (its
 * lookup answers the longest covering one), else "ok 0". */
static void do_holds(struct session *s, char *args[4], struct buf *out)
{
	struct vz_ctl_map *m = parse_target(s, args[0], args[1], out);
	int held;

	if (!m)
		return;
	if (m->type != BPF_MAP_TYPE_LPM_TRIE) {
		reply_error(s, out, "%s is not an LPM map", m->name);
		return;
	}
	held = lpm_holds(m, s->key);
	if (held < 0)
		reply_error(s, out, "holds %s: %s", m->name, map_error(held));
	else
		buf_printf(out, "ok %d\n", held);
}

static void do_lookup(struct session *s, char *args[4], struct buf *out)
{
	struct vz_ctl_map *m = parse_target(s, args[0], args[1], out);
	int err;

	if (!m)
		return;
	err = map_read(m, s->key, s->value);
	if (err) {
		buf_printf(out, "error lookup %s: %s\n", m->name,
			   map_error(err));
		return;
	}
	buf_printf(out, "ok ");
	buf_hex(out, s->value, full_size(m));
	buf_printf(out, "\n");
}

static void do_dump(struct session *s, char *name, struct buf *out)
{
	struct vz_ctl_map *m = name ? find_map(s->ctl, name) : NULL;
	struct buf rows = { 0 };
	__u8 *key = s->key, *next = s->old;
	size_t count = 0;
	bool first = true;

	if (!m) {
		reply_error(s, out, "%s has no map '%s'", s->ctl->nf,
			    name ? name : "");
		return;
	}
	/* next_key writes one key; s->old holds any full value, so any key */
	while (!map_next_key(m, first ? NULL : key, next)) {
		first = false;
		memcpy(key, next, m->key_size);
		if (map_read(m, key, s->value))
			continue; /* deleted meanwhile */
		buf_hex(&rows, key, m->key_size);
		buf_printf(&rows, " ");
		buf_hex(&rows, s->value, full_size(m));
		buf_printf(&rows, "\n");
		count++;
	}
	buf_printf(out, "ok %zu\n", count);
	if (rows.len && !buf_reserve(out, rows.len)) {
		memcpy(out->data + out->len, rows.data, rows.len);
		out->len += rows.len;
	}
	free(rows.data);
}

/* "ok 1" and the latest counters line, or "ok 0" before the first one */
static void do_counters(struct vz_ctl *ctl, struct buf *out)
{
	pthread_mutex_lock(&ctl->counters_lock);
	if (!ctl->counters) {
		buf_printf(out, "ok 0\n");
	} else if (!buf_reserve(out, ctl->counters_len + 8)) {
		buf_printf(out, "ok 1\n");
		memcpy(out->data + out->len, ctl->counters, ctl->counters_len);
		out->len += ctl->counters_len;
		buf_printf(out, "\n");
	}
	pthread_mutex_unlock(&ctl->counters_lock);
}

static void execute(struct session *s, char *line, struct buf *out)
{
	char *save = NULL, *verb = strtok_r(line, " \t\r", &save);
	char *args[4] = { 0 };
	int i;

	for (i = 0; i < 4; i++)
		args[i] = strtok_r(NULL, " \t\r", &save);
	if (!verb) {
		buf_printf(out, "error empty request\n");
	} else if (!strcmp(verb, "update") || !strcmp(verb, "delete")) {
		do_change(s, verb, args, out);
	} else if (!strcmp(verb, "fill")) {
		do_fill(s, args, out);
	} else if (!strcmp(verb, "read")) {
		do_read(s, args, out);
	} else if (!strcmp(verb, "holds")) {
		do_holds(s, args, out);
	} else if (!strcmp(verb, "lookup")) {
		do_lookup(s, args, out);
	} else if (!strcmp(verb, "dump")) {
		do_dump(s, args[0], out);
	} else if (!strcmp(verb, "begin")) {
		if (s->in_tx) {
			buf_printf(out, "error a transaction is open\n");
			return;
		}
		s->in_tx = true;
		s->failed = false;
		buf_printf(out, "ok\n");
	} else if (!strcmp(verb, "commit")) {
		if (!s->in_tx) {
			buf_printf(out, "error no transaction is open\n");
			return;
		}
		if (s->failed) {
			roll_back(s);
			buf_printf(out, "error %s; nothing was changed\n",
				   s->first_error);
		} else {
			forget_undo(s);
			buf_printf(out, "ok\n");
		}
		s->in_tx = s->failed = false;
	} else if (!strcmp(verb, "maps")) {
		buf_printf(out, "ok %d\n", s->ctl->nmaps);
		for (i = 0; i < s->ctl->nmaps; i++) {
			const struct vz_ctl_map *m = &s->ctl->maps[i];

			buf_printf(out, "%s %u %u %u %u %u\n", m->name, m->type,
				   m->key_size, m->value_size, m->max_entries,
				   is_percpu(m->type) ? m->copies : 1);
		}
	} else if (!strcmp(verb, "ports")) {
		buf_printf(out, "ok %d\n", s->ctl->nports);
		for (i = 0; i < s->ctl->nports; i++)
			buf_printf(out, "%d %s\n", i, s->ctl->ports[i]);
	} else if (!strcmp(verb, "info")) {
		buf_printf(out, "ok %s %s\n", s->ctl->nf, s->ctl->backend);
	} else if (!strcmp(verb, "counters")) {
		do_counters(s->ctl, out);
	} else {
		reply_error(s, out, "unknown request '%.40s'", verb);
	}
}

/* ---- an ops file --------------------------------------------------------- */

int vz_ctl_apply_file(struct vz_ctl *ctl, const char *path, char *err,
		      size_t errlen)
{
	struct buf out = { 0 };
	struct session s;
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t n;
	FILE *f;
	int ret = 0;

	f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "ops file %s: %s", path, strerror(errno));
		return -errno;
	}
	if (session_init(&s, ctl)) {
		fclose(f);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s.in_tx = true;
	/* bounded lines, not getline: an ops file from /dev/zero (one endless
	 * line) must be refused, not read until memory runs out */
	cap = LINE_MAX_BYTES + 2;
	line = malloc(cap);
	if (!line)
		ret = -ENOMEM;
	while (line && fgets(line, (int)cap, f)) {
		n = (ssize_t)strlen(line);
		lineno++;
		if (n && line[n - 1] == '\n') {
			line[n - 1] = '\0';
		} else if (!feof(f)) {
			snprintf(err, errlen,
				 "ops file %s line %zu: longer than %u bytes "
				 "or holds a NUL",
				 path, lineno, LINE_MAX_BYTES);
			ret = -EINVAL;
			break;
		}
		if (!line[0] || line[0] == '#')
			continue;
		out.len = 0;
		if (strncmp(line, "update ", 7) &&
		    strncmp(line, "delete ", 7) && strncmp(line, "fill ", 5)) {
			snprintf(err, errlen,
				 "ops file %s line %zu: not an "
				 "update, delete or fill",
				 path, lineno);
			ret = -EINVAL;
			break;
		}
		execute(&s, line, &out);
		if (out.len >= 5 && !strncmp(out.data, "error", 5)) {
			snprintf(err, errlen, "ops file %s line %zu: %.*s",
				 path, lineno, (int)out.len - 7, out.data + 6);
			ret = -EINVAL;
			break;
		}
	}
	if (!ret && ferror(f)) {
		snprintf(err, errlen, "ops file %s: %s", path, strerror(EIO));
		ret = -EIO;
	}
	if (ret == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	if (ret)
		roll_back(&s);
	free(line);
	free(out.data);
	session_free(&s);
	fclose(f);
	return ret;
}

/* ---- a whole session from memory (tests, fuzzing) ------------------------ */

int vz_ctl_run_text(struct vz_ctl *ctl, const char *text, size_t len,
		    char **reply, size_t *reply_len)
{
	struct buf out = { 0 };
	struct session s;
	char *copy, *start, *nl;

	*reply = NULL;
	*reply_len = 0;
	copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, text, len);
	copy[len] = '\0';
	if (session_init(&s, ctl)) {
		free(copy);
		return -ENOMEM;
	}
	/* line by line, as serve() splits what it reads; a last line without
	 * its newline is not a request, as on the socket */
	for (start = copy;
	     (nl = memchr(start, '\n', len - (size_t)(start - copy)));
	     start = nl + 1) {
		*nl = '\0';
		execute(&s, start, &out);
	}
	if (s.in_tx)
		roll_back(&s); /* as when a client hangs up mid-transaction */
	session_free(&s);
	free(copy);
	*reply = out.data;
	*reply_len = out.len;
	return 0;
}

/* ---- the socket ---------------------------------------------------------- */

static int write_all(int fd, const char *data, size_t len)
{
	while (len) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static void serve(struct vz_ctl *ctl, int fd)
{
	struct buf in = { 0 }, out = { 0 };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct session s;

	if (session_init(&s, ctl))
		goto out;
	while (!ctl->stop) {
		char *start, *nl;
		ssize_t n;

		if (poll(&pfd, 1, POLL_MS) <= 0)
			continue;
		if (buf_reserve(&in, 65536))
			break;
		n = read(fd, in.data + in.len, in.cap - in.len);
		if (n <= 0)
			break;
		in.len += (size_t)n;
		out.len = 0;
		start = in.data;
		while ((nl = memchr(start, '\n',
				    in.len - (size_t)(start - in.data)))) {
			*nl = '\0';
			execute(&s, start, &out);
			start = nl + 1;
		}
		in.len -= (size_t)(start - in.data);
		memmove(in.data, start, in.len);
		if (in.len > LINE_MAX_BYTES)
			break; /* no line is that long: not our client */
		if (out.len && write_all(fd, out.data, out.len))
			break;
	}
	/* a client gone mid-transaction leaves nothing half-done */
	if (s.in_tx)
		roll_back(&s);
	session_free(&s);
out:
	free(in.data);
	free(out.data);
	close(fd);
}

/* Root or the configured group only, whatever the socket's mode: a
 * refused peer gets one line and the hang-up. */
static bool refuse(struct vz_ctl *ctl, int fd)
{
	static const char msg[] = "error permission denied: root or the "
				  "run's --ctl-group only\n";
	uid_t uid;

	if (vz_peer_allowed(fd, ctl->gid, &uid))
		return false;
	__atomic_add_fetch(&ctl->refused, 1, __ATOMIC_RELAXED);
	if (send(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* it left already */
	}
	return true;
}

static void *server_thread(void *arg)
{
	struct vz_ctl *ctl = arg;
	struct pollfd pfd = { .fd = ctl->listen_fd, .events = POLLIN };

	while (!ctl->stop) {
		int fd;

		if (poll(&pfd, 1, POLL_MS) <= 0)
			continue;
		fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (refuse(ctl, fd))
			close(fd);
		else
			serve(ctl, fd);
	}
	return NULL;
}

/*
 * The directory is 0755 whoever runs: it is shared by every run on the
 * machine, each with its own group or none, so the sockets' modes (and
 * refuse()) guard them, not the directory's.
 */
static int make_dirs(const char *dir)
{
	char path[108];
	char *slash;

	snprintf(path, sizeof(path), "%s", dir);
	for (slash = strchr(path + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			return -errno;
		*slash = '/';
	}
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	return chmod(path, 0755) ? -errno : 0;
}

int vz_ctl_listen(struct vz_ctl *ctl, gid_t gid, char *err, size_t errlen)
{
	const char *dir = getenv("VELOZ_CTL_DIR");
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct stat ns;
	int fd, ret;

	if (!dir || !*dir)
		dir = "/run/veloz/ctl";
	if (stat("/proc/self/ns/net", &ns) || !ctl->nports) {
		snprintf(err, errlen, "control socket: no network namespace");
		return -EINVAL;
	}
	ret = snprintf(ctl->path, sizeof(ctl->path), "%s/net%lu-%s.sock", dir,
		       (unsigned long)ns.st_ino, ctl->ports[0]);
	if (ret < 0 || (size_t)ret >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "control socket path too long in %s",
			 dir);
		ctl->path[0] = '\0';
		return -ENAMETOOLONG;
	}
	ret = make_dirs(dir);
	if (ret) {
		snprintf(err, errlen, "cannot create %s: %s", dir,
			 strerror(-ret));
		ctl->path[0] = '\0';
		return ret;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(addr.sun_path, ctl->path, strlen(ctl->path) + 1);
	/* The port is ours (claimed before this), so a file here is stale. */
	unlink(ctl->path);
	ctl->gid = gid;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    (gid != VZ_ROOT_ONLY && chown(ctl->path, 0, gid)) ||
	    chmod(ctl->path, gid != VZ_ROOT_ONLY ? 0660 : 0600) ||
	    listen(fd, 8)) {
		ret = -errno;
		snprintf(err, errlen, "control socket %s: %s", ctl->path,
			 strerror(errno));
		close(fd);
		unlink(ctl->path);
		ctl->path[0] = '\0';
		return ret;
	}
	ctl->listen_fd = fd;
	ctl->stop = 0;
	ret = pthread_create(&ctl->thread, NULL, server_thread, ctl);
	if (ret) {
		snprintf(err, errlen, "control socket thread: %s",
			 strerror(ret));
		vz_ctl_close(ctl);
		return -ret;
	}
	ctl->serving = true;
	return 0;
}

void vz_ctl_publish_counters(struct vz_ctl *ctl, const char *line, size_t len)
{
	char *copy;

	if (ctl->listen_fd < 0)
		return;
	while (len && line[len - 1] == '\n')
		len--;
	copy = malloc(len + 1);
	if (!copy)
		return; /* the reader sees the line before: stale, not wrong */
	memcpy(copy, line, len);
	copy[len] = '\0';
	pthread_mutex_lock(&ctl->counters_lock);
	free(ctl->counters);
	ctl->counters = copy;
	ctl->counters_len = len;
	pthread_mutex_unlock(&ctl->counters_lock);
}

void vz_ctl_close(struct vz_ctl *ctl)
{
	ctl->stop = 1;
	if (ctl->serving)
		pthread_join(ctl->thread, NULL);
	ctl->serving = false;
	if (ctl->listen_fd >= 0)
		close(ctl->listen_fd);
	ctl->listen_fd = -1;
	if (ctl->path[0])
		unlink(ctl->path);
	ctl->path[0] = '\0';
	pthread_mutex_lock(&ctl->counters_lock);
	free(ctl->counters);
	ctl->counters = NULL;
	ctl->counters_len = 0;
	pthread_mutex_unlock(&ctl->counters_lock);
}
