/* SPDX-License-Identifier: MIT */
/*
 * lease-internal.h: the parsers of src/lib/lease.c, for fuzz/fuzz-lease.c. Not part of the
 * public API (and not exported from libgpuctl.so: the version script keeps only gpuctl_*).
 */
#ifndef GPUCTL_LEASE_INTERNAL_H
#define GPUCTL_LEASE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

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
