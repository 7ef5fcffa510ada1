/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * How every veloz C tool reports: one line on stderr, prefixed "veloz: ",
 * and a non-zero exit; stdout checked at exit so a lost line is no success.
 */
#ifndef VZ_COMMON_ERR_H
#define VZ_COMMON_ERR_H

/* One line on stderr, prefixed "veloz: ". */
void vz_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * "cannot register AF_XDP memory" for xsk_umem__create's error, saying what
 * to change when it is the locked-memory limit: without CAP_IPC_LOCK the
 * kernel charges a UMEM to RLIMIT_MEMLOCK and refuses it with ENOBUFS.
 */
void vz_err_umem(int err, unsigned long long bytes);

/*
 * libbpf's and libxdp's messages only with VELOZ_DEBUG set (2: debug too).
 * In bpf_log.c, so a tool that links no libbpf can use the rest of this.
 */
void vz_quiet_bpf_logs(void);

/*
 * At exit, flush and close stdout and fail (one line, exit 1) if any of
 * what was printed did not reach it: `--json > /dev/full` is no success.
 */
void vz_check_stdout_at_exit(void);

/* Do both paths name one file (symlinks and hard links included)? */
int vz_same_file(const char *a, const char *b);

#endif
