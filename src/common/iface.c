// SPDX-License-Identifier: BSD-2-Clause
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/iface.h"

#define VZ_RUN_DIR "/run/veloz"

/*
 * The lock file is named by network namespace and ifindex: interface names
 * repeat across namespaces, and `ip netns exec` shares /run.
 */
int vz_iface_lock(struct vz_iface_lock *lock, int ifindex, const char *ifname,
		  char *err, size_t errlen)
{
	struct stat ns;
	char pid[32];
	ssize_t n;

	lock->fd = -1;
	if (stat("/proc/self/ns/net", &ns))
		ns.st_ino = 0;
	mkdir(VZ_RUN_DIR, 0755);
	snprintf(lock->path, sizeof(lock->path), VZ_RUN_DIR "/xdp-%lu-%d.lock",
		 (unsigned long)ns.st_ino, ifindex);
	lock->fd = open(lock->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lock->fd < 0) {
		snprintf(err, errlen, "cannot create %s: %s", lock->path,
			 strerror(errno));
		return -errno;
	}
	if (flock(lock->fd, LOCK_EX | LOCK_NB)) {
		n = pread(lock->fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		snprintf(err, errlen, "veloz is already running on %s (pid %s)",
			 ifname, pid[0] ? pid : "unknown");
		close(lock->fd);
		lock->fd = -1;
		return -EBUSY;
	}
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(lock->fd, 0) ||
	    pwrite(lock->fd, pid, (size_t)n, 0) != n) {
		/* the pid is a courtesy for the error above; the lock holds */
	}
	return 0;
}

void vz_iface_unlock(struct vz_iface_lock *lock)
{
	if (lock->fd < 0)
		return;
	unlink(lock->path);
	close(lock->fd);
	lock->fd = -1;
}

/* One SIOCGIF* request on the interface: 0 or -errno. */
static int iface_ioctl(const char *ifname, unsigned long request,
		       struct ifreq *ifr)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return -errno;
	memset(ifr, 0, sizeof(*ifr));
	snprintf(ifr->ifr_name, sizeof(ifr->ifr_name), "%s", ifname);
	if (ioctl(fd, request, ifr))
		err = -errno;
	close(fd);
	return err;
}

int vz_iface_mac(const char *ifname, __u8 mac[6])
{
	struct ifreq ifr;
	int err = iface_ioctl(ifname, SIOCGIFHWADDR, &ifr);

	if (!err)
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	return err;
}

int vz_iface_mtu(const char *ifname, int *mtu)
{
	struct ifreq ifr;
	int err = iface_ioctl(ifname, SIOCGIFMTU, &ifr);

	if (!err)
		*mtu = ifr.ifr_mtu;
	return err;
}

int vz_iface_rx_queues(const char *ifname)
{
	char path[128];
	struct dirent *ent;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/sys/class/net/%s/queues", ifname);
	dir = opendir(path);
	if (!dir)
		return 1;
	while ((ent = readdir(dir)))
		n += !strncmp(ent->d_name, "rx-", 3);
	closedir(dir);
	return n ? n : 1;
}
