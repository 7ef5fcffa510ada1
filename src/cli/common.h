/* SPDX-License-Identifier: BSD-2-Clause */
/* What the C tools behind `veloz` share: errors, and opening an NF. */
#ifndef VZ_CLI_COMMON_H
#define VZ_CLI_COMMON_H

#include <sys/types.h>

#include <bpf/libbpf.h>

#include "runtime/nf_config.h"
#include "runtime/nf_loader.h"

#define VZ_MAX_SETS 64

/* One line on stderr, prefixed "veloz: ". */
void vz_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * "cannot register AF_XDP memory" for xsk_umem__create's error, saying what
 * to change when it is the locked-memory limit: without CAP_IPC_LOCK the
 * kernel charges a UMEM to RLIMIT_MEMLOCK and refuses it with ENOBUFS.
 */
void vz_err_umem(int err, unsigned long long bytes);

/* libbpf's and libxdp's messages only with VELOZ_DEBUG set (2: debug too). */
void vz_quiet_bpf_logs(void);

/* An NF as the control plane holds it: both builds and one configuration. */
struct vz_nf {
	const char *name;
	struct bpf_object *obj; /* opened, not loaded */
	struct vz_native_nf native; /* loaded: runs VZ_CONFIG_CHECK too */
	struct vz_nf_config cfg;
};

/*
 * Open NAME.bpf.o and NAME.so, apply the "key=value" settings and check
 * them with the NF's own rules. Nothing is loaded into the kernel yet, so a
 * bad config is refused before anything is attached. Prints the reason.
 */
int vz_nf_open(struct vz_nf *nf, const char *bpf_path, const char *native_path,
	       char **sets, int nsets, __u32 nworkers);
void vz_nf_close(struct vz_nf *nf);

/* First XDP program of the object. */
struct bpf_program *vz_nf_program(struct vz_nf *nf);

/* Verdict words, as in JSON output: drop, pass, tx, redirect, aborted. */
const char *vz_verdict_name(int verdict);

/* Parse a whole decimal number in [min, max] or fail with a message. */
int vz_parse_u64(const char *what, const char *text, __u64 min, __u64 max,
		 __u64 *out);
/* A group by name, or by number when no group has that name; fails with
 * a message naming the option `what`. */
int vz_parse_group(const char *what, const char *text, gid_t *gid);

/* Durations and intervals: finite, positive, at most VZ_SECONDS_MAX (some
 * 31 years: a value past it is a typo, and overflows time arithmetic). */
#define VZ_SECONDS_MAX 1e9
int vz_parse_seconds(const char *what, const char *text, double *out);

/* Do both paths name one file (symlinks and hard links included)? */
int vz_same_file(const char *a, const char *b);

/*
 * At exit, flush and close stdout and fail (one line, exit 1) if any of
 * what was printed did not reach it: `--json > /dev/full` is no success.
 */
void vz_check_stdout_at_exit(void);

#endif
