// SPDX-License-Identifier: MIT
/*
 * devstr.c: device sets, and the strings that name them to CUDA, the NVIDIA container toolkit,
 * Docker, CDI, Kubernetes and Slurm. Pure functions of a snapshot (plus the environment in
 * gpuctl_outer_allocation). The rules, with their sources, are in docs/device-strings.md;
 * [documented] marks a rule NVIDIA (or Docker, Slurm) states, [observed] one taken from
 * re-implementations that model the driver (PyTorch torch/cuda/__init__.py
 * _parse_visible_devices / _transform_uuid_to_ordinals, nvitop nvitop/api/device.py).
 *
 * Decisions:
 * - A device is a snapshot GPU index plus a MIG index (the position in that GPU's MIG list,
 *   i.e. NVML's MIG device index), -1 for the whole GPU. A set keeps insertion order, no
 *   duplicates.
 * - CUDA_VISIBLE_DEVICES (CUDA Programming Guide, "CUDA Environment Variables",
 *   https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html):
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
 * - Which devices indices count ("candidates"): whole GPUs not in MIG mode, in CUDA's order.
 *   A GPU in MIG mode cannot be used whole by CUDA, and MIG devices are enumerated only when
 *   CUDA_VISIBLE_DEVICES names them by UUID (MIG user guide, "CUDA Device Enumeration"), so a
 *   MIG device never has an index, and naming a MIG-mode GPU by UUID is invalid. Unset thus
 *   shows the candidates only: how many MIG devices CUDA shows without the variable depends on
 *   the driver branch (one on R450-R565, one per GPU instance on R570+) and is not modelled.
 * - CUDA's order: PCI_BUS_ID sorts by PCI bus id [documented]. FASTEST_FIRST (the default and
 *   any other value) is documented only as "a simple heuristic" that puts the fastest device
 *   first; our model of it: compute capability (major, minor) descending, then maximum SM clock
 *   descending, then total memory descending, then PCI bus id ascending. A fact the snapshot
 *   lacks sorts after every known value. PCI bus ids are compared as text: NVML prints them
 *   fixed-width ("00000000:41:00.0"), so text order is numeric order.
 * - Content of CUDA_VISIBLE_DEVICES is never an error (CUDA does not fail either): where and why
 *   parsing stopped is logged once per context and value, as a warning.
 * - NVIDIA_VISIBLE_DEVICES follows nvidia-container-toolkit internal/config/image/cuda_image.go
 *   (DevicesFromEnvvars: entries trimmed, empty ones skipped, "void" anywhere or nothing left:
 *   void), devices.go (NewVisibleDevices: precedence void > none > all) and libnvidia-container
 *   src/cli/common.c (select_devices). "all" (any case, as libnvidia-container compares it)
 *   selects every GPU and every MIG device (select_all_devices does both), GPUs first. A MIG
 *   entry selects the MIG device only (the toolkit also injects its parent's device node, which
 *   is plumbing, not an allocated device). Indices are NVML's; UUIDs must be full (no prefixes);
 *   a bus id needs the domain ("%x:%02x:%02x.0" in matches_pci_format) and is looked up with
 *   gpuctl_ids_resolve (ids.c), which compares by value; "<gpu>:<mig>" names a MIG device by
 *   NVML indices. Anything else: -EINVAL "NVIDIA_VISIBLE_DEVICES: 'x': unknown device".
 *   Duplicates are merged. Stricter than the toolkit in corners sscanf lets through (trailing
 *   junk after a bus id, a nonzero function), never laxer.
 * - SLURM_STEP_GPUS / SLURM_JOB_GPUS: Slurm writes them as "%d" joined with ','
 *   (src/plugins/gres/common/gres_common.c, common_gres_set_env: no ranges). They are places in
 *   the node's GRES list, mapped to GPUs through gres.conf and the device files' minor numbers
 *   (read_slurm_list below). Old Slurm writes "NoDevFiles" when gres.conf names no device
 *   files: -EINVAL (the allocation is unknown). A CUDA_VISIBLE_DEVICES that restates the Slurm
 *   list (the same places, or 0..n-1) is Slurm's and read as such (cuda_is_slurms).
 * - Inside a container NVML sees only the allocated GPUs, renumbered from 0, while an
 *   all-index NVIDIA_VISIBLE_DEVICES keeps host indices: when an index is out of range and the
 *   list names exactly as many GPUs as NVML sees, the allocation is every GPU NVML sees.
 * - Rendering is one table of forms (render_forms[]); every device string is built from full
 *   UUIDs, or with GPUCTL_RENDER_INDICES from indices: NVML's for the container forms, CUDA's
 *   PCI_BUS_ID ordinal (the position among the candidates in bus order, which is the NVML index
 *   unless a MIG-mode GPU comes before it) for the CUDA forms, always with
 *   CUDA_DEVICE_ORDER=PCI_BUS_ID. What a form cannot express is -EINVAL with a message, never a
 *   silently different device. JSON is written here with its own escaper: src/lib does not link
 *   jansson.
 */
#include <inttypes.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ctx.h"
#include "gres.h"
#include "mig-profile.h"
#include "snapshot-internal.h"
#include "utf8.h"
#include "util.h"

#define QUOTE_MAX   64  /* longest entry quoted in a message */
#define LOGKEY_MAX  300 /* longest "once" key (the value is cut to fit) */
#define BUSID_MAX   64  /* longest entry tried as a PCI bus id */
#define INT_TEXT    24  /* room for a size_t or int in decimal */
#define DEVSET_INIT 8   /* first allocation of a set */

struct dev {
	size_t gpu; /* snapshot GPU index */
	int mig;    /* MIG index on that GPU, -1 for the whole GPU */
};

struct gpuctl_devset {
	struct dev *devs; /* the devices, in order; owned */
	size_t n;         /* entries used in devs */
	size_t cap;       /* entries allocated in devs */
};

#define _cleanup_devset_ _cleanup_(gpuctl_devset_freep)

/* ---- Device sets ---- */

int gpuctl_devset_new(struct gpuctl_devset **ret_set)
{
	struct gpuctl_devset *s;

	if (!ret_set)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*ret_set = s;
	return 0;
}

void gpuctl_devset_free(struct gpuctl_devset *set)
{
	if (!set)
		return;
	free(set->devs);
	free(set);
}

bool gpuctl_devset_contains(const struct gpuctl_devset *set, size_t gpu, int mig)
{
	if (!set)
		return false;
	if (mig < 0)
		mig = -1;
	for (size_t i = 0; i < set->n; i++)
		if (set->devs[i].gpu == gpu && set->devs[i].mig == mig)
			return true;
	return false;
}

int gpuctl_devset_add(struct gpuctl_devset *set, size_t gpu, int mig)
{
	if (!set)
		return -EINVAL;
	if (mig < 0)
		mig = -1;
	if (gpuctl_devset_contains(set, gpu, mig))
		return -EEXIST;
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : DEVSET_INIT;
		struct dev *d;

		if (cap > SIZE_MAX / sizeof(*d))
			return -ENOMEM;
		d = realloc(set->devs, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		set->devs = d;
		set->cap = cap;
	}
	set->devs[set->n++] = (struct dev){.gpu = gpu, .mig = mig};
	return 0;
}

size_t gpuctl_devset_count(const struct gpuctl_devset *set)
{
	return set ? set->n : 0;
}

