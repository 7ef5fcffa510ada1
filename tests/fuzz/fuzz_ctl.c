// SPDX-License-Identifier: BSD-2-Clause
/*
 * The control protocol under fuzzing: any text, as a `veloz ctl` client
 * could send it, against an NF's native maps holding its start-up state.
 *
 * Each input runs inside a transaction that is never committed (its own
 * "begin" and "commit" lines are dropped), so when the session ends the
 * undo log must put back every map the input names exactly as it was: the
 * guarantee `veloz ctl` gives when a client dies mid-change. Every error
 * reply must be one printable line. And nothing may trip ASan or UBSan.
 *
 *   VZ_FUZZ_NF=router VZ_FUZZ_NF_DIR=build-fuzz/nf VZ_FUZZ_OPS=router.ops \
 *       fuzz-ctl [libFuzzer args]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include "ctl/nf.h"
#include "ctl/ctl.h"

static struct vz_nf nf;
static struct vz_ctl ctl;

static void die(const char *what)
{
	fprintf(stderr, "fuzz-ctl: %s\n", what);
	exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const __u8 *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *name = getenv("VZ_FUZZ_NF"),
		   *dir = getenv("VZ_FUZZ_NF_DIR"),
		   *ops = getenv("VZ_FUZZ_OPS");
	char bpf[4096], so[4096], err[512];

	(void)argc;
	(void)argv;
	if (!name || !dir)
		die("set VZ_FUZZ_NF (an NF name) and VZ_FUZZ_NF_DIR (where NAME.bpf.o and NAME.so are)");
	snprintf(bpf, sizeof(bpf), "%s/%s.bpf.o", dir, name);
	snprintf(so, sizeof(so), "%s/%s.so", dir, name);
	if (vz_nf_open(&nf, bpf, so, NULL, 0, 1))
		die("cannot open the NF");
	vz_ctl_init_native(&ctl, &nf.native, "native");
	if (ops && *ops && vz_ctl_apply_file(&ctl, ops, err, sizeof(err)))
		die(err);
	return 0;
}

static int by_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * An input's own dump of an array bigger than this (the router's next
 * hops: 4096 entries, lb's Maglev rings: 64 x 65537), or a run (fill, read)
 * longer than this, is left out: it runs the same code as a small one,
 * and printing or copying it in hex, then checking it, took most of this
 * target's time (ctl-lb fell to ~70 inputs/s on inputs that fill rings).
 */
#define BIG_ENTRIES 256

static bool is_array(const struct vz_ctl_map *m)
{
	return m->type == BPF_MAP_TYPE_ARRAY ||
	       m->type == BPF_MAP_TYPE_PERCPU_ARRAY;
}

static bool big_array(const struct vz_ctl_map *m)
{
	return is_array(m) && m->max_entries > BIG_ENTRIES;
}

/* A line of one of those: tokens split as vz_ctl_execute() splits them. */
static bool too_big(const char *line)
{
	char copy[256], *save = NULL, *verb, *name, *count, *end;
	unsigned long long n;
	int m;

	snprintf(copy, sizeof(copy), "%s", line);
	verb = strtok_r(copy, " \t\r", &save);
	name = strtok_r(NULL, " \t\r", &save);
	if (!verb || !name)
		return false;
	if (!strcmp(verb, "dump")) {
		for (m = 0; m < ctl.nmaps; m++)
			if (!strcmp(ctl.maps[m].name, name))
				return big_array(&ctl.maps[m]);
		return false;
	}
	if (strcmp(verb, "fill") && strcmp(verb, "read"))
		return false;
	strtok_r(NULL, " \t\r", &save); /* the first key */
	count = strtok_r(NULL, " \t\r", &save);
	if (!count || *count < '0' || *count > '9')
		return false;
	errno = 0;
	n = strtoull(count, &end, 10);
	return errno == ERANGE || (!*end && n > BIG_ENTRIES);
}

/*
 * The entries of array m the input can change: an array's entries cannot be
 * deleted, so only the keys its lines name (update KEY) and the runs they
 * fill (fill KEY COUNT) can differ. Reading just those, rather than dumping
 * the whole array (the router's next hops: 4096 entries in hex, twice per
 * input), is what lets this target reach 10^7 executions.
 */
