// SPDX-License-Identifier: BSD-2-Clause
/*
 * The trie behind native LPM maps (src/maps/lpm.c), step by step where
 * its layout is the contract: what a reader caught between two loads relies
 * on, and leaves scaled to the value stride. test-lpm checks its answers
 * against a reference and the kernel; this checks the words themselves.
 */
#include <errno.h>
#include <stdio.h>

#include "check.h"
#include "maps/lpm.h"

/*
 * What a reader caught between two loads relies on, step by step (the race
 * itself is too narrow to hit on demand): a collapsed group is unlinked
 * before it is freed and keeps its answers while free, and reusing it for
 * other addresses moves gen, so the reader retries.
 */
static void test_stale_group(void)
{
	static const __u8 a[4] = { 1, 2, 3, 0 }, b[4] = { 5, 6, 7, 128 };
	__u32 gen, e, ia = 0x010203, ib = 0x050607;
	const __u32 *group;
	struct vz_lpm t;

	REQUIRE(!vz_lpm_init(&t, 4, 8, 1), "vz_lpm_init");
	REQUIRE(!vz_lpm_add(&t, (const __u8[]){ 1, 2, 0, 0 }, 16, 0) &&
			!vz_lpm_add(&t, a, 25, 1),
		"stale: adds");
	/* a reader has read gen and the first-level entry: a group */
	gen = t.gen;
	e = t.root[vz_lpm_root_index(&t, a)];
	REQUIRE(vz_lpm_root_index(&t, a) == ia && (e & VZ_LPM_GROUP),
		"stale: 1.2.3.0/25 lives in a group");
	group = vz_lpm_group(&t, e & ~VZ_LPM_GROUP);
	CHECK(group[0] == 1 + 1 && group[128] == 0 + 1,
	      "stale: the group holds the /25 and the /16 under it");
	/* the writer deletes the /25: the /16 takes the whole /24 back */
	vz_lpm_delete(&t, a, 25, 1, 0);
	CHECK(t.root[ia] == 0 + 1, "stale: the parent is a leaf again");
	CHECK(group[0] == 0 + 1 && group[128] == 0 + 1,
	      "stale: the freed group still answers the /16");
	CHECK(t.gen == gen, "stale: nothing reused yet");
	CHECK(vz_lpm_lookup(&t, a) == 0, "stale: lookup finds the /16");
	/* ...and reuses the group for other addresses */
	REQUIRE(!vz_lpm_add(&t, b, 25, 2), "stale: add 5.6.7.128/25");
	CHECK(t.root[ib] == e, "stale: the same group, reused");
	CHECK(t.gen != gen, "stale: reuse moved gen: the reader retries");
	CHECK(group[128] == 2 + 1 && group[0] == 0,
	      "stale: the reused group answers for 5.6.7.0/24");
	CHECK(vz_lpm_lookup(&t, b) == 2 &&
		      vz_lpm_lookup(&t, (const __u8[]){ 5, 6, 7, 1 }) ==
			      VZ_LPM_NONE &&
		      vz_lpm_lookup(&t, a) == 0,
	      "stale: lookups after reuse");
	vz_lpm_delete(&t, b, 25, 2, VZ_LPM_NONE);
	CHECK(t.root[ib] == 0 && t.nfree == 1, "stale: empty again");
out:
	vz_lpm_free(&t);
}

/*
 * Leaves scaled to the value stride (lpm.h): rule r's leaf is
 * (r + 1) * leaf_scale, every level's entries agree, lookups still name
 * the rule, and a scale whose leaves would not fit in 31 bits is refused.
 */
static void test_leaf_scale(void)
{
	static const __u8 a[4] = { 9, 8, 7, 6 };
	__u32 e, scale = 5;
	struct vz_lpm t;

	CHECK(vz_lpm_init(&t, 4, VZ_LPM_MAX_RULES / 4 + 1, 4) == -EINVAL,
	      "scale: leaves past 31 bits are refused");
	CHECK(vz_lpm_init(&t, 4, 8, 0) == -EINVAL, "scale: 0 is refused");
	REQUIRE(!vz_lpm_init(&t, 4, 8, scale), "scale: init");
	REQUIRE(!vz_lpm_add(&t, a, 8, 3) && !vz_lpm_add(&t, a, 30, 6),
		"scale: adds");
	CHECK(t.root[0x090000] == (3 + 1) * scale,
	      "scale: a first-level leaf is (rule + 1) * scale");
	e = t.root[vz_lpm_root_index(&t, a)];
	REQUIRE(e & VZ_LPM_GROUP, "scale: the /30 lives in a group");
	CHECK(vz_lpm_group(&t, e & ~VZ_LPM_GROUP)[6] == (6 + 1) * scale &&
		      vz_lpm_group(&t, e & ~VZ_LPM_GROUP)[8] == (3 + 1) * scale,
	      "scale: so is a group's");
	CHECK(vz_lpm_lookup(&t, a) == 6 &&
		      vz_lpm_lookup(&t, (const __u8[]){ 9, 1, 1, 1 }) == 3 &&
		      vz_lpm_lookup(&t, (const __u8[]){ 10, 0, 0, 0 }) ==
			      VZ_LPM_NONE,
	      "scale: lookups name the rule");
	vz_lpm_delete(&t, a, 30, 6, 3);
	CHECK(t.root[vz_lpm_root_index(&t, a)] == (3 + 1) * scale &&
		      vz_lpm_lookup(&t, a) == 3,
	      "scale: a delete hands the /8's leaf back");
	vz_lpm_delete(&t, a, 8, 3, VZ_LPM_NONE);
	CHECK(t.root[0x090000] == 0 && vz_lpm_lookup(&t, a) == VZ_LPM_NONE,
	      "scale: empty again");
out:
	vz_lpm_free(&t);
}

/* The first level every non-IPv4 map's IPv4 lookup reads: all of its
 * 2^24 entries send the lookup off the path, and there is one of it. */
static void test_lpm4_elsewhere(void)
{
	const __u32 *root = vz_lpm4_elsewhere();
	__u32 i, off = 0;

	REQUIRE(root, "elsewhere: mapped");
	for (i = 0; i < 1u << 24; i += 4093)
		off += root[i] == VZ_LPM_GROUP;
	off += root[(1u << 24) - 1] == VZ_LPM_GROUP;
	CHECK(off == (1u << 24) / 4093 + 2,
	      "elsewhere: every entry is VZ_LPM_GROUP (%u)", off);
	CHECK(vz_lpm4_elsewhere() == root, "elsewhere: one per process");
out:
	return;
}

int main(void)
{
	test_stale_group();
	test_leaf_scale();
	test_lpm4_elsewhere();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("LPM trie: all checks passed\n");
	return 0;
}
