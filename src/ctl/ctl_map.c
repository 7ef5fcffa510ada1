// SPDX-License-Identifier: BSD-2-Clause
/*
 * The control plane's map operations (ctl.h), on BPF maps (xdp) or native
 * ones (afxdp, dpdk) alike: read, write, delete, runs of array entries,
 * iteration; and the table of an NF's maps they work on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "ctl/ctl_internal.h"

bool vz_ctl_is_percpu(__u32 type)
{
	return type == BPF_MAP_TYPE_PERCPU_ARRAY ||
	       type == BPF_MAP_TYPE_PERCPU_HASH ||
	       type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

bool vz_ctl_is_array(__u32 type)
{
	return type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_ARRAY;
}

__u32 vz_ctl_stride(const struct vz_ctl_map *m)
{
	return (m->value_size + 7) / 8 * 8;
}

/* Bytes of a full value: every copy, one stride apart. */
size_t vz_ctl_full_size(const struct vz_ctl_map *m)
{
	return vz_ctl_is_percpu(m->type) ? (size_t)vz_ctl_stride(m) * m->copies
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
		m->copies = vz_ctl_is_percpu(m->type) && ncpus > 0
				    ? (__u32)ncpus
				    : 1;
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

struct vz_ctl_map *vz_ctl_find_map(struct vz_ctl *ctl, const char *name)
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

int vz_ctl_map_read(struct vz_ctl_map *m, const void *key, void *value)
{
	int fd;

	if (m->native)
		return vz_map_read(m->native, key, value);
	fd = bpf_fd(m);
	if (fd < 0)
		return fd;
	return bpf_map_lookup_elem(fd, key, value) ? -errno : 0;
}

int vz_ctl_map_write(struct vz_ctl_map *m, const void *key, const void *value)
{
	int fd;

	if (m->native)
		return vz_map_write(m->native, key, value, BPF_ANY);
	fd = bpf_fd(m);
	if (fd < 0)
		return fd;
	return bpf_map_update_elem(fd, key, value, BPF_ANY) ? -errno : 0;
}

int vz_ctl_map_delete(struct vz_ctl_map *m, const void *key)
{
	int fd;

	if (vz_ctl_is_array(m->type))
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
int vz_ctl_map_run(struct vz_ctl_map *m, __u32 first, __u32 count, void *values,
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

int vz_ctl_map_write_run(struct vz_ctl_map *m, __u32 first, __u32 count,
			 const void *values)
{
	return vz_ctl_map_run(m, first, count, (void *)values, true);
}

int vz_ctl_map_next_key(struct vz_ctl_map *m, const void *key, void *next)
{
	int fd;

	if (m->native)
		return vz_map_next_key(m->native, key, next);
	fd = bpf_fd(m);
	if (fd < 0)
		return fd;
	return bpf_map_get_next_key(fd, key, next) ? -errno : 0;
}
