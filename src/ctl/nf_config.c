// SPDX-License-Identifier: BSD-2-Clause
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/btf.h>

#include "ctl/nf_config.h"

static struct bpf_map *find_config_map(struct bpf_object *obj)
{
	struct bpf_map *map;

	bpf_object__for_each_map (map, obj)
		if (strstr(bpf_map__name(map), VZ_CONFIG_SECTION))
			return map;
	return NULL;
}

/* The struct type of the vz_config variable in the config section. */
static const struct btf_type *config_struct(const struct btf *btf)
{
	const struct btf_var_secinfo *var;
	const struct btf_type *sec, *type;
	__s32 id;
	__u16 i;

	id = btf__find_by_name_kind(btf, VZ_CONFIG_SECTION, BTF_KIND_DATASEC);
	if (id < 0)
		return NULL;
	sec = btf__type_by_id(btf, id);
	var = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++, var++) {
		type = btf__type_by_id(btf, var->type);
		if (strcmp(btf__name_by_offset(btf, type->name_off),
			   "vz_config"))
			continue;
		id = btf__resolve_type(btf, type->type);
		type = id < 0 ? NULL : btf__type_by_id(btf, id);
		return type && btf_is_struct(type) ? type : NULL;
	}
	return NULL;
}

int vz_config_open(struct vz_nf_config *cfg, struct bpf_object *obj, char *err,
		   size_t errlen)
{
	const struct btf_member *member;
	const struct btf_type *st, *mt;
	const struct btf *btf;
	const void *initial;
	size_t size;
	__s32 id;
	__u16 i;

	memset(cfg, 0, sizeof(*cfg));
	cfg->map = find_config_map(obj);
	if (!cfg->map)
		return 0;
	btf = bpf_object__btf(obj);
	st = btf ? config_struct(btf) : NULL;
	initial = bpf_map__initial_value(cfg->map, &size);
	if (!st || !initial || size < st->size) {
		snprintf(err, errlen,
			 "config section without a readable struct "
			 "(was the NF built with -g?)");
		return -EINVAL;
	}
	cfg->size = st->size;
	cfg->section_size = (__u32)size;
	cfg->bytes = malloc(size);
	if (!cfg->bytes)
		return -ENOMEM;
	memcpy(cfg->bytes, initial, size);

	member = btf_members(st);
	for (i = 0; i < btf_vlen(st) && i < VZ_CONFIG_MAX_FIELDS;
	     i++, member++) {
		struct vz_config_field *field = &cfg->fields[cfg->nfields];

		id = btf__resolve_type(btf, member->type);
		mt = id < 0 ? NULL : btf__type_by_id(btf, id);
		if (!mt || !(btf_is_int(mt) || btf_is_enum(mt)) ||
		    btf_member_bitfield_size(st, i) ||
		    btf_member_bit_offset(st, i) % 8) {
			snprintf(err, errlen,
				 "config field %s: only whole "
				 "integer fields are supported",
				 btf__name_by_offset(btf, member->name_off));
			return -EINVAL;
		}
		snprintf(field->name, sizeof(field->name), "%s",
			 btf__name_by_offset(btf, member->name_off));
		field->offset = btf_member_bit_offset(st, i) / 8;
		field->size = mt->size;
		field->is_signed = btf_is_int(mt) &&
				   (btf_int_encoding(mt) & BTF_INT_SIGNED);
		cfg->nfields++;
	}
	return 0;
}

void vz_config_close(struct vz_nf_config *cfg)
{
	free(cfg->bytes);
	memset(cfg, 0, sizeof(*cfg));
}

__u64 vz_config_get(const struct vz_nf_config *cfg,
		    const struct vz_config_field *field)
{
	__u64 value = 0;

	memcpy(&value, cfg->bytes + field->offset, field->size); /* LE host */
	if (field->is_signed && field->size < 8 &&
	    (value >> (field->size * 8 - 1)) & 1)
		value |= ~0ull << (field->size * 8);
	return value;
}

