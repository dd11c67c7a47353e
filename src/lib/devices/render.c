// SPDX-License-Identifier: MIT
/*
 * render.c: device strings for each consumer (gpuctl_devstr_render, gpuctl_render_lookup):
 * CUDA_VISIBLE_DEVICES, a shell's export lines, docker --gpus, NVIDIA_VISIBLE_DEVICES, CDI
 * names, Kubernetes resources, JSON. docs/device-strings.md, "Rendering".
 *
 * Decisions:
 * - One table of forms (render_forms[]); every device string is built from full UUIDs, or with
 *   GPUCTL_RENDER_INDICES from indices: NVML's for the container forms, CUDA's PCI_BUS_ID
 *   ordinal (the position among the candidates in bus order, which is the NVML index unless a
 *   MIG-mode GPU comes before it) for the CUDA forms, always with CUDA_DEVICE_ORDER=PCI_BUS_ID.
 * - What a form cannot express is -EINVAL with a message, never a silently different device.
 * - A CUDA form is one process's CUDA_VISIBLE_DEVICES: never more MIG devices than CUDA uses
 *   (cuda-mig.c).
 * - JSON is written here with its own escaper (utf8.h): jansson is for workload/ alone (it reads
 *   the container runtimes' state files).
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctx.h"
#include "devices-internal.h"
#include "mig-profile.h"
#include "sbuf.h"
#include "utf8.h"

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
		sbuf_puts(b, s);
		return;
	}
	sbuf_puts(b, "'");
	for (const char *c = s; *c; c++) {
		if (*c == '\'')
			sbuf_puts(b, "'\\''");
		else
			sbuf_append(b, c, 1);
	}
	sbuf_puts(b, "'");
}

static void sb_json_string(struct sbuf *b, const char *s)
{
	_cleanup_free_ char *q = NULL;

	if (!s) {
		sbuf_puts(b, "null");
		return;
	}
	q = utf8_json_quote(s, SIZE_MAX); /* invalid UTF-8 becomes U+FFFD (utf8.h) */
	if (!q)
		b->oom = true;
	else
		sbuf_puts(b, q);
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

	if (!gpuctl_snapshot_gpu(rc->snap, d.gpu) || (d.mig >= 0 && !devstr_dev_mig(rc->snap, d)))
		return ctx_error(rc->ctx, -EINVAL, "device %s is not in the snapshot",
		                 devstr_dev_name(rc->snap, d, name, sizeof(name)));
	if (kind == ID_CUDA && d.mig < 0 && devstr_gpu_in_mig_mode(rc->snap, d.gpu))
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
			        devstr_dev_name(rc->snap, d, name, sizeof(name)));
		if ((r = devstr_cuda_candidates(rc->snap, true, &cand, &n)) < 0)
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
	u = devstr_dev_uuid(rc->snap, d);
	if (!u)
		return ctx_error(rc->ctx, -EINVAL, "device %s has no UUID",
		                 devstr_dev_name(rc->snap, d, name, sizeof(name)));
	if (!is_safe_token(u) || strlen(u) >= size)
		return ctx_error(rc->ctx, -EINVAL,
		                 "device %s: its UUID has characters a device string cannot carry",
		                 devstr_dev_name(rc->snap, d, name, sizeof(name)));
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

	sbuf_puts(&b, "");
	for (size_t i = 0; i < rc->set->n; i++) {
		if ((r = device_id(rc, i, kind, id, sizeof(id))) < 0) {
			free(b.p);
			return r;
		}
		if (i)
			sbuf_puts(&b, ",");
		sbuf_puts(&b, id);
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
		sbuf_puts(&rc->out, "CUDA_DEVICE_ORDER=PCI_BUS_ID ");
	sbuf_puts(&rc->out, "CUDA_VISIBLE_DEVICES=");
	sb_shell_word(&rc->out, list);
	sbuf_puts(&rc->out, "\n");
	return 0;
}

static int render_env(struct render *rc)
{
	_cleanup_free_ char *list = NULL;
	int r = device_list(rc, ID_CUDA, &list);

	if (r < 0)
		return r;
	sbuf_puts(&rc->out, "export CUDA_VISIBLE_DEVICES=");
	sb_shell_word(&rc->out, list);
	sbuf_puts(&rc->out, "\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n");
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
		sbuf_puts(&rc->out, "-e NVIDIA_VISIBLE_DEVICES=void\n");
		return 0;
	}
	sbuf_puts(&rc->out, "--gpus '\"device=");
	sbuf_puts(&rc->out, list);
	sbuf_puts(&rc->out, "\"'\n");
	return 0;
}