static void lookups(FILE *f, const struct vz_ctl_map *m, const char *input)
{
	char *copy = strdup(input), *line, *save = NULL;

	if (!copy)
		die("out of memory");
	for (line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char verb[16], name[64], key[128], count[32];
		int n = sscanf(line, "%15s %63s %127s %31s", verb, name, key,
			       count);

		if (n < 3 || strcmp(name, m->name))
			continue;
		if (n == 4 && !strcmp(verb, "fill"))
			fprintf(f, "read %s %s %s\n", name, key, count);
		else
			fprintf(f, "lookup %s %s\n", name, key);
	}
	free(copy);
}

/*
 * Every map the input mentions, as one string: a dump with its entries
 * sorted (a native hash map may hold a restored key in another slot), or
 * for an array the entries the input names.
 */
static char *snapshot(const char *input)
{
	char *script = NULL, *reply, *out, **lines, *line, *save = NULL;
	size_t len = 0, reply_len, n = 0, i, total = 1;
	FILE *f = open_memstream(&script, &len);
	int m;

	if (!f)
		die("out of memory");
	for (m = 0; m < ctl.nmaps; m++) {
		if (!strstr(input, ctl.maps[m].name))
			continue;
		if (is_array(&ctl.maps[m]))
			lookups(f, &ctl.maps[m], input);
		else
			fprintf(f, "dump %s\n", ctl.maps[m].name);
	}
	fclose(f);
	if (vz_ctl_run_text(&ctl, script, len, &reply, &reply_len))
		die("out of memory");
	free(script);
	reply = realloc(reply, reply_len + 1);
	if (!reply)
		die("out of memory");
	reply[reply_len] = '\0';
	lines = calloc(reply_len / 2 + 2, sizeof(*lines));
	if (!lines)
		die("out of memory");
	for (line = strtok_r(reply, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		lines[n++] = line;
		total += strlen(line) + 1;
	}
	qsort(lines, n, sizeof(*lines), by_line);
	out = malloc(total);
	if (!out)
		die("out of memory");
	out[0] = '\0';
	for (i = 0, len = 0; i < n; i++) {
		size_t l = strlen(lines[i]);

		memcpy(out + len, lines[i], l);
		out[len + l] = '\n';
		len += l + 1;
	}
	out[len] = '\0';
	free(lines);
	free(reply);
	return out;
}

/* Every "error" reply is one line of printable text that says something. */
static void check_errors(const char *reply, size_t len)
{
	const char *p = reply, *end = reply + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *c;

		if (!nl)
			abort(); /* every reply line ends with a newline */
		if (!strncmp(p, "error", 5)) {
			if (nl - p < 8 || p[5] != ' ')
				abort();
			for (c = p; c < nl; c++)
				if (*c < 0x20 || *c > 0x7e)
					abort();
		}
		p = nl + 1;
	}
}

int LLVMFuzzerTestOneInput(const __u8 *data, size_t size)
{
	char *text, *line, *save = NULL, *script, *reply, *before, *after,
			   *kept;
	size_t len = 0, kept_len = 0, reply_len;
	FILE *f;

	if (size > 4096)
		return 0;
	text = malloc(size + 1);
	if (!text)
		die("out of memory");
	memcpy(text, data, size);
	text[size] = '\0';
	if (strlen(text) !=
	    size) { /* NUL bytes: the socket splits on \n only */
		free(text);
		return 0;
	}
	/* the lines that run: the input's own begin and commit, and the big
	 * ones, left out */
	f = open_memstream(&kept, &kept_len);
	if (!f)
		die("out of memory");
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *verb = line + strspn(line, " \t\r");

		if (!strncmp(verb, "begin", 5) || !strncmp(verb, "commit", 6) ||
		    too_big(verb))
			continue;
		fprintf(f, "%s\n", line);
	}
	fclose(f);
	before = snapshot(kept);
	f = open_memstream(&script, &len);
	if (!f)
		die("out of memory");
	fprintf(f, "begin\n%s", kept);
	fclose(f);
	if (vz_ctl_run_text(&ctl, script, len, &reply, &reply_len))
		die("out of memory");
	check_errors(reply, reply_len);
	after = snapshot(kept);
	if (strcmp(before, after)) {
		fprintf(stderr,
			"fuzz-ctl: the maps changed although nothing was "
			"committed\nbefore:\n%s\nafter:\n%s\nreplies:\n%.*s\n",
			before, after, (int)reply_len, reply);
		abort();
	}
	free(before);
	free(after);
	free(reply);
	free(script);
	free(kept);
	free(text);
	return 0;
}
