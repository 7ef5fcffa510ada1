// SPDX-License-Identifier: BSD-2-Clause
/*
 * Differential fuzzing of one NF: every input is a frame, run through the
 * kernel build (BPF_PROG_TEST_RUN) and the native build exactly as `veloz
 * replay` runs it; the verdict, the redirect port and the output bytes must
 * be the same, and the native build must not trip ASan or UBSan. Needs root.
 *
 *   VZ_FUZZ_NF=tx VZ_FUZZ_NF_DIR=build-fuzz/nf fuzz-nf-diff [libFuzzer args]
 *
 * VZ_FUZZ_SET=key=value[,key=value] configures the NF; VZ_FUZZ_OPS=FILE
 * gives both builds the same start-up state (routes, rules, VIPs: an ops
 * file as tests/fuzz/ops.py writes it), so the fuzzer reaches past "no
 * route" into the NF's real work.
 */
#include <linux/if_ether.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/offline.h"
#include "ctl/ctl.h"

static struct vz_nf nf;
static struct vz_offline kernel, native;
static __u8 out_kernel[VZ_OFFLINE_OUT_MAX], out_native[VZ_OFFLINE_OUT_MAX];

static void die(const char *what)
{
	fprintf(stderr, "fuzz-nf-diff: %s\n", what);
	exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const __u8 *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *name = getenv("VZ_FUZZ_NF"),
		   *dir = getenv("VZ_FUZZ_NF_DIR");
	char bpf[4096], so[4096], *sets[VZ_MAX_SETS], *list, *tok;
	int nsets = 0;

	(void)argc;
	(void)argv;
	if (!name || !dir)
		die("set VZ_FUZZ_NF (an NF name) and VZ_FUZZ_NF_DIR (where NAME.bpf.o and NAME.so are)");
	snprintf(bpf, sizeof(bpf), "%s/%s.bpf.o", dir, name);
	snprintf(so, sizeof(so), "%s/%s.so", dir, name);
	list = getenv("VZ_FUZZ_SET") ? strdup(getenv("VZ_FUZZ_SET")) : NULL;
	for (tok = list ? strtok(list, ",") : NULL; tok && nsets < VZ_MAX_SETS;
	     tok = strtok(NULL, ","))
		sets[nsets++] = tok;
	if (vz_nf_open(&nf, bpf, so, sets, nsets, 1))
		die("cannot open the NF");
	if (vz_offline_open(&kernel, &nf, true, 0) ||
	    vz_offline_open(&native, &nf, false, 0))
		die("cannot prepare both builds");
	if (getenv("VZ_FUZZ_OPS") && *getenv("VZ_FUZZ_OPS")) {
		static struct vz_ctl kctl, nctl;
		char err[512];

		vz_ctl_init_bpf(&kctl, nf.obj, nf.name, "xdp");
		vz_ctl_init_native(&nctl, &nf.native, "native");
		if (vz_ctl_apply_file(&kctl, getenv("VZ_FUZZ_OPS"), err,
				      sizeof(err)) ||
		    vz_ctl_apply_file(&nctl, getenv("VZ_FUZZ_OPS"), err,
				      sizeof(err)))
			die(err);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const __u8 *data, size_t size)
{
	struct vz_offline_result k, n;

	/* what a port delivers, as replay does; the rest never reach an NF */
	if (size < ETH_HLEN || size > VZ_FRAME_MAX)
		return 0;
	if (vz_offline_run(&kernel, data, (__u32)size, out_kernel, &k))
		die("BPF_PROG_TEST_RUN failed");
	vz_offline_run(&native, data, (__u32)size, out_native, &n);
	if (k.verdict != n.verdict || k.port != n.port ||
	    k.len_out != n.len_out ||
	    memcmp(out_kernel, out_native, k.len_out)) {
		fprintf(stderr,
			"fuzz-nf-diff: %s disagrees on a %zu-byte frame: kernel "
			"%s port %d len %u, native %s port %d len %u\n",
			nf.name, size, vz_verdict_name(k.verdict), k.port,
			k.len_out, vz_verdict_name(n.verdict), n.port,
			n.len_out);
		abort(); /* libFuzzer keeps the input */
	}
	return 0;
}
