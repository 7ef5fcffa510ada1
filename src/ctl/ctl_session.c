// SPDX-License-Identifier: BSD-2-Clause
/*
 * Request lines, from an ops file or a control socket (see ctl.h). Every
 * request line gets one reply line; a transaction (begin ... commit) keeps
 * an undo log of the values it replaced, so a failure part-way (a full
 * table, a bad key) leaves the running NF as it was.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "common/parse.h"

#include "ctl/capture.h"
#include "ctl/ctl_internal.h"

/* ---- growable byte buffers ---------------------------------------------- */

int vz_ctl_buf_reserve(struct buf *b, size_t more)
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

void vz_ctl_buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || vz_ctl_buf_reserve(b, (size_t)n + 1))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void vz_ctl_buf_hex(struct buf *b, const __u8 *bytes, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	if (vz_ctl_buf_reserve(b, 2 * n + 1))
		return;
	for (i = 0; i < n; i++) {
		b->data[b->len++] = digits[bytes[i] >> 4];
		b->data[b->len++] = digits[bytes[i] & 15];
	}
}

int vz_ctl_unhex(const char *text, __u8 *out, size_t max, size_t *n)
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

/* ---- a session: requests, replies, transactions -------------------------- */

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
	vz_ctl_buf_printf(out, "error %s\n", s->last_error);
}

