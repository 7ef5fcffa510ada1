// SPDX-License-Identifier: BSD-2-Clause
/*
 * One parser for every C tool's options: the table (options.h) is turned
 * into getopt_long's array, each value is checked by its row's type and
 * limits, and the same rows print --help and --describe-options --json.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <net/if.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/options.h"
#include "common/parse.h"

#define OPT_HELP 0x10000 /* getopt values past any short option's */
#define OPT_DESCRIBE 0x10001
#define OPT_BASE 0x10100 /* + row index */

/* As --describe-options names them (python/veloz/core/options.py reads). */
static const char *const type_names[] = {
	[VZ_OPT_FLAG] = "flag",	    [VZ_OPT_U64] = "u64",
	[VZ_OPT_DOUBLE] = "double", [VZ_OPT_SECONDS] = "seconds",
	[VZ_OPT_STRING] = "string", [VZ_OPT_IFNAME] = "ifname",
	[VZ_OPT_ENUM] = "enum",	    [VZ_OPT_MAC] = "mac",
	[VZ_OPT_IPV4] = "ipv4",	    [VZ_OPT_LIST] = "list",
	[VZ_OPT_GROUP] = "group",   [VZ_OPT_CUSTOM] = "custom",
};

static size_t table_len(const struct vz_opts *o)
{
	size_t n = 0;

	while (o->table[n].name)
		n++;
	return n;
}

struct vz_option *vz_opts_find(const struct vz_opts *o, const char *name)
{
	struct vz_option *opt;

	for (opt = o->table; opt->name; opt++)
		if (!strcmp(opt->name, name))
			return opt;
	return NULL;
}

bool vz_opts_given(const struct vz_opts *o, const char *name)
{
	const struct vz_option *opt = vz_opts_find(o, name);

	return opt && opt->seen;
}

/* ---- values ---------------------------------------------------------- */

/* Where a row's value lives: its own pointer, or its field of CFG. */
static void *field(const struct vz_option *opt, const void *cfg)
{
	return opt->ptr ? opt->ptr : (char *)cfg + opt->offset;
}

static unsigned int nchoices(const struct vz_option *opt)
{
	unsigned int n = 0;

	if (opt->nchoices)
		return opt->nchoices;
	while (opt->choices[n])
		n++;
	return n;
}

