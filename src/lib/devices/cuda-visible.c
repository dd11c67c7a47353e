// SPDX-License-Identifier: MIT
/*
 * cuda-visible.c: CUDA_VISIBLE_DEVICES read as CUDA reads it (gpuctl_devstr_parse_cuda), and the
 * CUDA ordinals a set has under a given value (gpuctl_devset_cuda_ordinals). Fuzzed by
 * fuzz/fuzz-cuda-visible.c. docs/device-strings.md, "CUDA_VISIBLE_DEVICES and
 * CUDA_DEVICE_ORDER".
 *
 * Decisions:
 * - CUDA Programming Guide, "CUDA Environment Variables"
 *   (https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html):
 *   unset: every device; "": none [documented]. Entries split at ','; blanks around an entry
 *   are ignored [observed]. Index entries read like strtoul(): blanks, an optional sign, the
 *   leading digits ("1gpu2" is 1) [observed]; a negative, missing or too large index is
 *   invalid, and so is everything after it: "0,2,-1,1" shows 0 and 2 [documented]. The first
 *   entry decides between index mode and UUID mode; an entry of the other form is invalid
 *   [observed]. UUID mode: "GPU-" plus any unique prefix of a GPU UUID (the prefix must
 *   include "GPU-": MPS doc, https://docs.nvidia.com/deploy/mps/) [documented], a full "MIG-"
 *   UUID, or the legacy "MIG-GPU-<gpu uuid>/<gi>/<ci>" (MIG user guide, CUDA device
 *   enumeration) [documented]; an unknown or ambiguous UUID is invalid [observed]. UUIDs compare
 *   case-insensitively (the driver's rule is not documented; we are lenient). The same device
 *   named twice among the entries read gives no device at all [observed].
 * - Indices count the candidates of cuda-order.c, so naming a MIG-mode GPU by UUID is invalid.
 *   Unset thus shows the candidates only: how many MIG devices CUDA shows without the variable
 *   depends on the driver branch (one on R450-R565, one per GPU instance on R570+) and is not
 *   modelled.
 * - Content of CUDA_VISIBLE_DEVICES is never an error (CUDA does not fail either): where and why
 *   parsing stopped is logged once per context and value, as a warning.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ctx.h"
#include "devices-internal.h"

#define LOGKEY_MAX 300 /* longest "once" key (the value is cut to fit) */

/* Why an entry stops parsing; NULL when it resolved (to *ret). why is a static string. */
static const char *cuda_index_entry(const char *s, size_t len, const size_t *cand, size_t n_cand,
                                    struct dev *ret)
{
	size_t i = 0, v = 0;
	bool neg = false, overflow = false, any = false;

