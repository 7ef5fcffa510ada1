// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/pcap_io.h"

struct vz_pcap_in {
	pcap_t *pcap;
};

struct vz_pcap_out {
	pcap_t *dead;
	pcap_dumper_t *dumper;
};

struct vz_pcap_in *vz_pcap_open_in(const char *path, char *err, size_t errlen)
{
	char errbuf[PCAP_ERRBUF_SIZE];
	struct vz_pcap_in *in;
	pcap_t *pcap;

	pcap = pcap_open_offline(path, errbuf);
	if (!pcap) {
		snprintf(err, errlen, "--in %s: %s", path, errbuf);
		return NULL;
	}
	if (pcap_datalink(pcap) != DLT_EN10MB) {
		snprintf(err, errlen, "%s holds %s frames; NFs take Ethernet",
			 path, pcap_datalink_val_to_name(pcap_datalink(pcap)));
		pcap_close(pcap);
		return NULL;
	}
	in = calloc(1, sizeof(*in));
	if (!in) {
		pcap_close(pcap);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	in->pcap = pcap;
	return in;
}

int vz_pcap_next(struct vz_pcap_in *in, struct vz_pcap_record *rec, char *err,
		 size_t errlen)
{
	struct pcap_pkthdr *hdr;
	const u_char *data;
	int rc = pcap_next_ex(in->pcap, &hdr, &data);

	if (rc == PCAP_ERROR_BREAK)
		return 0;
	if (rc != 1) {
		snprintf(err, errlen, "reading the pcap: %s",
			 pcap_geterr(in->pcap));
		return -1;
	}
	rec->sec = hdr->ts.tv_sec;
	rec->frac = hdr->ts.tv_usec;
	rec->caplen = hdr->caplen;
	rec->len = hdr->len;
	rec->data = data;
	return 1;
}

void vz_pcap_close_in(struct vz_pcap_in *in)
{
	if (!in)
		return;
	pcap_close(in->pcap);
	free(in);
}

struct vz_pcap_out *vz_pcap_open_out(const char *path,
				     const struct vz_pcap_in *like, char *err,
				     size_t errlen)
{
	struct vz_pcap_out *out = calloc(1, sizeof(*out));

	if (!out) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	out->dead = pcap_open_dead_with_tstamp_precision(
		DLT_EN10MB, 65535, pcap_get_tstamp_precision(like->pcap));
	if (out->dead)
		out->dumper = pcap_dump_open(out->dead, path);
	if (!out->dumper) {
		snprintf(err, errlen, "cannot write %s: %s", path,
			 out->dead ? pcap_geterr(out->dead) : "out of memory");
		vz_pcap_close_out(out);
		return NULL;
	}
	return out;
}

void vz_pcap_write(struct vz_pcap_out *out, const struct vz_pcap_record *rec)
{
	struct pcap_pkthdr hdr = {
		.ts = { .tv_sec = rec->sec, .tv_usec = rec->frac },
		.caplen = rec->caplen,
		.len = rec->len,
	};

	pcap_dump((u_char *)out->dumper, &hdr, rec->data);
}

int vz_pcap_finish_out(struct vz_pcap_out *out, char *err, size_t errlen)
{
	FILE *f = pcap_dump_file(out->dumper);
	struct stat st;

	/*
	 * pcap_dump() reports nothing and pcap_dump_close() drops fclose's
	 * result: ask the stream itself, and for a file make the kernel say
	 * now what it would only say at close (ENOSPC, EIO, EDQUOT).
	 */
	if (pcap_dump_flush(out->dumper) || ferror(f) ||
	    (!fstat(fileno(f), &st) && S_ISREG(st.st_mode) &&
	     fsync(fileno(f)))) {
		snprintf(err, errlen, "cannot write the output: %s",
			 errno ? strerror(errno) : "write error");
		return -EIO;
	}
	return 0;
}

void vz_pcap_close_out(struct vz_pcap_out *out)
{
	if (!out)
		return;
	if (out->dumper)
		pcap_dump_close(out->dumper);
	if (out->dead)
		pcap_close(out->dead);
	free(out);
}
