/* SPDX-License-Identifier: MIT */
/*
 * test-fixtures.h: synthetic machines and scratch directories that several unit tests share
 * (test-ids, test-config, test-lease, test-wait). Header-only: every helper is static, marked
 * unused so a test that needs only some of them builds with -Werror.
 */
#ifndef GPUCTL_TEST_FIXTURES_H
#define GPUCTL_TEST_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"

#define FIXTURE_UNUSED __attribute__((unused))

/* 8 GPUs for id resolution: 0, 4 and 7 share the UUID prefix "12", 4 and 7 share "1234"; GPU 6
 * is in PCI domain 1. */
static const char *const fixture_uuids[] FIXTURE_UNUSED = {
        "GPU-12ab0000-1111-2222-3333-444444444444", "GPU-abcdef01-1111-2222-3333-444444444444",
        "GPU-abcdef02-1111-2222-3333-444444444444", "GPU-fedcba98-1111-2222-3333-444444444444",
        "GPU-1234aaaa-1111-2222-3333-444444444444", "GPU-55555555-1111-2222-3333-444444444444",
        "GPU-66666666-1111-2222-3333-444444444444", "GPU-1234bbbb-1111-2222-3333-444444444444",
};
static const char *const fixture_buses[] FIXTURE_UNUSED = {
        "00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
        "00000000:87:00.0", "00000000:90:00.0", "00000001:B7:00.0", "00000000:BD:00.0",
};

/* Those 8 GPUs with their UUIDs and PCI bus ids, nothing else. */
static FIXTURE_UNUSED struct gpuctl_snapshot *fixture_snap8(void)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(8, GPUCTL_SNAP_BASIC);

	assert_non_null(s);
	for (size_t i = 0; i < 8; i++) {
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_UUID, fixture_uuids[i]), 0);
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_PCI_BUS_ID, fixture_buses[i]), 0);
	}
	return s;
}

/* n GPUs whose UUIDs end in their index in hex (fixture_uuid_of), for the lease tests. */
static FIXTURE_UNUSED const char *fixture_uuid_of(size_t i)
{
	static char u[64];

	(void)snprintf(u, sizeof(u), "GPU-00000000-0000-0000-0000-%012zx", i);
	return u;
}

static FIXTURE_UNUSED struct gpuctl_snapshot *fixture_snap_n(size_t n, unsigned flags)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(n, flags);

	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_UUID, fixture_uuid_of(i)), 0);
	return s;
}

/* Growable structs (a leading struct_size, gpuctl.h): a caller's struct in a buffer of size bytes
 * filled with FIXTURE_CANARY but for its struct_size; after the call, every byte from `from` on
 * must still be the canary (the library wrote nothing past what the caller said it has). */
#define FIXTURE_CANARY 0xA5
/* A caller's struct of that type with room past its end, for the canary to fill. */
#define FIXTURE_ROOMY(type)                                                                        \
	union {                                                                                    \
		type s;                                                                            \
		unsigned char bytes[sizeof(type) + 32];                                            \
	}
static FIXTURE_UNUSED void fixture_canary_fill(void *buf, size_t size, size_t struct_size)
{
	memset(buf, FIXTURE_CANARY, size);
	memcpy(buf, &struct_size, sizeof(struct_size));
}

static FIXTURE_UNUSED void fixture_assert_canary(const void *buf, size_t from, size_t size)
{
	for (size_t i = from; i < size; i++)
		if (((const unsigned char *)buf)[i] != FIXTURE_CANARY)
			fail_msg("byte %zu written, past the caller's struct_size %zu", i, from);
}

/* A scratch directory /tmp/PREFIX-XXXXXX (mode 0755, so the lease code's checks of its parent
 * pass) into base[size], and base/d into ldir[lsize] for a lease directory not yet made. */
static FIXTURE_UNUSED int fixture_tmpdir(const char *prefix, char *base, size_t size, char *ldir,
                                         size_t lsize)
{
	(void)snprintf(base, size, "/tmp/%s-XXXXXX", prefix);
	if (!mkdtemp(base))
		return -1;
	(void)chmod(base, 0755);
	(void)snprintf(ldir, lsize, "%s/d", base);
	return 0;
}

static FIXTURE_UNUSED void fixture_rm_rf(const char *path)
{
	char cmd[600];

	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	assert_int_equal(system(cmd), 0);
}

/* gpuctl_lease_dir_open of dir, failing the test with the library's message. */
static FIXTURE_UNUSED struct gpuctl_lease_dir *fixture_lease_dir(struct gpuctl_ctx *ctx,
                                                                 const char *dir)
{
	struct gpuctl_lease_dir *d = NULL;

	if (gpuctl_lease_dir_open(ctx, dir, &d) < 0)
		fail_msg("gpuctl_lease_dir_open '%s': %s", dir, gpuctl_errmsg(ctx));
	return d;
}

#endif /* GPUCTL_TEST_FIXTURES_H */
