// SPDX-License-Identifier: MIT
/*
 * xid.c: the XID catalog: what each XID code means, how gpuctl classes it, what to do.
 *
 * This table is the only place in gpuctl that knows XID codes (docs/health.md, "XIDs").
 *
 * Sources (paraphrased, nothing copied):
 * - Meanings and actions: NVIDIA's XID catalog for Ampere and newer,
 *   https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, and its spreadsheet
 *   (Xid-Catalog.xlsx: sheet "Catalog", codes 1-172, and sheet "XID 144-150 Decode"), in the
 *   version leptonai/gpud generated on 2025-10-29 (components/accelerator/nvidia/xid/
 *   catalog_generated.go): its "immediate action" buckets RESET_GPU, RESTART_APP, RESTART_BM,
 *   RESTART_VM, CHECK_MECHANICALS, CHECK_UVM, UPDATE_SWFW, IGNORE, the XID 45/48/154 and
 *   NVLink workflows. Codes the catalog marks "Unused" are not listed (they are unknown here).
 * - The kernel-log form of XIDs 144-150 ("<UNIT> <Fatal|Nonfatal> XC<n> i<n> Link <n>
 *   (0x<intrinfo> 0x<error status> ...)"): production lines quoted in gpud's tests
 *   (nvlink_logs_test.go); the sub-code of NETIR_LINK_EVT is intrinfo bits 25..20, as the
 *   decode sheet's patterns place it.
 *
 * Decisions:
 * - Five classes. FENCE (FAIL): the GPU needs a reset or more before it takes work.
 *   APPLICATION (WARN): the job that hit it should restart; the GPU stays usable. CHECK (WARN):
 *   act on the advice (update software, check UVM, read the recovery action), the GPU is not
 *   known to be broken. INFO (an OK finding): counted and shown, nothing to do now. UNKNOWN
 *   (WARN): 999, which NVML uses for "an XID it cannot name", codes not in this table, and the
 *   codes the catalog names without an action; its advice never says the GPU is fine.
 * - 109 (context-switch timeout) is FENCE although Kubernetes' device plugin skips it: the
 *   catalog's action is RESET_GPU.
 * - Codes the catalog lists without an immediate action but whose meaning is plain: 167 (PCIe
 *   fatal timeout) and 169 (SEC2 micro-controller halt, like 62's PMU halt) are FENCE; 171 and
 *   172 (uncorrectable DRAM / SRAM error) come with XID 48 and are FENCE as 48 is.
 * - 144-150 (NVLink5) are graded by the decode sheet from the unit, error status and sub-code the
 *   driver prints: RESET_GPU is FENCE, IGNORE is INFO, XID_154_EVAL is CHECK (the driver's
 *   recovery action, also checked, says whether to reset). A status several bits wide is graded
 *   by its worst bit. A line the sheet has no row for is FENCE when the driver calls it Fatal and
 *   CHECK when Nonfatal; without a line (NVML events carry only the code) it is CHECK.
 * - The table is sorted by code and searched by bisection; the unit test looks up every listed
 *   code, so an entry out of order fails it.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
#define CHECK(c, m, a)                                                                             \
	{                                                                                          \
		.code = (c), .class_ = GPUCTL_XID_CHECK, .meaning = (m), .action = (a)             \
	}
#define UNLISTED(c, m)                                                                             \
	{                                                                                          \
		.code = (c), .class_ = GPUCTL_XID_UNKNOWN, .meaning = (m), .action = A_UNKNOWN     \
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
#define A_UNKNOWN                                                                                  \
	"NVIDIA's catalog gives no action for it: read the kernel log and the recovery action "    \
	"(nvidia-smi -q) before trusting the GPU; drain it if other XIDs came with it"
#define A_NVLINK5                                                                                  \
	"read the XID's status in the kernel log (it decides the action) and the recovery action " \
	"(nvidia-smi -q); reset the GPU if the driver asks for it"

static const struct gpuctl_xid_info table[] = {
        APP(8, "GPU stopped processing", A_RESTART),
        APP(11, "invalid or corrupted push buffer stream", A_RESTART),
        APP(13, "graphics engine exception", A_RESTART),
        APP(25, "invalid or illegal push buffer stream", A_RESTART),
        APP(31, "GPU memory page fault", A_RESTART),
        APP(32, "invalid or corrupted push buffer stream", A_RESTART),
        INFO(37, "driver firmware error", A_NONE),
        INFO(38, "driver firmware error (FECS watchdog)", A_NONE),
        APP(39, "copy engine exception", A_RESTART),
        APP(40, "copy engine exception", A_RESTART),
        APP(41, "copy engine exception", A_RESTART),
        APP(43, "GPU stopped processing (channel reset)", A_RESTART),
        INFO(44, "graphics engine fault during context switch", A_NONE),
        APP(45, "preemptive cleanup after an earlier error",
            "restart the job; if no other XID came with it, restart Fabric Manager"),
        FENCE(46, "GPU timeout", A_RESET),
        FENCE(48, "double-bit ECC error",
              "drain the GPU; reset it or reboot to clear the error; check the ECC counters"),
        FENCE(54, "auxiliary power is not connected to the GPU board",
              "drain the node, power it off and connect the GPU's auxiliary power (check the "
              "cables); contact support if it recurs"),
        APP(60, "video processor (SEC2) exception", A_RESTART),
        FENCE(62, "internal micro-controller halt", A_RESET),
        INFO(63, "row remap or page retirement recorded",
             "plan a GPU reset: the repair takes effect at the next reset"),
        FENCE(64, "row remap or page retirement failed",
              "drain the GPU and reset it now; memory is damaged (RMA candidate)"),
        INFO(66, "illegal access by driver", A_NONE),
        INFO(67, "illegal access by driver", A_NONE),
        APP(68, "video decoder exception", A_RESTART),
        APP(69, "graphics engine class error", A_RESTART),
        APP(70, "copy engine error", A_RESTART),
        APP(71, "copy engine error", A_RESTART),
        APP(72, "copy engine error", A_RESTART),
        FENCE(74, "NVLink error", A_NVLINK),
        APP(75, "copy engine error", A_RESTART),
        APP(76, "copy engine error", A_RESTART),
        APP(77, "copy engine error", A_RESTART),
        CHECK(78, "vGPU start error", "update the vGPU software and firmware, then retry"),
        FENCE(79, "GPU has fallen off the bus",
              "reboot the node; check seating, power and cooling; contact support if it "
              "recurs"),
        APP(80, "corrupted data sent to the GPU", A_RESTART),
        APP(82, "JPEG decoder error", A_RESTART),
        APP(83, "video decoder error", A_RESTART),
        APP(84, "video decoder error", A_RESTART),
        APP(85, "copy engine error", A_RESTART),
        APP(86, "optical flow accelerator exception", A_RESTART),
        APP(88, "video decoder error", A_RESTART),
        APP(89, "video decoder error", A_RESTART),
        INFO(92, "high single-bit ECC error rate", A_NONE),
        INFO(93, "InfoROM wear limit exceeded (non-fatal)", A_NONE),
        APP(94, "contained memory error",
            "restart the job that hit it; the GPU stays usable; reset it when convenient"),
        FENCE(95, "uncontained memory error", "drain the GPU and reset it"),
        APP(96, "video decoder error", A_RESTART),
        APP(97, "video decoder error", A_RESTART),
        APP(98, "video decoder error", A_RESTART),
        APP(99, "JPEG decoder error", A_RESTART),
        APP(100, "JPEG decoder error", A_RESTART),
        APP(101, "JPEG decoder error", A_RESTART),
        APP(102, "JPEG decoder error", A_RESTART),
        APP(103, "JPEG decoder error", A_RESTART),
        APP(104, "JPEG decoder error", A_RESTART),
        APP(105, "JPEG decoder error", A_RESTART),
        INFO(106, "SMBPBI test message", A_NONE),
        INFO(107, "SMBPBI test message (silent)", A_NONE),
        FENCE(109, "context-switch timeout", A_RESET),
        FENCE(110, "security fault", A_RESET),
        FENCE(119, "GSP RPC timeout", A_RESET),
        FENCE(120, "GSP error", A_RESET),
        INFO(121, "C2C link error (corrected)", A_NONE),
        APP(126, "copy engine error", A_RESTART),
        APP(127, "copy engine error", A_RESTART),
        APP(128, "copy engine error", A_RESTART),
        APP(129, "copy engine error", A_RESTART),
        APP(130, "copy engine error", A_RESTART),
        APP(131, "copy engine error", A_RESTART),
        APP(132, "copy engine error", A_RESTART),
        APP(133, "copy engine error", A_RESTART),
        APP(134, "copy engine error", A_RESTART),
        APP(135, "copy engine error", A_RESTART),
        FENCE(136, "link training failed", A_RESET),
        INFO(137, "NVLink FLA privilege error", A_NONE),
        APP(139, "optical flow accelerator error", A_RESTART),
        FENCE(140, "unrecoverable ECC error escaped containment", A_RESET),
        INFO(141, "CUDA fast path error", A_NONE),
        CHECK(142, "video encoder error", "contact NVIDIA support; restart the job"),
        FENCE(143, "GPU initialization error", A_RESET),
        CHECK(144, "NVLink5 SAW error, status not decoded", A_NVLINK5),
        CHECK(145, "NVLink5 RLW error, status not decoded", A_NVLINK5),
        CHECK(146, "NVLink5 TLW error, status not decoded", A_NVLINK5),
        CHECK(147, "NVLink5 TREX error, status not decoded", A_NVLINK5),
        CHECK(148, "NVLink5 NVLPW error, status not decoded", A_NVLINK5),
        CHECK(149, "NVLink5 NETIR error, status not decoded", A_NVLINK5),
        CHECK(150, "NVLink5 MSE error, status not decoded", A_NVLINK5),
        FENCE(151, "key rotation error (confidential computing)",
              "drain the GPU and restart its VM; contact support if it recurs"),
        INFO(152, "DLA SMMU error", A_NONE),
        INFO(153, "DLA timeout", A_NONE),
        INFO(154, "GPU recovery action changed",
             "read the recovery action (nvidia-smi -q) and the XID it names"),
        FENCE(155, "NVLink software-defined error", A_NVLINK),
        FENCE(156, "resource retirement event",
              "drain the GPU and reset it: the retirement takes effect at the reset"),
        INFO(157, "resource retirement failure", "none now; contact NVIDIA support if it recurs"),
        FENCE(158, "GPU fatal timeout", A_RESET),
        CHECK(159, "CHI non-data error",
              "check the unified-memory driver (nvidia-uvm) and the job's managed memory; "
              "restart the job"),
        INFO(160, "channel retirement event", A_NONE),
        INFO(161, "channel retirement failure", A_NONE),
        UNLISTED(162, "power smoothing circuitry re-engaged"),
        UNLISTED(163, "power smoothing circuitry disengaged"),
        UNLISTED(164, "power smoothing circuitry near the end of its lifetime"),
        UNLISTED(165, "power smoothing circuitry lifetime exhausted"),
        UNLISTED(166, "NVLink encrypted traffic before the link was set up for it"),
        FENCE(167, "PCIe fatal timeout",
              "drain the GPU and reset it or reboot; check the PCIe slot and riser; contact "
              "support if it recurs"),
        UNLISTED(168, "reduced GPU memory capacity (errors in the write-protected region)"),
        FENCE(169, "internal micro-controller (SEC2) halt", A_RESET),
        UNLISTED(170, "NVLink interrupt in confidential-computing mode"),
        FENCE(171, "uncorrectable DRAM error (with XID 48)",
              "drain the GPU; reset it or reboot to clear the error; check the ECC counters "
              "and row remapping"),
        FENCE(172, "uncorrectable SRAM error (with XID 48)",
              "drain the GPU; reset it or reboot to clear the error; check the ECC counters"),
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
	        .action =
	                "look the XID up in NVIDIA's XID catalog and the kernel log, and read the "
	                "recovery action (nvidia-smi -q) before trusting the GPU",
	};

	if (!ret_info || ret_info->struct_size < STRUCT_SIZE_MIN(struct gpuctl_xid_info, code))
		return -EINVAL;
	struct_fill(ret_info, e ? e : &unknown, sizeof(*ret_info));
	return 0;
}

/* ---- XIDs 144-150: the catalog's "XID 144-150 Decode" sheet ---- */

