// SPDX-License-Identifier: BSD-2-Clause
/*
 * veloz dump's file writer (src/dump/capfile.c) on known frames, for
 * test_capfile.py to read back with scapy: capfile-write OUT [pcap]
 * writes three frames (the third cut at 20 bytes of 100), each with the
 * comment "verdict=<i>". Exit 1 when a write fails (e.g. OUT=/dev/full).
 */
#include <stdio.h>
#include <string.h>

#include "dump/capfile.h"

int main(int argc, char **argv)
{
	static const char *const comments[] = {
		"verdict=drop queue=0", "verdict=pass queue=1",
		"verdict=redirect port=1 queue=0"
	};
	struct vz_capfile c = { 0 };
	uint8_t frame[100];
	uint32_t len[] = { 60, 99, 100 }, caplen[] = { 60, 99, 20 };
	int i, bad;

	if (argc < 2)
		return 2;
	c.pcapng = argc < 3 || strcmp(argv[2], "pcap");
	c.f = fopen(argv[1], "wb");
	if (!c.f)
		return 1;
	/* unbuffered: the first write that fails says so, not the close */
	setvbuf(c.f, NULL, _IONBF, 0);
	bad = vz_capfile_begin(&c, "dut-gen", 9216);
	for (i = 0; i < 3 && !bad; i++) {
		memset(frame, 0xa0 + i, sizeof(frame));
		bad = vz_capfile_packet(&c,
					1700000000123456789ull + (uint64_t)i,
					frame, caplen[i], len[i], comments[i]);
	}
	/* a frame longer than it says it is: refused, never written */
	if (!bad && vz_capfile_packet(&c, 0, frame, 10, 5, NULL) == 0)
		bad = 1;
	return fclose(c.f) || bad ? 1 : 0;
}
