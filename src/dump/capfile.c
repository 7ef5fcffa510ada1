// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <string.h>

#include "dump/capfile.h"

#define SHB_TYPE 0x0A0D0D0Au
#define IDB_TYPE 0x00000001u
#define EPB_TYPE 0x00000006u
#define BYTE_ORDER_MAGIC 0x1A2B3C4Du
#define PCAP_NSEC_MAGIC 0xA1B23C4Du
#define LINKTYPE_ETHERNET 1

#define OPT_END 0
#define OPT_COMMENT 1
#define SHB_USERAPPL 4
#define IF_NAME 2
#define IF_TSRESOL 9
#define EPB_FLAGS 2

/* Blocks are built in memory, then written whole: never half a block. */
struct block {
	uint8_t buf[VZ_CAPFILE_BLOCK_MAX];
	uint32_t len;
};

static void put(struct block *b, const void *p, uint32_t n)
{
	if (!n)
		return; /* an empty option's value may be NULL */
	memcpy(b->buf + b->len, p, n);
	b->len += n;
}

static void put32(struct block *b, uint32_t v)
{
	put(b, &v, 4);
}

static void put16(struct block *b, uint16_t v)
{
	put(b, &v, 2);
}

static void pad4(struct block *b)
{
	static const uint8_t zero[4];

	put(b, zero, (4 - b->len % 4) % 4);
}

static void option(struct block *b, uint16_t code, const void *p, uint16_t n)
{
	put16(b, code);
	put16(b, n);
	put(b, p, n);
	pad4(b);
}

static int write_all(FILE *f, const void *p, size_t n)
{
	return fwrite(p, 1, n, f) == n ? 0 : -(errno ? errno : EIO);
}

/* pcapng: the block's total length, at its start and again at its end. */
static int finish(FILE *f, struct block *b)
{
	uint32_t total;

	put32(b, 0);
	total = b->len;
	memcpy(b->buf + 4, &total, 4);
	memcpy(b->buf + total - 4, &total, 4);
	return write_all(f, b->buf, total);
}

static int pcap_begin(FILE *f, uint32_t snaplen)
{
	uint32_t hdr[6] = { PCAP_NSEC_MAGIC, 2 | (4u << 16),   0, 0,
			    snaplen,	     LINKTYPE_ETHERNET };

	return write_all(f, hdr, sizeof(hdr));
}

int vz_capfile_begin(struct vz_capfile *c, const char *ifname, uint32_t snaplen)
{
	static const char app[] = "veloz dump";
	static struct block b; /* large: not on the stack */
	uint8_t tsresol = 9; /* 10^-9 s */
	size_t n = strlen(ifname);
	int err;

	if (!c->pcapng)
		return pcap_begin(c->f, snaplen);
	b.len = 0;
	put32(&b, SHB_TYPE);
	put32(&b, 0);
	put32(&b, BYTE_ORDER_MAGIC);
	put16(&b, 1);
	put16(&b, 0);
	put32(&b, 0xffffffffu); /* section length: unknown */
	put32(&b, 0xffffffffu);
	option(&b, SHB_USERAPPL, app, sizeof(app) - 1);
	option(&b, OPT_END, NULL, 0);
	err = finish(c->f, &b);
	if (err)
		return err;
	b.len = 0;
	put32(&b, IDB_TYPE);
	put32(&b, 0);
	put16(&b, LINKTYPE_ETHERNET);
	put16(&b, 0);
	put32(&b, snaplen);
	option(&b, IF_NAME, ifname, (uint16_t)(n < 255 ? n : 255));
	option(&b, IF_TSRESOL, &tsresol, 1);
	option(&b, OPT_END, NULL, 0);
	return finish(c->f, &b);
}

static int pcap_packet(FILE *f, uint64_t ts_ns, const uint8_t *data,
		       uint32_t caplen, uint32_t len)
{
	uint32_t hdr[4] = { (uint32_t)(ts_ns / 1000000000u),
			    (uint32_t)(ts_ns % 1000000000u), caplen, len };
	int err = write_all(f, hdr, sizeof(hdr));

	return err ? err : write_all(f, data, caplen);
}

int vz_capfile_packet(struct vz_capfile *c, uint64_t ts_ns, const uint8_t *data,
		      uint32_t caplen, uint32_t len, const char *comment)
{
	static struct block b;
	uint32_t inbound = 1; /* epb_flags bits 0-1: inbound */
	size_t n = comment ? strlen(comment) : 0;

	if (caplen > VZ_CAPFILE_SNAP_MAX || caplen > len || n > 255)
		return -EINVAL;
	if (!c->pcapng)
		return pcap_packet(c->f, ts_ns, data, caplen, len);
	b.len = 0;
	put32(&b, EPB_TYPE);
	put32(&b, 0);
	put32(&b, 0); /* interface 0 */
	put32(&b, (uint32_t)(ts_ns >> 32));
	put32(&b, (uint32_t)ts_ns);
	put32(&b, caplen);
	put32(&b, len);
	put(&b, data, caplen);
	pad4(&b);
	if (n)
		option(&b, OPT_COMMENT, comment, (uint16_t)n);
	option(&b, EPB_FLAGS, &inbound, 4);
	option(&b, OPT_END, NULL, 0);
	return finish(c->f, &b);
}
