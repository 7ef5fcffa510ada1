/* SPDX-License-Identifier: BSD-2-Clause */
/* What the generator and the sink share: loading their XDP program. */
#ifndef VZ_GEN_BPF_OBJECT_H
#define VZ_GEN_BPF_OBJECT_H

#include <stddef.h>

#include <bpf/libbpf.h>

/*
 * NAME (e.g. "gen.bpf.o") in the directory of the running executable,
 * where the build puts it, into buf.
 */
void vz_beside_executable(const char *name, char *buf, size_t len);

/*
 * Open PATH, give the global data section whose name contains SECTION
 * the initial value CFG (LEN bytes), load it, and return the fd of its
 * first program; -1 after saying why (WHAT names the program).
 */
int vz_load_with_config(const char *path, const char *what, const char *section,
			const void *cfg, size_t len, struct bpf_object **obj);

#endif
