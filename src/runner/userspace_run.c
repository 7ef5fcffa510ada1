// SPDX-License-Identifier: BSD-2-Clause
/*
 * `run`'s command line for the userspace backends (afxdp, dpdk): the
 * option table, its checks and usage. The run itself is the one runner's
 * (src/runner/runner.c), as for xdp.
 */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/run_options.h"
#include "dispatch/dispatch.h" /* parse_args: --dispatch's names */
#include "runner/userspace.h"

/* Does the backend take --name (as written in its usage list)? */
static bool backend_has(const struct vz_backend *be, const char *name)
{
	const char *const *opt, *at;
	size_t len = strlen(name);

	for (opt = be->options; opt && *opt; opt++)
		for (at = strstr(*opt, "--"); at; at = strstr(at + 2, "--"))
			if (!strncmp(at + 2, name, len) &&
			    strchr("]| ", at[2 + len]))
				return true;
	return false;
}

/* What the command line gives besides struct vz_us_run's own fields. */
static struct us_cli {
	struct vz_nf_args nf;
	int pmd; /* index into pmd_names */
} cli;

static const char *const pmd_names[] = { "af_xdp", "af_packet", "eal", NULL };
static const char *const mode_names[] = { "native", "skb", NULL };
static const int mode_values[] = { XDP_MODE_NATIVE, XDP_MODE_SKB };

/* --iface, once per port. */
static int opt_iface(const struct vz_option *opt, const char *text, void *dst,
		     void *cfg)
{
	struct vz_us_run *run = cfg;

	(void)opt;
	(void)dst;
	if (run->nports == VZ_MAX_PORTS) {
		vz_err("at most %d ports", VZ_MAX_PORTS);
		return -EINVAL;
	}
	run->ports[run->nports++].ifname = text;
	return 0;
}

/* --copy, --zero-copy: the last one given wins. */
static int opt_copy(const struct vz_option *opt, const char *text, void *dst,
		    void *cfg)
{
	(void)text;
	(void)cfg;
	*(enum vz_xsk_copy *)dst =
		strcmp(opt->name, "copy") ? VZ_XSK_ZEROCOPY : VZ_XSK_COPY;
	return 0;
}

_Static_assert(VZ_MAX_SETS == VZ_OPT_LIST_MAX, "--set holds VZ_MAX_SETS");

#define US_OPT(name, type, member, ...) \
	VZ_OPTION(name, type, struct vz_us_run, member, __VA_ARGS__)

/*
 * Every backend's rows; those after "busy-poll" belong to some backends
 * only (be->options says which) and are hidden from the others.
 */
static struct vz_option us_options[] = {
	VZ_NF_OPTIONS(&cli.nf),
	US_OPT("iface", VZ_OPT_CUSTOM, ports, .parse = opt_iface,
	       .required = true, .repeat = true, .type_name = "ifname",
	       .metavar = "IF", .help = "a port (once per port)"),
	VZ_RUN_OPTIONS(struct vz_us_run),
	US_OPT("workers", VZ_OPT_U64, workers, .min = 1, .max = VZ_MAX_WORKERS,
	       .metavar = "N", .help = "threads running the NF"),
	US_OPT("queues", VZ_OPT_U64, queues, .min = 1, .max = VZ_MAX_WORKERS,
	       .no_default = true, .metavar = "N",
	       .help = "receive queues per port (default: --workers)"),
	US_OPT("batch", VZ_OPT_U64, batch, .min = 1, .max = VZ_US_BATCH_MAX,
	       .metavar = "N", .help = "frames per receive burst"),
	US_OPT("take-over", VZ_OPT_FLAG, take_over,
	       .help = "take the NF a running run has on the ports over, "
		       "with its state; that run leaves"),
	US_OPT("busy-poll", VZ_OPT_FLAG, busy_poll, .help = "busy-poll"),
	US_OPT("copy", VZ_OPT_FLAG, copy, .parse = opt_copy,
	       .help = "AF_XDP copy mode"),
	US_OPT("zero-copy", VZ_OPT_FLAG, copy, .parse = opt_copy,
	       .help = "AF_XDP zero-copy mode"),
	US_OPT("mode", VZ_OPT_ENUM, steer_mode, .choices = mode_names,
	       .values = mode_values, .metavar = "native|skb",
	       .help = "the steering program's XDP mode"),
	VZ_OPTION_PTR("pmd", VZ_OPT_ENUM, &cli.pmd, .choices = pmd_names,
		      .metavar = "af_xdp|af_packet|eal",
		      .help = "the DPDK poll-mode driver"),
	US_OPT("no-huge", VZ_OPT_FLAG, no_huge, .help = "no hugepages"),
	US_OPT("dispatch", VZ_OPT_ENUM, dispatch,
	       .choices = vz_dispatch_policy_names,
	       .nchoices = VZ_DISPATCH_POLICIES, .metavar = "POLICY",
	       .help = "spread flows over --workers by this policy"),
	VZ_OPTION_END,
};

