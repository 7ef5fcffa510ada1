/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The file `veloz dump -w` writes: pcapng (draft-ietf-opsawg-pcapng), one
 * section, one Ethernet interface with nanosecond timestamps, and Enhanced
 * Packet Blocks whose comment is the frame's verdict; or classic pcap
 * (nanosecond magic), which has nowhere to put a verdict. libpcap writes
 * only the latter. Every write is checked: a short write is an error.
 */
#ifndef VZ_DUMP_CAPFILE_H
#define VZ_DUMP_CAPFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Largest frame kept, and the largest block it makes (with its options). */
#define VZ_CAPFILE_SNAP_MAX 65535u
#define VZ_CAPFILE_BLOCK_MAX (VZ_CAPFILE_SNAP_MAX + 512u)

struct vz_capfile {
	FILE *f;
	bool pcapng; /* else classic pcap */
};

/* File header(s). 0, or -errno. */
int vz_capfile_begin(struct vz_capfile *c, const char *ifname,
		     uint32_t snaplen);
/* One inbound frame; comment (pcapng only) may be NULL. 0, or -errno. */
int vz_capfile_packet(struct vz_capfile *c, uint64_t ts_ns, const uint8_t *data,
		      uint32_t caplen, uint32_t len, const char *comment);

#endif