int vz_ctl_session_init(struct session *s, struct vz_ctl *ctl)
{
	size_t key = 8, value = 8;
	int i;

	memset(s, 0, sizeof(*s));
	s->ctl = ctl;
	s->pass_fd = -1;
	for (i = 0; i < ctl->nmaps; i++) {
		if (ctl->maps[i].key_size > key)
			key = ctl->maps[i].key_size;
		if (vz_ctl_full_size(&ctl->maps[i]) > value)
			value = vz_ctl_full_size(&ctl->maps[i]);
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

void vz_ctl_session_free(struct session *s)
{
	/* a successor gone before "leave": the workers go on */
	if (s->handed_over && !s->ctl->leave) {
		fprintf(stderr, "veloz: the successor hung up before taking "
				"over; the NF runs on\n");
		s->ctl->pause(s->ctl->pause_arg, false);
	}
	if (s->pass_fd >= 0)
		close(s->pass_fd);
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
	err = vz_ctl_map_next_key(m, NULL, first);
	if (err)
		return err == -ENOENT ? 0 : err; /* empty */
	err = vz_ctl_map_next_key(m, key, next);
	if (err == -ENOENT)
		return 1; /* the last key */
	if (err)
		return err;
	return memcmp(first, next, m->key_size) != 0;
}

/* Remember what key held before a change, to put it back on failure. */
static int remember(struct session *s, struct vz_ctl_map *m)
{
	size_t full = vz_ctl_full_size(m);
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
	err = vz_ctl_map_read(m, s->key, u->key + m->key_size);
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

void vz_ctl_roll_back(struct session *s)
{
	while (s->nundo) {
		struct undo *u = &s->undo[--s->nundo];

		if (u->run)
			vz_ctl_map_write_run(u->map, *(__u32 *)u->key, u->run,
					     u->key + u->map->key_size);
		else if (u->had_value)
			vz_ctl_map_write(u->map, u->key,
					 u->key + u->map->key_size);
		else
			vz_ctl_map_delete(u->map, u->key);
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
	m = vz_ctl_find_map(s->ctl, map_name);
	if (!m) {
		reply_error(s, out, "%s has no map '%s'", s->ctl->nf, map_name);
		return NULL;
	}
	if (vz_ctl_unhex(key_hex, s->key, s->key_cap, &n) || n != m->key_size) {
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
	size_t n, full = vz_ctl_full_size(m), c;

	if (!hex || vz_ctl_unhex(hex, s->old, s->value_cap, &n) ||
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
	for (c = 0; c < (vz_ctl_is_percpu(m->type) ? m->copies : 1); c++)
		memcpy(s->value + c * vz_ctl_stride(m), s->old, m->value_size);
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
		vz_ctl_buf_printf(out,
				  "error skipped after an earlier error\n");
		return;
	}
	err = remember(s, m);
	if (!err)
		err = update ? vz_ctl_map_write(m, s->key, s->value)
			     : vz_ctl_map_delete(m, s->key);
	if (err) {
		if (s->nundo > undo_before) /* nothing changed after all */
			free(s->undo[--s->nundo].key);
		reply_error(s, out, "%s %s: %s", verb, m->name, map_error(err));
		goto failed;
	}
	vz_ctl_buf_printf(out, "ok\n");
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
	__u64 n;

	if (!m)
		return NULL;
	if (m->type != BPF_MAP_TYPE_ARRAY) {
		reply_error(s, out, "%s: runs are for arrays (not per-CPU)",
			    m->name);
		return NULL;
	}
	*first = *(__u32 *)s->key;
	if (*first >= m->max_entries || !args[2] ||
	    vz_strtou64(args[2], 10, 1, m->max_entries - *first, &n)) {
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
		vz_ctl_buf_printf(out,
				  "error skipped after an earlier error\n");
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
		err = vz_ctl_map_run(m, first, count, u->key + m->key_size,
				     false);
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
	err = vz_ctl_map_write_run(m, first, count, values);
	if (err) {
		/* the undo entry stays: part of the run may be written */
		reply_error(s, out, "fill %s: %s", m->name, map_error(err));
		goto failed;
	}
	free(values);
	vz_ctl_buf_printf(out, "ok\n");
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
	err = vz_ctl_map_run(m, first, count, values, false);
	if (err) {
		reply_error(s, out, "read %s: %s", m->name, map_error(err));
	} else {
		vz_ctl_buf_printf(out, "ok ");
		vz_ctl_buf_hex(out, values, (size_t)count * m->value_size);
		vz_ctl_buf_printf(out, "\n");
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
		vz_ctl_buf_printf(out, "ok %d\n", held);
}

static void do_lookup(struct session *s, char *args[4], struct buf *out)
{
	struct vz_ctl_map *m = parse_target(s, args[0], args[1], out);
	int err;

	if (!m)
		return;
	err = vz_ctl_map_read(m, s->key, s->value);
	if (err) {
		vz_ctl_buf_printf(out, "error lookup %s: %s\n", m->name,
				  map_error(err));
		return;
	}
	vz_ctl_buf_printf(out, "ok ");
	vz_ctl_buf_hex(out, s->value, vz_ctl_full_size(m));
	vz_ctl_buf_printf(out, "\n");
}

static void do_dump(struct session *s, char *name, struct buf *out)
{
	struct vz_ctl_map *m = name ? vz_ctl_find_map(s->ctl, name) : NULL;
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
	while (!vz_ctl_map_next_key(m, first ? NULL : key, next)) {
		first = false;
		memcpy(key, next, m->key_size);
		if (vz_ctl_map_read(m, key, s->value))
			continue; /* deleted meanwhile */
		vz_ctl_buf_hex(&rows, key, m->key_size);
		vz_ctl_buf_printf(&rows, " ");
		vz_ctl_buf_hex(&rows, s->value, vz_ctl_full_size(m));
		vz_ctl_buf_printf(&rows, "\n");
		count++;
	}
	vz_ctl_buf_printf(out, "ok %zu\n", count);
	if (rows.len && !vz_ctl_buf_reserve(out, rows.len)) {
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
		vz_ctl_buf_printf(out, "ok 0\n");
	} else if (!vz_ctl_buf_reserve(out, ctl->counters_len + 8)) {
		vz_ctl_buf_printf(out, "ok 1\n");
		memcpy(out->data + out->len, ctl->counters, ctl->counters_len);
		out->len += ctl->counters_len;
		vz_ctl_buf_printf(out, "\n");
	}
	pthread_mutex_unlock(&ctl->counters_lock);
}

/*
 * A successor has the NF's program on the hook and its maps (xdp), or the
 * state of its paused workers (userspace): the run stops (within the main
 * loop's 10 ms sleep slice); on xdp it leaves the program attached.
 */
static void do_leave(struct session *s, struct buf *out)
{
	if (!s->ctl->stop_run) {
		reply_error(s, out, "leave: this %s run's NF ends with it",
			    s->ctl->backend);
		return;
	}
	/* a userspace run's state goes with "handover" first */
	if (s->ctl->pause && !s->handed_over) {
		reply_error(s, out, "leave: ask for the handover first");
		return;
	}
	s->ctl->leave = 1;
	*s->ctl->stop_run = 1;
	vz_ctl_buf_printf(out, "ok\n");
}

void vz_ctl_execute(struct session *s, char *line, struct buf *out)
{
	char *save = NULL, *verb = strtok_r(line, " \t\r", &save);
	char *args[4] = { 0 };
	int i;

	for (i = 0; i < 4; i++)
		args[i] = strtok_r(NULL, " \t\r", &save);
	if (!verb) {
		vz_ctl_buf_printf(out, "error empty request\n");
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
			vz_ctl_buf_printf(out, "error a transaction is open\n");
			return;
		}
		s->in_tx = true;
		s->failed = false;
		vz_ctl_buf_printf(out, "ok\n");
	} else if (!strcmp(verb, "commit")) {
		if (!s->in_tx) {
			vz_ctl_buf_printf(out,
					  "error no transaction is open\n");
			return;
		}
		if (s->failed) {
			vz_ctl_roll_back(s);
			vz_ctl_buf_printf(out,
					  "error %s; nothing was changed\n",
					  s->first_error);
		} else {
			forget_undo(s);
			vz_ctl_buf_printf(out, "ok\n");
		}
		s->in_tx = s->failed = false;
	} else if (!strcmp(verb, "maps")) {
		vz_ctl_buf_printf(out, "ok %d\n", s->ctl->nmaps);
		for (i = 0; i < s->ctl->nmaps; i++) {
			const struct vz_ctl_map *m = &s->ctl->maps[i];

			vz_ctl_buf_printf(
				out, "%s %u %u %u %u %u\n", m->name, m->type,
				m->key_size, m->value_size, m->max_entries,
				vz_ctl_is_percpu(m->type) ? m->copies : 1);
		}
	} else if (!strcmp(verb, "ports")) {
		vz_ctl_buf_printf(out, "ok %d\n", s->ctl->nports);
		for (i = 0; i < s->ctl->nports; i++)
			vz_ctl_buf_printf(out, "%d %s\n", i, s->ctl->ports[i]);
	} else if (!strcmp(verb, "info")) {
		vz_ctl_buf_printf(out, "ok %s %s\n", s->ctl->nf,
				  s->ctl->backend);
	} else if (!strcmp(verb, "counters")) {
		do_counters(s->ctl, out);
	} else if (!strcmp(verb, "capture")) {
		vz_capture_request(s->ctl, args, out); /* veloz dump */
	} else if (!strcmp(verb, "handover")) {
		vz_ctl_handover(s, out);
	} else if (!strcmp(verb, "leave")) {
		do_leave(s, out);
	} else {
		reply_error(s, out, "unknown request '%.40s'", verb);
	}
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
	if (vz_ctl_session_init(&s, ctl)) {
		free(copy);
		return -ENOMEM;
	}
	/* line by line, as serve() splits what it reads; a last line without
	 * its newline is not a request, as on the socket */
	for (start = copy;
	     (nl = memchr(start, '\n', len - (size_t)(start - copy)));
	     start = nl + 1) {
		*nl = '\0';
		vz_ctl_execute(&s, start, &out);
	}
	if (s.in_tx)
		vz_ctl_roll_back(
			&s); /* as when a client hangs up mid-transaction */
	vz_ctl_session_free(&s);
	free(copy);
	*reply = out.data;
	*reply_len = out.len;
	return 0;
}
