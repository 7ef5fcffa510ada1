// SPDX-License-Identifier: BSD-2-Clause
/*
 * The SPSC ring (src/dispatch/spsc.h): single and burst calls agree on
 * order, fullness and emptiness, across the wrap, for pointer-sized
 * entries (the word-copy path) and odd-sized ones (memcpy); and a producer
 * and a consumer on two threads pass a sequence through it intact.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "spsc.h"

static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			failures++;                                          \
		}                                                            \
	} while (0)

struct odd {
	unsigned char b[12];
};

static void odd_set(struct odd *e, unsigned int v)
{
	memset(e->b, (int)(v & 0xff), sizeof(e->b));
	memcpy(e->b, &v, sizeof(v));
}

static unsigned int odd_get(const struct odd *e)
{
	unsigned int v;

	memcpy(&v, e->b, sizeof(v));
	return v;
}

/* Bursts of every size 1..cap+1 in and out, over many wraps. */
static void bursts_words(void)
{
	enum { CAP = 16 };
	unsigned long long in[CAP + 2], out[CAP + 2], next = 0, expect = 0;
	struct vz_spsc r;
	unsigned int n, k, put, got, round, room;

	CHECK(vz_spsc_init(&r, CAP, sizeof(in[0])) == 0, "init");
	for (round = 0; round < 200; round++) {
		n = round % (CAP + 2);
		for (k = 0; k < n; k++)
			in[k] = next + k;
		room = CAP - vz_spsc_count(&r);
		put = vz_spsc_push_burst(&r, in, n);
		CHECK(put == (n < room ? n : room),
		      "push_burst %u of %u, room %u", put, n, room);
		CHECK(vz_spsc_count(&r) <= CAP, "count %u over capacity",
		      vz_spsc_count(&r));
		next += put;
		/* take a part back: leaves some in, so the next burst wraps */
		got = vz_spsc_pop_burst(&r, out, (round * 7) % (CAP + 2));
		for (k = 0; k < got; k++)
			CHECK(out[k] == expect + k, "word %llu, want %llu",
			      out[k], expect + k);
		expect += got;
	}
	/* full: a burst takes only the room left, then nothing */
	while (vz_spsc_pop_burst(&r, out, CAP))
		;
	for (k = 0; k < CAP + 2; k++)
		in[k] = k;
	CHECK(vz_spsc_push_burst(&r, in, CAP + 2) == CAP, "fills to capacity");
	CHECK(vz_spsc_push_burst(&r, in, 1) == 0, "full takes nothing");
	CHECK(!vz_spsc_push(&r, in), "push on full");
	CHECK(vz_spsc_pop_burst(&r, out, CAP + 2) == CAP, "drains all");
	for (k = 0; k < CAP; k++)
		CHECK(out[k] == k, "drained %llu, want %u", out[k], k);
	CHECK(vz_spsc_pop_burst(&r, out, 4) == 0, "empty gives nothing");
	CHECK(!vz_spsc_pop(&r, out), "pop on empty");
	vz_spsc_free(&r);
}

/* Single calls and bursts mixed, entries of 12 bytes. */
static void mixed_odd(void)
{
	enum { CAP = 8 };
	struct odd in[CAP], out[CAP], one;
	unsigned int next = 0, expect = 0, k, put, got, round;
	struct vz_spsc r;

	CHECK(vz_spsc_init(&r, CAP, sizeof(struct odd)) == 0, "init");
	for (round = 0; round < 100; round++) {
		if (round & 1) {
			odd_set(&one, next);
			next += vz_spsc_push(&r, &one);
		} else {
			for (k = 0; k < 3; k++)
				odd_set(&in[k], next + k);
			put = vz_spsc_push_burst(&r, in, 3);
			next += put;
		}
		if (round % 3 == 0) {
			if (vz_spsc_pop(&r, &one)) {
				CHECK(odd_get(&one) == expect,
				      "odd %u, want %u", odd_get(&one), expect);
				CHECK(one.b[11] == (unsigned char)expect,
				      "odd tail byte");
				expect++;
			}
		} else {
			got = vz_spsc_pop_burst(&r, out, 2);
			for (k = 0; k < got; k++) {
				CHECK(odd_get(&out[k]) == expect + k,
				      "odd %u, want %u", odd_get(&out[k]),
				      expect + k);
				CHECK(out[k].b[11] ==
					      (unsigned char)(expect + k),
				      "odd tail byte");
			}
			expect += got;
		}
		CHECK(vz_spsc_count(&r) == next - expect, "count");
	}
	vz_spsc_free(&r);
}

#define SEQ 2000000ull

static void *producer(void *arg)
{
	struct vz_spsc *r = arg;
	unsigned long long buf[32], next = 0;
	unsigned int k, want;

	while (next < SEQ) {
		want = (unsigned int)(next % 32) + 1;
		if (want > SEQ - next)
			want = (unsigned int)(SEQ - next);
		for (k = 0; k < want; k++)
			buf[k] = next + k;
		if (want == 1)
			next += vz_spsc_push(r, buf);
		else
			next += vz_spsc_push_burst(r, buf, want);
	}
	return NULL;
}

static void two_threads(void)
{
	unsigned long long buf[32], expect = 0;
	unsigned int k, got, bad = 0;
	struct vz_spsc r;
	pthread_t p;

	CHECK(vz_spsc_init(&r, 64, sizeof(buf[0])) == 0, "init");
	CHECK(pthread_create(&p, NULL, producer, &r) == 0, "thread");
	while (expect < SEQ) {
		got = vz_spsc_pop_burst(&r, buf,
					(unsigned int)(expect % 31) + 1);
		for (k = 0; k < got; k++)
			bad += buf[k] != expect + k;
		expect += got;
	}
	pthread_join(p, NULL);
	CHECK(!bad, "%u entries out of order across threads", bad);
	CHECK(vz_spsc_count(&r) == 0, "ring left non-empty");
	vz_spsc_free(&r);
}

int main(void)
{
	struct vz_spsc r;

	CHECK(vz_spsc_init(&r, 12, 8) != 0, "capacity not a power of two");
	bursts_words();
	mixed_odd();
	two_threads();
	if (failures) {
		fprintf(stderr, "test-spsc: %d failures\n", failures);
		return 1;
	}
	printf("test-spsc: ok\n");
	return 0;
}
