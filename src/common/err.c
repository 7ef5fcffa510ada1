// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

void vz_err(const char *fmt, ...)
{
	va_list ap;

	fputs("veloz: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
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