enum nv5_action {
	NV5_IGNORE,  /* IGNORE: non-fatal */
	NV5_EVAL154, /* XID_154_EVAL: the recovery action (XID 154) says what to do */
	NV5_RESET,   /* RESET_GPU: fatal */
};

/* One row: the XID, the unit as the driver names it ('/' between the sheet's alternatives),
 * the sub-code (intrinfo bits 25..20; 0 except for NETIR_LINK_EVT) and the error status. */
struct nv5_row {
	unsigned xid;
	const char *units;
	unsigned subcode;
	uint32_t status;
	enum nv5_action action;
};

static const struct nv5_row nv5_rows[] = {
        {144, "SAW_MVB", 0, 0x1u, NV5_IGNORE},
        {144, "SAW_MVB", 0, 0x2u, NV5_RESET},
        {144, "SAW_MVB", 0, 0x4u, NV5_IGNORE},
        {144, "SAW_MVB", 0, 0x8u, NV5_IGNORE},
        {144, "SAW_MVB", 0, 0x10u, NV5_RESET},
        {144, "SAW_MVB", 0, 0x20u, NV5_IGNORE},
        {145, "RLW_CTRL", 0, 0x80000000u, NV5_IGNORE},
        {145, "RLW_REMAP", 0, 0x1u, NV5_EVAL154},
        {145, "RLW_REMAP", 0, 0x2u, NV5_EVAL154},
        {145, "RLW_REMAP", 0, 0x4u, NV5_EVAL154},
        {145, "RLW_REMAP", 0, 0x8u, NV5_EVAL154},
        {145, "RLW_REMAP", 0, 0x10u, NV5_EVAL154},
        {145, "RLW_REMAP", 0, 0x20u, NV5_EVAL154},
        {145, "RLW_REMAP", 0, 0x40u, NV5_RESET},
        {145, "RLW_REMAP", 0, 0x80u, NV5_RESET},
        {145, "RLW_REMAP", 0, 0x100u, NV5_IGNORE},
        {145, "RLW_REMAP", 0, 0x200u, NV5_IGNORE},
        {145, "RLW_REMAP", 0, 0x80000000u, NV5_IGNORE},
        {145, "RLW_RSPCOL", 0, 0x1u, NV5_IGNORE},
        {145, "RLW_RSPCOL", 0, 0x2u, NV5_RESET},
        {145, "RLW_RSPCOL", 0, 0x80000000u, NV5_IGNORE},
        {145, "RLW_RXPIPE", 0, 0x1u, NV5_IGNORE},
        {145, "RLW_RXPIPE", 0, 0x2u, NV5_IGNORE},
        {145, "RLW_RXPIPE", 0, 0x4u, NV5_IGNORE},
        {145, "RLW_RXPIPE", 0, 0x8u, NV5_IGNORE},
        {145, "RLW_RXPIPE", 0, 0x80000000u, NV5_IGNORE},
        {145, "RLW_SRC_TRACK", 0, 0x1u, NV5_RESET},
        {145, "RLW_SRC_TRACK", 0, 0x2u, NV5_IGNORE},
        {145, "RLW_SRC_TRACK", 0, 0x4u, NV5_EVAL154},
        {145, "RLW_SRC_TRACK", 0, 0x8u, NV5_EVAL154},
        {145, "RLW_SRC_TRACK", 0, 0x10u, NV5_RESET},
        {145, "RLW_SRC_TRACK", 0, 0x20u, NV5_RESET},
        {145, "RLW_SRC_TRACK", 0, 0x80000000u, NV5_IGNORE},
        {145, "RLW_TAGSTATE", 0, 0x1u, NV5_IGNORE},
        {145, "RLW_TAGSTATE", 0, 0x2u, NV5_RESET},
        {145, "RLW_TAGSTATE", 0, 0x10000u, NV5_IGNORE},
        {145, "RLW_TAGSTATE", 0, 0x20000u, NV5_RESET},
        {145, "RLW_TAGSTATE", 0, 0x100000u, NV5_RESET},
        {145, "RLW_TAGSTATE", 0, 0x80000000u, NV5_IGNORE},
        {146, "TLW_CTRL", 0, 0x1u, NV5_IGNORE},
        {146, "TLW_CTRL", 0, 0x2u, NV5_IGNORE},
        {146, "TLW_CTRL", 0, 0x4u, NV5_RESET},
        {146, "TLW_CTRL", 0, 0x80000000u, NV5_IGNORE},
        {146, "TLW_RX/TLW_RX_PIPE0/TLW_RX_PIPE1", 0, 0x1u, NV5_IGNORE},
        {146, "TLW_RX/TLW_RX_PIPE0/TLW_RX_PIPE1", 0, 0x2u, NV5_IGNORE},
        {146, "TLW_RX/TLW_RX_PIPE0/TLW_RX_PIPE1", 0, 0x4u, NV5_RESET},
        {146, "TLW_RX/TLW_RX_PIPE0/TLW_RX_PIPE1", 0, 0x80000000u, NV5_IGNORE},
        {146, "TLW_TX/TLW_TX_PIPE0/TLW_TX_PIPE1", 0, 0x1u, NV5_IGNORE},
        {146, "TLW_TX/TLW_TX_PIPE0/TLW_TX_PIPE1", 0, 0x2u, NV5_IGNORE},
        {146, "TLW_TX/TLW_TX_PIPE0/TLW_TX_PIPE1", 0, 0x4u, NV5_RESET},
        {146, "TLW_TX/TLW_TX_PIPE0/TLW_TX_PIPE1", 0, 0x80000000u, NV5_IGNORE},
        {147, "TREX", 0, 0x1u, NV5_IGNORE},
        {147, "TREX", 0, 0x80000000u, NV5_IGNORE},
        {148, "NVLPW_CTRL/NVLPW", 0, 0x80000000u, NV5_IGNORE},
        {149, "NETIR/NETIR_INT", 0, 0x0u, NV5_RESET},
        {149, "NETIR_BER_EVENT", 0, 0x0u, NV5_IGNORE},
        {149, "NETIR_BER_EVENT", 0, 0x1u, NV5_IGNORE},
        {149, "NETIR_BER_EVENT", 0, 0x2u, NV5_IGNORE},
        {149, "NETIR_BER_EVENT", 0, 0x3u, NV5_IGNORE},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 0, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 1, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 2, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 4, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 10, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 15, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 16, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 17, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 18, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 21, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 22, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 32, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 33, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 34, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 35, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 36, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 37, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 38, 0x0u, NV5_IGNORE},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 40, 0x0u, NV5_IGNORE},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 42, 0x0u, NV5_RESET},
        {149, "NETIR_LINK_EVT/NETIR_LINK_DOWN", 43, 0x0u, NV5_RESET},
        {149, "NETIR_MFDE_EVENT", 0, 0x1u, NV5_RESET},
        {149, "NETIR_MFDE_EVENT", 0, 0x3u, NV5_IGNORE},
        {149, "NETIR_MFDE_EVENT", 0, 0x4u, NV5_RESET},
        {149, "NETIR_MFDE_EVENT", 0, 0x5u, NV5_RESET},
        {149, "NETIR_MFDE_EVENT", 0, 0x7u, NV5_RESET},
        {150, "MSE_WATCHDOG", 0, 0x0u, NV5_RESET},
};

