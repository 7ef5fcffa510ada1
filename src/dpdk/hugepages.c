// SPDX-License-Identifier: BSD-2-Clause
/*
 * The dpdk backend's hugepages. EAL runs --in-memory, on 2 MiB hugepages
 * from memfd. When too few are free, nr_hugepages is raised by what is
 * missing and lowered by as much at exit; each reservation is recorded in
 * /run/veloz/dpdk-hugepages-PID first, so that the next vz-dpdk gives back
 * what a killed run had reserved.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dpdk/dpdk.h"
#include "dpdk/hugepages.h"

#define HP_DIR "/sys/kernel/mm/hugepages/hugepages-2048kB"
#define RUN_DIR "/run/veloz"
#define HP_RECORD "dpdk-hugepages-"

static int read_ulong(const char *path, unsigned long *out)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%lu", out) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

static int write_ulong(const char *path, unsigned long value)
{
	FILE *f = fopen(path, "we");
	int ret = 0;

	if (!f)
		return -errno;
	if (fprintf(f, "%lu\n", value) < 0)
		ret = -errno;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

#define HP_LOCK RUN_DIR "/dpdk-hugepages.lock"

/*
 * Serialises the runs' changes to the pool. The lock file goes when it is
 * released, so a taker checks that the file it locked is still the one
 * of that name.
 */
static int hp_lock(void)
{
	struct stat held, named;
	int fd;

	mkdir(RUN_DIR, 0755);
	for (;;) {
		fd = open(HP_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -1;
		if (flock(fd, LOCK_EX) || fstat(fd, &held)) {
			close(fd);
			return -1;
		}
		if (!stat(HP_LOCK, &named) && named.st_ino == held.st_ino &&
		    named.st_dev == held.st_dev)
			return fd;
		close(fd);
	}
}

static void hp_unlock(int fd)
{
	if (fd < 0)
		return;
	unlink(HP_LOCK);
	close(fd);
}

/*
 * The persistent pool, what writing nr_hugepages sets. Reading it gives
 * the surplus too: pages in use when the pool was lowered, such as those
 * an AF_XDP UMEM held, which the kernel unpins only some time after the
 * process has gone.
 */
static int hp_persistent(unsigned long *out)
{
	unsigned long nr, surplus;
	int ret = read_ulong(HP_DIR "/nr_hugepages", &nr);

	if (!ret)
		ret = read_ulong(HP_DIR "/surplus_hugepages", &surplus);
	if (!ret)
		*out = nr > surplus ? nr - surplus : 0;
	return ret;
}

/* Lower the persistent pool by n (not below zero). */
static int hp_lower(unsigned long n)
{
	unsigned long nr;
	int ret = hp_persistent(&nr);

	if (ret)
		return ret;
	return write_ulong(HP_DIR "/nr_hugepages", nr > n ? nr - n : 0);
}

static bool is_live_run(int pid)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	return !strncmp(comm, "vz-dpdk", 7);
}

/* Give back what runs killed before their teardown had reserved. */
static void hp_reclaim(void)
{
	char path[PATH_MAX], *end;
	unsigned long pages;
	struct dirent *ent;
	long pid;
	DIR *dir = opendir(RUN_DIR);

	if (!dir)
		return;
	while ((ent = readdir(dir))) {
		if (strncmp(ent->d_name, HP_RECORD, strlen(HP_RECORD)))
			continue;
		pid = strtol(ent->d_name + strlen(HP_RECORD), &end, 10);
		if (*end || pid <= 0 || pid == getpid() ||
		    is_live_run((int)pid))
			continue;
		snprintf(path, sizeof(path), RUN_DIR "/%s", ent->d_name);
		if (!read_ulong(path, &pages) && pages && !hp_lower(pages))
			fprintf(stderr,
				"veloz: gave back %lu hugepages that a killed "
				"vz-dpdk run (pid %ld) had reserved\n",
				pages, pid);
		unlink(path);
	}
	closedir(dir);
}

/* Make `need` 2 MiB hugepages available, raising nr_hugepages if short. */
int dpdk_hp_reserve(struct dpdk *d, unsigned long need)
{
	unsigned long nr, free_pages, resv, avail, want, got = 0;
	int lock = hp_lock(), ret;

	if (lock < 0) {
		vz_err("cannot lock " HP_LOCK ": %s", strerror(errno));
		return -errno;
	}
	hp_reclaim();
	ret = hp_persistent(&nr);
	if (!ret)
		ret = read_ulong(HP_DIR "/free_hugepages", &free_pages);
	if (!ret)
		ret = read_ulong(HP_DIR "/resv_hugepages", &resv);
	if (ret) {
		vz_err("this kernel offers no 2 MiB hugepages (%s: %s); use "
		       "--no-huge",
		       HP_DIR, strerror(-ret));
		goto out;
	}
	avail = free_pages > resv ? free_pages - resv : 0;
	if (avail >= need)
		goto out;
	want = need - avail;
	/* recorded first: a kill right after the raise is still undone */
	snprintf(d->hp_record, sizeof(d->hp_record), RUN_DIR "/" HP_RECORD "%d",
		 (int)getpid());
	ret = write_ulong(d->hp_record, want);
	if (ret) {
		vz_err("cannot write %s: %s", d->hp_record, strerror(-ret));
		d->hp_record[0] = '\0';
		goto out;
	}
	ret = write_ulong(HP_DIR "/nr_hugepages", nr + want);
	if (ret) {
		/* read-only sysfs (a container), or no permission */
		vz_err("cannot raise " HP_DIR "/nr_hugepages to %lu: %s; "
		       "reserve hugepages beforehand or use --no-huge",
		       nr + want, strerror(-ret));
		goto out;
	}
	ret = hp_persistent(&got);
	got = !ret && got > nr ? got - nr : 0;
	d->hp_added = got;
	if (got)
		write_ulong(d->hp_record, got);
	if (got < want) {
		vz_err("cannot reserve %lu more 2 MiB hugepages (the kernel "
		       "found %lu; memory too fragmented?); free memory or "
		       "use --no-huge",
		       want, got);
		ret = -ENOMEM;
	}
out:
	hp_unlock(lock);
	return ret;
}

void dpdk_hp_release(struct dpdk *d)
{
	int lock, ret;

	if (!d->hp_record[0])
		return;
	lock = hp_lock();
	if (d->hp_added) {
		ret = hp_lower(d->hp_added);
		if (ret)
			vz_err("could not give back %lu hugepages "
			       "(nr_hugepages): %s",
			       d->hp_added, strerror(-ret));
	}
	unlink(d->hp_record);
	hp_unlock(lock);
	d->hp_record[0] = '\0';
}
