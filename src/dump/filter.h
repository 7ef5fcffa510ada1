/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A tcpdump filter expression, compiled by libpcap and run on each captured
 * frame. Behind its own header because libpcap's <pcap/bpf.h> and the
 * kernel's <linux/bpf.h> both define struct bpf_insn.
 */
#ifndef VZ_DUMP_FILTER_H
#define VZ_DUMP_FILTER_H

#include <stddef.h>
#include <stdint.h>

struct vz_dump_filter;

/* NULL with the compiler's reason in err for a bad expression. */
struct vz_dump_filter *vz_dump_filter_new(const char *expr, uint32_t snaplen,
					  char *err, size_t errlen);
/* Does the frame (caplen bytes of a len-byte frame) match? */
int vz_dump_filter_match(const struct vz_dump_filter *f, const uint8_t *data,
			 uint32_t caplen, uint32_t len);
void vz_dump_filter_free(struct vz_dump_filter *f);

#endif
