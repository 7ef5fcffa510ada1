// SPDX-License-Identifier: BSD-2-Clause
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/counters.h"
#include "ctl/ctl.h"
#include "ctl/nf.h"

void vz_snapshot_add(struct vz_snapshot *s, unsigned int w,
		     const struct vz_counts *c)
{
	struct vz_counts *t = &s->total;
	int v, p;

	s->worker[w] = *c;
	if (w >= s->nworkers)
		s->nworkers = w + 1;
	for (v = 0; v < VZ_VERDICT_COUNT; v++) {
		s->worker[w].all.packets += c->verdict[v].packets;
		s->worker[w].all.bytes += c->verdict[v].bytes;
		t->verdict[v].packets += c->verdict[v].packets;
		t->verdict[v].bytes += c->verdict[v].bytes;
	}
	t->all.packets += s->worker[w].all.packets;
	t->all.bytes += s->worker[w].all.bytes;
	for (p = 0; p < VZ_MAX_PORTS; p++)
		t->redirected[p] += c->redirected[p];
	t->rt.rx += c->rt.rx;
	t->rt.rx_invalid += c->rt.rx_invalid;
	t->rt.tx_failed += c->rt.tx_failed;
	t->rt.pass_failed += c->rt.pass_failed;
	t->rt.from_kernel += c->rt.from_kernel;
}

static void json_missed(FILE *f, const struct vz_snapshot *s)
{
	if (s && s->rx_missed_known)
		fprintf(f, ", \"rx_missed\": %llu",
			(unsigned long long)s->rx_missed);
	else
		fprintf(f, ", \"rx_missed\": null");
}

/* s: the snapshot for the total, NULL for a worker (rx_missed: null) */
static void json_counts(FILE *f, const struct vz_counter_view *view,
			const struct vz_counts *c, const struct vz_snapshot *s)
{
	int v;

	fprintf(f, "\"packets\": %llu, \"bytes\": %llu",
		(unsigned long long)c->all.packets,
		(unsigned long long)c->all.bytes);
	for (v = 0; v < VZ_VERDICT_COUNT; v++)
		fprintf(f, ", \"%s\": %llu", vz_verdict_name(v),
			(unsigned long long)c->verdict[v].packets);
	if (view->runtime)
		fprintf(f,
			", \"rx\": %llu, \"errors\": {\"rx_invalid\": %llu, "
			"\"tx_failed\": %llu, \"pass_failed\": %llu",
			(unsigned long long)c->rt.rx,
			(unsigned long long)c->rt.rx_invalid,
			(unsigned long long)c->rt.tx_failed,
			(unsigned long long)c->rt.pass_failed);
	else
		/*
		 * The same shape on XDP: the NF runs on every frame the hook
		 * sees (none invalid), PASS cannot fail, nothing comes from a
		 * TAP; a TX the driver fails is counted by the driver (ethtool
		 * -S), not here: null, not a zero that claims to know.
		 */
		fprintf(f,
			", \"rx\": %llu, \"errors\": {\"rx_invalid\": 0, "
			"\"tx_failed\": null, \"pass_failed\": 0",
			(unsigned long long)c->all.packets);
	json_missed(f, s);
	fprintf(f, "}, \"from_kernel\": %llu",
		(unsigned long long)(view->runtime ? c->rt.from_kernel : 0));
}

/* Written by the control socket's thread. */
static unsigned long ctl_count(const unsigned long *count)
{
	return __atomic_load_n(count, __ATOMIC_RELAXED);
}