static const struct gpuctl_xid_info nv5_outcome[] = {
        [NV5_IGNORE] = {.class_ = GPUCTL_XID_INFO,
                        .meaning = "NVLink5 error whose status the catalog grades non-fatal "
                                   "(IGNORE)",
                        .action = "none now (the catalog's IGNORE for this status); contact "
                                  "support if it recurs"},
        [NV5_EVAL154] = {.class_ = GPUCTL_XID_CHECK,
                         .meaning = "NVLink5 error whose status the catalog says to evaluate "
                                    "with XID 154",
                         .action = "read the recovery action (nvidia-smi -q, XID 154): reset "
                                   "the GPU if the driver asks for it; restart the job"},
        [NV5_RESET] = {.class_ = GPUCTL_XID_FENCE,
                       .meaning = "NVLink5 error whose status the catalog grades fatal "
                                  "(RESET_GPU)",
                       .action = "drain the GPU and reset it (the catalog's RESET_GPU for this "
                                 "status); contact support if it recurs"},
};

static const struct gpuctl_xid_info nv5_driver_fatal = {
        .class_ = GPUCTL_XID_FENCE,
        .meaning = "NVLink5 error the driver reports Fatal (a status the catalog's decode does "
                   "not list)",
        .action = A_NVLINK,
};
static const struct gpuctl_xid_info nv5_driver_nonfatal = {
        .class_ = GPUCTL_XID_CHECK,
        .meaning = "NVLink5 error the driver reports Nonfatal (a status the catalog's decode "
                   "does not list)",
        .action = A_NVLINK5,
};

