/* CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, read as the CUDA driver reads them.
 *
 * Documented rules (CUDA Programming Guide, "CUDA Environment Variables"; MPS and MIG user
 * guides; summarised with sources in the project's reference "queues-and-device-strings",
 * Part B1):
 * - unset: every device; "" (empty): none.
 * - a comma-separated list of indices, GPU UUIDs ("GPU-..."), unique GPU UUID prefixes (which
 *   must include "GPU-"), MIG UUIDs ("MIG-...", R470+) or legacy MIG-GPU-<uuid>/<gi>/<ci>;
 *   devices are enumerated in list order.
 * - parsing stops at the first invalid entry (documented example: "0,2,-1,1" shows 0 and 2).
 * - CUDA_DEVICE_ORDER=PCI_BUS_ID numbers devices by PCI bus id; FASTEST_FIRST (the default, and
 *   what any other value means) puts the fastest first "using a simple heuristic".
 * Modelled rules (undocumented; PyTorch's _parse_visible_devices and nvitop's parser, which
 * mirror the driver; marked "modelled" in the reference):
 * - an index entry parses like strtoul: blanks, then leading digits ("1gpu2" is 1); no digit,
 *   a sign or an index >= the number of GPUs is invalid;
 * - the first entry fixes index or UUID mode; an entry of the other kind is invalid;
 * - an ambiguous or unknown UUID (prefix) is invalid;
 * - a device named twice (after resolution) makes the whole list show no device.
 * gpuctl's shared written model (docs; this file and src/lib/devices/cuda-visible.c follow it):
 * - FASTEST_FIRST = compute capability (major, minor) descending, then maximum SM clock
 *   descending, then total memory descending, then PCI bus id ascending;
 * - GPUs in MIG mode are not CUDA devices as a whole: unset and index lists skip them, a GPU
 *   UUID naming one is invalid; MIG devices are visible only when named by MIG UUID (either
 *   form), and then appear in list order like any UUID entry.
 * Documented MIG enumeration (MIG user guide, "CUDA device enumeration"; the reference's B1),
 * applied to the list once parsed, by the scenario's driver branch (its driver_version):
 * - before R570 (CUDA 11/R450 to CUDA 12/R5xx) a process enumerates one MIG device only, the
 *   first one listed, and no whole GPU beside it;
 * - R570 and later: at most one compute instance per GPU instance (the first listed of each;
 *   the guide says only that CUDA "picks one"), at most 64 MIG devices in all, whole GPUs
 *   alongside. */
#include "visible.h"
#include "../util.h"

#include <ctype.h>
#include <strings.h>

static int cmp_pci(const struct sim_gpu *a, const struct sim_gpu *b)
{
	if (a->domain != b->domain)
		return a->domain < b->domain ? -1 : 1;
	if (a->bus != b->bus)
		return a->bus < b->bus ? -1 : 1;
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	if (a->function != b->function)
		return a->function < b->function ? -1 : 1;
	return 0;
}

static unsigned long long max_sm(const struct sim_gpu *g)
{
	return g->max_clock_sm.valid ? g->max_clock_sm.v : 0;
}

/* Negative when a comes first under FASTEST_FIRST. */
static int cmp_fastest(const struct sim_gpu *a, const struct sim_gpu *b)
{
	if (a->cc_major != b->cc_major)
		return a->cc_major > b->cc_major ? -1 : 1;
	if (a->cc_minor != b->cc_minor)
		return a->cc_minor > b->cc_minor ? -1 : 1;
	if (max_sm(a) != max_sm(b))
		return max_sm(a) > max_sm(b) ? -1 : 1;
	if (a->memory_total_mib != b->memory_total_mib)
		return a->memory_total_mib > b->memory_total_mib ? -1 : 1;
	return cmp_pci(a, b);
}

/* The GPUs CUDA can use whole, in CUDA_DEVICE_ORDER order (insertion sort: at most 128). */
static unsigned int ordered_gpus(const struct sim_scenario *sc, bool pci, unsigned int *out)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < sc->n_gpus; i++) {
		const struct sim_gpu *g = &sc->gpus[i];
		unsigned int j = n;

		if (g->mig_enabled)
			continue;
		while (j > 0) {
			const struct sim_gpu *p = &sc->gpus[out[j - 1]];
			if ((pci ? cmp_pci(p, g) : cmp_fastest(p, g)) <= 0)
				break;
			out[j] = out[j - 1];
			j--;
		}
		out[j] = i;
		n++;
	}
	return n;
}

static bool starts_with(const char *s, size_t len, const char *prefix)
{
	size_t pl = strlen(prefix);
	return len >= pl && memcmp(s, prefix, pl) == 0;
}

/* An index entry: blanks, digits, anything after the digits ignored. */
static int parse_index(const char *s, size_t len, unsigned int n, unsigned int *ret)
{
	size_t i = 0;
	unsigned long v = 0;

	while (i < len && isspace((unsigned char)s[i]))
		i++;
	if (i >= len || !isdigit((unsigned char)s[i]))
		return -EINVAL;
	for (; i < len && isdigit((unsigned char)s[i]); i++) {
		v = v * 10 + (unsigned long)(s[i] - '0');
		if (v >= n)
			return -ERANGE; /* also stops runaway digit strings */
	}
	*ret = (unsigned int)v;
	return 0;
}

/* "GPU-<prefix>": the one GPU whose UUID starts with it (case-insensitive). */
static int find_gpu_prefix(const struct sim_scenario *sc, const char *s, size_t len,
                           unsigned int *ret)
{
	int found = -1;

	for (unsigned int i = 0; i < sc->n_gpus; i++) {
		if (strlen(sc->gpus[i].uuid) < len || strncasecmp(sc->gpus[i].uuid, s, len) != 0)
			continue;
		if (found >= 0)
			return -EEXIST; /* ambiguous */
		found = (int)i;
	}
	if (found < 0)
		return -ENOENT;
	*ret = (unsigned int)found;
	return 0;
}

