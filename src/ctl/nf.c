// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ctl/nf.h"

int vz_nf_open(struct vz_nf *nf, const char *bpf_path, const char *native_path,
	       char **sets, int nsets, __u32 nworkers)
{
	char err[512] = "";
	int i, ret;

	memset(nf, 0, sizeof(*nf));
	vz_quiet_bpf_logs();
	nf->obj = bpf_object__open_file(bpf_path, NULL);
	if (!nf->obj) {
		ret = -errno;
		nf->obj = NULL;
		vz_err("cannot open NF object %s: %s", bpf_path,
		       strerror(-ret));
		return ret;
	}
	ret = vz_config_open(&nf->cfg, nf->obj, err, sizeof(err));
	if (ret)
		goto fail;
	ret = vz_native_open(&nf->native, native_path, nworkers, err,
			     sizeof(err));
	if (ret)
		goto fail;
	nf->name = nf->native.desc->name;
	for (i = 0; i < nsets; i++) {
		ret = vz_config_set(&nf->cfg, sets[i], err, sizeof(err));
		if (ret)
			goto fail;
	}
	ret = vz_config_check(&nf->cfg, &nf->native, err, sizeof(err));
	if (ret)
		goto fail;
	vz_config_apply_native(&nf->cfg, &nf->native);
	ret = vz_config_apply_bpf(&nf->cfg);
	if (ret) {
		snprintf(err, sizeof(err), "cannot set config: %s",
			 strerror(-ret));
		goto fail;
	}
	return 0;
fail:
	vz_err("%s", err);
	vz_nf_close(nf);
	return ret ? ret : -EINVAL;
}

void vz_nf_close(struct vz_nf *nf)
{
	vz_config_close(&nf->cfg);
	vz_native_close(&nf->native);
	bpf_object__close(nf->obj);
	memset(nf, 0, sizeof(*nf));
}

struct bpf_program *vz_nf_program(struct vz_nf *nf)
{
	return bpf_object__next_program(nf->obj, NULL);
}

const char *vz_verdict_name(int verdict)
{
	switch (verdict) {
	case VZ_DROP:
		return "drop";
	case VZ_PASS:
		return "pass";
	case VZ_TX:
		return "tx";
	case VZ_REDIRECT_VERDICT:
		return "redirect";
	default:
		return "aborted";
	}
}