	if (i < len && (s[i] == '+' || s[i] == '-'))
		neg = s[i++] == '-';
	for (; i < len && isdigit((unsigned char)s[i]); i++) {
		size_t d = (size_t)(s[i] - '0');

		any = true;
		if (v > (SIZE_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	if (len == 0)
		return "empty entry";
	if (!any)
		return devstr_has_prefix_ci(s, len, "GPU-") || devstr_has_prefix_ci(s, len, "MIG-")
		               ? "a UUID in a list of indices (CUDA does not mix the forms)"
		               : "not an index";
	if (neg && v != 0)
		return "negative index";
	if (overflow || v >= n_cand)
		return "index out of range";
	*ret = (struct dev){.gpu = cand[v], .mig = -1};
	return NULL;
}

static const char *cuda_gpu_uuid_entry(const struct gpuctl_snapshot *snap, const char *s,
                                       size_t len, struct dev *ret)
{
	size_t n_match = 0, found = 0;

	for (size_t g = 0; g < snap->n_gpus; g++) {
		const char *u = gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_UUID);

		if (!u || strlen(u) < len || strncasecmp(u, s, len) != 0)
			continue;
		if (strlen(u) == len) { /* the full UUID */
			n_match = 1;
			found = g;
			break;
		}
		if (n_match++ == 0)
			found = g;
	}
	if (n_match == 0)
		return "no GPU has that UUID or UUID prefix";
	if (n_match > 1)
		return "ambiguous UUID prefix (several GPUs match)";
	if (devstr_gpu_in_mig_mode(snap, found))
		return "the GPU is in MIG mode and cannot be used whole (name a MIG device)";
	*ret = (struct dev){.gpu = found, .mig = -1};
	return NULL;
}

static const char *cuda_mig_uuid_entry(const struct gpuctl_snapshot *snap, const char *s,
                                       size_t len, struct dev *ret)
{
	return devstr_mig_by_uuid(snap, s, len, ret) ? NULL : "no MIG device has that UUID";
}

/* "MIG-GPU-<gpu uuid>/<gi>/<ci>" (before R470). */
static const char *cuda_legacy_mig_entry(const struct gpuctl_snapshot *snap, const char *s,
                                         size_t len, struct dev *ret)
{
	const char *u = s + 4, *end = s + len; /* past "MIG-" */
	const char *sl1 = memchr(u, '/', (size_t)(end - u)), *sl2;
	size_t gi, ci;

	if (!sl1 || !(sl2 = memchr(sl1 + 1, '/', (size_t)(end - sl1 - 1))) ||
	    !devstr_all_digits(sl1 + 1, (size_t)(sl2 - sl1 - 1)) ||
	    !devstr_all_digits(sl2 + 1, (size_t)(end - sl2 - 1)) ||
	    !devstr_digits_value(sl1 + 1, (size_t)(sl2 - sl1 - 1), INT64_MAX, &gi) ||
	    !devstr_digits_value(sl2 + 1, (size_t)(end - sl2 - 1), INT64_MAX, &ci))
		return "malformed MIG-GPU-<uuid>/<gi>/<ci>";
	for (size_t g = 0; g < snap->n_gpus; g++) {
		if (!devstr_eq_ci(u, (size_t)(sl1 - u),
		                  gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_UUID)))
			continue;
		for (size_t m = 0; m < snap->gpus[g].n_migs; m++) {
			int64_t vgi, vci;
			const struct gpuctl_mig *mig = &snap->gpus[g].migs[m];

			if (gpuctl_mig_int(mig, GPUCTL_MIG_GI, &vgi) == 0 &&
			    gpuctl_mig_int(mig, GPUCTL_MIG_CI, &vci) == 0 && (size_t)vgi == gi &&
			    (size_t)vci == ci) {
				*ret = (struct dev){.gpu = g, .mig = (int)m};
				return NULL;
			}
		}
		return "that GPU has no MIG device with that GPU and compute instance";
	}
	return "no GPU has that UUID";
}

static const char *cuda_uuid_entry(const struct gpuctl_snapshot *snap, const char *s, size_t len,
                                   struct dev *ret)
{
	if (devstr_has_prefix_ci(s, len, "MIG-GPU-"))
		return cuda_legacy_mig_entry(snap, s, len, ret);
	if (devstr_has_prefix_ci(s, len, "MIG-"))
		return cuda_mig_uuid_entry(snap, s, len, ret);
	if (devstr_has_prefix_ci(s, len, "GPU-"))
		return cuda_gpu_uuid_entry(snap, s, len, ret);
	if (len == 0)
		return "empty entry";
	return "not a UUID in a list of UUIDs (CUDA does not mix the forms)";
}

/* Logs, once per context and value, why parsing stopped at an entry and what CUDA shows. */
static void cuda_warn(struct gpuctl_ctx *ctx, const char *value, size_t entry, const char *s,
                      size_t len, const char *why, const char *outcome)
{
	char key[LOGKEY_MAX], qv[QUOTE_MAX + 4], qe[QUOTE_MAX + 4];

	quote_text(qv, sizeof(qv), value, strlen(value), QUOTE_MAX);
	quote_text(qe, sizeof(qe), s, len, QUOTE_MAX);
	(void)snprintf(key, sizeof(key), "devstr-cuda:%.*s", LOGKEY_MAX - 20, value);
	ctx_log_once(ctx, key, GPUCTL_LOG_WARNING,
	             "CUDA_VISIBLE_DEVICES='%s': entry %zu '%s': %s; %s", qv, entry, qe, why,
	             outcome);
}

int gpuctl_devstr_parse_cuda(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                             const char *value, const char *order, struct gpuctl_devset **ret_set)
{
	_cleanup_devset_ struct gpuctl_devset *set = NULL;
	_cleanup_free_ size_t *cand = NULL;
	size_t n_cand = 0, entry = 0;
	bool uuid_mode = false;
	const char *p;
	int r;

	if (!snap || !ret_set)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	r = gpuctl_devset_new(&set);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	r = devstr_cuda_candidates(snap, devstr_order_is_pci(order), &cand, &n_cand);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");

	if (!value) { /* unset: every candidate, in CUDA's order */
		for (size_t i = 0; i < n_cand; i++)
			if ((r = gpuctl_devset_add(set, cand[i], -1)) < 0)
				return ctx_error(ctx, r, "out of memory");
		*ret_set = TAKE_PTR(set);
		return 0;
	}

	for (p = value; *value && p;) {
		const char *s, *why;
		size_t len;
		struct dev d = {0};

		devstr_next_entry(&p, &s, &len);
		if (entry++ == 0)
			uuid_mode = devstr_has_prefix_ci(s, len, "GPU-") ||
			            devstr_has_prefix_ci(s, len, "MIG-");
		why = uuid_mode ? cuda_uuid_entry(snap, s, len, &d)
		                : cuda_index_entry(s, len, cand, n_cand, &d);
		if (why) {
			cuda_warn(ctx, value, entry, s, len, why,
			          set->n ? "CUDA stops there and shows only the devices before it"
			                 : "CUDA shows no device");
			break;
		}
		if (gpuctl_devset_contains(set, d.gpu, d.mig)) {
			cuda_warn(ctx, value, entry, s, len, "names a device already listed",
			          "CUDA shows no device at all");
			set->n = 0;
			break;
		}
		if ((r = gpuctl_devset_add(set, d.gpu, d.mig)) < 0)
			return ctx_error(ctx, r, "out of memory");
	}
	*ret_set = TAKE_PTR(set);
	return 0;
}

int gpuctl_devset_cuda_ordinals(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                                const struct gpuctl_devset *set, const char *cuda_visible,
                                const char *order, int *ret_ordinals)
{
	_cleanup_devset_ struct gpuctl_devset *seen = NULL;
	int r;

	if (!snap || !set || (!ret_ordinals && set->n))
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	r = gpuctl_devstr_parse_cuda(ctx, snap, cuda_visible, order, &seen);
	if (r < 0)
		return r;
	for (size_t i = 0; i < set->n; i++) {
		ret_ordinals[i] = -1;
		for (size_t j = 0; j < seen->n && j <= INT32_MAX; j++)
			if (seen->devs[j].gpu == set->devs[i].gpu &&
			    seen->devs[j].mig == set->devs[i].mig) {
				ret_ordinals[i] = (int)j;
				break;
			}
	}
	return 0;
}
