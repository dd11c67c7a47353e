/* SPDX-License-Identifier: MIT */
/*
 * devnode-internal.h: the pure readers behind the device-node map (devnode-parse.c): the
 * driver's mig-minors table and the kernel's /proc/devices. Linked by fuzz/fuzz-devnode.c.
 */
#ifndef GPUCTL_DEVNODE_INTERNAL_H
#define GPUCTL_DEVNODE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One line of /proc/driver/nvidia-caps/mig-minors. */
enum devnode_cap_kind {
	DEVNODE_CAP_OTHER, /* a capability of no MIG device ("config", "monitor", ...) */
	DEVNODE_CAP_GI,    /* "gpuG/giI/access N" */
	DEVNODE_CAP_CI,    /* "gpuG/giI/ciC/access N" */
};

struct devnode_cap {
	enum devnode_cap_kind kind;
	uint32_t gpu;   /* G: the GPU's device minor (N of /dev/nvidiaN) */
	uint32_t gi;    /* I: the GPU instance id */
	uint32_t ci;    /* C: the compute instance id (DEVNODE_CAP_CI) */
	uint32_t minor; /* N of /dev/nvidia-caps/nvidia-capN */
};

/* Minor numbers are below 2^20, majors below 2^12 (the kernel's MINORBITS and dev_t). */
#define DEVNODE_MINOR_LIMIT (1u << 20)
#define DEVNODE_MAJOR_LIMIT (1u << 12)

/* Line line[0..len) (no newline) of mig-minors: "NAME MINOR", NAME without blanks, MINOR
 * decimal below DEVNODE_MINOR_LIMIT. False when it is not such a line. */
bool devnode_mig_line(const char *line, size_t len, struct devnode_cap *ret);
/* The MIG lines (DEVNODE_CAP_GI, _CI) of mig-minors text[0..len), read once: *ret (malloc'ed;
 * NULL when none) and *ret_n. 0 or -ENOMEM. */
int devnode_mig_table(const char *text, size_t len, struct devnode_cap **ret, size_t *ret_n);
/* The minor of GPU instance gi of the GPU of device minor gpu (ci < 0), or of its compute
 * instance ci, among caps[0..n); false when no line names it (the first that does counts). */
bool devnode_mig_find(const struct devnode_cap *caps, size_t n, uint32_t gpu, uint32_t gi, int ci,
                      uint32_t *ret_minor);
/* The major of character device driver name in /proc/devices text[0..len) (its "Character
 * devices:" section: "%3d %s" lines); false when it is not listed. */
bool devnode_char_major(const char *text, size_t len, const char *name, uint32_t *ret_major);

#endif /* GPUCTL_DEVNODE_INTERNAL_H */
