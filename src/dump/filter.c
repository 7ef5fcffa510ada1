// SPDX-License-Identifier: BSD-2-Clause
#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>

#include "dump/filter.h"

struct vz_dump_filter {
	struct bpf_program prog;
};

struct vz_dump_filter *vz_dump_filter_new(const char *expr, uint32_t snaplen,
					  char *err, size_t errlen)
{
	struct vz_dump_filter *f;
	pcap_t *p;

	f = calloc(1, sizeof(*f));
	p = pcap_open_dead(DLT_EN10MB, (int)snaplen);
	if (!f || !p) {
		snprintf(err, errlen, "cannot set up the filter compiler");
		goto fail;
	}
	if (pcap_compile(p, &f->prog, expr, 1, PCAP_NETMASK_UNKNOWN)) {
		snprintf(err, errlen, "bad filter '%s': %s", expr,
			 pcap_geterr(p));
		goto fail;
	}
	pcap_close(p);
	return f;
fail:
	if (p)
		pcap_close(p);
	free(f);
	return NULL;
}

int vz_dump_filter_match(const struct vz_dump_filter *f, const uint8_t *data,
			 uint32_t caplen, uint32_t len)
{
	struct pcap_pkthdr h = { .caplen = caplen, .len = len };

	return pcap_offline_filter(&f->prog, &h, data) != 0;
}

void vz_dump_filter_free(struct vz_dump_filter *f)
{
	if (!f)
		return;
	pcap_freecode(&f->prog);
	free(f);
}
