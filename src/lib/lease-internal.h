/* SPDX-License-Identifier: MIT */
/*
 * lease-internal.h: what the lease files of src/lib share, and the parsers of other users' files
 * that fuzz/fuzz-lease.c drives. Not part of the public API (and not exported from
 * libgpuctl.so: the version script keeps only gpuctl_*); every function declared here is named
 * lease_*, so that the static library cannot collide with a user's symbol.
 */
#ifndef GPUCTL_LEASE_INTERNAL_H
#define GPUCTL_LEASE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/gpuctl.h"

/* ---- lease-share.c: the memory shared leases declare ---- */

#define SHARE_UNIT (1024u * 1024u) /* bytes per locked byte of a shared lease */

/* The units (SHARE_UNIT bytes each) that the shared leases on fd's lock file declare, counted
 * from the kernel's OFD locks: 0, or -errno (-E2BIG: too many ranges to follow). */
int lease_share_used(int fd, uint64_t *ret_used);

/* Locks need units of the free space below cap (units) on fd, lowest first: 0, -ENOSPC when
 * there is not that much, or -errno. Under select.lock: nothing else places ranges meanwhile. */
int lease_share_take(int fd, uint64_t need, uint64_t cap);

/* The units of device (g, mig) of snap that shared leases may declare: its memory less lr's
 * margin (0 when its memory is unknown: nothing can be shared on it). */
uint64_t lease_share_capacity(const struct gpuctl_snapshot *snap, size_t g, int mig,
                              const struct gpuctl_lease_request *lr);

/* ---- the parsers, for fuzz/fuzz-lease.c ---- */

/* Parses an owner record of len bytes as the record of device uuid (docs/leases.md): 0, or
 * -EINVAL for anything the reader refuses. */
int lease_record_parse_text(const char *text, size_t len, const char *uuid);

/* Parses a waiter's ticket of len bytes (docs/leases.md "Waiting"): true when it is well-formed
 * (a ticket with a NUL byte is not). */
bool lease_ticket_parse_text(const char *text, size_t len);

/* Parses a record file name ("<UUID>.json", "<UUID>@<tag>.json"): true when it names a record;
 * then uuid (UUID_MAX + 1 = 97 bytes) gets the UUID and *ret_shared the kind. */
bool lease_record_name_parse(const char *name, char *uuid, bool *ret_shared);

#endif /* GPUCTL_LEASE_INTERNAL_H */