int gpuctl_devset_get(const struct gpuctl_devset *set, size_t i, size_t *ret_gpu, int *ret_mig)
{
	if (!set || i >= set->n)
		return -EINVAL;
	if (ret_gpu)
		*ret_gpu = set->devs[i].gpu;
	if (ret_mig)
		*ret_mig = set->devs[i].mig;
	return 0;
}

static const struct gpuctl_mig *dev_mig(const struct gpuctl_snapshot *snap, struct dev d)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, d.gpu);

	return g && d.mig >= 0 ? gpuctl_gpu_mig(g, (size_t)d.mig) : NULL;
}

/* The number "<gpu>:<mig>" strings use for a MIG device: NVML's MIG device index on its GPU
 * (GPUCTL_MIG_INDEX, the index nvmlDeviceGetMigDeviceHandleByIndex takes, which the container
 * toolkit's "<gpu>:<mig>" names), or its place in the snapshot when NVML did not say. */
static int mig_nvml_index(const struct gpuctl_snapshot *snap, struct dev d)
{
	const struct gpuctl_mig *m = dev_mig(snap, d);
	int64_t v;

	if (m && gpuctl_mig_int(m, GPUCTL_MIG_INDEX, &v) == 0 && v >= 0 && v <= INT32_MAX)
		return (int)v;
	return d.mig;
}

/* The snapshot place of the MIG device of GPU g whose NVML index is idx; -1 if none. */
static int mig_by_nvml_index(const struct gpuctl_snapshot *snap, size_t g, size_t idx)
{
	for (size_t m = 0; m < snap->gpus[g].n_migs && m <= INT32_MAX; m++)
		if ((size_t)mig_nvml_index(snap, (struct dev){.gpu = g, .mig = (int)m}) == idx)
			return (int)m;
	return -1;
}

static const char *dev_uuid(const struct gpuctl_snapshot *snap, struct dev d)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, d.gpu);
	const struct gpuctl_mig *m;

	if (!g)
		return NULL;
	if (d.mig < 0)
		return gpuctl_gpu_str(g, GPUCTL_F_UUID);
	m = gpuctl_gpu_mig(g, (size_t)d.mig);
	return m ? gpuctl_mig_uuid(m) : NULL;
}

const char *gpuctl_devset_uuid(const struct gpuctl_devset *set, const struct gpuctl_snapshot *snap,
                               size_t i)
{
	if (!set || !snap || i >= set->n)
		return NULL;
	return dev_uuid(snap, set->devs[i]);
}

void gpuctl_device_label(const struct gpuctl_snapshot *snap, size_t gpu, int mig, char *buf,
                         size_t size)
{
	if (!buf || size == 0)
		return;
	if (mig >= 0 && snap)
		(void)snprintf(buf, size, "%zu:%d", gpu,
		               mig_nvml_index(snap, (struct dev){.gpu = gpu, .mig = mig}));
	else if (mig >= 0)
		(void)snprintf(buf, size, "%zu:%d", gpu, mig);
	else
		(void)snprintf(buf, size, "%zu", gpu);
}

/* gpuctl_device_label of d, for messages. */
static const char *dev_name(const struct gpuctl_snapshot *snap, struct dev d, char *buf,
                            size_t size)
{
	gpuctl_device_label(snap, d.gpu, d.mig, buf, size);
	return buf;
}

/* Whether allow admits d: d itself, or d's whole GPU when d is a MIG device. */
static bool set_allows(const struct gpuctl_devset *allow, struct dev d)
{
	return gpuctl_devset_contains(allow, d.gpu, d.mig) ||
	       (d.mig >= 0 && gpuctl_devset_contains(allow, d.gpu, -1));
}

/* ---- Small helpers ---- */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Next ','-separated entry of *p, blanks trimmed, into *ret_s and *ret_len. Advances *p past the
 * entry (NULL after the last one). */
static void next_entry(const char **p, const char **ret_s, size_t *ret_len)
{
	const char *s = *p, *end = strchr(s, ',');
	const char *e = end ? end : s + strlen(s);

	*p = end ? end + 1 : NULL;
	while (s < e && is_blank(*s))
		s++;
	while (e > s && is_blank(e[-1]))
		e--;
	*ret_s = s;
	*ret_len = (size_t)(e - s);
}

static bool has_prefix_ci(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && strncasecmp(s, prefix, n) == 0;
}

static bool eq_ci(const char *s, size_t len, const char *full)
{
	return full && strlen(full) == len && strncasecmp(s, full, len) == 0;
}

static bool all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* Decimal digits s[0..len) to a value; false on overflow past max. */
static bool digits_value(const char *s, size_t len, size_t max, size_t *ret)
{
	size_t v = 0;

	for (size_t i = 0; i < len; i++) {
		size_t d = (size_t)(s[i] - '0');

		if (v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}

static bool gpu_in_mig_mode(const struct gpuctl_snapshot *snap, size_t gpu)
{
	int64_t v = 0;

	return gpuctl_gpu_int(gpuctl_snapshot_gpu(snap, gpu), GPUCTL_F_MIG_MODE, &v) == 0 && v;
}

/* ---- CUDA's enumeration order ---- */

/* "8.6" -> 8, 6; false when unknown or malformed. */
static bool compute_cap(const struct gpuctl_gpu *g, long *ret_major, long *ret_minor)
{
	const char *s = gpuctl_gpu_str(g, GPUCTL_F_COMPUTE_CAP);
	char *end;
	long major, minor;

	if (!s || !isdigit((unsigned char)s[0]))
		return false;
	errno = 0;
	major = strtol(s, &end, 10);
	if (errno || *end != '.' || !isdigit((unsigned char)end[1]))
		return false;
	minor = strtol(end + 1, &end, 10);
	if (errno || *end)
		return false;
	*ret_major = major;
	*ret_minor = minor;
	return true;
}

/* Compares known-ness first (known sorts first), then the values descending. */
static int cmp_desc(bool ka, int64_t a, bool kb, int64_t b)
{
	if (ka != kb)
		return ka ? -1 : 1;
	if (!ka || a == b)
		return 0;
	return a > b ? -1 : 1;
}

static int cmp_int_field(const struct gpuctl_gpu *a, const struct gpuctl_gpu *b,
                         enum gpuctl_field f)
{
	int64_t va = 0, vb = 0;
	bool ka = gpuctl_gpu_int(a, f, &va) == 0, kb = gpuctl_gpu_int(b, f, &vb) == 0;

	return cmp_desc(ka, va, kb, vb);
}

/* PCI bus id ascending (missing last), then NVML index. */
static int cmp_bus(const struct gpuctl_gpu *a, const struct gpuctl_gpu *b)
{
	const char *ba = gpuctl_gpu_str(a, GPUCTL_F_PCI_BUS_ID);
	const char *bb = gpuctl_gpu_str(b, GPUCTL_F_PCI_BUS_ID);
	int c;

	if (!ba != !bb)
		return ba ? -1 : 1;
	if (ba && (c = strcasecmp(ba, bb)) != 0)
		return c < 0 ? -1 : 1;
	return gpuctl_gpu_index(a) < gpuctl_gpu_index(b) ? -1 : 1;
}

/* Our model of FASTEST_FIRST: see the file-top comment and docs/device-strings.md. */
static int cmp_fastest(const struct gpuctl_gpu *a, const struct gpuctl_gpu *b)
{
	long amaj = 0, amin = 0, bmaj = 0, bmin = 0;
	bool ka = compute_cap(a, &amaj, &amin), kb = compute_cap(b, &bmaj, &bmin);
	int c;

	if ((c = cmp_desc(ka, amaj, kb, bmaj)) != 0 || (c = cmp_desc(ka, amin, kb, bmin)) != 0)
		return c;
	if ((c = cmp_int_field(a, b, GPUCTL_F_CLOCK_SM_MAX)) != 0)
		return c;
	if ((c = cmp_int_field(a, b, GPUCTL_F_MEMORY_TOTAL)) != 0)
		return c;
	return cmp_bus(a, b);
}

static bool order_is_pci(const char *order)
{
	return order && streq(order, "PCI_BUS_ID");
}

/* The GPUs CUDA indices count (not in MIG mode), in CUDA's order. Insertion sort: stable, no
 * comparator context needed, and machines have tens of GPUs. */
static int cuda_candidates(const struct gpuctl_snapshot *snap, bool pci, size_t **ret,
                           size_t *ret_n)
{
	size_t *c = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*c));
	size_t n = 0;

	if (!c)
		return -ENOMEM;
	for (size_t g = 0; g < snap->n_gpus; g++) {
		size_t j = n;

		if (gpu_in_mig_mode(snap, g))
			continue;
		while (j > 0) {
			const struct gpuctl_gpu *a = &snap->gpus[c[j - 1]], *b = &snap->gpus[g];

			if ((pci ? cmp_bus(a, b) : cmp_fastest(a, b)) <= 0)
				break;
			c[j] = c[j - 1];
			j--;
		}
		c[j] = g;
		n++;
	}
	*ret = c;
	*ret_n = n;
	return 0;
}