static bool same_uuid(const char *uuid, const char *s, size_t len)
{
	return strlen(uuid) == len && strncasecmp(uuid, s, len) == 0;
}

/* "MIG-<uuid>" or legacy "MIG-GPU-<uuid>/<gi>/<ci>". */
static int find_mig(const struct sim_scenario *sc, const char *s, size_t len,
                    struct sim_cuda_dev *ret)
{
	if (starts_with(s, len, "MIG-GPU-")) {
		const char *slash = memchr(s, '/', len);
		unsigned int gi, ci;
		char tail[32];
		int end = 0;

		if (!slash || (size_t)(s + len - slash) >= sizeof(tail))
			return -EINVAL;
		memcpy(tail, slash, (size_t)(s + len - slash));
		tail[s + len - slash] = '\0';
		if (sscanf(tail, "/%u/%u%n", &gi, &ci, &end) != 2 || tail[end] != '\0' ||
		    !isdigit((unsigned char)tail[1]))
			return -EINVAL;
		for (unsigned int i = 0; i < sc->n_gpus; i++) {
			const struct sim_gpu *g = &sc->gpus[i];
			if (!same_uuid(g->uuid, s + 4, (size_t)(slash - s - 4)) || !g->mig_enabled)
				continue;
			for (unsigned int k = 0; k < g->mig_count; k++)
				if (g->mig[k].gi == gi && g->mig[k].ci == ci) {
					*ret = (struct sim_cuda_dev){i, (int)k};
					return 0;
				}
		}
		return -ENOENT;
	}
	for (unsigned int i = 0; i < sc->n_gpus; i++)
		for (unsigned int k = 0; sc->gpus[i].mig_enabled && k < sc->gpus[i].mig_count; k++)
			if (same_uuid(sc->gpus[i].mig[k].uuid, s, len)) {
				*ret = (struct sim_cuda_dev){i, (int)k};
				return 0;
			}
	return -ENOENT;
}

/* The driver branch: the leading number of driver_version ("550.54.15" is 550); 0 unknown. */
static unsigned int driver_branch(const struct sim_scenario *sc)
{
	unsigned int v = 0;

	for (const char *p = sc->driver_version; isdigit((unsigned char)*p) && v < 100000; p++)
		v = v * 10 + (unsigned int)(*p - '0');
	return v;
}

/* The MIG devices CUDA enumerates of a parsed list, by driver branch (rules at the top);
 * returns the new count, devs kept in list order. */
static size_t mig_enumeration(const struct sim_scenario *sc, struct sim_cuda_dev *devs, size_t n)
{
	size_t out = 0, nmig = 0;

	if (driver_branch(sc) < SIM_CUDA_MIG_MULTI_BRANCH) {
		for (size_t i = 0; i < n; i++)
			if (devs[i].mig >= 0) {
				devs[0] = devs[i];
				return 1;
			}
		return n;
	}
	for (size_t i = 0; i < n; i++) {
		struct sim_cuda_dev d = devs[i];
		bool taken = false;

		if (d.mig >= 0) {
			unsigned int gi = sc->gpus[d.gpu].mig[d.mig].gi;

			for (size_t j = 0; j < out && !taken; j++)
				taken = devs[j].mig >= 0 && devs[j].gpu == d.gpu &&
				        sc->gpus[d.gpu].mig[devs[j].mig].gi == gi;
			if (taken || nmig == SIM_CUDA_MIG_MAX)
				continue;
			nmig++;
		}
		devs[out++] = d;
	}
	return out;
}

size_t sim_cuda_visible(const struct sim_scenario *sc, const char *cvd, const char *order,
                        struct sim_cuda_dev *devs, size_t max)
{
	unsigned int ord[SIM_MAX_GPUS], n_ord;
	bool uuid_mode = false;
	size_t n = 0;

	n_ord = ordered_gpus(sc, order && strcmp(order, "PCI_BUS_ID") == 0, ord);
	if (!cvd) {
		for (unsigned int i = 0; i < n_ord && n < max; i++)
			devs[n++] = (struct sim_cuda_dev){ord[i], -1};
		return n;
	}
	for (const char *p = cvd;; p++) {
		const char *comma = strchr(p, ','), *s = p;
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		struct sim_cuda_dev d = {0, -1};
		bool is_uuid;
		unsigned int idx;

		while (len && isspace((unsigned char)*s))
			s++, len--;
		while (len && isspace((unsigned char)s[len - 1]))
			len--;
		is_uuid = starts_with(s, len, "GPU-") || starts_with(s, len, "MIG-");
		if (p == cvd)
			uuid_mode = is_uuid;
		if (is_uuid != uuid_mode)
			break;
		if (!is_uuid) {
			if (parse_index(s, len, n_ord, &idx) < 0)
				break;
			d.gpu = ord[idx];
		} else if (starts_with(s, len, "MIG-")) {
			if (find_mig(sc, s, len, &d) < 0)
				break;
		} else {
			if (find_gpu_prefix(sc, s, len, &d.gpu) < 0 || sc->gpus[d.gpu].mig_enabled)
				break;
		}
		for (size_t i = 0; i < n; i++)
			if (devs[i].gpu == d.gpu && devs[i].mig == d.mig)
				return 0; /* a duplicate: no device at all */
		if (n < max)
			devs[n++] = d;
		if (!comma)
			break;
		p = comma;
	}
	return mig_enumeration(sc, devs, n);
}
