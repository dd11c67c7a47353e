/* SPDX-License-Identifier: MIT */
/*
 * facts-cache.h: what a GPU cannot change until the machine boots again (its name, PCI bus id
 * and device id, slowdown temperature, maximum PCIe link width), kept from one gpuctl process to
 * the next so that a listing asks NVML only for what changes (facts-cache.c says the decisions;
 * docs/ARCHITECTURE.md, the nvml room's facts cache).
 */
#ifndef GPUCTL_FACTS_CACHE_H
#define GPUCTL_FACTS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/context.h"
#include "snapshot-internal.h"

#define FACTS_UUID_MAX 80 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define FACTS_NAME_MAX 96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define FACTS_BUS_MAX  32 /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */

/* One GPU's facts; a fact not known is not set (has_* false, empty string). */
struct facts_entry {
	char uuid[FACTS_UUID_MAX]; /* the key: "GPU-..." */
	char bus[FACTS_BUS_MAX];   /* GPUCTL_F_PCI_BUS_ID, NVML's "00000000:07:00.0" */
	char name[FACTS_NAME_MAX]; /* GPUCTL_F_NAME */
	int64_t device_id;         /* GPUCTL_F_PCI_DEVICE_ID */
	int64_t slowdown_c;        /* GPUCTL_F_TEMP_SLOWDOWN */
	int64_t width_max;         /* GPUCTL_F_PCIE_WIDTH_MAX */
	bool has_device_id, has_slowdown, has_width_max;
};

#define FACTS_DRIVER_MAX 160 /* the driver line kept, with its NUL */

/* The facts of one boot and driver. */
struct facts_cache {
	char boot_id[40];              /* /proc/sys/kernel/random/boot_id */
	char driver[FACTS_DRIVER_MAX]; /* the first line of the driver's /proc version file
	                                * ("" when there is none) */
	struct facts_entry *entries;   /* owned */
	size_t n;                      /* entries */
};

#define FACTS_CACHE_MAX_BYTES (64 * 1024) /* a larger file is not read */
#define FACTS_CACHE_MAX_GPUS  1024        /* entries kept */

/* The fields an entry holds, as a mask of FBIT(field). */
#define FACTS_CACHE_FIELDS                                                                         \
	((UINT64_C(1) << GPUCTL_F_PCI_BUS_ID) | (UINT64_C(1) << GPUCTL_F_PCI_DEVICE_ID) |          \
	 (UINT64_C(1) << GPUCTL_F_NAME) | (UINT64_C(1) << GPUCTL_F_TEMP_SLOWDOWN) |                \
	 (UINT64_C(1) << GPUCTL_F_PCIE_WIDTH_MAX))

/* Parses a cache file's text[0..len) (not NUL-terminated) into *ret when its boot line is
 * boot_id and its driver line driver: 0; -ESTALE for another boot's or driver's file; -EINVAL
 * for a text that is not a whole cache file of this format (one bad line rejects it all);
 * -ENOMEM. */
int facts_cache_parse(const char *text, size_t len, const char *boot_id, const char *driver,
                      struct facts_cache **ret);
struct sbuf;
/* Appends the text of c that facts_cache_parse reads back to b. */
void facts_cache_format(const struct facts_cache *c, struct sbuf *b);
/* Reads this boot's and driver's cache from the file $GPUCTL_FACTS_CACHE names, else
 * $XDG_RUNTIME_DIR/gpuctl-facts ("" or "off": none): NULL when there is none, or it cannot be
 * trusted or read (why, at debug level). */
struct facts_cache *facts_cache_load(struct gpuctl_ctx *ctx);
void facts_cache_free(struct facts_cache *c);
/* The entry of the GPU with this UUID, or NULL. */
const struct facts_entry *facts_cache_find(const struct facts_cache *c, const char *uuid);
/* Sets the facts of e into GPU gpu of snap, for the fields of want; returns those set. */
uint64_t facts_entry_apply(const struct facts_entry *e, struct gpuctl_snapshot *snap, size_t gpu,
                           uint64_t want);
/* Writes the cache file again when snap read a fact of a GPU that old (NULL: none) lacks,
 * keeping old's entries of other GPUs. Never fails: what cannot be written is said at debug
 * level. */
void facts_cache_update(struct gpuctl_ctx *ctx, const struct facts_cache *old,
                        const struct gpuctl_snapshot *snap);

#endif /* GPUCTL_FACTS_CACHE_H */