/* ---- CUDA_VISIBLE_DEVICES ---- */

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
		return has_prefix_ci(s, len, "GPU-") || has_prefix_ci(s, len, "MIG-")
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
	if (gpu_in_mig_mode(snap, found))
		return "the GPU is in MIG mode and cannot be used whole (name a MIG device)";
	*ret = (struct dev){.gpu = found, .mig = -1};
	return NULL;
}

static const char *cuda_mig_uuid_entry(const struct gpuctl_snapshot *snap, const char *s,
                                       size_t len, struct dev *ret)
{
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (size_t m = 0; m < snap->gpus[g].n_migs; m++)
			if (eq_ci(s, len, snap->gpus[g].migs[m].uuid)) {
				*ret = (struct dev){.gpu = g, .mig = (int)m};
				return NULL;
			}
	return "no MIG device has that UUID";
}

/* "MIG-GPU-<gpu uuid>/<gi>/<ci>" (before R470). */
static const char *cuda_legacy_mig_entry(const struct gpuctl_snapshot *snap, const char *s,
                                         size_t len, struct dev *ret)
{
	const char *u = s + 4, *end = s + len; /* past "MIG-" */
	const char *sl1 = memchr(u, '/', (size_t)(end - u)), *sl2;
	size_t gi, ci;

	if (!sl1 || !(sl2 = memchr(sl1 + 1, '/', (size_t)(end - sl1 - 1))) ||
	    !all_digits(sl1 + 1, (size_t)(sl2 - sl1 - 1)) ||
	    !all_digits(sl2 + 1, (size_t)(end - sl2 - 1)) ||
	    !digits_value(sl1 + 1, (size_t)(sl2 - sl1 - 1), INT64_MAX, &gi) ||
	    !digits_value(sl2 + 1, (size_t)(end - sl2 - 1), INT64_MAX, &ci))
		return "malformed MIG-GPU-<uuid>/<gi>/<ci>";
	for (size_t g = 0; g < snap->n_gpus; g++) {
		if (!eq_ci(u, (size_t)(sl1 - u), gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_UUID)))
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
	if (has_prefix_ci(s, len, "MIG-GPU-"))
		return cuda_legacy_mig_entry(snap, s, len, ret);
	if (has_prefix_ci(s, len, "MIG-"))
		return cuda_mig_uuid_entry(snap, s, len, ret);
	if (has_prefix_ci(s, len, "GPU-"))
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
	r = cuda_candidates(snap, order_is_pci(order), &cand, &n_cand);
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

		next_entry(&p, &s, &len);
		if (entry++ == 0)
			uuid_mode = has_prefix_ci(s, len, "GPU-") || has_prefix_ci(s, len, "MIG-");
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

/* ---- NVIDIA_VISIBLE_DEVICES ---- */

static int add_all(struct gpuctl_devset *set, const struct gpuctl_snapshot *snap)
{
	int r;

	for (size_t g = 0; g < snap->n_gpus; g++)
		if ((r = gpuctl_devset_add(set, g, -1)) < 0)
			return r;
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (size_t m = 0; m < snap->gpus[g].n_migs && m <= INT32_MAX; m++)
			if ((r = gpuctl_devset_add(set, g, (int)m)) < 0)
				return r;
	return 0;
}

/* A bus id with its domain ("0000:07:00.0"), found through gpuctl_ids_resolve. */
static bool nvidia_bus_entry(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                             const char *s, size_t len, struct dev *ret)
{
	char buf[BUSID_MAX];
	const char *c1 = memchr(s, ':', len), *c2;
	size_t *idx = NULL, n = 0;
	bool ok;

	if (len >= sizeof(buf) || !c1 || !(c2 = memchr(c1 + 1, ':', len - (size_t)(c1 - s) - 1)))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (memchr(buf, ',', len) || gpuctl_ids_resolve(ctx, snap, buf, &idx, &n) < 0)
		return false;
	ok = n == 1;
	if (ok)
		*ret = (struct dev){.gpu = idx[0], .mig = -1};
	free(idx);
	return ok;
}

/* The device an entry names; false if none (the caller reports "unknown device"). */
static bool nvidia_entry(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *s,
                         size_t len, struct dev *ret)
{
	const char *colon = memchr(s, ':', len);
	size_t g, m;

	if (len > 4 && has_prefix_ci(s, len, "GPU-")) {
		for (g = 0; g < snap->n_gpus; g++)
			if (eq_ci(s, len, gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_UUID))) {
				*ret = (struct dev){.gpu = g, .mig = -1};
				return true;
			}
		return false;
	}
	if (len > 4 && has_prefix_ci(s, len, "MIG-"))
		return cuda_mig_uuid_entry(snap, s, len, ret) == NULL;
	if (all_digits(s, len)) {
		if (!digits_value(s, len, SIZE_MAX, &g) || g >= snap->n_gpus)
			return false;
		*ret = (struct dev){.gpu = g, .mig = -1};
		return true;
	}
	if (colon && all_digits(s, (size_t)(colon - s)) &&
	    all_digits(colon + 1, len - (size_t)(colon - s) - 1)) {
		if (!digits_value(s, (size_t)(colon - s), SIZE_MAX, &g) ||
		    !digits_value(colon + 1, len - (size_t)(colon - s) - 1, INT32_MAX, &m) ||
		    g >= snap->n_gpus || mig_by_nvml_index(snap, g, m) < 0)
			return false;
		*ret = (struct dev){.gpu = g, .mig = mig_by_nvml_index(snap, g, m)};
		return true;
	}
	return nvidia_bus_entry(ctx, snap, s, len, ret);
}

