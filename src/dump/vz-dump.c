// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-dump: the frames an NF runs on, each with its verdict, into pcapng
 * (or pcap, or one line per frame). `veloz dump` runs it.
 *
 * xdp, xdp-generic (--object NAME.dump.bpf.o): the NF's dump build swaps in
 * for the attached program while the capture runs, its maps the NF's
 * (xdp_swap.h), and the NF swaps back at the end: -c COUNT reached,
 * SIGINT, SIGTERM, SIGHUP. afxdp, dpdk (--ctl SOCKET): the run sends its
 * workers' frames to a socket of ours while the capture is on
 * (ctl_capture.h, src/ctl/capture.h).
 *
 * Bounded: the kernel's buffers (--ring-size per CPU) or the socket's; a
 * frame that finds them full is dropped and counted, never waited for. At
 * the end: frames seen, kept, dropped (buffer full), filtered out.
 */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/err.h"
#include "common/options.h"
#include "dump/capfile.h"
#include "dump/ctl_capture.h"
#include "dump/filter.h"
#include "dump/reader.h"
#include "dump/xdp_swap.h"
#include "runner/xdp_attach.h"

#define RING_DEFAULT (1u << 20) /* per CPU */

struct dump_opts {
	const char *ifname, *object, *ctl, *out_path;
	__u64 count, snaplen, ring_bytes;
	bool json, restore;
};

