// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runner/ports.h"
#include "runner/xdp_attach.h"

int vz_claim_port(struct vz_iface_lock *lock, int ifindex, const char *ifname,
		  bool replace, unsigned int adopt_id)
{
	struct vz_xdp_attached now;
	char err[256];
	int ret;

	ret = vz_iface_lock(lock, ifindex, ifname, err, sizeof(err));
	if (ret) {
		vz_err("%s", err);
		return ret;
	}
	ret = vz_xdp_query(ifindex, &now);
	if (ret) {
		vz_err("cannot query XDP on %s: %s", ifname, strerror(-ret));
		return ret;
	}
	if (!now.any || (adopt_id && now.prog_id == adopt_id))
		return 0;
	if (adopt_id) {
		vz_err("the program on %s changed while it was being adopted "
		       "(now %s, id %u); nothing was changed",
		       ifname, now.names, now.prog_id);
		return -EAGAIN;
	}
	if (now.link_id) {
		/* An unpinned link goes with its process: this one's lives. */
		int pid = vz_xdp_link_holder(now.link_id);

		if (pid)
			vz_err("%s has an XDP program (%s, %s mode) held by a "
			       "running process (pid %d, BPF link %u); stop "
			       "it first",
			       ifname, now.names, vz_xdp_mode_name(now.mode),
			       pid, now.link_id);
		else
			vz_err("%s has an XDP program (%s, %s mode) held by "
			       "BPF link %u (pinned, or a process out of "
			       "sight); remove the link's holder first",
			       ifname, now.names, vz_xdp_mode_name(now.mode),
			       now.link_id);
		return -EBUSY;
	}
	if (!strcmp(now.names, VZ_TESTBED_RX_PROG)) {
		ret = vz_xdp_detach_all(ifindex);
		if (ret)
			vz_err("cannot replace the testbed's receive program on "
			       "%s: %s",
			       ifname, strerror(-ret));
		return ret;
	}
	if (!now.ours) {
		vz_err("%s already has an XDP program that is not veloz's (%s, "
		       "%s mode); detach it first, e.g. xdp-loader unload %s "
		       "--all",
		       ifname, now.names, vz_xdp_mode_name(now.mode), ifname);
		return -EBUSY;
	}
	/* Ours, and the lock was free: a run that died without cleaning up. */
	if (!replace) {
		vz_err("%s has a stale veloz program (%s, %s mode, id %u) left "
		       "by a run that was killed; rerun with --replace to "
		       "remove it (or, on xdp, --take-over to adopt its maps)",
		       ifname, now.names, vz_xdp_mode_name(now.mode),
		       now.prog_id);
		return -EEXIST;
	}
	ret = vz_xdp_detach_all(ifindex);
	if (ret) {
		vz_err("cannot remove the stale program from %s: %s", ifname,
		       strerror(-ret));
		return ret;
	}
	fprintf(stderr, "veloz: removed stale veloz program %s from %s\n",
		now.names, ifname);
	return 0;
}

int vz_check_port_fields(const struct vz_nf *nf, int nports,
			 const char *first_ifname)
{
	const struct vz_config_field *field;
	__u64 port;
	__u32 i;

	for (i = 0; i < nf->cfg.nfields; i++) {
		field = &nf->cfg.fields[i];
		if (strcmp(field->name, "port"))
			continue;
		port = vz_config_get(&nf->cfg, field);
		if (port >= (__u64)nports) {
			vz_err("config port %llu is not a port of this run (it "
			       "has %d: %s%s); add the interface with --iface "
			       "or name it in the config",
			       (unsigned long long)port, nports, first_ifname,
			       nports > 1 ? ", ..." : "");
			return -EINVAL;
		}
	}
	return 0;
}
