// SPDX-License-Identifier: MIT
/*
 * outer.c: the allocation this process was started in (gpuctl_outer_allocation): the devices
 * every one of CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, SLURM_STEP_GPUS and SLURM_JOB_GPUS
 * that is set allows, in the order of the first one set. Reads the environment and gres.conf.
 * docs/device-strings.md "The outer allocation", docs/slurm.md.
 *
 * Decisions:
 * - SLURM_STEP_GPUS / SLURM_JOB_GPUS: Slurm writes them as "%d" joined with ','
 *   (src/plugins/gres/common/gres_common.c, common_gres_set_env: no ranges). They are places in
 *   the node's GRES list, mapped to GPUs through gres.conf and the device files' minor numbers
 *   (read_slurm_list below). Old Slurm writes "NoDevFiles" when gres.conf names no device
 *   files: -EINVAL (the allocation is unknown). A CUDA_VISIBLE_DEVICES that restates the Slurm
 *   list (the same places, or 0..n-1) is Slurm's and read as such (cuda_is_slurms).
 * - Inside a container NVML sees only the allocated GPUs, renumbered from 0, while an
 *   all-index NVIDIA_VISIBLE_DEVICES keeps host indices: when an index is out of range and the
 *   list names exactly as many GPUs as NVML sees, the allocation is every GPU NVML sees.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "ctx.h"
#include "devices-internal.h"
#include "gres.h"

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

		devstr_next_entry(&p, &s, &len);
		quote_text(q, sizeof(q), s, len, QUOTE_MAX);
		if (!devstr_all_digits(s, len))
			return ctx_error(ctx, -EINVAL, "%s: '%s': not a GPU index", var, q);
		if (!devstr_digits_value(s, len, SIZE_MAX, &g) || g >= snap->n_gpus) {
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

		devstr_next_entry(&p, &s, &n);
		quote_text(q, sizeof(q), s, n, QUOTE_MAX);
		if (!devstr_all_digits(s, n) || !devstr_digits_value(s, n, SIZE_MAX, &pos)) {
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

				devstr_next_entry(&p, &s, &len);
				indices = indices && (len == 0 || devstr_all_digits(s, len));
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
		devstr_next_entry(&a, &s1, &l1);
		devstr_next_entry(&b, &s2, &l2);
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
				ok = ok && (!sets[i] || devstr_set_allows(sets[i], d));
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