/* Whether unit (len bytes) is one of the '/'-separated names of units. */
static bool unit_is(const char *units, const char *unit, size_t len)
{
	for (const char *p = units; *p;) {
		size_t n = strcspn(p, "/");

		if (n == len && strncmp(p, unit, len) == 0)
			return true;
		p += n;
		if (*p == '/')
			p++;
	}
	return false;
}

/* The row for (code, unit, sub-code, status), or NULL. */
static const struct nv5_row *nv5_find(unsigned code, const char *unit, size_t len, unsigned subcode,
                                      uint32_t status)
{
	for (size_t i = 0; i < ELEMENTSOF(nv5_rows); i++) {
		const struct nv5_row *r = &nv5_rows[i];

		if (r->xid == code && r->subcode == subcode && r->status == status &&
		    unit_is(r->units, unit, len))
			return r;
	}
	return NULL;
}

/* The driver's NVLink5 line: "... <UNIT> <Fatal|Nonfatal> XC<n> ... (0x<intrinfo> 0x<status>".
 * Fills the unit (pointer into text and length), the severity word (1 Fatal, 0 Nonfatal) and,
 * when the numbers follow, intrinfo and status (*ret_have_numbers). false when no such words. */
static bool nv5_parse(const char *text, const char **ret_unit, size_t *ret_len, int *ret_fatal,
                      bool *ret_have_numbers, uint32_t *ret_intrinfo, uint32_t *ret_status)
{
	static const char *const words[] = {" Fatal XC", " Nonfatal XC"};
	const char *sev = NULL, *u, *paren;
	int fatal = 0;
	unsigned long a, b;
	char *end;

	for (int w = 0; w < 2 && !sev; w++)
		if ((sev = strstr(text, words[w])))
			fatal = w == 0;
	if (!sev)
		return false;
	for (u = sev; u > text && (isupper((unsigned char)u[-1]) || isdigit((unsigned char)u[-1]) ||
	                           u[-1] == '_');
	     u--)
		;
	if (u == sev)
		return false;
	*ret_unit = u;
	*ret_len = (size_t)(sev - u);
	*ret_fatal = fatal;
	*ret_have_numbers = false;
	paren = strstr(sev, "(0x");
	if (!paren)
		return true;
	a = strtoul(paren + 1, &end, 16);
	if (end == paren + 1 || strncmp(end, " 0x", 3) != 0 || a > UINT32_MAX)
		return true;
	b = strtoul(end + 1, &end, 16);
	if (b > UINT32_MAX || !(*end == ' ' || *end == ')'))
		return true;
	*ret_intrinfo = (uint32_t)a;
	*ret_status = (uint32_t)b;
	*ret_have_numbers = true;
	return true;
}

