// SPDX-License-Identifier: BSD-2-Clause
/*
 * The control socket's idle timeout (ctl_server.c): a client that falls
 * silent while it holds the NF's one session -- here mid-transaction, as a
 * SIGSTOPped `veloz ctl` would -- is hung up on after ctl->idle_ms, its
 * transaction rolled back, so the next client is served; when the silent
 * one speaks again it reads one "error closed:" line, then the end. A
 * client that is slow but never silent that long keeps its session.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <linux/bpf.h>

#include "check.h"
#include "common/clock.h"
#include "ctl/ctl.h"

#define IDLE_MS 300

static struct vz_map table = {
	.name = "t",
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = 4,
	.value_size = 4,
	.max_entries = 4,
};

static int connect_to(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 }; /* a hang fails, not blocks */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	CHECK(fd >= 0 && !connect(fd, (struct sockaddr *)&addr, sizeof(addr)),
	      "connect: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void say(int fd, const char *text)
{
	if (send(fd, text, strlen(text), MSG_NOSIGNAL) < 0) {
		/* hung up on: what it reads says why */
	}
}

/* One reply line, without its newline; "" at the end or on a timeout. */
static void hear(int fd, char *line, size_t len)
{
	size_t have = 0;

	while (have + 1 < len && read(fd, line + have, 1) == 1 &&
	       line[have] != '\n')
		have++;
	line[have] = '\0';
}

static void pause_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static void test_silent_client_is_closed(struct vz_ctl *ctl)
{
	char line[256];
	double t0, waited;
	int a, b;

	a = connect_to(ctl->path);
	say(a, "begin\nupdate t 00000000 07000000\n");
	hear(a, line, sizeof(line));
	CHECK(!strcmp(line, "ok"), "begin: '%s'", line);
	hear(a, line, sizeof(line));
	CHECK(!strcmp(line, "ok"), "update: '%s'", line);
	t0 = vz_now_s();
	/* a is silent now; b waits behind it for the one session */
	b = connect_to(ctl->path);
	say(b, "lookup t 00000000\n");
	hear(b, line, sizeof(line));
	waited = vz_now_s() - t0;
	CHECK(!strcmp(line, "ok 00000000"), "rolled back: '%s'", line);
	CHECK(waited >= IDLE_MS / 1e3 * 0.9, "served after %.3f s", waited);
	CHECK(__atomic_load_n(&ctl->idle_closed, __ATOMIC_RELAXED) == 1,
	      "idle closed %lu", ctl->idle_closed);
	close(b);
	/* a speaks again: its commit meets the notice, then the end */
	say(a, "commit\n");
	hear(a, line, sizeof(line));
	CHECK(!strcmp(line, "error closed: no request for 0.3 s; its "
			    "transaction was rolled back"),
	      "the notice: '%s'", line);
	hear(a, line, sizeof(line));
	CHECK(!line[0], "then the end: '%s'", line);
	close(a);
}

static void test_slow_client_keeps_its_session(struct vz_ctl *ctl)
{
	char line[256];
	int a, i;

	a = connect_to(ctl->path);
	say(a, "begin\nupdate t 01000000 05000000\n");
	hear(a, line, sizeof(line));
	hear(a, line, sizeof(line));
	CHECK(!strcmp(line, "ok"), "update: '%s'", line);
	/* silent for 2/3 of the limit at a time, 4/3 of it in all */
	for (i = 0; i < 2; i++) {
		pause_ms(IDLE_MS * 2 / 3);
		say(a, "info\n");
		hear(a, line, sizeof(line));
		CHECK(!strcmp(line, "ok test none"), "info %d: '%s'", i, line);
	}
	pause_ms(IDLE_MS * 2 / 3);
	say(a, "commit\nlookup t 01000000\n");
	hear(a, line, sizeof(line));
	CHECK(!strcmp(line, "ok"), "commit: '%s'", line);
	hear(a, line, sizeof(line));
	CHECK(!strcmp(line, "ok 05000000"), "committed: '%s'", line);
	CHECK(__atomic_load_n(&ctl->idle_closed, __ATOMIC_RELAXED) == 1,
	      "idle closed %lu", ctl->idle_closed);
	close(a);
}

int main(void)
{
	char dir[] = "/tmp/vz-ctl-idle-XXXXXX", err[256];
	struct vz_ctl ctl;

	if (!mkdtemp(dir))
		return 1;
	setenv("VELOZ_CTL_DIR", dir, 1);
	CHECK(!vz_map_init(&table, 1), "map");
	memset(&ctl, 0, sizeof(ctl));
	ctl.listen_fd = -1;
	ctl.nf = "test";
	ctl.backend = "none";
	snprintf(ctl.maps[0].name, sizeof(ctl.maps[0].name), "t");
	ctl.maps[0].type = table.type;
	ctl.maps[0].key_size = table.key_size;
	ctl.maps[0].value_size = table.value_size;
	ctl.maps[0].max_entries = table.max_entries;
	ctl.maps[0].copies = 1;
	ctl.maps[0].native = &table;
	ctl.nmaps = 1;
	ctl.idle_ms = IDLE_MS;
	vz_ctl_add_port(&ctl, "lo");
	CHECK(!vz_ctl_listen(&ctl, (gid_t)-1, err, sizeof(err)), "listen: %s",
	      err);

	test_silent_client_is_closed(&ctl);
	test_slow_client_keeps_its_session(&ctl);

	vz_ctl_close(&ctl);
	vz_map_free(&table);
	rmdir(dir);
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures != 0;
}
