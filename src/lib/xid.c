// SPDX-License-Identifier: MIT
/*
 * xid.c: the XID catalog: what each XID code means, how gpuctl classes it, what to do.
 *
 * This table is the only place in gpuctl that knows XID codes (docs/health.md, "XIDs").
 *
 * Sources (paraphrased, nothing copied):
 * - Meanings and actions: NVIDIA's XID catalog,
 *   https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (its "immediate
 *   action" buckets RESET_GPU, RESTART_APP, RESTART_BM, IGNORE, the XID 45/48 and NVLink
 *   workflows), and NVIDIA's older XID error list for codes the new catalog calls unused.
 * - Classes: the lists (fence: the catalog's RESET_GPU / RESTART_BM / NVLink-workflow
 *   codes plus DCGM's always-FAIL XIDs; application: RESTART_APP and the codes Kubernetes'
 *   device plugin skips as application errors), which agree with DCGM's BuildXidMappings
 *   except where DCGM's labels contradict the catalog (docs/health.md lists them).
 *
 * Decisions:
 * - Four classes. FENCE (FAIL): the GPU needs a reset or more before it takes work. APPLICATION
 *   (WARN): the job that hit it should restart; the GPU stays usable. INFO (an OK finding):
 *   counted and shown, nothing to do now. UNKNOWN (WARN): 999, which NVML uses for "an XID it
 *   cannot name", and every code not in this table: not silent, but not enough to fence a GPU.
 * - 109 (context-switch timeout) is FENCE although Kubernetes' device plugin skips it: the
 *   catalog's action is RESET_GPU.
 * - The table is sorted by code and searched by bisection; the unit test looks up every listed
 *   code, so an entry out of order fails it.
 */
#include <stdlib.h>

#include "gpuctl/gpuctl.h"
#include "util.h"

#define FENCE(c, m, a)                                                                             \
	{                                                                                          \
		.code = (c), .class_ = GPUCTL_XID_FENCE, .meaning = (m), .action = (a)             \
	}
#define APP(c, m, a)                                                                               \
	{                                                                                          \
		.code = (c), .class_ = GPUCTL_XID_APPLICATION, .meaning = (m), .action = (a)       \
	}
#define INFO(c, m, a)                                                                              \
	{                                                                                          \
		.code = (c), .class_ = GPUCTL_XID_INFO, .meaning = (m), .action = (a)              \
	}

/* Actions shared by several codes. */
#define A_RESET   "drain the GPU and reset it (nvidia-smi -r) or reboot; contact support if it recurs"
#define A_RESTART "restart the job; the GPU stays usable (investigate the application if it recurs)"
#define A_NVLINK                                                                                   \
	"drain the GPU, reset it and check its NVLinks (nvidia-smi nvlink -s); contact support "   \
	"if "                                                                                      \
	"it recurs"
#define A_NONE "none now; watch for other XIDs"

static const struct gpuctl_xid_info table[] = {
        APP(8, "GPU stopped processing", A_RESTART),
        APP(13, "graphics engine exception", A_RESTART),
        APP(31, "GPU memory page fault", A_RESTART),
        APP(32, "invalid or corrupted push buffer stream", A_RESTART),
        APP(43, "GPU stopped processing (channel reset)", A_RESTART),
        APP(45, "preemptive cleanup after an earlier error",
            "restart the job; if no other XID came with it, restart Fabric Manager"),
        FENCE(46, "GPU timeout", A_RESET),
        FENCE(48, "double-bit ECC error",
              "drain the GPU; reset it or reboot to clear the error; check the ECC counters"),
        FENCE(62, "internal micro-controller halt", A_RESET),
        INFO(63, "row remap or page retirement recorded",
             "plan a GPU reset: the repair takes effect at the next reset"),
        FENCE(64, "row remap or page retirement failed",
              "drain the GPU and reset it now; memory is damaged (RMA candidate)"),
        APP(68, "video decoder exception", A_RESTART),
        APP(69, "graphics engine class error", A_RESTART),
        FENCE(74, "NVLink error", A_NVLINK),
        FENCE(79, "GPU has fallen off the bus",
              "reboot the node; check seating, power and cooling; contact support if it "
              "recurs"),
        INFO(92, "high single-bit ECC error rate", A_NONE),
        INFO(93, "InfoROM wear limit exceeded (non-fatal)", A_NONE),
        APP(94, "contained memory error",
            "restart the job that hit it; the GPU stays usable; reset it when convenient"),
        FENCE(95, "uncontained memory error", "drain the GPU and reset it"),
        FENCE(109, "context-switch timeout", A_RESET),
        FENCE(110, "security fault", A_RESET),
        FENCE(119, "GSP RPC timeout", A_RESET),
        FENCE(120, "GSP error", A_RESET),
        INFO(121, "C2C link error (corrected)", A_NONE),
        FENCE(136, "link training failed", A_RESET),
        INFO(137, "NVLink FLA privilege error", A_NONE),
        FENCE(140, "unrecoverable ECC error escaped containment", A_RESET),
        FENCE(143, "GPU initialization error", A_RESET),
        FENCE(144, "NVLink5 SAW error", A_NVLINK),
        FENCE(145, "NVLink5 RLW error", A_NVLINK),
        FENCE(146, "NVLink5 TLW error", A_NVLINK),
        FENCE(147, "NVLink5 TREX error", A_NVLINK),
        FENCE(148, "NVLink5 NVLPW error", A_NVLINK),
        FENCE(149, "NVLink5 NETIR error", A_NVLINK),
        FENCE(150, "NVLink5 MSE error", A_NVLINK),
        INFO(154, "GPU recovery action changed",
             "read the recovery action (nvidia-smi -q) and the XID it names"),
        FENCE(155, "NVLink software-defined error", A_NVLINK),
        FENCE(158, "GPU fatal timeout", A_RESET),
};

static int cmp_code(const void *key, const void *elem)
{
	unsigned k = *(const unsigned *)key;
	unsigned c = ((const struct gpuctl_xid_info *)elem)->code;

	return k < c ? -1 : k > c ? 1 : 0;
}

int gpuctl_xid_lookup(unsigned code, struct gpuctl_xid_info *ret_info)
{
	const struct gpuctl_xid_info *e =
	        bsearch(&code, table, ELEMENTSOF(table), sizeof(table[0]), cmp_code);
	struct gpuctl_xid_info unknown = {
	        .code = code,
	        .class_ = GPUCTL_XID_UNKNOWN,
	        .meaning = code == 999 ? "unknown XID (NVML could not name it)"
	                               : "XID not in gpuctl's catalog",
	        .action = "look the XID up in NVIDIA's XID catalog and the kernel log; the GPU "
	                  "stays usable",
	};

	if (!ret_info || ret_info->struct_size < STRUCT_SIZE_MIN(struct gpuctl_xid_info, code))
		return -EINVAL;
	struct_fill(ret_info, e ? e : &unknown, sizeof(*ret_info));
	return 0;
}

const char *gpuctl_xid_class_name(int class_)
{
	static const char *const names[] = {
	        [GPUCTL_XID_UNKNOWN] = "unknown",
	        [GPUCTL_XID_FENCE] = "fence",
	        [GPUCTL_XID_APPLICATION] = "application",
	        [GPUCTL_XID_INFO] = "info",
	};

	if (class_ < 0 || (size_t)class_ >= ELEMENTSOF(names))
		return NULL;
	return names[class_];
}
