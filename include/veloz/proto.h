/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Header-only protocol parsing on struct vz_ctx, the same in the BPF and
 * native builds (cilium's bpf/lib in shape): Ethernet, VLAN, ARP, IPv4,
 * IPv6, TCP/UDP, ICMP/ICMPv6. nf.h includes it, so every NF has it; other
 * BPF programs include the parts they use, as the UDP stack does natively.
 */
#ifndef VELOZ_PROTO_H
#define VELOZ_PROTO_H

#include <veloz/proto/ctx.h>
#include <veloz/proto/eth.h>
#include <veloz/proto/vlan.h>
#include <veloz/proto/ipv4.h>
#include <veloz/proto/ipv6.h>
#include <veloz/proto/l4.h>
#include <veloz/proto/arp.h>
#include <veloz/proto/icmp.h>

#endif /* VELOZ_PROTO_H */
