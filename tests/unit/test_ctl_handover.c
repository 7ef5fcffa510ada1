// SPDX-License-Identifier: BSD-2-Clause
/*
 * A userspace run's state handed to its successor (src/ctl/ctl_handover.c):
 * every native map kind written into a memfd and read back into fresh maps
 * entry for entry (an array's block, per-CPU copies, hash entries, LPM
 * rules answering the same lookups); a successor whose maps do not fit is
 * told why; the "handover" request pauses the workers, and a session that
 * ends without "leave" lets them go on.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "check.h"
#include "ctl/ctl.h"
#include "ctl_ask.h"

#define NMAPS 4

struct nf_maps {
	struct vz_map m[NMAPS];
	struct vz_ctl ctl;
};

struct lpm_key {
	__u32 prefixlen;
	__u8 addr[4];
};

static void maps_init(struct nf_maps *n, __u32 workers, bool with_hash)
{
	static const struct vz_map shapes[NMAPS] = {
		{ .name = "arr",
		  .type = BPF_MAP_TYPE_ARRAY,
		  .key_size = 4,
		  .value_size = 8,
		  .max_entries = 1000 },
		{ .name = "pc",
		  .type = BPF_MAP_TYPE_PERCPU_ARRAY,
		  .key_size = 4,
		  .value_size = 8,
		  .max_entries = 4 },
		{ .name = "h",
		  .type = BPF_MAP_TYPE_LRU_HASH,
		  .key_size = 4,
		  .value_size = 12,
		  .max_entries = 100 },
		{ .name = "lpm",
		  .type = BPF_MAP_TYPE_LPM_TRIE,
		  .key_size = 8,
		  .value_size = 4,
		  .max_entries = 100,
		  .flags = BPF_F_NO_PREALLOC },
	};
	int i, n_maps = 0;

	memset(n, 0, sizeof(*n));
	n->ctl.listen_fd = -1;
	n->ctl.nf = "test";
	n->ctl.backend = "afxdp";
	for (i = 0; i < NMAPS; i++) {
		const struct vz_map *shape = &shapes[i];
		struct vz_ctl_map *m = &n->ctl.maps[n_maps];

		if (!with_hash && shape->type == BPF_MAP_TYPE_LRU_HASH)
			continue;
		n->m[n_maps] = *shape;
		CHECK(!vz_map_init(&n->m[n_maps], workers), "init %s",
		      shape->name);
		snprintf(m->name, sizeof(m->name), "%s", shape->name);
		m->type = shape->type;
		m->key_size = shape->key_size;
		m->value_size = shape->value_size;
		m->max_entries = shape->max_entries;
		m->copies = n->m[n_maps].nworkers;
		m->native = &n->m[n_maps];
		n_maps++;
	}
	n->ctl.nmaps = n_maps;
}

static void maps_free(struct nf_maps *n)
{
	int i;

	for (i = 0; i < n->ctl.nmaps; i++)
		vz_map_free(n->ctl.maps[i].native);
}

static struct vz_map *map(struct nf_maps *n, const char *name)
{
	int i;

	for (i = 0; i < n->ctl.nmaps; i++)
		if (!strcmp(n->ctl.maps[i].name, name))
			return n->ctl.maps[i].native;
	return NULL;
}

static void fill(struct nf_maps *n)
{
	__u64 v, pc[2];
	__u32 k;

	for (k = 0; k < 1000; k++) {
		v = (__u64)k * 3 + 1;
		vz_map_write(map(n, "arr"), &k, &v, BPF_ANY);
	}
	for (k = 0; k < 4; k++) {
		pc[0] = k + 100;
		pc[1] = k + 200;
		vz_map_write(map(n, "pc"), &k, pc, BPF_ANY);
	}
	for (k = 0; k < 50; k++) {
		__u8 val[12] = { (__u8)k, 1, 2, 3 };

		vz_map_write(map(n, "h"), &k, val, BPF_ANY);
	}
	for (k = 0; k < 20; k++) {
		struct lpm_key key = { 8 + k, { 198, 18, (__u8)k, 0 } };
		__u32 val = 1000 + k;

		vz_map_write(map(n, "lpm"), &key, &val, BPF_ANY);
	}
}

static void same_state(struct nf_maps *a, struct nf_maps *b)
{
	__u8 va[64], vb[64];
	__u32 k;

	for (k = 0; k < 1000; k += 37) {
		vz_map_read(map(a, "arr"), &k, va);
		vz_map_read(map(b, "arr"), &k, vb);
		CHECK(!memcmp(va, vb, 8), "arr[%u]", k);
	}
	for (k = 0; k < 4; k++) {
		vz_map_read(map(a, "pc"), &k, va);
		vz_map_read(map(b, "pc"), &k, vb);
		CHECK(!memcmp(va, vb, 16), "pc[%u]: every worker's copy", k);
	}
	for (k = 0; k < 60; k++) {
		int ra = vz_map_read(map(a, "h"), &k, va);
		int rb = vz_map_read(map(b, "h"), &k, vb);

		CHECK(ra == rb && (ra || !memcmp(va, vb, 12)), "h[%u]", k);
	}
	for (k = 0; k < 256; k++) {
		struct lpm_key key = { 32, { 198, 18, (__u8)k, 7 } };
		int ra = vz_map_read(map(a, "lpm"), &key, va);
		int rb = vz_map_read(map(b, "lpm"), &key, vb);

		CHECK(ra == rb && (ra || !memcmp(va, vb, 4)),
		      "lpm 198.18.%u.7: %d %d", k, ra, rb);
	}
}

static int pauses, resumes;

static int count_pause(void *arg, bool on)
{
	(void)arg;
	if (on)
		pauses++;
	else
		resumes++;
	return 0;
}

int main(void)
{
	struct nf_maps old, fresh, other;
	char err[256], *r;
	int fd;

	maps_init(&old, 2, true);
	fill(&old);
	CHECK(!vz_ctl_snapshot(&old.ctl, &fd), "snapshot");

	maps_init(&fresh, 2, true);
	CHECK(!vz_ctl_restore(&fresh.ctl, fd, err, sizeof(err)), "restore: %s",
	      err);
	same_state(&old, &fresh);
	maps_free(&fresh);

	/* other per-CPU copies: refused, saying why */
	maps_init(&other, 3, true);
	CHECK(vz_ctl_restore(&other.ctl, fd, err, sizeof(err)) &&
		      strstr(err, "map pc: its per-CPU copies differ"),
	      "3 workers: '%s'", err);
	maps_free(&other);
	/* a map this build does not have */
	maps_init(&other, 2, false);
	CHECK(vz_ctl_restore(&other.ctl, fd, err, sizeof(err)) &&
		      strstr(err, "map h: this build has no such map"),
	      "no such map: '%s'", err);
	maps_free(&other);
	close(fd);

	/* "handover": paused, the state passed; no "leave": going on */
	r = ask(&old.ctl, "handover\n");
	CHECK(!strncmp(r, "error handover: this afxdp run", 30),
	      "no pause hook: '%s'", r);
	free(r);
	old.ctl.pause = count_pause;
	r = ask(&old.ctl, "handover\nhandover\n");
	CHECK(!strncmp(r, "ok ", 3) &&
		      strstr(r, "\nerror handover: handed over already\n"),
	      "handover: '%s'", r);
	CHECK(pauses == 1 && resumes == 1, "paused %d, resumed %d", pauses,
	      resumes);
	free(r);
	maps_free(&old);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
