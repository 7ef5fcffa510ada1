// SPDX-License-Identifier: BSD-2-Clause
/*
 * Who may use a running NF's control socket (src/ctl/ctl_server.c): root
 * only by default, root and one group with --ctl-group. The file's owner
 * and mode say so, and the server checks each peer's credentials too, so a
 * mode loosened by hand lets nobody else in. Clients are forked children
 * that become nobody (uid/gid 65534), with or without the group. Root only.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ctl/ctl.h"
#include "common/peercred.h"

#define GROUP 4242
#define NOBODY 65534

static char dir[64], ctl_dir[96];

/* A request as nobody (plus `extra` as a supplementary group unless 0):
 * the first reply line, or "connect: <error>", into out. */
static void as_nobody(const char *path, gid_t extra, char *out, size_t len)
{
	int p[2], st;
	ssize_t n;
	pid_t pid;

	out[0] = '\0';
	if (pipe(p))
		return;
	pid = fork();
	if (!pid) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		char line[256] = "";
		size_t have = 0;
		int fd;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		if (setgroups(extra ? 1 : 0, &extra) || setgid(NOBODY) ||
		    setuid(NOBODY))
			_exit(2);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			snprintf(line, sizeof(line), "connect: %s",
				 strerror(errno));
		} else {
			if (send(fd, "ports\n", 6, MSG_NOSIGNAL) < 0) {
				/* refused already: its line is to read */
			}
			while (have + 1 < sizeof(line) &&
			       read(fd, line + have, 1) == 1 &&
			       line[have] != '\n')
				have++;
			line[have] = '\0';
		}
		if (write(p[1], line, strlen(line)) < 0)
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], out, len - 1);
	out[n > 0 ? n : 0] = '\0';
	close(p[0]);
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && !WEXITSTATUS(st), "client exit %d",
	      WEXITSTATUS(st));
}

static bool refused_line(const char *line)
{
	return !strncmp(line, "error permission denied", 23);
}

static void listen_as(struct vz_ctl *ctl, gid_t gid)
{
	char err[256];

	memset(ctl, 0, sizeof(*ctl));
	ctl->listen_fd = -1;
	ctl->nf = "test";
	ctl->backend = "none";
	vz_ctl_add_port(ctl, "lo");
	CHECK(!vz_ctl_listen(ctl, gid, err, sizeof(err)), "listen: %s", err);
}

static void test_root_only(void)
{
	struct vz_ctl ctl;
	struct stat st;
	char line[256];

	listen_as(&ctl, VZ_ROOT_ONLY);
	CHECK(!stat(ctl_dir, &st) && (st.st_mode & 0777) == 0755,
	      "directory 0755");
	CHECK(!stat(ctl.path, &st) && (st.st_mode & 0777) == 0600 &&
		      st.st_uid == 0 && st.st_gid == 0,
	      "root only: root:root 0600, not %o %u:%u", st.st_mode & 0777,
	      st.st_uid, st.st_gid);
	as_nobody(ctl.path, GROUP, line, sizeof(line));
	CHECK(!strcmp(line, "connect: Permission denied"), "nobody: '%s'",
	      line);
	/* The mode loosened by hand: the credentials still refuse. */
	chmod(ctl.path, 0666);
	as_nobody(ctl.path, GROUP, line, sizeof(line));
	CHECK(refused_line(line), "nobody, mode 0666: '%s'", line);
	CHECK(ctl.refused == 1, "refused %lu", ctl.refused);
	vz_ctl_close(&ctl);
}

static void test_group(void)
{
	struct vz_ctl ctl;
	struct stat st;
	char line[256];

	listen_as(&ctl, GROUP);
	CHECK(!stat(ctl.path, &st) && (st.st_mode & 0777) == 0660 &&
		      st.st_uid == 0 && st.st_gid == GROUP,
	      "group: root:%d 0660, not %o %u:%u", GROUP, st.st_mode & 0777,
	      st.st_uid, st.st_gid);
	as_nobody(ctl.path, GROUP, line, sizeof(line));
	CHECK(!strcmp(line, "ok 1"), "a member: '%s'", line);
	as_nobody(ctl.path, 0, line, sizeof(line));
	CHECK(!strcmp(line, "connect: Permission denied"), "not a member: '%s'",
	      line);
	chmod(ctl.path, 0666);
	as_nobody(ctl.path, 0, line, sizeof(line));
	CHECK(refused_line(line), "not a member, mode 0666: '%s'", line);
	CHECK(ctl.refused == 1, "refused %lu", ctl.refused);
	snprintf(line, sizeof(line), "%s", ctl.path);
	vz_ctl_close(&ctl);
	CHECK(access(line, F_OK) < 0, "socket removed");
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr,
			"skipped: needs root (children become nobody)\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/vz-ctl-acl-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	chmod(dir, 0755); /* nobody must reach the socket to be refused */
	snprintf(ctl_dir, sizeof(ctl_dir), "%s/ctl", dir);
	setenv("VELOZ_CTL_DIR", ctl_dir, 1);

	test_root_only();
	test_group();

	rmdir(ctl_dir);
	rmdir(dir);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