int vz_config_set(struct vz_nf_config *cfg, const char *assignment, char *err,
		  size_t errlen)
{
	const struct vz_config_field *field = NULL;
	const char *eq = strchr(assignment, '=');
	size_t name_len;
	__u64 value, max;
	char *end;
	__u32 i;

	if (!eq) {
		snprintf(err, errlen, "config '%s': expected name=value",
			 assignment);
		return -EINVAL;
	}
	name_len = (size_t)(eq - assignment);
	for (i = 0; i < cfg->nfields; i++)
		if (strlen(cfg->fields[i].name) == name_len &&
		    !strncmp(cfg->fields[i].name, assignment, name_len))
			field = &cfg->fields[i];
	if (!field) {
		int n = snprintf(err, errlen, "unknown config key '%.*s'",
				 (int)name_len, assignment);

		for (i = 0; i < cfg->nfields && n > 0 && (size_t)n < errlen;
		     i++)
			n += snprintf(
				err + n, errlen - (size_t)n, "%s%s",
				i ? ", " : " (known: ", cfg->fields[i].name);
		if (n > 0 && (size_t)n < errlen)
			snprintf(err + n, errlen - (size_t)n, "%s",
				 cfg->nfields ? ")" : " (this NF takes none)");
		return -EINVAL;
	}
	errno = 0;
	max = field->size == 8 ? ~0ull : (1ull << (field->size * 8)) - 1;
	if (field->is_signed) {
		long long sv = strtoll(eq + 1, &end, 0);
		long long lim = (long long)(max >> 1);

		value = (__u64)sv;
		if (!errno && *end == '\0' && end != eq + 1 &&
		    (sv > lim || sv < -lim - 1))
			errno = ERANGE;
	} else {
		value = strtoull(eq + 1, &end, 0);
		if (!errno && (value > max || strchr(eq + 1, '-')))
			errno = ERANGE;
	}
	if (end == eq + 1 || *end != '\0') {
		snprintf(err, errlen, "config key '%s': '%s' is not an integer",
			 field->name, eq + 1);
		return -EINVAL;
	}
	if (errno == ERANGE) {
		snprintf(err, errlen,
			 "config key '%s': %s does not fit a %u-bit "
			 "%s field",
			 field->name, eq + 1, field->size * 8,
			 field->is_signed ? "signed" : "unsigned");
		return -ERANGE;
	}
	memcpy(cfg->bytes + field->offset, &value, field->size); /* LE host */
	return 0;
}

int vz_config_check(const struct vz_nf_config *cfg,
		    const struct vz_native_nf *nf, char *err, size_t errlen)
{
	const char *complaint;

	if (!cfg->map || !nf->config_check)
		return 0;
	complaint = nf->config_check(cfg->bytes);
	if (!complaint)
		return 0;
	snprintf(err, errlen, "bad config: %s", complaint);
	return -EINVAL;
}

int vz_config_apply_bpf(const struct vz_nf_config *cfg)
{
	if (!cfg->map)
		return 0;
	return bpf_map__set_initial_value(cfg->map, cfg->bytes,
					  cfg->section_size);
}

void vz_config_apply_native(const struct vz_nf_config *cfg,
			    const struct vz_native_nf *nf)
{
	if (cfg->map && nf->config)
		memcpy(nf->config, cfg->bytes, cfg->size);
}

void vz_config_print_json(const struct vz_nf_config *cfg, FILE *out)
{
	const struct vz_config_field *field;
	__u32 i;

	fputs("[", out);
	for (i = 0; i < cfg->nfields; i++) {
		field = &cfg->fields[i];
		fprintf(out,
			"%s{\"name\": \"%s\", \"offset\": %u, \"size\": %u, "
			"\"signed\": %s, \"default\": ",
			i ? ", " : "", field->name, field->offset, field->size,
			field->is_signed ? "true" : "false");
		if (field->is_signed)
			fprintf(out, "%" PRId64 "}",
				(int64_t)vz_config_get(cfg, field));
		else
			fprintf(out, "%" PRIu64 "}",
				(uint64_t)vz_config_get(cfg, field));
	}
	fputs("]", out);
}
