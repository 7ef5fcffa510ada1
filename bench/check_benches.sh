#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The bench programs at a tiny size: each runs, prints every row it
# promises with numbers in it, finds the same answers as DPDK's (the LPM
# lookups against rte_lpm/rte_lpm6, the ring's elements all arriving in
# order), and refuses bad arguments with one line and exit status 2.
# No timing is asserted: at this size the figures mean nothing.
#   check_benches.sh VZ-LPM-BENCH VZ-RING-BENCH
set -u
lpm=$1 ring=$2
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# rows: "NAME  number number ..." starting with at least $2 numbers (more
# columns may follow, numbers or "-" where a column does not apply)
row() {
	grep -Eq "^$1 +(-?[0-9]+(\.[0-9]+)?x? +){$(($2 - 1))}-?[0-9]+(\.[0-9]+)?x?( +(-?[0-9]+(\.[0-9]+)?x?|-))*\$" "$out" ||
		bad "no well-formed row '$1' ($2 numbers)"
}

# DPDK's tables on 4 KiB pages (--no-huge) unless 2 MiB pages are free
"$lpm" -n 3000 -6 1000 -l 4096 -t 1 >"$out" 2>&1 ||
	bad "vz-lpm-bench exited $?"
for fam in ipv4 ipv6; do
	for keys in uniform routed; do
		# IPv4 has the key-struct columns too
		n=6; [ $fam = ipv4 ] && n=8
		row "$fam $keys, lookup" $n
		row "$fam $keys, \\+ read route" $n
	done
	for op in "first load" delete add; do
		row "$fam $op" 3
	done
	[ $fam = ipv6 ] && row "ipv6 reload" 3
	# memory: two figures, then what DPDK's table was configured with
	grep -Eq "^$fam +-?[0-9]+\.[0-9] +-?[0-9]+\.[0-9] +\(rte_lpm6?: " "$out" ||
		bad "no well-formed memory row '$fam'"
done
grep -q '^answers: identical in both libraries$' "$out" ||
	bad "vz-lpm-bench: answers differ from rte_lpm's"
grep -q MISMATCH "$out" && bad "vz-lpm-bench: MISMATCH"
[ $fail = 0 ] || cat "$out"

"$ring" -n 4096 -t 1 >"$out" 2>&1 || bad "vz-ring-bench exited $?"
for mode in "single core" "two cores"; do
	for b in 1 32; do
		row "$mode, burst $b" 3
	done
done
grep -q '^elements: all arrived, in order$' "$out" ||
	bad "vz-ring-bench: elements lost or reordered"
[ $fail = 0 ] || cat "$out"

# bad arguments: one line on stderr, exit status 2, nothing run
for args in "-t 0" "-n 3" "-t x" "stray"; do
	"$ring" $args >/dev/null 2>"$out"
	rc=$?
	[ $rc = 2 ] || bad "vz-ring-bench $args: exit $rc, want 2"
	[ "$(wc -l <"$out")" = 1 ] || bad "vz-ring-bench $args: not one line"
done
"$lpm" -n 0 >/dev/null 2>"$out"
rc=$?
[ $rc = 2 ] || bad "vz-lpm-bench -n 0: exit $rc, want 2"
[ "$(wc -l <"$out")" = 1 ] || bad "vz-lpm-bench -n 0: not one line"

[ $fail = 0 ] && echo "bench programs: output well formed, answers agree"
exit $fail