static int render_nvidia(struct render *rc)
{
	_cleanup_free_ char *list = NULL;
	int r = device_list(rc, ID_CONTAINER, &list);

	if (r < 0)
		return r;
	sbuf_puts(&rc->out, "NVIDIA_VISIBLE_DEVICES=");
	sbuf_puts(&rc->out, rc->set->n ? list : "void");
	sbuf_puts(&rc->out, "\n");
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
		sbuf_puts(&rc->out, "nvidia.com/gpu=");
		sbuf_puts(&rc->out, id);
		sbuf_puts(&rc->out, "\n");
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

			prof = gpuctl_mig_profile(devstr_dev_mig(rc->snap, d));
			if (!prof)
				return ctx_error(
				        rc->ctx, -EINVAL,
				        "MIG device %s: its profile is unknown, so there is "
				        "no Kubernetes resource name for it",
				        devstr_dev_name(rc->snap, d, name, sizeof(name)));
			if (mig_profile_k8s_name(prof, res, sizeof(res)) < 0)
				return ctx_error(
				        rc->ctx, -EINVAL,
				        "MIG device %s: profile '%.64s' makes no Kubernetes "
				        "resource name",
				        devstr_dev_name(rc->snap, d, name, sizeof(name)),
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
	sbuf_puts(&rc->out, "resources:\n  limits:\n");
	for (size_t k = 0; k < n_names; k++) {
		char res[96];

		if (names[k]) {
			/* checked above: it has a resource name */
			if (mig_profile_k8s_name(names[k], res, sizeof(res)) < 0)
				return ctx_error(rc->ctx, -EINVAL, "no resource name");
			sbuf_printf(&rc->out, "    nvidia.com/%s: %zu\n", res, counts[k]);
		} else {
			sbuf_printf(&rc->out, "    nvidia.com/gpu: %zu\n", counts[k]);
		}
	}
	sbuf_puts(&rc->out,
	          "env:\n"
	          "  # The NVIDIA device plugin chooses the devices for the limits above and sets\n"
	          "  # NVIDIA_VISIBLE_DEVICES itself; this entry pins these devices only where no\n"
	          "  # device plugin runs.\n"
	          "  - name: NVIDIA_VISIBLE_DEVICES\n"
	          "    value: \"");
	sbuf_puts(&rc->out, rc->set->n ? list : "void");
	sbuf_puts(&rc->out, "\"\n");
	return 0;
}

static int render_json(struct render *rc)
{
	sbuf_puts(&rc->out, "{\"devices\": [");
	for (size_t i = 0; i < rc->set->n; i++) {
		struct dev d = rc->set->devs[i];
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(rc->snap, d.gpu);
		const struct gpuctl_mig *m = devstr_dev_mig(rc->snap, d);
		char name[INT_TEXT * 2];

		if (!g || (d.mig >= 0 && !m))
			return ctx_error(rc->ctx, -EINVAL, "device %s is not in the snapshot",
			                 devstr_dev_name(rc->snap, d, name, sizeof(name)));
		sbuf_printf(&rc->out, "%s{\"index\": %zu, \"uuid\": ", i ? ", " : "", d.gpu);
		sb_json_string(&rc->out, gpuctl_gpu_str(g, GPUCTL_F_UUID));
		sbuf_puts(&rc->out, ", \"pci_bus_id\": ");
		sb_json_string(&rc->out, gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID));
		sbuf_puts(&rc->out, ", \"name\": ");
		sb_json_string(&rc->out, gpuctl_gpu_str(g, GPUCTL_F_NAME));
		sbuf_puts(&rc->out, ", \"mig\": ");
		if (m) {
			sbuf_printf(&rc->out, "{\"index\": %d, \"uuid\": ",
			            devstr_mig_nvml_index(rc->snap, d));
			sb_json_string(&rc->out, gpuctl_mig_uuid(m));
			sbuf_puts(&rc->out, ", \"profile\": ");
			sb_json_string(&rc->out, gpuctl_mig_profile(m));
			sbuf_puts(&rc->out, "}");
		} else {
			sbuf_puts(&rc->out, "null");
		}
		sbuf_puts(&rc->out, "}");
	}
	sbuf_puts(&rc->out, "]}\n");
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
	sbuf_puts(&rc.out, "");
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