int gpuctl_devstr_parse_nvidia(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                               const char *value, struct gpuctl_devset **ret_set)
{
	_cleanup_devset_ struct gpuctl_devset *set = NULL;
	bool is_void = true, is_none = false, is_all = false;
	const char *p;
	int r;

	if (!snap || !ret_set)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	r = gpuctl_devset_new(&set);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");

	/* The special values first, as the toolkit reads them: void > none > all. */
	for (p = value; p && *value;) {
		const char *s;
		size_t len;

		next_entry(&p, &s, &len);
		if (len == 0)
			continue;
		if (len == 4 && strncmp(s, "void", 4) == 0) {
			is_void = true;
			break;
		}
		is_void = false;
		if (len == 4 && strncmp(s, "none", 4) == 0)
			is_none = true;
		else if (len == 3 && strncasecmp(s, "all", 3) == 0)
			is_all = true;
	}
	if (is_void || is_none) {
		*ret_set = TAKE_PTR(set);
		return 0;
	}
	if (is_all) {
		if ((r = add_all(set, snap)) < 0)
			return ctx_error(ctx, r, "out of memory");
		*ret_set = TAKE_PTR(set);
		return 0;
	}

	for (p = value; p;) {
		const char *s;
		size_t len;
		struct dev d = {0};

		next_entry(&p, &s, &len);
		if (len == 0)
			continue;
		if (!nvidia_entry(ctx, snap, s, len, &d)) {
			char q[QUOTE_MAX + 4];

			quote_text(q, sizeof(q), s, len, QUOTE_MAX);
			return ctx_error(ctx, -EINVAL,
			                 "NVIDIA_VISIBLE_DEVICES: '%s': unknown device", q);
		}
		r = gpuctl_devset_add(set, d.gpu, d.mig);
		if (r < 0 && r != -EEXIST)
			return ctx_error(ctx, r, "out of memory");
	}
	*ret_set = TAKE_PTR(set);
	return 0;
}

/* ---- The outer allocation ---- */

enum {
	SRC_CUDA,
	SRC_NVIDIA,
	SRC_SLURM_STEP,
	SRC_SLURM_JOB,
	SRC__COUNT,
};

static const char *const src_var[SRC__COUNT] = {
        [SRC_CUDA] = "CUDA_VISIBLE_DEVICES",
        [SRC_NVIDIA] = "NVIDIA_VISIBLE_DEVICES",
        [SRC_SLURM_STEP] = "SLURM_STEP_GPUS",
        [SRC_SLURM_JOB] = "SLURM_JOB_GPUS",
};

/* ret_source names, by the bit mask of the variables set (bit i: src_var[i]). Static strings,
 * so *ret_source needs no freeing. */
static const char *const src_names[1u << SRC__COUNT] = {
        [0x1] = "CUDA_VISIBLE_DEVICES",
        [0x2] = "NVIDIA_VISIBLE_DEVICES",
        [0x3] = "CUDA_VISIBLE_DEVICES+NVIDIA_VISIBLE_DEVICES",
        [0x4] = "SLURM_STEP_GPUS",
        [0x5] = "CUDA_VISIBLE_DEVICES+SLURM_STEP_GPUS",
        [0x6] = "NVIDIA_VISIBLE_DEVICES+SLURM_STEP_GPUS",
        [0x7] = "CUDA_VISIBLE_DEVICES+NVIDIA_VISIBLE_DEVICES+SLURM_STEP_GPUS",
        [0x8] = "SLURM_JOB_GPUS",
        [0x9] = "CUDA_VISIBLE_DEVICES+SLURM_JOB_GPUS",
        [0xa] = "NVIDIA_VISIBLE_DEVICES+SLURM_JOB_GPUS",
        [0xb] = "CUDA_VISIBLE_DEVICES+NVIDIA_VISIBLE_DEVICES+SLURM_JOB_GPUS",
        [0xc] = "SLURM_STEP_GPUS+SLURM_JOB_GPUS",
        [0xd] = "CUDA_VISIBLE_DEVICES+SLURM_STEP_GPUS+SLURM_JOB_GPUS",
        [0xe] = "NVIDIA_VISIBLE_DEVICES+SLURM_STEP_GPUS+SLURM_JOB_GPUS",
        [0xf] = "CUDA_VISIBLE_DEVICES+NVIDIA_VISIBLE_DEVICES+SLURM_STEP_GPUS+SLURM_JOB_GPUS",
};

/* Reads a list of NVML indices (Slurm's form). An index out of range while the list names as
 * many GPUs as the snapshot has means a renumbered view (cgroup, container): every GPU.
 * -EINVAL for anything else that is not such a list; the message names var. */
static int read_index_list(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                           const char *var, const char *value, struct gpuctl_devset **ret_set)
{
	_cleanup_devset_ struct gpuctl_devset *set = NULL;
	bool out_of_range = false;
	size_t n_entries = 0;
	char q[QUOTE_MAX + 4];
	const char *p;
	int r;

	if ((r = gpuctl_devset_new(&set)) < 0)
		return ctx_error(ctx, r, "out of memory");
	if (streq(value, "NoDevFiles"))
		return ctx_error(ctx, -EINVAL,
		                 "%s: 'NoDevFiles': Slurm allocated GPUs but cannot say which "
		                 "(gres.conf names no device files)",
		                 var);
	for (p = value; p && *value;) {
		const char *s;
		size_t len, g;

		next_entry(&p, &s, &len);
		quote_text(q, sizeof(q), s, len, QUOTE_MAX);
		if (!all_digits(s, len))
			return ctx_error(ctx, -EINVAL, "%s: '%s': not a GPU index", var, q);
		if (!digits_value(s, len, SIZE_MAX, &g) || g >= snap->n_gpus) {
			out_of_range = true;
			n_entries++;
			continue;
		}
		r = gpuctl_devset_add(set, g, -1);
		if (r == -ENOMEM)
			return ctx_error(ctx, r, "out of memory");
		n_entries += r == 0;
	}
	if (out_of_range) {
		if (n_entries != snap->n_gpus) {
			quote_text(q, sizeof(q), value, strlen(value), QUOTE_MAX);
			return ctx_error(
			        ctx, -EINVAL,
			        "%s: '%s': names a GPU index NVML does not have (%zu GPU%s)", var,
			        q, snap->n_gpus, snap->n_gpus == 1 ? "" : "s");
		}
		set->n = 0;
		for (size_t g = 0; g < snap->n_gpus; g++)
			if ((r = gpuctl_devset_add(set, g, -1)) < 0)
				return ctx_error(ctx, r, "out of memory");
	}
	*ret_set = TAKE_PTR(set);
	return 0;
}

/* Where slurmd and Slurm's tools find gres.conf: beside slurm.conf, which is $SLURM_CONF, else
 * /etc/slurm/slurm.conf (Debian's and SchedMD's default; src/common/read_config.c,
 * get_extra_conf_path). */
static void gres_conf_path(char *buf, size_t size)
{
	const char *conf = secure_getenv("SLURM_CONF");
	const char *slash = conf ? strrchr(conf, '/') : NULL;

	if (conf && *conf && slash)
		(void)snprintf(buf, size, "%.*s/gres.conf", (int)(slash - conf), conf);
	else if (conf && *conf)
		(void)snprintf(buf, size, "gres.conf");
	else
		(void)snprintf(buf, size, "/etc/slurm/gres.conf");
}

