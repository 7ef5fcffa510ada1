// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-nfinfo: what an NF is made of, as JSON: its XDP program, its config
 * fields (names, sizes and defaults from the object's BTF) and its maps.
 * `veloz nfs` shows it; nothing is loaded into the kernel.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "runtime/nf.h"

static void print_maps(struct vz_nf *nf)
{
	struct vz_map *const *map;
	bool first = true;

	printf("[");
	for (map = nf->native.desc->maps; map < nf->native.desc->maps_end;
	     map++) {
		/* veloz's own maps (vz_*) are the same in every NF */
		if (!strncmp((*map)->name, "vz_", 3))
			continue;
		printf("%s{\"name\": \"%s\", \"type\": \"%s\", \"key_size\": %u, "
		       "\"value_size\": %u, \"max_entries\": %u}",
		       first ? "" : ", ", (*map)->name,
		       libbpf_bpf_map_type_str((enum bpf_map_type)(*map)->type),
		       (*map)->key_size, (*map)->value_size,
		       (*map)->max_entries);
		first = false;
	}
	printf("]");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "bpf", required_argument, NULL, 'b' },
		{ "native", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *bpf_path = NULL, *native_path = NULL;
	struct bpf_program *prog;
	struct vz_nf nf;
	int opt;

	while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (opt) {
		case 'b':
			bpf_path = optarg;
			break;
		case 'n':
			native_path = optarg;
			break;
		case 'h':
			printf("usage: vz-nfinfo --bpf NF.bpf.o --native NF.so\n");
			return 0;
		default:
			return 2;
		}
	}
	if (!bpf_path || !native_path || optind != argc) {
		fprintf(stderr,
			"usage: vz-nfinfo --bpf NF.bpf.o --native NF.so\n");
		return 2;
	}
	vz_check_stdout_at_exit();
	if (vz_nf_open(&nf, bpf_path, native_path, NULL, 0, 1))
		return 2;
	prog = vz_nf_program(&nf);
	printf("{\"name\": \"%s\", \"program\": \"%s\", \"section\": \"%s\", "
	       "\"config\": ",
	       nf.name, prog ? bpf_program__name(prog) : "",
	       prog ? bpf_program__section_name(prog) : "");
	vz_config_print_json(&nf.cfg, stdout);
	printf(", \"maps\": ");
	print_maps(&nf);
	printf("}\n");
	vz_nf_close(&nf);
	return 0;
}