static const char *const us_first_backend_option = "busy-poll";

static void set_usage(const struct vz_backend *be, char *buf, size_t len)
{
	const char *const *opt;
	size_t n;

	n = (size_t)snprintf(
		buf, len,
		"usage: vz-%s run --bpf NF.bpf.o --native NF.so --iface IF "
		"[--iface IF]...\n"
		"         [--set KEY=VALUE]... [--json] [--interval S] "
		"[--duration S] [--replace]\n"
		"         [--workers N] [--queues N] [--batch N] [--ops FILE]"
		" [--ctl-group GROUP]\n"
		"         [--ctl-idle-timeout S] [--take-over]",
		be->name);
	for (opt = be->options; opt && *opt && n < len; opt++)
		n += (size_t)snprintf(buf + n, len - n, " %s", *opt);
	if (n < len)
		snprintf(buf + n, len - n, "\n");
}

/* Hide the rows of other backends' options; refuse them if given. */
static int backend_rows(const struct vz_backend *be, bool check)
{
	struct vz_option *opt = us_options;

	while (strcmp(opt->name, us_first_backend_option))
		opt++;
	for (; opt->name; opt++) {
		opt->hidden = !backend_has(be, opt->name);
		if (check && opt->hidden && opt->seen) {
			vz_err("--%s is not an option of the %s backend",
			       opt->name, be->name);
			return 2;
		}
	}
	return 0;
}

static int parse_args(struct vz_us_run *run, int argc, char **argv,
		      const char **bpf_path, const char **native_path,
		      char **sets, int *nsets)
{
	const struct vz_backend *be = run->backend;
	char usage[1024];
	struct vz_opts o = { .usage = usage,
			     .table = us_options,
			     .subcommand = "run",
			     .stop_at_nonopt = true };
	char prog[32];
	int next;

	snprintf(prog, sizeof(prog), "vz-%s", be->name);
	o.prog = prog;
	set_usage(be, usage, sizeof(usage));
	backend_rows(be, false);
	cli.pmd = 0; /* af_xdp */
	/* "--" ends the options; what follows is the EAL's */
	if (vz_opts_parse(&o, run, argc, argv, &next))
		return 2;
	if (backend_rows(be, true))
		return 2;
	if (next < argc && !strcmp(argv[next - 1], "--")) {
		run->extra_args = &argv[next];
		run->nextra = argc - next;
	} else if (next != argc) {
		vz_err("%s: unexpected argument '%s' (see --help)", prog,
		       argv[next]);
		return 2;
	}
	run->pmd = pmd_names[cli.pmd];
	*bpf_path = cli.nf.bpf_path;
	*native_path = cli.nf.native_path;
	memcpy(sets, cli.nf.sets.v, sizeof(*sets) * (size_t)cli.nf.sets.n);
	*nsets = cli.nf.sets.n;
	if (run->alloc && run->dispatch < 0) {
		vz_err("--alloc goes with --dispatch");
		return 2;
	}
	/* a dispatch stage's workers have no pause point (take_over.h) */
	if (run->take_over && run->dispatch >= 0) {
		vz_err("--take-over does not go with --dispatch");
		return 2;
	}
	if (run->take_over && run->replace) {
		vz_err("--take-over takes what --replace would remove: one or "
		       "the other");
		return 2;
	}
	if (!run->queues) /* dispatching, one thread takes every queue */
		run->queues = run->dispatch >= 0 ? 1 : run->workers;
	if (run->dispatch < 0 && run->workers > run->queues) {
		vz_err("--workers %u is more than --queues %u: a queue has one "
		       "worker",
		       run->workers, run->queues);
		return 2;
	}
	return 0;
}

int vz_us_main(int argc, char **argv, const struct vz_backend *backend)
{
	struct vz_us_run *run = calloc(1, sizeof(*run));
	const char *bpf_path = NULL, *native_path = NULL;
	char *sets[VZ_MAX_SETS];
	int nsets = 0, ret;

	if (!run)
		return 1;
	vz_run_init(run, backend);
	vz_check_stdout_at_exit(); /* counters that never reached stdout fail */
	ret = parse_args(run, argc, argv, &bpf_path, &native_path, sets,
			 &nsets);
	if (!ret)
		ret = vz_run(run, bpf_path, native_path, sets, nsets);
	free(run);
	return ret;
}