/* The GPU whose device file has this minor number, or SIZE_MAX. */
static size_t gpu_by_minor(const struct gpuctl_snapshot *snap, unsigned int minor)
{
	for (size_t g = 0; g < snap->n_gpus; g++) {
		int64_t v;

		if (gpuctl_gpu_int(&snap->gpus[g], GPUCTL_F_MINOR_NUMBER, &v) == 0 &&
		    v == (int64_t)minor)
			return g;
	}
	return SIZE_MAX;
}

/* Slurm's GPU numbers (SLURM_STEP_GPUS, SLURM_JOB_GPUS) are positions in the node's GRES list,
 * not NVML indices: position i is the i-th device file of the node's gres.conf gpu records, and
 * that file's minor number is the GPU's (nvmlDeviceGetMinorNumber), which holds in a job's
 * cgroup-renumbered view too. With AutoDetect on, Slurm orders the GPUs it finds as NVML
 * enumerates them (gres_gpu.c, _merge_system_gres_conf: "a stand-in for PCI bus ID order"), so
 * positions are NVML indices. Anything else is -EINVAL: never a guess. docs/slurm.md. */
static int read_slurm_list(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                           const char *var, const char *value, struct gpuctl_devset **ret_set)
{
	_cleanup_devset_ struct gpuctl_devset *set = NULL;
	_cleanup_free_ char *text = NULL;
	struct gres_gpus gres = {0};
	char path[4096], node[256], why[256] = "", q[QUOTE_MAX + 4];
	const char *p;
	size_t len = 0;
	int r;

	if (streq(value, "NoDevFiles"))
		return ctx_error(ctx, -EINVAL,
		                 "%s: 'NoDevFiles': Slurm allocated GPUs but cannot say which "
		                 "(gres.conf names no device files)",
		                 var);
	gres_conf_path(path, sizeof(path));
	if ((r = gres_node_name(node, sizeof(node))) < 0)
		return ctx_error(ctx, -EINVAL, "%s: cannot tell this node's Slurm name: %s", var,
		                 strerror(-r));
	r = gres_read_file(path, 1 << 20, &text, &len);
	if (r < 0)
		return ctx_error(ctx, -EINVAL,
		                 "%s: cannot map Slurm's GPU numbers to devices: %s: %s (Slurm "
		                 "numbers GPUs by their place in gres.conf; set SLURM_CONF)",
		                 var, path, strerror(-r));
	r = gres_conf_parse(text, len, node, &gres, why, sizeof(why));
	if (r == -ENOMEM)
		return ctx_error(ctx, r, "out of memory");
	if (r < 0)
		return ctx_error(ctx, -EINVAL, "%s: cannot map Slurm's GPU numbers: %s: %s", var,
		                 path, why);
	if (gres.multiple_files || (!gres.autodetect && (gres.no_file || gres.n == 0))) {
		r = ctx_error(ctx, -EINVAL,
		              "%s: cannot map Slurm's GPU numbers: %s has %s for node %s", var,
		              path,
		              gres.multiple_files ? "MIG records (MultipleFiles=)"
		                                  : "no gpu device files (File=)",
		              node);
		gres_gpus_free(&gres);
		return r;
	}
	if ((r = gpuctl_devset_new(&set)) < 0) {
		gres_gpus_free(&gres);
		return ctx_error(ctx, r, "out of memory");
	}
	for (p = value; p && *value && r >= 0;) {
		const char *s;
		size_t n, pos, g = SIZE_MAX;
		struct stat st;

		next_entry(&p, &s, &n);
		quote_text(q, sizeof(q), s, n, QUOTE_MAX);
		if (!all_digits(s, n) || !digits_value(s, n, SIZE_MAX, &pos)) {
			r = ctx_error(ctx, -EINVAL, "%s: '%s': not a GPU index", var, q);
			break;
		}
		if (gres.autodetect && gres.n == 0) {
			if (pos >= snap->n_gpus)
				r = ctx_error(ctx, -EINVAL,
				              "%s: '%s': Slurm's GPU %zu is not among the %zu GPUs "
				              "NVML sees (AutoDetect in %s)",
				              var, q, pos, snap->n_gpus, path);
			g = pos;
		} else if (pos >= gres.n) {
			r = ctx_error(ctx, -EINVAL, "%s: '%s': %s lists %zu GPU%s for node %s", var,
			              q, path, gres.n, gres.n == 1 ? "" : "s", node);
		} else if (stat(gres.files[pos], &st) < 0 || !S_ISCHR(st.st_mode)) {
			r = ctx_error(ctx, -EINVAL,
			              "%s: '%s': %s (Slurm's GPU %zu): not a character device", var,
			              q, gres.files[pos], pos);
		} else if ((g = gpu_by_minor(snap, minor(st.st_rdev))) == SIZE_MAX) {
			r = ctx_error(
			        ctx, -EINVAL,
			        "%s: '%s': %s (Slurm's GPU %zu, minor %u) is no GPU NVML sees", var,
			        q, gres.files[pos], pos, minor(st.st_rdev));
		}
		if (r >= 0) {
			r = gpuctl_devset_add(set, g, -1);
			if (r == -EEXIST) /* listed twice: once is enough */
				r = 0;
			else if (r < 0)
				r = ctx_error(ctx, r, "out of memory");
		}
	}
	gres_gpus_free(&gres);
	if (r < 0)
		return r;
	*ret_set = TAKE_PTR(set);
	return 0;
}

static int read_source(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, int src,
                       const char *value, struct gpuctl_devset **ret_set)
{
	int r;

	switch (src) {
	case SRC_CUDA:
		return gpuctl_devstr_parse_cuda(ctx, snap, value,
		                                secure_getenv("CUDA_DEVICE_ORDER"), ret_set);
	case SRC_NVIDIA:
		r = gpuctl_devstr_parse_nvidia(ctx, snap, value, ret_set);
		if (r == -EINVAL) {
			/* Host indices in a container's view: the Slurm reading, if it fits. */
			bool indices = true;

			for (const char *p = value; p;) {
				const char *s;
				size_t len;

				next_entry(&p, &s, &len);
				indices = indices && (len == 0 || all_digits(s, len));
			}
			if (indices &&
			    read_index_list(ctx, snap, src_var[src], value, ret_set) == 0)
				return 0;
			/* keep parse_nvidia's message: it names the entry */
			return gpuctl_devstr_parse_nvidia(ctx, snap, value, ret_set);
		}
		return r;
	default:
		return read_slurm_list(ctx, snap, src_var[src], value, ret_set);
	}
}

/* Whether CUDA_VISIBLE_DEVICES is Slurm's own restatement of its GPU list: what slurmstepd
 * writes beside SLURM_STEP_GPUS/SLURM_JOB_GPUS (gres_common.c common_gres_set_env: the same
 * positions, or 0..n-1 when devices are constrained). Then it is read as Slurm's numbers, not
 * CUDA's: a gres.conf out of PCI order makes the two differ. */
static bool cuda_is_slurms(const char *cuda, const char *slurm)
{
	const char *a = cuda, *b = slurm;
	size_t k = 0;
	bool same = true, local = true;

	for (;;) {
		const char *s1, *s2;
		size_t l1, l2;

		if (!a != !b)
			return false;
		if (!a)
			break;
		next_entry(&a, &s1, &l1);
		next_entry(&b, &s2, &l2);
		same = same && l1 == l2 && memcmp(s1, s2, l1) == 0;
		char want[INT_TEXT];
		int wl = snprintf(want, sizeof(want), "%zu", k++);
		local = local && (size_t)wl == l1 && memcmp(s1, want, l1) == 0;
	}
	return same || local;
}