struct dumper {
	struct dump_opts o;
	char *filter_expr;
	struct vz_dump_filter *filter;
	struct vz_capfile file; /* .f NULL: a line per frame on stdout */
	FILE *lines; /* where the lines and events go */
	__u64 realtime_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC, ns */
	__u64 got, kept, filtered, truncated;
	int write_err;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *action_name(__s32 action)
{
	static const char *const names[] = { "aborted", "drop", "pass", "tx",
					     "redirect" };

	return action >= 0 && action < 5 ? names[action] : "unknown";
}

/* The verdict as the pcapng comment and the lines say it. */
static void verdict_text(const struct vz_dump_event *ev, char *out, size_t len)
{
	int n = snprintf(out, len, "verdict=%s", action_name(ev->action));

	if (ev->action == 4 && n > 0 && (size_t)n < len)
		snprintf(out + n, len - (size_t)n, " port=%u", ev->port);
}

static void print_frame(struct dumper *d, const struct vz_dump_event *ev,
			__u64 ts, const char *verdict)
{
	if (d->o.json) {
		fprintf(d->lines,
			"{\"event\": \"frame\", \"ts_ns\": %llu, \"len\": %u, "
			"\"caplen\": %u, \"queue\": %u, \"verdict\": \"%s\"}\n",
			(unsigned long long)ts, ev->len, ev->caplen, ev->queue,
			action_name(ev->action));
		return;
	}
	fprintf(d->lines, "%llu.%09llu len %u queue %u %s\n",
		(unsigned long long)(ts / 1000000000ull),
		(unsigned long long)(ts % 1000000000ull), ev->len, ev->queue,
		verdict);
}

static void on_frame(void *ctx, const struct vz_dump_event *ev,
		     const uint8_t *data)
{
	struct dumper *d = ctx;
	char comment[96];
	__u64 ts;

	if (d->o.count && d->kept >= d->o.count)
		return; /* past -c: not ours to count */
	d->got++;
	if (d->filter &&
	    !vz_dump_filter_match(d->filter, data, ev->caplen, ev->len)) {
		d->filtered++;
		return;
	}
	ts = ev->ts_ns + d->realtime_offset;
	if (ev->caplen < ev->len)
		d->truncated++;
	verdict_text(ev, comment, sizeof(comment));
	snprintf(comment + strlen(comment), sizeof(comment) - strlen(comment),
		 " queue=%u", ev->queue);
	if (d->file.f) {
		if (!d->write_err)
			d->write_err =
				vz_capfile_packet(&d->file, ts, data,
						  ev->caplen, ev->len, comment);
		if (d->write_err)
			stop = 1;
	} else {
		print_frame(d, ev, ts, comment);
	}
	d->kept++;
	if (d->o.count && d->kept >= d->o.count)
		stop = 1;
}

static struct vz_option dump_options[] = {
	VZ_OPTION("iface", VZ_OPT_IFNAME, struct dump_opts, ifname,
		  .required = true, .metavar = "IF",
		  .help = "the interface the NF runs on"),
	VZ_OPTION(
		"object", VZ_OPT_STRING, struct dump_opts, object,
		.metavar = "NF.dump.bpf.o",
		.help = "xdp: the NF's dump build, swapped in while capturing"),
	VZ_OPTION("ctl", VZ_OPT_STRING, struct dump_opts, ctl,
		  .metavar = "SOCKET",
		  .help = "afxdp, dpdk: the run's control socket"),
	VZ_OPTION("write", VZ_OPT_STRING, struct dump_opts, out_path,
		  .short_opt = 'w', .metavar = "FILE",
		  .help = "pcapng (pcap if FILE ends in .pcap: no verdicts); "
			  "'-': stdout"),
	VZ_OPTION("count", VZ_OPT_U64, struct dump_opts, count,
		  .short_opt = 'c', .metavar = "N", .min = 1, .max = UINT64_MAX,
		  .no_default = true, .help = "stop after N frames kept"),
	VZ_OPTION("snaplen", VZ_OPT_U64, struct dump_opts, snaplen,
		  .short_opt = 's', .metavar = "BYTES", .min = 1,
		  .max = VZ_DUMP_SNAP_MAX, .help = "bytes kept of each frame"),
	VZ_OPTION("ring-size", VZ_OPT_U64, struct dump_opts, ring_bytes,
		  .metavar = "BYTES", .min = 1u << 14, .max = 1u << 28,
		  .help = "xdp: kernel buffer per CPU (a power of two); "
			  "frames that find it full are dropped and counted"),
	VZ_OPTION("json", VZ_OPT_FLAG, struct dump_opts, json,
		  .help = "JSON lines: capturing, frames, summary"),
	VZ_OPTION("restore", VZ_OPT_FLAG, struct dump_opts, restore,
		  .help = "put back the NF a killed dump left swapped out"),
	VZ_OPTION_END,
};

static const struct vz_opts dump_opts = {
	.prog = "vz-dump",
	.usage = "usage: vz-dump --iface IF (--object NF.dump.bpf.o | --ctl "
		 "SOCKET) [-w FILE] [-c N] [-s BYTES] [--json] [FILTER...]\n"
		 "       vz-dump --iface IF --restore\n",
	.table = dump_options,
	.positional = true,
};

/* The filter is the rest of the command line, as tcpdump takes it. */
static int join_filter(struct dumper *d, int argc, char **argv, int next)
{
	size_t n = 0;
	int i;

	for (i = next; i < argc; i++)
		n += strlen(argv[i]) + 1;
	if (!n)
		return 0;
	d->filter_expr = calloc(1, n);
	if (!d->filter_expr)
		return -ENOMEM;
	for (i = next; i < argc; i++) {
		if (i > next)
			strcat(d->filter_expr, " ");
		strcat(d->filter_expr, argv[i]);
	}
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

/* Bad input, found before anything is touched: exit 2. */
static int check_input(struct dumper *d, char *err, size_t errlen)
{
	if (!!d->o.object + !!d->o.ctl + d->o.restore != 1) {
		snprintf(err, errlen, "give one of --object, --ctl, --restore");
		return -EINVAL;
	}
	if (d->o.ring_bytes & (d->o.ring_bytes - 1)) {
		snprintf(err, errlen, "--ring-size must be a power of two");
		return -EINVAL;
	}
	if (d->filter_expr) {
		d->filter = vz_dump_filter_new(
			d->filter_expr, (uint32_t)d->o.snaplen, err, errlen);
		if (!d->filter)
			return -EINVAL;
	}
	if (d->o.out_path && strcmp(d->o.out_path, "-") && d->o.object &&
	    vz_same_file(d->o.out_path, d->o.object) == 1) {
		snprintf(err, errlen, "-w %s is the file capture reads from",
			 d->o.out_path);
		return -EINVAL;
	}
	return 0;
}

static int open_output(struct dumper *d, char *err, size_t errlen)
{
	const char *p = d->o.out_path;

	d->lines = stdout;
	if (!p)
		return 0;
	d->file.pcapng = !ends_with(p, ".pcap");
	d->file.f = strcmp(p, "-") ? fopen(p, "wb") : stdout;
	if (d->file.f == stdout)
		d->lines = stderr; /* the file is on stdout */
	if (!d->file.f) {
		snprintf(err, errlen, "cannot write %s: %s", p,
			 strerror(errno));
		return -errno;
	}
	if (vz_capfile_begin(&d->file, d->o.ifname, (uint32_t)d->o.snaplen)) {
		snprintf(err, errlen, "cannot write %s: %s", p,
			 strerror(errno ? errno : EIO));
		return -EIO;
	}
	return 0;
}

static void report(struct dumper *d, __u64 dropped)
{
	__u64 seen = d->got + dropped;

	if (d->o.json)
		fprintf(d->lines,
			"{\"event\": \"summary\", \"seen\": %llu, \"kept\": "
			"%llu, \"dropped\": %llu, \"filtered\": %llu, "
			"\"truncated\": %llu}\n",
			(unsigned long long)seen, (unsigned long long)d->kept,
			(unsigned long long)dropped,
			(unsigned long long)d->filtered,
			(unsigned long long)d->truncated);
	fprintf(stderr,
		"%llu frames seen, %llu kept, %llu dropped (buffer full), "
		"%llu filtered out; %llu cut to %llu bytes\n",
		(unsigned long long)seen, (unsigned long long)d->kept,
		(unsigned long long)dropped, (unsigned long long)d->filtered,
		(unsigned long long)d->truncated,
		(unsigned long long)d->o.snaplen);
}

static void announce(struct dumper *d, const char *how)
{
	if (d->o.json)
		fprintf(d->lines,
			"{\"event\": \"capturing\", \"iface\": \"%s\", "
			"\"how\": \"%s\"}\n",
			d->o.ifname, how);
	else
		fprintf(stderr, "capturing on %s (%s)\n", d->o.ifname, how);
	fflush(d->lines);
}

static void ctl_ready(void *ctx)
{
	announce(ctx, "the run's capture socket");
}

/* afxdp, dpdk: the run sends us its frames while the capture is on. */
static int capture_ctl(struct dumper *d, char *err, size_t errlen,
		       __u64 *dropped)
{
	struct vz_ctl_capture_result res = { 0 };
	int ret = vz_ctl_capture(d->o.ctl, (uint32_t)d->o.snaplen, on_frame, d,
				 ctl_ready, &stop, &res, err, errlen);

	*dropped = res.dropped;
	if (res.refused)
		fprintf(stderr,
			"veloz: %llu malformed records from the run: "
			"ignored\n",
			(unsigned long long)res.refused);
	return ret ? 1 : 0;
}

/* xdp: the dump build in, capture, the NF back. */
static int capture_xdp(struct dumper *d, int ifindex, char *err, size_t errlen,
		       __u64 *dropped)
{
	struct vz_xdp_swap s = { .orig_fd = -1, .dump_fd = -1 };
	struct vz_perf_read r = { .drops_fd = -1 };
	int ret;

	ret = vz_swap_find(&s, ifindex, d->o.ifname, err, errlen);
	if (ret)
		return ret == -ENOENT ? 2 : 1;
	ret = vz_swap_load(&s, d->o.object, err, errlen) ||
	      vz_perf_open(&r, s.obj, (uint32_t)d->o.snaplen,
			   (uint32_t)d->o.ring_bytes, on_frame, d, err,
			   errlen) ||
	      vz_swap_in(&s, err, errlen);
	if (ret)
		goto out;
	announce(d, "xdp dump build");
	while (!stop && !(ret = vz_perf_poll(&r, 100)))
		;
	if (ret)
		snprintf(err, errlen, "cannot read the capture buffers: %s",
			 strerror(-ret));
	/* the NF back first, so that what is left in the buffers is final */
	if (vz_swap_out(&s, err, errlen))
		ret = ret ? ret : -EIO;
	usleep(10000); /* a run on another CPU finishes within microseconds */
	vz_perf_poll(&r, 0);
	*dropped = vz_perf_dropped(&r) + r.unpaired;
out:
	vz_perf_close(&r);
	vz_swap_close(&s);
	return ret ? 1 : 0;
}

static int finish_output(struct dumper *d, int ret)
{
	FILE *f = d->file.f;

	if (!f)
		return ret;
	if (d->write_err || fflush(f) || ferror(f)) {
		vz_err("cannot write %s: %s", d->o.out_path,
		       strerror(d->write_err ? -d->write_err : EIO));
		ret = 1;
	}
	if (f != stdout && fclose(f) && !ret) {
		vz_err("cannot write %s: %s", d->o.out_path, strerror(errno));
		ret = 1;
	}
	d->file.f = NULL;
	return ret;
}

static void on_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
}

int main(int argc, char **argv)
{
	struct dumper d = { .o = { .snaplen = VZ_DUMP_SNAP_MAX,
				   .ring_bytes = RING_DEFAULT } };
	__u64 dropped = 0;
	char err[512] = "";
	int ifindex, next = argc, ret;

	vz_quiet_bpf_logs();
	if (vz_opts_parse(&dump_opts, &d.o, argc, argv, &next) ||
	    join_filter(&d, argc, argv, next))
		return 2;
	if (check_input(&d, err, sizeof(err))) {
		vz_err("%s", err);
		ret = 2;
		goto out;
	}
	ifindex = (int)if_nametoindex(d.o.ifname);
	if (!ifindex) {
		vz_err("no interface %s here", d.o.ifname);
		ret = 2;
		goto out;
	}
	if (!vz_xdp_privileged()) {
		vz_err("capturing needs root (CAP_BPF and CAP_NET_ADMIN)");
		ret = 1;
		goto out;
	}
	if (d.o.restore) {
		ret = vz_swap_restore_stale(ifindex, d.o.ifname, err,
					    sizeof(err));
		if (ret)
			vz_err("%s", err);
		ret = ret ? 1 : 0;
		goto out;
	}
	if (open_output(&d, err, sizeof(err))) {
		vz_err("%s", err);
		ret = 2;
		goto out;
	}
	on_signals();
	d.realtime_offset =
		vz_clock_ns(CLOCK_REALTIME) - vz_clock_ns(CLOCK_MONOTONIC);
	ret = d.o.object ? capture_xdp(&d, ifindex, err, sizeof(err), &dropped)
			 : capture_ctl(&d, err, sizeof(err), &dropped);
	if (ret)
		vz_err("%s", err);
	ret = finish_output(&d, ret);
	if (!ret)
		report(&d, dropped);
out:
	if (d.file.f && d.file.f != stdout)
		fclose(d.file.f);
	vz_dump_filter_free(d.filter);
	free(d.filter_expr);
	return ret;
}