static int parse_double(const struct vz_option *opt, const char *text,
			double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	/* NaN compares false with everything: test for what is wanted */
	if (errno || end == text || *end || !isfinite(v) ||
	    !(v >= opt->dmin && v <= opt->dmax)) {
		vz_err("--%s must be a number from %g to %g, not '%s'",
		       opt->name, opt->dmin, opt->dmax, text);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* Store V in a field of 1, 2, 4 or 8 bytes (the table's sizeof). */
static void store_uint(void *dst, size_t size, __u64 v)
{
	switch (size) {
	case 1:
		*(__u8 *)dst = (__u8)v;
		break;
	case 2:
		*(__u16 *)dst = (__u16)v;
		break;
	case 4:
		*(__u32 *)dst = (__u32)v;
		break;
	default:
		*(__u64 *)dst = v;
	}
}

static __u64 load_uint(const void *src, size_t size)
{
	switch (size) {
	case 1:
		return *(const __u8 *)src;
	case 2:
		return *(const __u16 *)src;
	case 4:
		return *(const __u32 *)src;
	default:
		return *(const __u64 *)src;
	}
}

static int parse_u64(const struct vz_option *opt, const char *text, void *dst)
{
	char what[64];
	__u64 v;

	snprintf(what, sizeof(what), "--%s", opt->name);
	/* a clamped option takes any whole number and saturates at max */
	if (vz_parse_u64(what, text, opt->min,
			 opt->clamp ? UINT64_MAX : opt->max, &v))
		return -EINVAL;
	store_uint(dst, opt->size, v > opt->max ? opt->max : v);
	return 0;
}

static int parse_enum(const struct vz_option *opt, const char *text, int *dst)
{
	unsigned int i, n = nchoices(opt);
	char list[256] = "";

	for (i = 0; i < n; i++) {
		if (!strcmp(text, opt->choices[i])) {
			*dst = opt->values ? opt->values[i] : (int)i;
			return 0;
		}
		snprintf(list + strlen(list), sizeof(list) - strlen(list),
			 "%s%s", i ? ", " : "", opt->choices[i]);
	}
	vz_err("--%s: unknown value '%s' (%s)", opt->name, text, list);
	return -EINVAL;
}

/* The choice whose stored value is V, for describe's default. */
static const char *enum_name(const struct vz_option *opt, int v)
{
	unsigned int i, n = nchoices(opt);

	for (i = 0; i < n; i++)
		if ((opt->values ? opt->values[i] : (int)i) == v)
			return opt->choices[i];
	return NULL;
}

static int parse_list(const struct vz_option *opt, const char *text,
		      struct vz_opt_list *list)
{
	if (list->n == VZ_OPT_LIST_MAX) {
		vz_err("--%s: at most %d values", opt->name, VZ_OPT_LIST_MAX);
		return -EINVAL;
	}
	/* getopt's optarg points into argv, which outlives the parse */
	list->v[list->n++] = (char *)text;
	return 0;
}

static int parse_value(const struct vz_option *opt, const char *text, void *dst,
		       void *cfg)
{
	char what[64];

	snprintf(what, sizeof(what), "--%s", opt->name);
	switch (opt->type) {
	case VZ_OPT_FLAG:
		if (opt->parse) /* a flag that sets more than a bool */
			return opt->parse(opt, NULL, dst, cfg);
		*(bool *)dst = true;
		return 0;
	case VZ_OPT_U64:
		return parse_u64(opt, text, dst);
	case VZ_OPT_DOUBLE:
		return parse_double(opt, text, dst);
	case VZ_OPT_SECONDS:
		return vz_parse_seconds(what, text, dst) ? -EINVAL : 0;
	case VZ_OPT_IFNAME:
		if (!*text || strlen(text) >= IFNAMSIZ || strchr(text, '/') ||
		    strpbrk(text, " \t\n")) {
			vz_err("--%s: not an interface name: '%s'", opt->name,
			       text);
			return -EINVAL;
		}
		/* fall through */
	case VZ_OPT_STRING:
		*(const char **)dst = text;
		return 0;
	case VZ_OPT_ENUM:
		return parse_enum(opt, text, dst);
	case VZ_OPT_MAC:
		if (vz_parse_mac(text, dst)) {
			vz_err("--%s: not a MAC address: '%s'", opt->name,
			       text);
			return -EINVAL;
		}
		return 0;
	case VZ_OPT_IPV4:
		if (inet_pton(AF_INET, text, dst) != 1) {
			vz_err("--%s: not an IPv4 address: '%s'", opt->name,
			       text);
			return -EINVAL;
		}
		return 0;
	case VZ_OPT_LIST:
		return parse_list(opt, text, dst);
	case VZ_OPT_GROUP:
		return vz_parse_group(what, text, dst) ? -EINVAL : 0;
	case VZ_OPT_CUSTOM:
		return opt->parse(opt, text, dst, cfg);
	}
	return -EINVAL;
}

/* ---- help and describe ----------------------------------------------- */

static void json_string(FILE *out, const char *s)
{
	if (!s) {
		fputs("null", out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

/* The field's value before parsing: the default, as JSON. */
static void json_default(FILE *out, const struct vz_option *opt,
			 const void *cfg)
{
	const void *src = field(opt, cfg);
	const __u8 *mac = src;
	char addr[INET_ADDRSTRLEN];

	if ((!cfg && !opt->ptr) || opt->no_default) {
		fputs("null", out);
		return;
	}
	switch (opt->type) {
	case VZ_OPT_FLAG:
		if (opt->parse) {
			fputs("null", out);
			return;
		}
		fputs(*(const bool *)src ? "true" : "false", out);
		return;
	case VZ_OPT_U64:
		fprintf(out, "%llu",
			(unsigned long long)load_uint(src, opt->size));
		return;
	case VZ_OPT_DOUBLE:
	case VZ_OPT_SECONDS:
		fprintf(out, "%.17g", *(const double *)src);
		return;
	case VZ_OPT_STRING:
	case VZ_OPT_IFNAME:
		json_string(out, *(const char *const *)src);
		return;
	case VZ_OPT_ENUM:
		json_string(out, enum_name(opt, *(const int *)src));
		return;
	case VZ_OPT_MAC:
		if (mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5])
			fprintf(out, "\"%02x:%02x:%02x:%02x:%02x:%02x\"",
				mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
		else
			fputs("null", out);
		return;
	case VZ_OPT_IPV4:
		if (((const struct in_addr *)src)->s_addr &&
		    inet_ntop(AF_INET, src, addr, sizeof(addr)))
			json_string(out, addr);
		else
			fputs("null", out);
		return;
	case VZ_OPT_LIST:
	case VZ_OPT_GROUP: /* (gid_t)-1, root only: there is no such group */
	case VZ_OPT_CUSTOM:
		fputs("null", out);
		return;
	}
}

static void json_limits(FILE *out, const struct vz_option *opt)
{
	int i;

	if (opt->type == VZ_OPT_U64)
		fprintf(out, ", \"min\": %llu, \"max\": %llu, \"clamp\": %s",
			(unsigned long long)opt->min,
			(unsigned long long)opt->max,
			opt->clamp ? "true" : "false");
	else if (opt->type == VZ_OPT_DOUBLE)
		fprintf(out, ", \"min\": %.17g, \"max\": %.17g", opt->dmin,
			opt->dmax);
	else if (opt->type == VZ_OPT_SECONDS)
		fprintf(out, ", \"min_exclusive\": 0, \"max\": %.17g",
			VZ_SECONDS_MAX);
	else if (opt->type == VZ_OPT_IFNAME)
		fprintf(out, ", \"max_len\": %d", IFNAMSIZ - 1);
	if (opt->type != VZ_OPT_ENUM)
		return;
	fputs(", \"choices\": [", out);
	for (i = 0; i < (int)nchoices(opt); i++) {
		fputs(i ? ", " : "", out);
		json_string(out, opt->choices[i]);
	}
	fputc(']', out);
}

void vz_opts_describe_json(const struct vz_opts *o, const void *cfg, FILE *out)
{
	const struct vz_option *opt;
	char shrt[2] = "";
	bool first = true;

	fputs("{\"prog\": ", out);
	json_string(out, o->prog);
	fputs(", \"options\": [", out);
	for (opt = o->table; opt->name; opt++) {
		if (opt->hidden)
			continue;
		shrt[0] = (char)opt->short_opt;
		fprintf(out, "%s\n  {\"name\": ", first ? "" : ",");
		first = false;
		json_string(out, opt->name);
		fputs(", \"short\": ", out);
		json_string(out, opt->short_opt ? shrt : NULL);
		fprintf(out, ", \"type\": ");
		json_string(out, opt->type == VZ_OPT_CUSTOM && opt->type_name
					 ? opt->type_name
					 : type_names[opt->type]);
		fprintf(out,
			", \"takes_value\": %s, \"required\": %s, "
			"\"repeat\": %s",
			opt->type == VZ_OPT_FLAG ? "false" : "true",
			opt->required ? "true" : "false",
			opt->repeat || opt->type == VZ_OPT_LIST ? "true"
								: "false");
		json_limits(out, opt);
		fputs(", \"default\": ", out);
		json_default(out, opt, cfg);
		fputs(", \"metavar\": ", out);
		json_string(out, opt->metavar);
		fputs(", \"help\": ", out);
		json_string(out, opt->help);
		fputc('}', out);
	}
	fputs("\n]}\n", out);
}

void vz_opts_help(const struct vz_opts *o, FILE *out)
{
	const struct vz_option *opt;
	char left[64];

	fputs(o->usage, out);
	for (opt = o->table; opt->name; opt++) {
		if (!opt->help || opt->hidden)
			continue;
		snprintf(left, sizeof(left), "%s%c%s--%s%s%s",
			 opt->short_opt ? "-" : "",
			 opt->short_opt ? opt->short_opt : ' ',
			 opt->short_opt ? ", " : "  ", opt->name,
			 opt->type == VZ_OPT_FLAG ? "" : " ",
			 opt->type == VZ_OPT_FLAG ? ""
			 : opt->metavar		  ? opt->metavar
						  : "VALUE");
		fprintf(out, "  %-26s %s", left, opt->help);
		if (opt->type == VZ_OPT_U64)
			fprintf(out, " (%llu..%llu)",
				(unsigned long long)opt->min,
				(unsigned long long)opt->max);
		else if (opt->type == VZ_OPT_DOUBLE)
			fprintf(out, " (%g..%g)", opt->dmin, opt->dmax);
		fputc('\n', out);
	}
	if (o->epilog)
		fputs(o->epilog, out);
}

/* ---- the parser ------------------------------------------------------ */

/* getopt_long's array and short string, built from the table. */
static struct option *build_getopt(const struct vz_opts *o, char *shorts,
				   size_t nshorts)
{
	size_t i, n = table_len(o), k = 0;
	struct option *lo = calloc(n + 3, sizeof(*lo));

	if (!lo)
		return NULL;
	k += (size_t)snprintf(shorts, nshorts, "%s:h",
			      o->stop_at_nonopt ? "+" : "");
	for (i = 0; i < n; i++) {
		const struct vz_option *opt = &o->table[i];

		lo[i] = (struct option){ opt->name,
					 opt->type == VZ_OPT_FLAG
						 ? no_argument
						 : required_argument,
					 NULL,
					 opt->short_opt ? opt->short_opt
							: (int)(OPT_BASE + i) };
		if (opt->short_opt && k + 3 < nshorts) {
			shorts[k++] = (char)opt->short_opt;
			if (opt->type != VZ_OPT_FLAG)
				shorts[k++] = ':';
			shorts[k] = '\0';
		}
	}
	lo[n] = (struct option){ "help", no_argument, NULL, OPT_HELP };
	lo[n + 1] = (struct option){ "describe-options", no_argument, NULL,
				     OPT_DESCRIBE };
	return lo;
}

static struct vz_option *row_of(const struct vz_opts *o, int c)
{
	struct vz_option *opt;

	if (c >= OPT_BASE)
		return &o->table[c - OPT_BASE];
	for (opt = o->table; opt->name; opt++)
		if (opt->short_opt == c)
			return opt;
	return NULL;
}

/*
 * --describe-options anywhere before "--" answers whatever else is given:
 * Python asks for the table without knowing what a tool requires.
 */
static bool wants_describe(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--describe-options"))
			return true;
	return false;
}

static int check_required(const struct vz_opts *o)
{
	const struct vz_option *opt;

	for (opt = o->table; opt->name; opt++) {
		if (opt->required && !opt->seen) {
			vz_err("%s: --%s is required (see --help)", o->prog,
			       opt->name);
			return -EINVAL;
		}
	}
	return 0;
}

static int parse_one(const struct vz_opts *o, void *cfg, int c, char **argv)
{
	struct vz_option *opt = row_of(o, c);

	if (c == ':') {
		vz_err("%s: %s needs a value", o->prog, argv[optind - 1]);
		return -EINVAL;
	}
	if (!opt) {
		vz_err("%s: unknown option '%s' (see --help)", o->prog,
		       argv[optind - 1]);
		return -EINVAL;
	}
	opt->seen++;
	return parse_value(opt, optarg, field(opt, cfg), cfg);
}

static int parse_argv(const struct vz_opts *o, void *cfg, int argc, char **argv,
		      int *next)
{
	char shorts[128];
	struct option *lo;
	int c, ret = 0;

	lo = build_getopt(o, shorts, sizeof(shorts));
	if (!lo) {
		vz_err("%s: out of memory", o->prog);
		return -ENOMEM;
	}
	opterr = 0;
	optind = 1;
	while (!ret && (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (c == 'h' || c == OPT_HELP) {
			free(lo);
			vz_opts_help(o, stdout);
			exit(0);
		}
		ret = parse_one(o, cfg, c, argv);
	}
	free(lo);
	if (ret)
		return ret;
	if (optind < argc && !o->positional && !o->stop_at_nonopt) {
		vz_err("%s: unexpected argument '%s' (see --help)", o->prog,
		       argv[optind]);
		return -EINVAL;
	}
	*next = optind;
	return check_required(o);
}

int vz_opts_parse(const struct vz_opts *o, void *cfg, int argc, char **argv,
		  int *next)
{
	int ret, shift = 0, n = 0;

	if (wants_describe(argc, argv)) {
		vz_opts_describe_json(o, cfg, stdout);
		exit(0);
	}
	if (o->subcommand) {
		if (argc < 2 || strcmp(argv[1], o->subcommand)) {
			fputs(o->usage, stderr);
			return -EINVAL;
		}
		/* getopt takes the subcommand for the program's name */
		argc--;
		argv++;
		shift = 1;
	}
	ret = parse_argv(o, cfg, argc, argv, &n);
	if (next)
		*next = n + shift;
	return ret;
}
