// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-sim's output: per step and overall, latency percentiles, loss,
 * reordering, moves and reallocations, as one JSON object or a table; and
 * the timeline of queue lengths, rows written as the run goes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/sim/sim.h"

void timeline_row(struct sim *s)
{
	unsigned int i, total = 0, most = 0;
	FILE *f = s->timeline;

	for (i = 0; i < s->o->cores; i++) {
		unsigned int q = (unsigned int)s->w[i].wait.len + s->w[i].busy;

		total += q;
		if (q > most)
			most = q;
	}
	if (!s->o->json) {
		fprintf(f, "%12.1f %6u %8u %8u\n", (double)s->now / 1000,
			s->active, total, most);
		s->timeline_rows++;
		return;
	}
	fprintf(f,
		"%s{\"t_us\": %.1f, \"active\": %u, \"queued\": %u, "
		"\"queues\": [",
		s->timeline_rows++ ? ", " : "", (double)s->now / 1000,
		s->active, total);
	for (i = 0; i < s->o->cores; i++)
		fprintf(f, "%s%zu", i ? ", " : "",
			s->w[i].wait.len + (size_t)s->w[i].busy);
	fputs("]}", f);
}

struct summary {
	double load, offered, active_mean, imbalance;
	unsigned int used; /* workers that got frames */
	struct hist *lat;
	__u64 frames, lost, reordered, flows_moved, buckets_moved,
		buckets_forced, flows_forced, cold, compared;
	__u64 grows, shrinks;
	__u64 per_worker[VZ_DISPATCH_MAX_WORKERS];
};

static void summarise(const struct sim *s, unsigned int from, unsigned int to,
		      struct summary *out, struct hist *lat)
{
	const struct opts *o = s->o;
	const struct snapshot *b = &s->steps[from].begin,
			      *e = &s->steps[to - 1].end;
	double work = 0, active = 0, load = 0, mean;
	unsigned int i;
	__u64 most = 0, lost = 0, out_cold = 0;

	memset(lat, 0, sizeof(*lat));
	for (i = from; i < to; i++) {
		hist_merge(lat, &s->steps[i].lat);
		lost += s->steps[i].lost;
		out_cold += s->steps[i].cold;
		work += s->steps[i].work_ns;
		active += s->steps[i].active_ns;
		load += o->loads[i];
	}
	*out = (struct summary){
		.load = load / (to - from),
		.offered = work / ((double)s->step_ns * (to - from) * o->cores),
		.active_mean = active / ((double)s->step_ns * (to - from)),
		.lat = lat,
		.frames = e->d.frames - b->d.frames,
		.lost = lost,
		.reordered = e->d.reordered - b->d.reordered,
		.flows_moved = e->d.flows_moved - b->d.flows_moved,
		.buckets_moved = e->d.buckets_moved - b->d.buckets_moved,
		.buckets_forced = e->d.buckets_forced - b->d.buckets_forced,
		.flows_forced = e->d.flows_forced - b->d.flows_forced,
		.compared = e->d.compared - b->d.compared,
		.grows = e->a.grows - b->a.grows,
		.shrinks = e->a.shrinks - b->a.shrinks,
	};
	out->cold = out_cold;
	for (i = 0; i < o->cores; i++) {
		out->per_worker[i] =
			e->d.frames_per_worker[i] - b->d.frames_per_worker[i];
		if (out->per_worker[i]) {
			out->used++;
			if (out->per_worker[i] > most)
				most = out->per_worker[i];
		}
	}
	/* The busiest worker against an even split over the active ones. */
	mean = out->active_mean ? (double)out->frames / out->active_mean : 0;
	out->imbalance = mean ? (double)most / mean : 0;
}

/*
 * The q-quantile of every frame offered, a lost one counting as slower
 * than any that completed, so a policy cannot hide its overload as loss.
 * JSON null when the quantile falls among the lost frames.
 */
static void print_tail(const struct hist *h, __u64 lost, double q)
{
	double rank = ceil(q * (double)(h->n + lost));

	if (rank > (double)h->n)
		printf("null");
	else
		printf("%.4f", hist_quantile(h, rank / (double)h->n) / 1000);
}

static void print_json_summary(const struct sim *s, const struct summary *x)
{
	const struct hist *h = x->lat;
	unsigned int i;

	printf("{\"load\": %.4f, \"offered\": %.4f, \"frames\": %llu, "
	       "\"lost\": %llu, \"latency_us\": {\"mean\": %.4f, \"p50\": %.4f, \"p90\": %.4f, "
	       "\"p99\": %.4f, \"p999\": %.4f, \"max\": %.4f}, "
	       "\"reordered\": %llu, \"flows_moved\": %llu, "
	       "\"buckets_moved\": %llu, \"buckets_forced\": %llu, "
	       "\"flows_forced\": %llu, \"cold_frames\": %llu, "
	       "\"workers_compared\": %llu, \"reallocations\": %llu, "
	       "\"grows\": %llu, \"shrinks\": %llu, \"active_mean\": %.3f, "
	       "\"imbalance\": %.4f, \"workers_used\": %u, \"share\": [",
	       x->load, x->offered, (unsigned long long)x->frames,
	       (unsigned long long)x->lost,
	       h->n ? h->sum / (double)h->n / 1000 : 0,
	       hist_quantile(h, 0.5) / 1000, hist_quantile(h, 0.9) / 1000,
	       hist_quantile(h, 0.99) / 1000, hist_quantile(h, 0.999) / 1000,
	       (double)h->max / 1000, (unsigned long long)x->reordered,
	       (unsigned long long)x->flows_moved,
	       (unsigned long long)x->buckets_moved,
	       (unsigned long long)x->buckets_forced,
	       (unsigned long long)x->flows_forced, (unsigned long long)x->cold,
	       (unsigned long long)x->compared,
	       (unsigned long long)(x->grows + x->shrinks),
	       (unsigned long long)x->grows, (unsigned long long)x->shrinks,
	       x->active_mean, x->imbalance, x->used);
	for (i = 0; i < s->o->cores; i++)
		printf("%s%.5f", i ? ", " : "",
		       x->frames ? (double)x->per_worker[i] / (double)x->frames
				 : 0);
	printf("], \"tail_us\": {\"p99\": ");
	print_tail(h, x->lost, 0.99);
	printf(", \"p999\": ");
	print_tail(h, x->lost, 0.999);
	printf("}}");
}

