// SPDX-License-Identifier: BSD-2-Clause
/*
 * ICMP (RFC 792), the part a host owes: echo replies, and port unreachable
 * for UDP nobody listens to, rate-limited (RFC 1812 4.3.2.8) so that a
 * spoofed flood cannot turn us into a reflector.
 */
#include <veloz/csum.h>

#include "sock/stack/stack_internal.h"

void vz_icmp_input(struct vz_stack *s, const struct vz_ip_pkt *p, __u64 now_ns)
{
	struct vz_ctx l4 = vz_l4_ctx(p);
	const struct vz_icmphdr *icmp = vz_icmp(&l4, 0);
	struct vz_icmphdr h;

	(void)now_ns;
	if (!icmp || vz_csum_fold(vz_sum32(vz_sum(0, p->l4, p->l4len)))) {
		s->st.icmp_bad++;
		return;
	}
	if (icmp->type != VZ_ICMP_ECHO) {
		s->st.icmp_other++;
		return;
	}
	s->st.icmp_echo_in++;
	/* the same identifier, sequence and data back, from us */
	h = *icmp;
	h.type = VZ_ICMP_ECHOREPLY;
	h.code = 0;
	h.checksum = 0;
	h.checksum = vz_csum_fold(vz_sum32(vz_sum(
		vz_sum(0, &h, sizeof(h)), icmp + 1, p->l4len - sizeof(h))));
	if (!vz_ip_output(s, p->src_mac, IPPROTO_ICMP, p->src, &h, sizeof(h),
			  icmp + 1, p->l4len - sizeof(h)))
		s->st.icmp_echo_out++;
}

/* One token of the ICMP error bucket, refilled at VZ_ICMP_RATE a second
 * (ICMPv6 errors draw on the same bucket). */
bool vz_icmp_token(struct vz_stack *s, __u64 now_ns)
{
	const __u64 per = 1000000000ull / VZ_ICMP_RATE;
	__u64 n;

	if (now_ns < s->icmp_refill_ns) /* a clock that went back */
		s->icmp_refill_ns = now_ns;
	n = (now_ns - s->icmp_refill_ns) / per;
	if (n >= VZ_ICMP_BURST - s->icmp_tokens) {
		s->icmp_tokens = VZ_ICMP_BURST;
		s->icmp_refill_ns = now_ns;
	} else {
		s->icmp_tokens += (unsigned int)n;
		s->icmp_refill_ns += n * per;
	}
	if (!s->icmp_tokens)
		return false;
	s->icmp_tokens--;
	return true;
}

/* Port unreachable: the offending header and 8 bytes of what followed. */
void vz_icmp_port_unreach(struct vz_stack *s, const struct vz_ip_pkt *p,
			  __u64 now_ns)
{
	__u8 msg[sizeof(struct vz_icmphdr) + 60 + 8] = { VZ_ICMP_DEST_UNREACH,
							 VZ_ICMP_PORT_UNREACH };
	size_t quote = p->l4len < 8 ? p->l4len : 8, len;
	__u16 check;

	if (!vz_icmp_token(s, now_ns))
		return;
	memcpy(msg + sizeof(struct vz_icmphdr), p->iph, p->hlen);
	memcpy(msg + sizeof(struct vz_icmphdr) + p->hlen, p->l4, quote);
	len = sizeof(struct vz_icmphdr) + p->hlen + quote;
	check = vz_csum_fold(vz_sum32(vz_sum(0, msg, len)));
	memcpy(msg + 2, &check, 2);
	if (!vz_ip_output(s, p->src_mac, IPPROTO_ICMP, p->src, msg, len, NULL,
			  0))
		s->st.icmp_unreach_out++;
}
