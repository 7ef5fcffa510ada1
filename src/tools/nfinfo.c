// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-nfinfo: what an NF is made of, as JSON: its XDP program, its config
 * fields (names, sizes and defaults from the object's BTF) and its maps.
 * `veloz nfs` shows it; nothing is loaded into the kernel.
 */
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/options.h"
#include "ctl/nf.h"

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

struct nfinfo_opts {
	const char *bpf_path, *native_path;
};

static struct vz_option nfinfo_options[] = {
	VZ_OPTION("bpf", VZ_OPT_STRING, struct nfinfo_opts, bpf_path,
		  .required = true, .metavar = "NF.bpf.o",
		  .help = "the NF's kernel build"),
	VZ_OPTION("native", VZ_OPT_STRING, struct nfinfo_opts, native_path,
		  .required = true, .metavar = "NF.so",
		  .help = "the NF's native build"),
	VZ_OPTION_END,
};

static const struct vz_opts nfinfo_opts = {
	.prog = "vz-nfinfo",
	.usage = "usage: vz-nfinfo --bpf NF.bpf.o --native NF.so\n",
	.table = nfinfo_options,
};

int main(int argc, char **argv)
{
	struct nfinfo_opts o = { 0 };
	struct bpf_program *prog;
	struct vz_nf nf;

	if (vz_opts_parse(&nfinfo_opts, &o, argc, argv, NULL))
		return 2;
	vz_check_stdout_at_exit();
	if (vz_nf_open(&nf, o.bpf_path, o.native_path, NULL, 0, 1))
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
