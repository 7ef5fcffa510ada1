// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/parse.h"
#include "gen/bpf_object.h"

void vz_beside_executable(const char *name, char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - strlen(name) - 1);
	char *slash;

	buf[n > 0 ? n : 0] = '\0';
	slash = strrchr(buf, '/');
	strcpy(slash ? slash + 1 : buf, name);
}

int vz_load_with_config(const char *path, const char *what, const char *section,
			const void *cfg, size_t len, struct bpf_object **obj)
{
	struct bpf_program *prog;
	struct bpf_map *map;
	int err;

	*obj = bpf_object__open_file(path, NULL);
	if (!*obj) {
		vz_err("cannot open the %s's program %s", what, path);
		return -1;
	}
	bpf_object__for_each_map (map, *obj)
		if (strstr(bpf_map__name(map), section))
			bpf_map__set_initial_value(map, cfg, len);
	err = bpf_object__load(*obj);
	if (err) {
		vz_err("the kernel refused the %s's program: %s", what,
		       strerror(-err));
		return -1;
	}
	prog = bpf_object__next_program(*obj, NULL);
	return prog ? bpf_program__fd(prog) : -1;
}