static void print_table_row(const char *label, const struct summary *x)
{
	const struct hist *h = x->lat;

	printf("%-5s %5.2f %5.3f %9llu %8llu %7.2f %7.2f %7.2f %8.2f %8.2f "
	       "%9.2f %8llu %7llu %7llu %6llu %6llu %6.2f %6.3f\n",
	       label, x->load, x->offered, (unsigned long long)x->frames,
	       (unsigned long long)x->lost,
	       h->n ? h->sum / (double)h->n / 1000 : 0,
	       hist_quantile(h, 0.5) / 1000, hist_quantile(h, 0.9) / 1000,
	       hist_quantile(h, 0.99) / 1000, hist_quantile(h, 0.999) / 1000,
	       (double)h->max / 1000, (unsigned long long)x->reordered,
	       (unsigned long long)x->flows_moved,
	       (unsigned long long)x->buckets_moved,
	       (unsigned long long)(x->buckets_forced + x->flows_forced),
	       (unsigned long long)(x->grows + x->shrinks), x->active_mean,
	       x->imbalance);
}

void report(struct sim *s, char *timeline, size_t timeline_len)
{
	const struct opts *o = s->o;
	struct summary x;
	struct hist *lat = xrealloc(NULL, sizeof(*lat));
	unsigned int i;

	if (o->json) {
		printf("{\"policy\": \"%s\", \"cores\": %u, \"alloc\": %s, "
		       "\"prepopulate\": %s, \"arrivals\": \"%s\", "
		       "\"service\": \"%s\", \"service_us\": %g, "
		       "\"flows\": %u, \"flow_sizes\": \"%s\", \"zipf_s\": %g, "
		       "\"step_ms\": %g, \"wake_us\": %g, \"seed\": %llu, "
		       "\"steps\": [",
		       vz_dispatch_policy_name(o->policy), o->cores,
		       o->alloc ? "true" : "false",
		       o->prepopulate ? "true" : "false",
		       arrival_names[o->arrivals], service_names[o->service],
		       o->service_us, o->flows, flow_size_names[o->flow_sizes],
		       o->zipf_s, o->step_ms, o->wake_us, o->seed);
		for (i = 0; i < o->nsteps; i++) {
			summarise(s, i, i + 1, &x, lat);
			if (i)
				printf(", ");
			print_json_summary(s, &x);
		}
		printf("], \"overall\": ");
		summarise(s, 0, o->nsteps, &x, lat);
		print_json_summary(s, &x);
		if (o->timeline_us)
			printf(", \"timeline\": [%.*s]", (int)timeline_len,
			       timeline);
		printf("}\n");
		free(lat);
		return;
	}
	printf("policy %s, %u cores%s%s, %s arrivals, %s service (mean %g "
	       "us), %u flows (%s), %g ms per step, seed %llu\n",
	       vz_dispatch_policy_name(o->policy), o->cores,
	       o->alloc ? ", core allocator" : "",
	       o->prepopulate ? ", prepopulated" : "",
	       arrival_names[o->arrivals], service_names[o->service],
	       o->service_us, o->flows, flow_size_names[o->flow_sizes],
	       o->step_ms, o->seed);
	printf("%-5s %5s %5s %9s %8s %7s %7s %7s %8s %8s %9s %8s %7s %7s %6s "
	       "%6s %6s %6s\n",
	       "step", "load", "offer", "frames", "lost", "mean", "p50", "p90",
	       "p99", "p99.9", "max", "reorder", "flowmv", "bktmv", "forced",
	       "realloc", "active", "imbal");
	for (i = 0; i < o->nsteps; i++) {
		char label[16];

		snprintf(label, sizeof(label), "%u", i + 1);
		summarise(s, i, i + 1, &x, lat);
		print_table_row(label, &x);
	}
	if (o->nsteps > 1) {
		summarise(s, 0, o->nsteps, &x, lat);
		print_table_row("all", &x);
	}
	printf("(latency in us; imbal = busiest worker's frames / frames per "
	       "active worker)\n");
	if (o->timeline_us)
		printf("\n%12s %6s %8s %8s\n%.*s", "t_us", "active", "queued",
		       "longest", (int)timeline_len, timeline);
	free(lat);
}