/* Grades an NVLink5 XID line; NULL when the line does not say (caller keeps the code's entry). */
static const struct gpuctl_xid_info *nv5_grade(unsigned code, const char *text)
{
	const char *unit = NULL;
	size_t len = 0;
	int fatal = 0;
	bool numbers = false;
	uint32_t intrinfo = 0, status = 0;
	const struct nv5_row *r;

	if (!text || !nv5_parse(text, &unit, &len, &fatal, &numbers, &intrinfo, &status))
		return NULL;
	if (numbers) {
		unsigned subcode = (intrinfo >> 20) & 0x3f;
		int worst = -1;
		bool every_bit = status != 0;

		r = nv5_find(code, unit, len, subcode, status);
		if (r)
			return &nv5_outcome[r->action];
		/* several bits: each must have a row; the worst bit decides */
		for (unsigned bit = 0; bit < 32 && status; bit++) {
			if (!(status & (1u << bit)))
				continue;
			r = nv5_find(code, unit, len, subcode, 1u << bit);
			if (!r) {
				every_bit = false;
				break;
			}
			if ((int)r->action > worst)
				worst = (int)r->action;
		}
		if (every_bit && worst >= 0)
			return &nv5_outcome[worst];
	}
	return fatal ? &nv5_driver_fatal : &nv5_driver_nonfatal;
}

int gpuctl_xid_lookup_event(unsigned code, const char *text, struct gpuctl_xid_info *ret_info)
{
	const struct gpuctl_xid_info *g = code >= 144 && code <= 150 ? nv5_grade(code, text) : NULL;
	int r = gpuctl_xid_lookup(code, ret_info);

	if (r < 0 || !g)
		return r;
	struct gpuctl_xid_info info = *g;
	info.code = code;
	info.struct_size = sizeof(info);
	struct_fill(ret_info, &info, sizeof(info));
	return 0;
}

const char *gpuctl_xid_class_name(int class_)
{
	static const char *const names[] = {
	        [GPUCTL_XID_UNKNOWN] = "unknown",
	        [GPUCTL_XID_FENCE] = "fence",
	        [GPUCTL_XID_APPLICATION] = "application",
	        [GPUCTL_XID_INFO] = "info",
	        [GPUCTL_XID_CHECK] = "check",
	};

	if (class_ < 0 || (size_t)class_ >= ELEMENTSOF(names))
		return NULL;
	return names[class_];
}
