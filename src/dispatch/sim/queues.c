// SPDX-License-Identifier: BSD-2-Clause
/*
 * vz-sim's queues: the FIFO of frames (a worker's queue, the
 * dispatcher's), which grows as needed, and the heap of pending events,
 * ordered by time and then by when they were pushed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "dispatch/sim/sim.h"

void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (!p) {
		fprintf(stderr, "veloz: sim: out of memory\n");
		exit(1);
	}
	return p;
}

void fifo_push(struct fifo *f, const struct frame *fr)
{
	if (f->len == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64, k;
		struct frame *q = xrealloc(NULL, cap * sizeof(*q));

		for (k = 0; k < f->len; k++)
			q[k] = f->q[(f->head + k) & (f->cap - 1)];
		free(f->q);
		f->q = q;
		f->cap = cap;
		f->head = 0;
	}
	f->q[(f->head + f->len) & (f->cap - 1)] = *fr;
	f->len++;
}

struct frame fifo_pop(struct fifo *f)
{
	struct frame fr = f->q[f->head];

	f->head = (f->head + 1) & (f->cap - 1);
	f->len--;
	return fr;
}

static bool ev_before(const struct event *a, const struct event *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void heap_push(struct heap *h, __u64 t, unsigned int type, unsigned int worker)
{
	struct event ev = { t, h->seq++, type, worker };
	size_t i, parent;

	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 128;
		h->e = xrealloc(h->e, h->cap * sizeof(*h->e));
	}
	for (i = h->n++; i; i = parent) {
		parent = (i - 1) / 2;
		if (!ev_before(&ev, &h->e[parent]))
			break;
		h->e[i] = h->e[parent];
	}
	h->e[i] = ev;
}

struct event heap_pop(struct heap *h)
{
	struct event top = h->e[0], last = h->e[--h->n];
	size_t i = 0, c;

	for (;;) {
		c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && ev_before(&h->e[c + 1], &h->e[c]))
			c++;
		if (!ev_before(&h->e[c], &last))
			break;
		h->e[i] = h->e[c];
		i = c;
	}
	if (h->n)
		h->e[i] = last;
	return top;
}
