// SPDX-License-Identifier: BSD-2-Clause
/*
 * The config parser under fuzzing: any "key=value" text against an NF's
 * config (from its BTF) is accepted or refused with a message, never a
 * crash, and what is accepted passes the NF's own check or is refused by it.
 *
 *   VZ_FUZZ_NF=memaccess VZ_FUZZ_NF_DIR=build-fuzz/nf fuzz-config [libFuzzer
 * args]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/nf.h"

static struct vz_nf nf;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const __u8 *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *name = getenv("VZ_FUZZ_NF"),
		   *dir = getenv("VZ_FUZZ_NF_DIR");
	char bpf[4096], so[4096];

	(void)argc;
	(void)argv;
	if (!name || !dir) {
		fprintf(stderr,
			"fuzz-config: set VZ_FUZZ_NF and VZ_FUZZ_NF_DIR\n");
		exit(1);
	}
	snprintf(bpf, sizeof(bpf), "%s/%s.bpf.o", dir, name);
	snprintf(so, sizeof(so), "%s/%s.so", dir, name);
	if (vz_nf_open(&nf, bpf, so, NULL, 0, 1))
		exit(1);
	return 0;
}

int LLVMFuzzerTestOneInput(const __u8 *data, size_t size)
{
	char text[256], err[512];
	int ret;

	if (size >= sizeof(text))
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	err[0] = '\0';
	ret = vz_config_set(&nf.cfg, text, err, sizeof(err));
	if (ret && !err[0])
		abort(); /* a refusal always says why */
	if (!ret) {
		err[0] = '\0';
		ret = vz_config_check(&nf.cfg, &nf.native, err, sizeof(err));
		if (ret && !err[0])
			abort();
	}
	return 0;
}