static void print_json(FILE *f, const struct vz_counter_view *view,
		       const struct vz_snapshot *s, double t, double pps,
		       double bps, bool summary)
{
	unsigned int w;
	int p;

	fprintf(f, "{%s\"t\": %.3f, \"nf\": \"%s\", ",
		summary ? "\"summary\": true, " : "", t, view->nf);
	json_counts(f, view, &s->total, s);
	fprintf(f, ", \"pps\": %.0f, \"bps\": %.0f, \"redirected\": {", pps,
		bps);
	for (p = 0; p < view->nports; p++)
		fprintf(f, "%s\"%s\": %llu", p ? ", " : "", view->ports[p],
			(unsigned long long)s->total.redirected[p]);
	fprintf(f, "}, \"workers\": [");
	for (w = 0; w < s->nworkers; w++) {
		fprintf(f, "%s{\"worker\": %u, ", w ? ", " : "", w);
		json_counts(f, view, &s->worker[w], NULL);
		fprintf(f, "}");
	}
	fprintf(f, "]");
	if (view->ctl_refused)
		fprintf(f, ", \"ctl_refused\": %lu",
			ctl_count(view->ctl_refused));
	if (view->ctl_idle_closed)
		fprintf(f, ", \"ctl_idle_closed\": %lu",
			ctl_count(view->ctl_idle_closed));
	if (view->extra)
		view->extra(view->extra_arg, f, true);
	fprintf(f, "}\n");
}

static void print_table(const struct vz_counter_view *view,
			const struct vz_snapshot *s, double t, double pps,
			double bps, bool summary)
{
	const struct vz_counts *c = &s->total;
	int v;

	if (summary)
		printf("total %7.1fs %12llu pkts %14llu bytes %10.0f pps avg",
		       t, (unsigned long long)c->all.packets,
		       (unsigned long long)c->all.bytes, pps);
	else
		printf("%13.1fs %12llu pkts %14llu bytes %10.0f pps "
		       "%8.1f Mbit/s",
		       t, (unsigned long long)c->all.packets,
		       (unsigned long long)c->all.bytes, pps, bps / 1e6);
	/* drop pass tx redirect, then aborted */
	for (v = 1; v <= VZ_VERDICT_COUNT; v++)
		printf("  %s %llu", vz_verdict_name(v % VZ_VERDICT_COUNT),
		       (unsigned long long)c->verdict[v % VZ_VERDICT_COUNT]
			       .packets);
	if (view->runtime && (c->rt.rx_invalid || c->rt.tx_failed ||
			      c->rt.pass_failed || s->rx_missed))
		printf("  errors: invalid %llu tx %llu pass %llu missed %llu",
		       (unsigned long long)c->rt.rx_invalid,
		       (unsigned long long)c->rt.tx_failed,
		       (unsigned long long)c->rt.pass_failed,
		       (unsigned long long)s->rx_missed);
	if (view->ctl_refused && ctl_count(view->ctl_refused))
		printf("  ctl refused %lu", ctl_count(view->ctl_refused));
	if (view->ctl_idle_closed && ctl_count(view->ctl_idle_closed))
		printf("  ctl idle closed %lu",
		       ctl_count(view->ctl_idle_closed));
	if (view->extra)
		view->extra(view->extra_arg, stdout, false);
	printf("\n");
}

/* The same JSON line, whatever stdout shows, kept for the control socket. */
static void publish(const struct vz_counter_view *view,
		    const struct vz_snapshot *s, double t, double pps,
		    double bps, bool summary)
{
	char *line = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&line, &len);

	if (!f)
		return;
	print_json(f, view, s, t, pps, bps, summary);
	if (!fclose(f))
		vz_ctl_publish_counters(view->ctl, line, len);
	free(line);
}

void vz_counters_print(const struct vz_counter_view *view,
		       const struct vz_snapshot *now,
		       const struct vz_snapshot *prev, double t, double dt,
		       bool summary)
{
	double pps = 0, bps = 0;

	if (dt > 0) {
		pps = (double)(now->total.all.packets -
			       prev->total.all.packets) /
		      dt;
		bps = (double)(now->total.all.bytes - prev->total.all.bytes) *
		      8 / dt;
	}
	if (view->json)
		print_json(stdout, view, now, t, pps, bps, summary);
	else
		print_table(view, now, t, pps, bps, summary);
	fflush(stdout);
	if (view->ctl)
		publish(view, now, t, pps, bps, summary);
}
