/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Option tables for the C tools, in the style of xdp-tools' prog_option
 * (lib/util/params.h): each option is one row saying its name, type, where
 * it is stored, its limits and its help. One parser walks the table, so a
 * limit is written once, and `--describe-options --json` prints the same
 * rows for Python (python/veloz/core/options.py) to build its checks from.
 *
 * The defaults are what the caller's struct holds before vz_opts_parse():
 * --describe-options reads them from there, so they too are written once.
 */
#ifndef VZ_COMMON_OPTIONS_H
#define VZ_COMMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <linux/types.h>

enum vz_opt_type {
	VZ_OPT_FLAG, /* bool, set to true; no value */
	VZ_OPT_U64, /* whole number in [min, max]; stored in 1, 2, 4 or 8 bytes
		     */
	VZ_OPT_DOUBLE, /* finite number in [dmin, dmax], a double */
	VZ_OPT_SECONDS, /* positive seconds up to VZ_SECONDS_MAX, a double */
	VZ_OPT_STRING, /* const char *, pointing into argv */
	VZ_OPT_IFNAME, /* const char *: 1..IFNAMSIZ-1 bytes, no '/' or space */
	VZ_OPT_ENUM, /* one of choices[]: stored as its index, an int */
	VZ_OPT_MAC, /* __u8[6] */
	VZ_OPT_IPV4, /* struct in_addr */
	VZ_OPT_LIST, /* struct vz_opt_list: each time given, one more value */
	VZ_OPT_GROUP, /* gid_t: a group name, or a number */
	VZ_OPT_CUSTOM, /* parse() does it all; type_name names it */
};

/* What a VZ_OPT_LIST option holds: --set K=V --set K2=V2... */
#define VZ_OPT_LIST_MAX 64
struct vz_opt_list {
	char *v[VZ_OPT_LIST_MAX]; /* into argv */
	int n;
};

struct vz_option;
/*
 * Parse TEXT into DST (the option's field) or, for values that set more
 * than one field, into CFG (the whole struct); print one line and fail.
 */
typedef int (*vz_opt_parse_fn)(const struct vz_option *opt, const char *text,
			       void *dst, void *cfg);

struct vz_option {
	const char *name; /* long name, without "--" */
	int short_opt; /* 0: none */
	enum vz_opt_type type;
	size_t offset, size; /* the field in the caller's struct */
	const char *metavar; /* the value's name in help: N, PATH... */
	const char *help;
	bool required;
	bool clamp; /* U64: a value past max becomes max (legacy) */
	bool repeat; /* may be given more than once (CUSTOM appends) */
	bool no_default; /* describe: the field's initial value means "unset" */
	__u64 min, max; /* U64 */
	double dmin, dmax; /* DOUBLE */
	const char *const *choices; /* ENUM: NULL-terminated, or nchoices */
	unsigned int nchoices;
	const int *values; /* ENUM: store values[i], not i (may be NULL) */
	bool hidden; /* accepted, but not offered: --help, describe skip it */
	void *ptr; /* store here, not in the caller's struct (VZ_OPTION_PTR) */
	vz_opt_parse_fn parse; /* CUSTOM; a FLAG's, called with text NULL */
	const char *type_name; /* CUSTOM: what describe calls the type */
	unsigned int seen; /* times given: set by vz_opts_parse() */
};

#define vz_sizeof_field(type, member) sizeof(((type *)0)->member)

/* A row: VZ_OPTION("iface", VZ_OPT_IFNAME, struct gen, ifname, .help = ..) */
#define VZ_OPTION(_name, _type, _cfgtype, _member, ...)                 \
	{                                                               \
		.name = (_name), .type = (_type),                       \
		.offset = offsetof(_cfgtype, _member),                  \
		.size = vz_sizeof_field(_cfgtype, _member), __VA_ARGS__ \
	}
/* A row stored outside the parsed struct: a tool's own locals. */
#define VZ_OPTION_PTR(_name, _type, _ptr, ...)                   \
	{                                                        \
		.name = (_name), .type = (_type), .ptr = (_ptr), \
		.size = sizeof(*(_ptr)), __VA_ARGS__             \
	}
#define VZ_OPTION_END        \
	{                    \
		.name = NULL \
	}

struct vz_opts {
	const char *prog; /* "vz-gen": in errors and help */
	const char *usage; /* the synopsis lines, printed before the table */
	const char *epilog; /* printed after it; may be NULL */
	struct vz_option *table; /* ends with VZ_OPTION_END */
	const char *subcommand; /* "run": argv[1] must be it (NULL: none) */
	bool stop_at_nonopt; /* getopt's '+': leave the rest in argv */
	bool positional; /* non-option arguments allowed (from *next on) */
};

/*
 * Parse argv into CFG by the table. Handles --help (prints, exits 0) and
 * --describe-options [--json] (prints the table, exits 0). On bad input:
 * one line "veloz: ..." on stderr and -EINVAL. *next (may be NULL) is the
 * index of the first argument not parsed. With a subcommand, argv[1] must
 * be it (but --describe-options needs none).
 */
int vz_opts_parse(const struct vz_opts *o, void *cfg, int argc, char **argv,
		  int *next);

/* The row named NAME (NULL if none). */
struct vz_option *vz_opts_find(const struct vz_opts *o, const char *name);
/* Was --NAME given? */
bool vz_opts_given(const struct vz_opts *o, const char *name);

/* The table as help text, and as JSON (the --describe-options output). */
void vz_opts_help(const struct vz_opts *o, FILE *out);
void vz_opts_describe_json(const struct vz_opts *o, const void *cfg, FILE *out);

#endif
