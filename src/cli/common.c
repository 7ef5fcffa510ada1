// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <grp.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xdp/libxdp.h>

#include "cli/common.h"

void vz_err(const char *fmt, ...)
{
	va_list ap;

	fputs("veloz: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* libbpf's own chatter is for debugging; our errors say what went wrong. */
static int quiet_libbpf(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	if (level == LIBBPF_WARN && getenv("VELOZ_DEBUG"))
		return vfprintf(stderr, fmt, ap);
	if (level == LIBBPF_DEBUG && getenv("VELOZ_DEBUG") &&
	    !strcmp(getenv("VELOZ_DEBUG"), "2"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

void vz_err_umem(int err, unsigned long long bytes)
{
	struct rlimit lim;

	if (err == -ENOBUFS && !getrlimit(RLIMIT_MEMLOCK, &lim) &&
	    lim.rlim_cur != RLIM_INFINITY) {
		vz_err("cannot register AF_XDP memory (%llu MiB): the "
		       "locked-memory limit is %llu KiB (ulimit -l); raise it "
		       "(LimitMEMLOCK=infinity) or grant CAP_IPC_LOCK",
		       bytes >> 20, (unsigned long long)lim.rlim_cur >> 10);
		return;
	}
	vz_err("cannot register AF_XDP memory (%llu MiB): %s", bytes >> 20,
	       strerror(-err));
}

void vz_quiet_bpf_logs(void)
{
	libbpf_set_print(quiet_libbpf);
	/* e.g. its dispatcher fallback notice: say it only when debugging */
	libxdp_set_print((libxdp_print_fn_t)quiet_libbpf);
}

int vz_nf_open(struct vz_nf *nf, const char *bpf_path, const char *native_path,
	       char **sets, int nsets, __u32 nworkers)
{
	char err[512] = "";
	int i, ret;

	memset(nf, 0, sizeof(*nf));
	vz_quiet_bpf_logs();
	nf->obj = bpf_object__open_file(bpf_path, NULL);
	if (!nf->obj) {
		ret = -errno;
		nf->obj = NULL;
		vz_err("cannot open NF object %s: %s", bpf_path,
		       strerror(-ret));
		return ret;
	}
	ret = vz_config_open(&nf->cfg, nf->obj, err, sizeof(err));
	if (ret)
		goto fail;
	ret = vz_native_open(&nf->native, native_path, nworkers, err,
			     sizeof(err));
	if (ret)
		goto fail;
	nf->name = nf->native.desc->name;
	for (i = 0; i < nsets; i++) {
		ret = vz_config_set(&nf->cfg, sets[i], err, sizeof(err));
		if (ret)
			goto fail;
	}
	ret = vz_config_check(&nf->cfg, &nf->native, err, sizeof(err));
	if (ret)
		goto fail;
	vz_config_apply_native(&nf->cfg, &nf->native);
	ret = vz_config_apply_bpf(&nf->cfg);
	if (ret) {
		snprintf(err, sizeof(err), "cannot set config: %s",
			 strerror(-ret));
		goto fail;
	}
	return 0;
fail:
	vz_err("%s", err);
	vz_nf_close(nf);
	return ret ? ret : -EINVAL;
}

void vz_nf_close(struct vz_nf *nf)
{
	vz_config_close(&nf->cfg);
	vz_native_close(&nf->native);
	bpf_object__close(nf->obj);
	memset(nf, 0, sizeof(*nf));
}

struct bpf_program *vz_nf_program(struct vz_nf *nf)
{
	return bpf_object__next_program(nf->obj, NULL);
}

const char *vz_verdict_name(int verdict)
{
	switch (verdict) {
	case VZ_DROP:
		return "drop";
	case VZ_PASS:
		return "pass";
	case VZ_TX:
		return "tx";
	case VZ_REDIRECT_VERDICT:
		return "redirect";
	default:
		return "aborted";
	}
}

int vz_parse_u64(const char *what, const char *text, __u64 min, __u64 max,
		 __u64 *out)
{
	unsigned long long value;
	char *end;

	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno || end == text || *end || text[0] == '-' || value < min ||
	    value > max) {
		vz_err("%s must be a whole number from %llu to %llu, not '%s'",
		       what, (unsigned long long)min, (unsigned long long)max,
		       text);
		return -EINVAL;
	}
	*out = value;
	return 0;
}

int vz_parse_group(const char *what, const char *text, gid_t *gid)
{
	struct group *g = getgrnam(text);
	__u64 v;

	if (g) {
		*gid = g->gr_gid;
		return 0;
	}
	if (text[0] < '0' || text[0] > '9') {
		vz_err("%s: no group %s", what, text);
		return -EINVAL;
	}
	/* (gid_t)-1 is no group at all to the kernel */
	if (vz_parse_u64(what, text, 0, 0xfffffffeu, &v))
		return -EINVAL;
	*gid = (gid_t)v;
	return 0;
}

int vz_parse_seconds(const char *what, const char *text, double *out)
{
	char *end;
	double value;

	errno = 0;
	value = strtod(text, &end);
	/* NaN compares false with everything: test for what is wanted */
	if (errno || end == text || *end || !isfinite(value) || !(value > 0) ||
	    value > VZ_SECONDS_MAX) {
		vz_err("%s must be a positive number of seconds up to %g, "
		       "not '%s'",
		       what, VZ_SECONDS_MAX, text);
		return -EINVAL;
	}
	*out = value;
	return 0;
}

int vz_same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	/* stat follows symlinks; a hard link has the same inode */
	if (stat(a, &sa) || stat(b, &sb))
		return 0;
	return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void close_stdout(void)
{
	int bad = 0, err = 0;

	if (fflush(stdout)) {
		bad = 1;
		err = errno;
	} else if (ferror(stdout)) {
		bad = 1; /* an earlier write failed; its errno is gone */
	}
	if (fclose(stdout) && !bad) {
		bad = 1;
		err = errno;
	}
	/* a reader that left (`| head -1`) is a quiet end, as SIGPIPE's */
	if (!bad || err == EPIPE)
		return;
	vz_err("cannot write the output: %s",
	       err ? strerror(err) : "write error");
	_exit(1);
}

void vz_check_stdout_at_exit(void)
{
	atexit(close_stdout);
}
