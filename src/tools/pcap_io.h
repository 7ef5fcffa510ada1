/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pcap files behind a small interface: libpcap's <pcap/bpf.h> and the
 * kernel's <linux/bpf.h> both define struct bpf_insn, so no file may include
 * both.
 */
#ifndef VZ_CLI_PCAP_IO_H
#define VZ_CLI_PCAP_IO_H

#include <stddef.h>
#include <stdint.h>

struct vz_pcap_in;
struct vz_pcap_out;

struct vz_pcap_record {
	int64_t sec;
	int64_t frac; /* micro- or nanoseconds, as the file has it */
	uint32_t caplen;
	uint32_t len;
	const uint8_t *data;
};

/* Opens an Ethernet pcap; anything else is refused with a reason. */
struct vz_pcap_in *vz_pcap_open_in(const char *path, char *err, size_t errlen);
/* 1: a record; 0: end of file; -1: error, err says which. */
int vz_pcap_next(struct vz_pcap_in *in, struct vz_pcap_record *rec, char *err,
		 size_t errlen);
void vz_pcap_close_in(struct vz_pcap_in *in);

/* Same timestamp precision as `like`. */
struct vz_pcap_out *vz_pcap_open_out(const char *path,
				     const struct vz_pcap_in *like, char *err,
				     size_t errlen);
void vz_pcap_write(struct vz_pcap_out *out, const struct vz_pcap_record *rec);
/* Everything written reached the file (flushed, no stream error, synced);
 * else -EIO and the reason in err. Call before vz_pcap_close_out. */
int vz_pcap_finish_out(struct vz_pcap_out *out, char *err, size_t errlen);
void vz_pcap_close_out(struct vz_pcap_out *out);

#endif