int gpuctl_outer_allocation(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                            struct gpuctl_devset **ret_set, const char **ret_source)
{
	struct gpuctl_devset *sets[SRC__COUNT] = {NULL};
	_cleanup_devset_ struct gpuctl_devset *out = NULL;
	unsigned mask = 0;
	int first = -1, r = 0;

	if (!snap || !ret_set || !ret_source)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	const char *slurm = secure_getenv(src_var[SRC_SLURM_STEP]);

	if (!slurm)
		slurm = secure_getenv(src_var[SRC_SLURM_JOB]);
	for (int i = 0; i < SRC__COUNT; i++) {
		const char *v = secure_getenv(src_var[i]);

		if (!v)
			continue;
		if (i == SRC_CUDA && slurm && cuda_is_slurms(v, slurm)) {
			ctx_log(ctx, GPUCTL_LOG_DEBUG,
			        "CUDA_VISIBLE_DEVICES=%s is Slurm's: read as its GPU numbers", v);
			continue;
		}
		r = read_source(ctx, snap, i, v, &sets[i]);
		if (r < 0)
			goto free_sets;
		mask |= 1u << i;
		if (first < 0)
			first = i;
	}
	if (first >= 0) {
		if ((r = gpuctl_devset_new(&out)) < 0) {
			r = ctx_error(ctx, r, "out of memory");
			goto free_sets;
		}
		for (size_t k = 0; k < sets[first]->n; k++) {
			struct dev d = sets[first]->devs[k];
			bool ok = true;

			for (int i = first + 1; i < SRC__COUNT; i++)
				ok = ok && (!sets[i] || set_allows(sets[i], d));
			if (ok && (r = gpuctl_devset_add(out, d.gpu, d.mig)) < 0) {
				r = ctx_error(ctx, r, "out of memory");
				goto free_sets;
			}
		}
	}
	*ret_set = TAKE_PTR(out);
	*ret_source = mask ? src_names[mask] : NULL;
	r = 0;
free_sets:
	for (int i = 0; i < SRC__COUNT; i++)
		gpuctl_devset_free(sets[i]);
	return r;
}

/* ---- Rendering ---- */

/* A growing string; oom records a failed allocation so callers check once, at the end. */
struct sbuf {
	char *p;    /* the text, NUL-terminated; owned */
	size_t len; /* bytes used, without the NUL */
	size_t cap; /* bytes allocated */
	bool oom;   /* an append failed: the text is incomplete */
};

static void sb_append(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (n >= SIZE_MAX / 2 - b->len) {
		b->oom = true;
		return;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 128;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
	sb_append(b, s, strlen(s));
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) _printf_(2, 3);
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) { /* only short, fixed items go through here */
		b->oom = true;
		return;
	}
	sb_append(b, tmp, (size_t)n);
}

/* Characters every form carries without quoting: CSV, YAML, CDI names, shell words. */
static bool is_safe_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("-_.:", *s))
			return false;
	return true;
}

/* Printable ASCII only, so it can go into a one-line message. */
static bool printable(const char *s)
{
	for (; *s; s++)
		if (!isgraph((unsigned char)*s))
			return false;
	return true;
}

/* A value as one shell word: bare when it has only safe characters, else in single quotes. */
static void sb_shell_word(struct sbuf *b, const char *s)
{
	bool bare = true;

	for (const char *c = s; *c; c++)
		if (!isalnum((unsigned char)*c) && !strchr("-_.,:/=+", *c))
			bare = false;
	if (bare) {
		sb_puts(b, s);
		return;
	}
	sb_puts(b, "'");
	for (const char *c = s; *c; c++) {
		if (*c == '\'')
			sb_puts(b, "'\\''");
		else
			sb_append(b, c, 1);
	}
	sb_puts(b, "'");
}

static void sb_json_string(struct sbuf *b, const char *s)
{
	_cleanup_free_ char *q = NULL;

	if (!s) {
		sb_puts(b, "null");
		return;
	}
	q = utf8_json_quote(s, SIZE_MAX); /* invalid UTF-8 becomes U+FFFD (utf8.h) */
	if (!q)
		b->oom = true;
	else
		sb_puts(b, q);
}

/* What a renderer works from. */
struct render {
	struct gpuctl_ctx *ctx;             /* for messages */
	const struct gpuctl_snapshot *snap; /* the machine */
	const struct gpuctl_devset *set;    /* what to render */
	bool indices;                       /* GPUCTL_RENDER_INDICES */
	struct sbuf out;                    /* the text */
};

enum id_kind {
	ID_CONTAINER, /* UUIDs; indices as NVML's "<gpu>" / "<gpu>:<mig>" */
	ID_CUDA,      /* UUIDs; indices as CUDA's PCI_BUS_ID ordinals, MIG devices refused */
};

/* The name of the set's i-th device in a device string, into buf. */
static int device_id(struct render *rc, size_t i, enum id_kind kind, char *buf, size_t size)
{
	struct dev d = rc->set->devs[i];
	char name[INT_TEXT * 2];
	const char *u;

	if (!gpuctl_snapshot_gpu(rc->snap, d.gpu) || (d.mig >= 0 && !dev_mig(rc->snap, d)))
		return ctx_error(rc->ctx, -EINVAL, "device %s is not in the snapshot",
		                 dev_name(rc->snap, d, name, sizeof(name)));
	if (kind == ID_CUDA && d.mig < 0 && gpu_in_mig_mode(rc->snap, d.gpu))
		return ctx_error(rc->ctx, -EINVAL,
		                 "GPU %zu is in MIG mode: CUDA cannot use it whole; choose its MIG "
		                 "devices",
		                 d.gpu);
	if (rc->indices && kind == ID_CUDA) {
		_cleanup_free_ size_t *cand = NULL;
		size_t n = 0;
		int r;

		if (d.mig >= 0)
			return ctx_error(
			        rc->ctx, -EINVAL,
			        "MIG device %s has no CUDA index (CUDA reaches MIG devices "
			        "only by UUID): render without indices",
			        dev_name(rc->snap, d, name, sizeof(name)));
		if ((r = cuda_candidates(rc->snap, true, &cand, &n)) < 0)
			return ctx_error(rc->ctx, r, "out of memory");
		for (size_t k = 0; k < n; k++)
			if (cand[k] == d.gpu) {
				(void)snprintf(buf, size, "%zu", k);
				return 0;
			}
		return ctx_error(rc->ctx, -EINVAL, "GPU %zu has no CUDA index", d.gpu);
	}
	if (rc->indices) {
		gpuctl_device_label(rc->snap, d.gpu, d.mig, buf, size);
		return 0;
	}
	u = dev_uuid(rc->snap, d);
	if (!u)
		return ctx_error(rc->ctx, -EINVAL, "device %s has no UUID",
		                 dev_name(rc->snap, d, name, sizeof(name)));
	if (!is_safe_token(u) || strlen(u) >= size)
		return ctx_error(rc->ctx, -EINVAL,
		                 "device %s: its UUID has characters a device string cannot carry",
		                 dev_name(rc->snap, d, name, sizeof(name)));
	strscpy(buf, size, u);
	return 0;
}

#define ID_MAX 96 /* a MIG UUID is 40 characters, a legacy name under 60 */

/* The set's device names joined with ',' into *ret (malloc'ed; "" for an empty set). */
static int device_list(struct render *rc, enum id_kind kind, char **ret)
{
	struct sbuf b = {0};
	char id[ID_MAX];
	int r;

	sb_puts(&b, "");
	for (size_t i = 0; i < rc->set->n; i++) {
		if ((r = device_id(rc, i, kind, id, sizeof(id))) < 0) {
			free(b.p);
			return r;
		}
		if (i)
			sb_puts(&b, ",");
		sb_puts(&b, id);
	}
	if (b.oom) {
		free(b.p);
		return ctx_error(rc->ctx, -ENOMEM, "out of memory");
	}
	*ret = b.p;
	return 0;
}

static int render_cuda(struct render *rc)
{
	_cleanup_free_ char *list = NULL;
	int r = device_list(rc, ID_CUDA, &list);

	if (r < 0)
		return r;
	if (rc->indices)
		sb_puts(&rc->out, "CUDA_DEVICE_ORDER=PCI_BUS_ID ");
	sb_puts(&rc->out, "CUDA_VISIBLE_DEVICES=");
	sb_shell_word(&rc->out, list);
	sb_puts(&rc->out, "\n");
	return 0;
}

static int render_env(struct render *rc)
{
	_cleanup_free_ char *list = NULL;
	int r = device_list(rc, ID_CUDA, &list);

	if (r < 0)
		return r;
	sb_puts(&rc->out, "export CUDA_VISIBLE_DEVICES=");
	sb_shell_word(&rc->out, list);
	sb_puts(&rc->out, "\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n");
	return 0;
}

/* docker/cli opts/gpus.go reads --gpus as one CSV record: the inner double quotes keep
 * "device=a,b" one field; the outer single quotes keep them from the shell. No device is
 * -e NVIDIA_VISIBLE_DEVICES=void, not --gpus 0: moby 20.10's daemon/nvidia_linux.go
 * (setNvidiaGPUs; Debian 12's docker.io) sets nothing for a count of 0, so a CUDA image's own
 * NVIDIA_VISIBLE_DEVICES=all would expose every GPU; later moby writes void, and an explicit
 * -e overrides the image's value on both. */
static int render_docker(struct render *rc)
{
	_cleanup_free_ char *list = NULL;
	int r = device_list(rc, ID_CONTAINER, &list);

	if (r < 0)
		return r;
	if (rc->set->n == 0) {
		sb_puts(&rc->out, "-e NVIDIA_VISIBLE_DEVICES=void\n");
		return 0;
	}
	sb_puts(&rc->out, "--gpus '\"device=");
	sb_puts(&rc->out, list);
	sb_puts(&rc->out, "\"'\n");
	return 0;
}

static int render_nvidia(struct render *rc)
{
	_cleanup_free_ char *list = NULL;
	int r = device_list(rc, ID_CONTAINER, &list);

	if (r < 0)
		return r;
	sb_puts(&rc->out, "NVIDIA_VISIBLE_DEVICES=");
	sb_puts(&rc->out, rc->set->n ? list : "void");
	sb_puts(&rc->out, "\n");
	return 0;
}

/* nvidia-ctk cdi generate names devices nvidia.com/gpu=<index>, <gpu>:<mig>, <UUID>. */
static int render_cdi(struct render *rc)
{
	char id[ID_MAX];
	int r;

	for (size_t i = 0; i < rc->set->n; i++) {
		if ((r = device_id(rc, i, ID_CONTAINER, id, sizeof(id))) < 0)
			return r;
		sb_puts(&rc->out, "nvidia.com/gpu=");
		sb_puts(&rc->out, id);
		sb_puts(&rc->out, "\n");
	}
	return 0;
}

/* Kubernetes asks for counts: nvidia.com/gpu for whole GPUs, nvidia.com/mig-<profile> per MIG
 * profile (the device plugin's "mixed" strategy, which writes a profile's '+' as '.':
 * nvidia.com/mig-1g.5gb.me), in order of first appearance. */
static int render_k8s(struct render *rc)
{
	_cleanup_free_ char *list = NULL;
	_cleanup_free_ const char **names = NULL; /* profile, or NULL for whole GPUs */
	_cleanup_free_ size_t *counts = NULL;
	size_t n_names = 0;
	int r = device_list(rc, ID_CONTAINER, &list);

	if (r < 0)
		return r;
	names = calloc(rc->set->n + 1, sizeof(*names));
	counts = calloc(rc->set->n + 1, sizeof(*counts));
	if (!names || !counts)
		return ctx_error(rc->ctx, -ENOMEM, "out of memory");
	for (size_t i = 0; i < rc->set->n; i++) {
		struct dev d = rc->set->devs[i];
		const char *prof = NULL;
		size_t k;

		if (d.mig >= 0) {
			char name[48];

			char res[96];

			prof = gpuctl_mig_profile(dev_mig(rc->snap, d));
			if (!prof)
				return ctx_error(
				        rc->ctx, -EINVAL,
				        "MIG device %s: its profile is unknown, so there is "
				        "no Kubernetes resource name for it",
				        dev_name(rc->snap, d, name, sizeof(name)));
			if (mig_profile_k8s_name(prof, res, sizeof(res)) < 0)
				return ctx_error(
				        rc->ctx, -EINVAL,
				        "MIG device %s: profile '%.64s' makes no Kubernetes "
				        "resource name",
				        dev_name(rc->snap, d, name, sizeof(name)),
				        printable(prof) ? prof : "?");
		}
		for (k = 0; k < n_names; k++)
			if ((!names[k] && !prof) || (names[k] && prof && streq(names[k], prof)))
				break;
		if (k == n_names)
			names[n_names++] = prof;
		counts[k]++;
	}
	if (n_names == 0)
		n_names = 1; /* an empty set asks for nvidia.com/gpu: 0 */
	sb_puts(&rc->out, "resources:\n  limits:\n");
	for (size_t k = 0; k < n_names; k++) {
		char res[96];

		if (names[k]) {
			/* checked above: it has a resource name */
			if (mig_profile_k8s_name(names[k], res, sizeof(res)) < 0)
				return ctx_error(rc->ctx, -EINVAL, "no resource name");
			sb_printf(&rc->out, "    nvidia.com/%s: %zu\n", res, counts[k]);
		} else {
			sb_printf(&rc->out, "    nvidia.com/gpu: %zu\n", counts[k]);
		}
	}
	sb_puts(&rc->out,
	        "env:\n"
	        "  # The NVIDIA device plugin chooses the devices for the limits above and sets\n"
	        "  # NVIDIA_VISIBLE_DEVICES itself; this entry pins these devices only where no\n"
	        "  # device plugin runs.\n"
	        "  - name: NVIDIA_VISIBLE_DEVICES\n"
	        "    value: \"");
	sb_puts(&rc->out, rc->set->n ? list : "void");
	sb_puts(&rc->out, "\"\n");
	return 0;
}

static int render_json(struct render *rc)
{
	sb_puts(&rc->out, "{\"devices\": [");
	for (size_t i = 0; i < rc->set->n; i++) {
		struct dev d = rc->set->devs[i];
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(rc->snap, d.gpu);
		const struct gpuctl_mig *m = dev_mig(rc->snap, d);
		char name[INT_TEXT * 2];

		if (!g || (d.mig >= 0 && !m))
			return ctx_error(rc->ctx, -EINVAL, "device %s is not in the snapshot",
			                 dev_name(rc->snap, d, name, sizeof(name)));
		sb_printf(&rc->out, "%s{\"index\": %zu, \"uuid\": ", i ? ", " : "", d.gpu);
		sb_json_string(&rc->out, gpuctl_gpu_str(g, GPUCTL_F_UUID));
		sb_puts(&rc->out, ", \"pci_bus_id\": ");
		sb_json_string(&rc->out, gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID));
		sb_puts(&rc->out, ", \"name\": ");
		sb_json_string(&rc->out, gpuctl_gpu_str(g, GPUCTL_F_NAME));
		sb_puts(&rc->out, ", \"mig\": ");
		if (m) {
			sb_printf(&rc->out,
			          "{\"index\": %d, \"uuid\": ", mig_nvml_index(rc->snap, d));
			sb_json_string(&rc->out, gpuctl_mig_uuid(m));
			sb_puts(&rc->out, ", \"profile\": ");
			sb_json_string(&rc->out, gpuctl_mig_profile(m));
			sb_puts(&rc->out, "}");
		} else {
			sb_puts(&rc->out, "null");
		}
		sb_puts(&rc->out, "}");
	}
	sb_puts(&rc->out, "]}\n");
	return 0;
}

/* The forms, by enum value: name for gpuctl_render_lookup, and the renderer. */
static const struct render_form {
	const char *name;                 /* --format word */
	int (*render)(struct render *rc); /* appends the text to rc->out */
} render_forms[] = {
        [GPUCTL_RENDER_CUDA] = {"cuda", render_cuda},
        [GPUCTL_RENDER_ENV] = {"env", render_env},
        [GPUCTL_RENDER_DOCKER] = {"docker", render_docker},
        [GPUCTL_RENDER_NVIDIA] = {"nvidia", render_nvidia},
        [GPUCTL_RENDER_CDI] = {"cdi", render_cdi},
        [GPUCTL_RENDER_K8S] = {"k8s", render_k8s},
        [GPUCTL_RENDER_JSON] = {"json", render_json},
};

int gpuctl_render_lookup(const char *name)
{
	if (!name)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(render_forms); i++)
		if (strcasecmp(name, render_forms[i].name) == 0)
			return (int)i;
	return -EINVAL;
}

/* ---- How many MIG devices one CUDA process uses ---- */

/* The driver branch of snap: the leading number of its driver version ("550.54.15" is 550);
 * 0 when unknown. */
static unsigned driver_branch(const struct gpuctl_snapshot *snap)
{
	const char *v = gpuctl_snapshot_driver_version(snap);
	unsigned b = 0;

	for (; v && *v >= '0' && *v <= '9' && b < 100000; v++)
		b = b * 10 + (unsigned)(*v - '0');
	return b;
}

unsigned gpuctl_cuda_mig_limit(const struct gpuctl_snapshot *snap)
{
	return driver_branch(snap) < GPUCTL_CUDA_MIG_MULTI_BRANCH ? 1 : GPUCTL_CUDA_MIG_MAX;
}

int gpuctl_devset_cuda_check(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                             const struct gpuctl_devset *set)
{
	size_t n, nmig = 0, first_mig = 0;
	const char *ver;
	char a[32], b[32];

	if (!snap || !set)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	n = gpuctl_devset_count(set);
	ver = gpuctl_snapshot_driver_version(snap);
	for (size_t i = 0; i < n; i++) {
		size_t gi;
		int mi;

		(void)gpuctl_devset_get(set, i, &gi, &mi);
		if (mi >= 0 && nmig++ == 0)
			first_mig = i;
	}
	if (nmig == 0)
		return 0;
	if (gpuctl_cuda_mig_limit(snap) == 1) {
		size_t g0;
		int m0;

		if (n == 1)
			return 0;
		(void)gpuctl_devset_get(set, first_mig, &g0, &m0);
		gpuctl_device_label(snap, g0, m0, a, sizeof(a));
		return ctx_error(
		        ctx, -EINVAL,
		        "%zu devices (%zu MIG) for one CUDA process: with driver %s (before "
		        "R570) a CUDA process enumerates only one MIG device, here %s, and "
		        "nothing beside it (MIG user guide, CUDA device enumeration)",
		        n, nmig, ver ? ver : "of unknown version", a);
	}
	if (nmig > gpuctl_cuda_mig_limit(snap))
		return ctx_error(ctx, -EINVAL,
		                 "%zu MIG devices for one CUDA process: CUDA enumerates at most %u "
		                 "(MIG user guide, CUDA device enumeration)",
		                 nmig, GPUCTL_CUDA_MIG_MAX);
	for (size_t i = 0; i < n; i++) {
		int64_t gi_i, gi_j;
		size_t g_i, g_j;
		int m_i, m_j;

		(void)gpuctl_devset_get(set, i, &g_i, &m_i);
		if (m_i < 0 ||
		    gpuctl_mig_int(gpuctl_gpu_mig(gpuctl_snapshot_gpu(snap, g_i), (size_t)m_i),
		                   GPUCTL_MIG_GI, &gi_i) < 0)
			continue;
		for (size_t j = i + 1; j < n; j++) {
			(void)gpuctl_devset_get(set, j, &g_j, &m_j);
			if (m_j < 0 || g_j != g_i ||
			    gpuctl_mig_int(
			            gpuctl_gpu_mig(gpuctl_snapshot_gpu(snap, g_j), (size_t)m_j),
			            GPUCTL_MIG_GI, &gi_j) < 0 ||
			    gi_j != gi_i)
				continue;
			gpuctl_device_label(snap, g_i, m_i, a, sizeof(a));
			gpuctl_device_label(snap, g_j, m_j, b, sizeof(b));
			return ctx_error(
			        ctx, -EINVAL,
			        "MIG devices %s and %s share GPU instance %" PRId64
			        " of GPU %zu: CUDA enumerates one compute instance per GPU "
			        "instance in a process (MIG user guide, CUDA device "
			        "enumeration)",
			        a, b, gi_i, g_i);
		}
	}
	return 0;
}

int gpuctl_devstr_render(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                         const struct gpuctl_devset *set, enum gpuctl_render form, unsigned flags,
                         char **ret_text)
{
	struct render rc = {.ctx = ctx, .snap = snap, .set = set};
	int r;

	if (!snap || !set || !ret_text)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if ((unsigned)form >= ELEMENTSOF(render_forms) || !render_forms[form].render)
		return ctx_error(ctx, -EINVAL, "unknown output form %d", (int)form);
	if (flags & ~GPUCTL_RENDER_INDICES)
		return ctx_error(ctx, -EINVAL, "unknown render flags 0x%x", flags);
	rc.indices = flags & GPUCTL_RENDER_INDICES;
	/* a CUDA form is one process's CUDA_VISIBLE_DEVICES: never more than CUDA uses */
	if (form == GPUCTL_RENDER_CUDA || form == GPUCTL_RENDER_ENV) {
		r = gpuctl_devset_cuda_check(ctx, snap, set);
		if (r < 0)
			return r;
	}
	sb_puts(&rc.out, "");
	r = render_forms[form].render(&rc);
	if (r >= 0 && rc.out.oom)
		r = ctx_error(ctx, -ENOMEM, "out of memory");
	if (r < 0) {
		free(rc.out.p);
		return r;
	}
	*ret_text = rc.out.p;
	return 0;
}
