// SPDX-License-Identifier: MIT
/*
 * test-config.c: the configuration file (src/lib/config/: config.c, config-file.c,
 * config-pools.c): a full valid file read back, the defaults, every error class with its line,
 * comments, ranges, pool maps on a synthetic 8-GPU snapshot, share margins, pool permissions and
 * loading files.
 *
 * Decisions:
 * - Expected values come from docs/config.md (the format written before the code), not from
 *   running the parser.
 * - Permission tests need a user with a passwd entry who is not root (root may draw from every
 *   pool): the current user, or "nobody" when the tests run as root; skipped if neither exists.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"
#include "test-fixtures.h"

#define GiB (UINT64_C(1) << 30)
#define MiB (UINT64_C(1) << 20)

static struct gpuctl_ctx *ctx;

static int setup(void **state)
{
	(void)state;
	return gpuctl_ctx_new(&ctx);
}

static int teardown(void **state)
{
	(void)state;
	gpuctl_ctx_free(ctx);
	ctx = NULL;
	return 0;
}

static struct gpuctl_config *parse_ok(const char *text)
{
	struct gpuctl_config *cfg = NULL;
	int r = gpuctl_config_parse(ctx, "t.conf", text, strlen(text), &cfg);

	if (r < 0)
		fail_msg("parse failed (%d): %s\n---\n%s", r, gpuctl_errmsg(ctx), text);
	assert_non_null(cfg);
	return cfg;
}

/* Expects -EINVAL with "t.conf:LINE: " and every NULL-terminated piece in the message; the
 * out-parameter untouched. */
static void parse_err_len(const char *text, size_t len, unsigned line, ...)
{
	struct gpuctl_config *cfg = (struct gpuctl_config *)0x1;
	char prefix[32];
	const char *m, *piece;
	va_list ap;
	int r = gpuctl_config_parse(ctx, "t.conf", text, len, &cfg);

	if (r != -EINVAL)
		fail_msg("expected -EINVAL, got %d for:\n%s", r, text);
	assert_ptr_equal(cfg, (struct gpuctl_config *)0x1);
	m = gpuctl_errmsg(ctx);
	assert_null(strchr(m, '\n'));
	(void)snprintf(prefix, sizeof(prefix), "t.conf:%u: ", line);
	if (strncmp(m, prefix, strlen(prefix)) != 0)
		fail_msg("message '%s' does not start with '%s'", m, prefix);
	va_start(ap, line);
	while ((piece = va_arg(ap, const char *)))
		if (!strstr(m, piece))
			fail_msg("message '%s' lacks '%s'", m, piece);
	va_end(ap);
}
#define parse_err(text, line, ...) parse_err_len(text, strlen(text), line, __VA_ARGS__, NULL)

static void test_full_file(void **state)
{
	static const char text[] = "# gpuctl configuration\n"
	                           "\n"
	                           "lease_dir = /run/gpuctl-test   # shared leases\n"
	                           "  busy_memory=512MiB\n"
	                           "busy_utilization = 10%\n"
	                           "share_margin = 2GiB\n"
	                           "ledger = /srv/gpuctl/ledger.db\n"
	                           "dev_dir = /srv/dev\n"
	                           "\n"
	                           "[pool training]\n"
	                           "gpus = 0-3, 7\n"
	                           "users = alice, 1001\n"
	                           "groups = ml, 2000\n"
	                           "description = The training team's GPUs (room#2) # a comment\n"
	                           "\t[ pool  inference.v2 ]  \n"
	                           "gpus = GPU-55555555, 00000001:B7:00.0\n"
	                           "users = *\n"
	                           "[pool 9open_]\n"
	                           "gpus = 4\n";
	struct gpuctl_config *cfg = parse_ok(text);
	const struct gpuctl_config_settings *st = gpuctl_config_settings(cfg);
	const char *name = NULL, *desc = NULL;
	const char *const *users = NULL, *const *groups = NULL;
	bool restricted = false;
	uint32_t uid = 7, mode = 7;

	(void)state;
	assert_null(gpuctl_config_path(cfg));
	assert_int_equal(gpuctl_config_file_owner(cfg, &uid, &mode), -ENOENT);
	assert_string_equal(st->lease_dir, "/run/gpuctl-test");
	assert_true(st->busy_memory == 512 * MiB);
	assert_int_equal(st->busy_utilization, 10);
	assert_false(st->share_margin_is_pct);
	assert_true(st->share_margin == 2 * GiB);
	assert_true(gpuctl_config_share_margin(cfg, 80 * GiB) == 2 * GiB);
	assert_string_equal(st->ledger, "/srv/gpuctl/ledger.db");
	assert_string_equal(st->dev_dir, "/srv/dev");

	assert_int_equal(gpuctl_config_pool_count(cfg), 3);
	assert_int_equal(gpuctl_config_pool_get(cfg, 0, &name, &desc, &restricted, &users, &groups),
	                 0);
	assert_string_equal(name, "training");
	assert_string_equal(desc, "The training team's GPUs (room#2)");
	assert_true(restricted);
	assert_string_equal(users[0], "alice");
	assert_string_equal(users[1], "1001");
	assert_null(users[2]);
	assert_string_equal(groups[0], "ml");
	assert_string_equal(groups[1], "2000");
	assert_null(groups[2]);

	assert_int_equal(gpuctl_config_pool_get(cfg, 1, &name, &desc, &restricted, &users, &groups),
	                 0);
	assert_string_equal(name, "inference.v2");
	assert_null(desc);
	assert_false(restricted); /* users = *: everyone */
	assert_string_equal(users[0], "*");
	assert_null(users[1]);
	assert_null(groups[0]);

	assert_int_equal(gpuctl_config_pool_get(cfg, 2, &name, &desc, &restricted, &users, &groups),
	                 0);
	assert_string_equal(name, "9open_");
	assert_false(restricted);
	assert_null(users[0]);
	assert_null(groups[0]);
	assert_int_equal(gpuctl_config_pool_get(cfg, 3, &name, NULL, NULL, NULL, NULL), -EINVAL);

	struct gpuctl_snapshot *snap = fixture_snap8();
	int *map = NULL;
	static const int want[8] = {0, 0, 0, 0, 2, 1, 1, 0};

	assert_int_equal(gpuctl_config_pool_map(ctx, cfg, snap, &map), 0);
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(map[i], want[i]);
	free(map);
	gpuctl_snapshot_free(snap);
	gpuctl_config_free(cfg);
}

static void check_defaults(const struct gpuctl_config *cfg)
{
	const struct gpuctl_config_settings *st = gpuctl_config_settings(cfg);

	assert_null(st->lease_dir);
	assert_null(st->ledger);
	assert_null(st->dev_dir);
	assert_true(st->busy_memory == 0);
	assert_int_equal(st->busy_utilization, -1);
	assert_true(st->share_margin_is_pct);
	assert_true(st->share_margin == 5);
	assert_int_equal(gpuctl_config_pool_count(cfg), 0);
}

static void test_defaults(void **state)
{
	struct gpuctl_config *cfg = NULL;
	struct gpuctl_snapshot *snap = fixture_snap8();
	int *map = NULL;

	(void)state;
	assert_int_equal(gpuctl_config_parse(ctx, "t.conf", NULL, 0, &cfg), 0);
	check_defaults(cfg);
	assert_int_equal(gpuctl_config_pool_map(ctx, cfg, snap, &map), 0);
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(map[i], -1);
	free(map);
	gpuctl_config_free(cfg);

	cfg = parse_ok("# only comments\n\n   \t\n  # indented comment\n");
	check_defaults(cfg);
	gpuctl_config_free(cfg);

	check_defaults(NULL); /* NULL reads as the empty configuration */
	gpuctl_config_free(NULL);
	gpuctl_snapshot_free(snap);
}

static void test_comments(void **state)
{
	/* No newline at the end; CRLF line ends; '#' inside a value is kept. */
	struct gpuctl_config *cfg = parse_ok("busy_memory = 1GiB\t# tab before the hash\r\n"
	                                     "# lease_dir = relative\r\n"
	                                     "[pool a] # a comment after a header\n"
	                                     "gpus = 0 # zero\n"
	                                     "description = a#b #c\n"
	                                     "users=#1");
	const char *desc = NULL;
	const char *const *users = NULL;

	(void)state;
	assert_true(gpuctl_config_settings(cfg)->busy_memory == GiB);
	assert_null(gpuctl_config_settings(cfg)->lease_dir);
	assert_int_equal(gpuctl_config_pool_get(cfg, 0, NULL, &desc, NULL, &users, NULL), 0);
	assert_string_equal(desc, "a#b");
	assert_string_equal(users[0], "#1"); /* no blank before '#': a value */
	gpuctl_config_free(cfg);
}

static void test_errors(void **state)
{
	char big[5000];

	(void)state;
	/* the documented example, exactly */
	parse_err("[pool training]\ngpus = 0\ngpu = 1\n", 3, "unknown key");
	assert_string_equal(gpuctl_errmsg(ctx),
	                    "t.conf:3: unknown key 'gpu' in [pool training] (expected gpus, users, "
	                    "groups, description, idle_warn, idle_release, max_lease_age, enforce, "
	                    "violation_action, terminate_grace or terminate_system)");
	/* unknown key, key in the wrong section */
	parse_err("lease_dri = /run/x\n", 1, "unknown key 'lease_dri'");
	parse_err("ledger = var/ledger.db\n", 1, "ledger 'var/ledger.db': not an absolute path");
	parse_err("dev_dir = dev\n", 1, "dev_dir 'dev': not an absolute path");
	parse_err("[pool a]\ngpus = 0\ndev_dir = /dev\n", 3, "'dev_dir'", "global");
	parse_err("# c\ngpus = 0\n", 2, "'gpus'", "[pool NAME]");
	parse_err("[pool a]\ngpus = 0\nbusy_memory = 1GiB\n", 3, "'busy_memory'", "global");
	/* repeated keys */
	parse_err("busy_memory = 1GiB\n# c\nbusy_memory = 2GiB\n", 3, "'busy_memory'", "twice",
	          "first on line 1");
	parse_err("[pool a]\ngpus = 0\n\ngpus = 1\n", 4, "'gpus'", "twice", "first on line 2",
	          "[pool a]");
	parse_err("[pool a]\ngpus = 0\nusers = x\nusers = y\n", 4, "'users'", "twice");
	/* missing '=', empty value, missing key */
	parse_err("lease_dir /run/x\n", 1, "missing '='", "lease_dir /run/x");
	parse_err("busy_memory =\n", 1, "empty value", "'busy_memory'");
	parse_err("\nbusy_memory =   # nothing\n", 2, "empty value", "'busy_memory'");
	parse_err("[pool a]\ngpus = 0\ndescription=\n", 3, "empty value", "'description'");
	parse_err("= 3\n", 1, "missing key");
	/* bad values */
	parse_err("busy_memory = 10\n", 1, "busy_memory '10'", "unit");
	parse_err("busy_memory = 10Gib\n", 1, "busy_memory '10Gib'");
	parse_err("busy_memory = -1GiB\n", 1, "busy_memory '-1GiB'");
	parse_err("busy_utilization = 101\n", 1, "busy_utilization '101'");
	parse_err("busy_utilization = ten\n", 1, "busy_utilization 'ten'");
	parse_err("lease_dir = run/gpuctl\n", 1, "lease_dir 'run/gpuctl'", "absolute");
	parse_err("lease_dir = /run/a\tb\n", 1, "lease_dir '/run/a?b'", "control");
	parse_err("share_margin = 60%\n", 1, "share_margin '60%'");
	parse_err("share_margin = 51%\n", 1, "share_margin '51%'");
	parse_err("share_margin = 5\n", 1, "share_margin '5'");
	parse_err("share_margin = x%\n", 1, "share_margin 'x%'");
	parse_err("[pool a]\ngpus = 0\ndescription = a\001b\n", 3, "'a?b'", "control");
	/* list entries */
	parse_err("[pool a]\ngpus = 0,,1\n", 2, "gpus", "entry 2", "empty");
	parse_err("[pool a]\ngpus = 0,\n", 2, "gpus", "entry 2", "empty");
	parse_err("[pool a]\ngpus = 0 1\n", 2, "gpus", "'0 1'");
	parse_err("[pool a]\ngpus = 5-2\n", 2, "gpus", "'5-2'", "backwards");
	parse_err("[pool a]\ngpus = 99999999999999999999\n", 2, "gpus", "too large");
	parse_err("[pool a]\ngpus = 0\ngroups = *\n", 3, "groups", "'*'");
	parse_err("[pool a]\ngpus = 0\nusers = a:b\n", 3, "users", "'a:b'");
	parse_err("[pool a]\ngpus = 0\nusers = 4294967295\n", 3, "users", "'4294967295'");
	/* headers */
	parse_err("[pool a\n", 1, "'[pool a'", "[pool NAME]");
	parse_err("[team a]\n", 1, "'[team a]'", "[pool NAME]");
	parse_err("[poola]\n", 1, "'[poola]'", "[pool NAME]");
	parse_err("[pool a] junk\n", 1, "[pool NAME]");
	parse_err("[pool]\n", 1, "names no pool");
	parse_err("[pool -a]\n", 1, "bad pool name '-a'");
	parse_err("[pool a b]\n", 1, "bad pool name 'a b'");
	parse_err("[pool a/b]\n", 1, "bad pool name 'a/b'");
	parse_err("[pool a2345678901234567890123456789012345678901234567890123456789012345]\n", 1,
	          "bad pool name");
	gpuctl_config_free(parse_ok(
	        "[pool a234567890123456789012345678901234567890123456789012345678901234]\ngpus = "
	        "0\n"));
	parse_err("[pool default]\n", 1, "'default'", "reserved");
	parse_err("[pool a]\ngpus = 0\n\n[pool b]\ngpus = 1\n[pool a]\n", 6, "'a'", "twice",
	          "first on line 1");
	/* a pool without gpus: the line of its header, also at the end of the file */
	parse_err("[pool a]\nusers = x\n[pool b]\ngpus = 1\n", 1, "[pool a]", "'gpus'");
	parse_err("[pool a]\ngpus = 0\n# c\n[pool b]\n# end\n", 4, "[pool b]", "'gpus'");
	/* NUL bytes, long lines, big files */
	static const char nul[] = "# ok\nbusy\0_memory = 1GiB\n";
	parse_err_len(nul, sizeof(nul) - 1, 2, "NUL", NULL);
	memset(big, 'x', sizeof(big));
	memcpy(big, "# ", 2);
	big[4097] = '\n';
	parse_err_len(big, 4098, 1, "4096", NULL);
	big[4096] = '\n'; /* a 4096-byte comment line is fine */
	struct gpuctl_config *cfg = NULL;
	assert_int_equal(gpuctl_config_parse(ctx, "t.conf", big, 4097, &cfg), 0);
	gpuctl_config_free(cfg);

	char *huge = malloc(1024 * 1024 + 1);
	assert_non_null(huge);
	memset(huge, '\n', 1024 * 1024 + 1);
	cfg = (struct gpuctl_config *)0x1;
	assert_int_equal(gpuctl_config_parse(ctx, "t.conf", huge, 1024 * 1024 + 1, &cfg), -EINVAL);
	assert_ptr_equal(cfg, (struct gpuctl_config *)0x1);
	assert_string_equal(gpuctl_errmsg(ctx), "t.conf: larger than 1 MiB (1048577 bytes)");
	cfg = NULL;
	assert_int_equal(gpuctl_config_parse(ctx, "t.conf", huge, 1024 * 1024, &cfg), 0);
	gpuctl_config_free(cfg);
	free(huge);

	/* echoed text is escaped: a control byte in a key is shown as '?' */
	parse_err("ga\033[2Jp = 1\n", 1, "unknown key 'ga?[2Jp'");
}

/* Parses text and maps it on the 8-GPU snapshot; want[8] or an error line and pieces. */
static void map_ok(const char *text, const int *want)
{
	struct gpuctl_config *cfg = parse_ok(text);
	struct gpuctl_snapshot *snap = fixture_snap8();
	int *map = NULL;

	if (gpuctl_config_pool_map(ctx, cfg, snap, &map) < 0)
		fail_msg("map failed: %s\n---\n%s", gpuctl_errmsg(ctx), text);
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(map[i], want[i]);
	free(map);
	gpuctl_snapshot_free(snap);
	gpuctl_config_free(cfg);
}

static void map_err(const char *text, unsigned line, const char *a, const char *b)
{
	struct gpuctl_config *cfg = parse_ok(text);
	struct gpuctl_snapshot *snap = fixture_snap8();
	int *map = (int *)0x1;
	char prefix[32];
	const char *m;

	assert_int_equal(gpuctl_config_pool_map(ctx, cfg, snap, &map), -EINVAL);
	assert_ptr_equal(map, (int *)0x1);
	m = gpuctl_errmsg(ctx);
	(void)snprintf(prefix, sizeof(prefix), "t.conf:%u: ", line);
	if (strncmp(m, prefix, strlen(prefix)) != 0 || !strstr(m, a) || (b && !strstr(m, b)))
		fail_msg("message '%s': want '%s', '%s', '%s'", m, prefix, a, b ? b : "");
	assert_null(strchr(m, '\n'));
	gpuctl_snapshot_free(snap);
	gpuctl_config_free(cfg);
}

/* docs/config.md "Idle actions": global defaults, a pool's own keys override them (0: off). */
static void test_idle_actions(void **state)
{
	struct gpuctl_config_idle c;
	struct gpuctl_config *cfg;

	(void)state;
	cfg = parse_ok("idle_warn = 10m\nidle_release = 30m\n"
	               "[pool a]\ngpus = 0\nidle_release = 0\nmax_lease_age = 7d\n"
	               "[pool b]\ngpus = 1\n");
	gpuctl_config_pool_idle(cfg, 0, &c);
	assert_true(c.idle_warn_s == 600 && c.idle_release_s == 0 && c.max_lease_age_s == 604800);
	gpuctl_config_pool_idle(cfg, 1, &c);
	assert_true(c.idle_warn_s == 600 && c.idle_release_s == 1800 && c.max_lease_age_s == 0);
	gpuctl_config_pool_idle(cfg, SIZE_MAX, &c); /* the default pool */
	assert_true(c.idle_warn_s == 600 && c.idle_release_s == 1800 && c.max_lease_age_s == 0);
	gpuctl_config_free(cfg);
	gpuctl_config_pool_idle(NULL, 0, &c);
	assert_true(c.idle_warn_s == 0 && c.idle_release_s == 0 && c.max_lease_age_s == 0);
	parse_err("idle_release = 30\n", 1, "idle_release '30': not a duration");
	parse_err("\nmax_lease_age = 400d\n", 2, "max_lease_age '400d': longer than 366 days");
	parse_err("[pool a]\ngpus = 0\nidle_warn = 1m\nidle_warn = 2m\n", 4, "'idle_warn'", "twice",
	          "first on line 3");
	parse_err("idle_warn =\n", 1, "empty value", "'idle_warn'");
	parse_err("idle_warn = 1m # x\nidle_warn=2s\n", 2, "twice");
}

/* docs/config.md "Enforcement": global defaults, a pool's own keys override them; defaults off,
 * log, 10s, no. */
static void test_enforce(void **state)
{
	struct gpuctl_config_enforce e;
	struct gpuctl_config *cfg;

	(void)state;
	gpuctl_config_pool_enforce(NULL, 0, &e);
	assert_true(e.enforce == GPUCTL_ENFORCE_OFF && e.action == GPUCTL_VIOLATION_LOG &&
	            e.terminate_grace_s == 10 && !e.terminate_system);
	cfg = parse_ok("[pool a]\ngpus = 0\n");
	gpuctl_config_pool_enforce(cfg, 0, &e);
	assert_true(e.enforce == GPUCTL_ENFORCE_OFF && e.action == GPUCTL_VIOLATION_LOG &&
	            e.terminate_grace_s == 10 && !e.terminate_system);
	gpuctl_config_free(cfg);
	cfg = parse_ok("enforce = watch\nviolation_action = notify\nterminate_grace = 1m\n"
	               "[pool a]\ngpus = 0\nenforce = off\nviolation_action = terminate\n"
	               "terminate_system = yes\n"
	               "[pool b]\ngpus = 1\nenforce = cgroup\nterminate_grace = 0\n"
	               "[pool c]\ngpus = 2\nenforce = acl # ACLs\n");
	gpuctl_config_pool_enforce(cfg, 0, &e);
	assert_true(e.enforce == GPUCTL_ENFORCE_OFF && e.action == GPUCTL_VIOLATION_TERMINATE &&
	            e.terminate_grace_s == 60 && e.terminate_system);
	gpuctl_config_pool_enforce(cfg, 1, &e);
	assert_true(e.enforce == GPUCTL_ENFORCE_CGROUP && e.action == GPUCTL_VIOLATION_NOTIFY &&
	            e.terminate_grace_s == 0 && !e.terminate_system);
	gpuctl_config_pool_enforce(cfg, 2, &e);
	assert_true(e.enforce == GPUCTL_ENFORCE_ACL && e.action == GPUCTL_VIOLATION_NOTIFY &&
	            e.terminate_grace_s == 60);
	gpuctl_config_pool_enforce(cfg, SIZE_MAX, &e); /* the default pool: the global keys */
	assert_true(e.enforce == GPUCTL_ENFORCE_WATCH && e.action == GPUCTL_VIOLATION_NOTIFY &&
	            e.terminate_grace_s == 60 && !e.terminate_system);
	gpuctl_config_free(cfg);
	assert_string_equal(gpuctl_enforce_name(GPUCTL_ENFORCE_CGROUP), "cgroup");
	assert_null(gpuctl_enforce_name((enum gpuctl_enforce)4));
	assert_string_equal(gpuctl_violation_action_name(GPUCTL_VIOLATION_NOTIFY), "notify");
	assert_null(gpuctl_violation_action_name((enum gpuctl_violation_action)3));
	parse_err("enforce = on\n", 1, "enforce 'on': not off, watch, acl or cgroup");
	parse_err("enforce = Watch\n", 1, "enforce 'Watch'");
	parse_err("\nviolation_action = kill\n", 2,
	          "violation_action 'kill': not log, notify or terminate");
	parse_err("terminate_system = true\n", 1, "terminate_system 'true': not no or yes");
	parse_err("terminate_grace = 10\n", 1, "terminate_grace '10': not a duration");
	parse_err("terminate_grace = 400d\n", 1, "terminate_grace '400d': longer than 366 days");
	parse_err("[pool a]\ngpus = 0\nenforce = watch\nenforce = acl\n", 4, "'enforce'", "twice",
	          "first on line 3");
	parse_err("enforce =\n", 1, "empty value", "'enforce'");
	parse_err("[pool a]\ngpus = 0\nenforcement = watch\n", 3, "unknown key 'enforcement'",
	          "terminate_system)");
}

/* docs/config.md "Quotas": a user's own entry, else the most generous of their groups', else the
 * default; a pool's key replaces the global list; root has none. uids without a passwd entry
 * (4000001, 4000002) match by number only; 65534 (Debian's nobody, primary group 65534) by its
 * group too. */
static void test_quotas(void **state)
{
	struct gpuctl_config_quota q;
	struct gpuctl_config *cfg;

	(void)state;
	cfg = parse_ok("quota_gpus = 2, 4000001:5, @65534:3\n"
	               "quota_lease_length = 8h, 4000001:unlimited\n"
	               "quota_gpu_hours_day = 24.5\n"
	               "quota_gpu_hours_week = 100, @65534 : unlimited\n"
	               "[pool a]\ngpus = 0\nquota_gpus = 4\n"
	               "[pool b]\ngpus = 1\nquota_gpu_hours_week = 0.001, 4000002:0\n");
	assert_true(gpuctl_config_has_quota(cfg));
	assert_int_equal(gpuctl_config_pool_quota(ctx, cfg, SIZE_MAX, 4000001, &q), 0);
	assert_true(q.gpus == 5 && q.lease_length_s == 0 && q.gpu_hours_day == 24.5 &&
	            q.gpu_hours_week == 100);
	assert_int_equal(gpuctl_config_pool_quota(ctx, cfg, SIZE_MAX, 4000002, &q), 0);
	assert_true(q.gpus == 2 && q.lease_length_s == 28800);
	assert_int_equal(gpuctl_config_pool_quota(ctx, cfg, SIZE_MAX, 65534, &q), 0);
	assert_true(q.gpus == 3 && q.gpu_hours_week < 0);
	/* pool a replaces quota_gpus only: 4 for everyone, the user's entry gone with the list */
	assert_int_equal(gpuctl_config_pool_quota(ctx, cfg, 0, 4000001, &q), 0);
	assert_true(q.gpus == 4 && q.lease_length_s == 0 && q.gpu_hours_week == 100);
	assert_int_equal(gpuctl_config_pool_quota(ctx, cfg, 1, 4000002, &q), 0);
	assert_true(q.gpus == 2 && q.gpu_hours_week == 0);
	assert_int_equal(gpuctl_config_pool_quota(ctx, cfg, 1, 4000001, &q), 0);
	assert_true(q.gpu_hours_week == 0.001);
	/* root: none */
	assert_int_equal(gpuctl_config_pool_quota(ctx, cfg, SIZE_MAX, 0, &q), 0);
	assert_true(q.gpus == -1 && q.lease_length_s == 0 && q.gpu_hours_day < 0);
	gpuctl_config_free(cfg);
	cfg = parse_ok("busy_memory = 0\n");
	assert_false(gpuctl_config_has_quota(cfg));
	assert_int_equal(gpuctl_config_pool_quota(ctx, cfg, SIZE_MAX, 4000001, &q), 0);
	assert_true(q.gpus == -1 && q.lease_length_s == 0 && q.gpu_hours_week < 0);
	gpuctl_config_free(cfg);

	/* the documented errors */
	parse_err("quota_gpu = 1\n", 1, "unknown key 'quota_gpu'",
	          "quota_gpus, quota_lease_length");
	parse_err("[pool a]\ngpus = 0\nquota_x = 1\n", 3, "unknown key 'quota_x' in [pool a]");
	parse_err("quota_gpus = four\n", 1, "quota_gpus: 'four': not a number of GPUs");
	parse_err("quota_gpus = 4097\n", 1, "quota_gpus: '4097'");
	parse_err("quota_gpus = -1\n", 1, "quota_gpus: '-1'");
	parse_err("quota_lease_length = 8\n", 1, "quota_lease_length: '8': not a duration");
	parse_err("quota_lease_length = 0\n", 1, "quota_lease_length: '0': not a duration");
	parse_err("quota_lease_length = 400d\n", 1, "longer than 366 days");
	parse_err("quota_gpu_hours_day = 1.2345\n", 1,
	          "quota_gpu_hours_day: '1.2345': not a number of GPU-hours");
	parse_err("quota_gpu_hours_week = 1.\n", 1, "quota_gpu_hours_week: '1.'");
	parse_err("quota_gpu_hours_week = 1e3\n", 1, "quota_gpu_hours_week: '1e3'");
	parse_err("quota_gpus = a b:3\n", 1, "quota_gpus: 'a b:3': not USER:VALUE or @GROUP:VALUE");
	parse_err("quota_gpus = @:3\n", 1, "not USER:VALUE");
	parse_err("quota_gpus = :3\n", 1, "not USER:VALUE");
	parse_err("quota_gpus = alice:\n", 1, "quota_gpus: ''");
	parse_err("quota_gpus = 1, alice:3, alice:4\n", 1,
	          "'alice:4': this user or group given twice");
	parse_err("quota_gpus = 4, 5\n", 1, "'5': the default given twice");
	parse_err("quota_gpus = 1,\n", 1, "quota_gpus: entry 2 of the list is empty");
	/* a blank after ':' at an entry's end (found by fuzz-config: read past the entry) */
	parse_err("quota_gpu_hours_day = ml:\t, 1\n", 1, "quota_gpu_hours_day: ''");
	parse_err("quota_gpus = 1\n\nquota_gpus = 2\n", 3, "'quota_gpus' given twice", "line 1");
	parse_err("quota_gpus =\n", 1, "empty value for 'quota_gpus'");
	/* a user and a group of one name are two entries */
	cfg = parse_ok("quota_gpus = x:1, @x:2\n");
	gpuctl_config_free(cfg);
}

/* docs/config.md "Hooks": global only, absolute paths, hook_timeout 1s-1h (default 10s),
 * hook_max_running 1-64 (default 4). */
static void test_hooks(void **state)
{
	struct gpuctl_config_hooks h;
	struct gpuctl_config *cfg;

	(void)state;
	gpuctl_config_hooks(NULL, &h);
	assert_true(h.timeout_s == 10 && h.max_running == 4);
	for (int i = 0; i < GPUCTL_HOOK_COUNT_; i++)
		assert_null(h.path[i]);
	cfg = parse_ok("# hooks\non_health = /usr/local/lib/gpuctl/slack\non_idle=/a b/c\n"
	               "hook_timeout = 2m\nhook_max_running = 64\n[pool a]\ngpus = 0\n");
	gpuctl_config_hooks(cfg, &h);
	assert_string_equal(h.path[GPUCTL_HOOK_HEALTH], "/usr/local/lib/gpuctl/slack");
	assert_int_equal(h.line[GPUCTL_HOOK_HEALTH], 2);
	assert_string_equal(h.path[GPUCTL_HOOK_IDLE], "/a b/c");
	assert_int_equal(h.line[GPUCTL_HOOK_IDLE], 3);
	assert_null(h.path[GPUCTL_HOOK_LEASE_START]);
	assert_int_equal(h.line[GPUCTL_HOOK_LEASE_START], 0);
	assert_true(h.timeout_s == 120 && h.max_running == 64);
	gpuctl_config_free(cfg);
	assert_string_equal(gpuctl_hook_event_name(GPUCTL_HOOK_LEASE_END), "lease_end");
	assert_string_equal(gpuctl_hook_event_name(GPUCTL_HOOK_VIOLATION), "violation");
	assert_null(gpuctl_hook_event_name(GPUCTL_HOOK_COUNT_));
	parse_err("on_health = hooks/slack\n", 1, "on_health 'hooks/slack': not an absolute path");
	parse_err("\non_lease_end = /a\ton\n", 2, "on_lease_end", "control character");
	parse_err("[pool a]\ngpus = 0\non_idle = /x\n", 3, "'on_idle'", "global setting");
	parse_err("on_idle = /x\non_idle = /y\n", 2, "'on_idle'", "twice", "first on line 1");
	parse_err("on_violation =\n", 1, "empty value", "'on_violation'");
	parse_err("hook_timeout = 0\n", 1, "hook_timeout '0': not from 1s to 1h");
	parse_err("hook_timeout = 2h\n", 1, "hook_timeout '2h': not from 1s to 1h");
	parse_err("hook_timeout = 10\n", 1, "hook_timeout '10': not a duration");
	parse_err("hook_max_running = 0\n", 1, "hook_max_running '0': not a number from 1 to 64");
	parse_err("hook_max_running = 65\n", 1, "hook_max_running '65'");
	parse_err("on_lease_strat = /x\n", 1, "unknown key 'on_lease_strat'", "on_lease_start");
}

/* docs/config.md "Status page": peers are http(s) base URLs (a trailing '/' dropped), at most
 * 16; status_page_users is show (the default) or hide; both global only. */
static void test_status_page(void **state)
{
	struct gpuctl_config_status_page sp;
	struct gpuctl_config *cfg;
	char many[16 * 24 + 32] = "peers = ";

	(void)state;
	gpuctl_config_status_page(NULL, &sp);
	assert_non_null(sp.peers);
	assert_null(sp.peers[0]);
	assert_false(sp.hide_users);
	assert_int_equal(sp.access, GPUCTL_STATUS_PAGE_LOCAL);
	cfg = parse_ok("status_page = off\n");
	gpuctl_config_status_page(cfg, &sp);
	assert_int_equal(sp.access, GPUCTL_STATUS_PAGE_OFF);
	gpuctl_config_free(cfg);
	cfg = parse_ok("status_page = network\n");
	gpuctl_config_status_page(cfg, &sp);
	assert_int_equal(sp.access, GPUCTL_STATUS_PAGE_NETWORK);
	gpuctl_config_free(cfg);
	parse_err("status_page = public\n", 1, "status_page 'public': not off, local or network");
	cfg = parse_ok("peers = http://gpu2:9400/, https://[::1]:9401/gpuctl,http://10.0.0.3:80\n"
	               "status_page_users = hide\n");
	gpuctl_config_status_page(cfg, &sp);
	assert_string_equal(sp.peers[0], "http://gpu2:9400");
	assert_string_equal(sp.peers[1], "https://[::1]:9401/gpuctl");
	assert_string_equal(sp.peers[2], "http://10.0.0.3:80");
	assert_null(sp.peers[3]);
	assert_true(sp.hide_users);
	assert_int_equal(sp.access, GPUCTL_STATUS_PAGE_LOCAL);
	gpuctl_config_free(cfg);
	cfg = parse_ok("status_page_users = show\n");
	gpuctl_config_status_page(cfg, &sp);
	assert_false(sp.hide_users);
	assert_null(sp.peers[0]);
	gpuctl_config_free(cfg);
	for (int i = 0; i < 16; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%shttp://h%d:1",
		         i ? "," : "", i);
	cfg = parse_ok(many);
	gpuctl_config_free(cfg);
	snprintf(many + strlen(many), sizeof(many) - strlen(many), ",http://x:1\n");
	parse_err(many, 1, "more than 16 peers");
	parse_err("peers = gpu2:9400\n", 1, "peers: 'gpu2:9400' is not an http:// or https:// URL");
	parse_err("peers = http://a:1,,http://b:2\n", 1, "peers: an empty entry");
	parse_err("peers = http://a\"><script>\n", 1, "only letters, digits");
	parse_err("peers = http://u:p@a:1\n", 1, "no user, query or fragment");
	parse_err("peers = http://a/?x=1\n", 1, "only letters");
	parse_err("peers = http://:80\n", 1, "names no host");
	parse_err("status_page_users = anonymous\n", 1,
	          "status_page_users 'anonymous': not show or hide");
	parse_err("[pool a]\ngpus = 0\npeers = http://a\n", 3, "'peers'", "global setting");
	parse_err("peers = http://a\npeers = http://b\n", 2, "'peers'", "twice");
	parse_err("status_page_users =\n", 1, "empty value", "'status_page_users'");
}

static void test_ranges_and_map(void **state)
{
	(void)state;
	map_ok("[pool a]\ngpus = 0-3\n", (const int[8]){0, 0, 0, 0, -1, -1, -1, -1});
	map_ok("[pool a]\ngpus = 3-3\n", (const int[8]){-1, -1, -1, 0, -1, -1, -1, -1});
	map_ok("[pool a]\ngpus = 0-7\n", (const int[8]){0, 0, 0, 0, 0, 0, 0, 0});
	/* every id form; one GPU named twice by the same pool is fine */
	map_ok("[pool a]\ngpus = GPU-abcdef01-1111-2222-3333-444444444444, abcdef02\n"
	       "[pool b]\ngpus = 0000:4e:00.0, 87:00.0, 5-5, 1234bbbb, 3\n",
	       (const int[8]){-1, 0, 0, 1, 1, 1, -1, 1});
	/* an unknown GPU, with the line of its entry */
	map_err("[pool a]\ngpus = 0\n[pool b]\n\ngpus = 1, GPU-ffff\n", 5, "[pool b]",
	        "'GPU-ffff'");
	map_err("[pool a]\ngpus = 8\n", 2, "[pool a]", "'8'");
	map_err("[pool a]\ngpus = 6-9\n", 2, "'6-9'", "index 9");
	map_err("[pool a]\ngpus = 12\n", 2, "'12'", "no GPU with that index");
}

static void test_two_pools(void **state)
{
	(void)state;
	map_err("[pool a]\ngpus = 0-3\n\n[pool b]\ngpus = 5, 00000000:4E:00.0\n", 5, "'a' (line 2)",
	        "'b'");
	map_err("[pool a]\ngpus = 0-3\n\n[pool b]\ngpus = 5, 00000000:4E:00.0\n", 5, "GPU 3",
	        "GPU-fedcba98-1111-2222-3333-444444444444");
	map_err("[pool x]\ngpus = 1\n[pool y]\ngpus = 0-2\n", 4, "'x'", "'y'");
}

static void test_share_margin(void **state)
{
	struct gpuctl_config *cfg;

	(void)state;
	/* the default: 5% */
	assert_true(gpuctl_config_share_margin(NULL, 80 * GiB) == 4 * GiB);
	cfg = parse_ok("share_margin = 5%\n");
	assert_true(gpuctl_config_settings(cfg)->share_margin_is_pct);
	assert_true(gpuctl_config_settings(cfg)->share_margin == 5);
	assert_true(gpuctl_config_share_margin(cfg, 80 * GiB) == 4 * GiB);
	assert_true(gpuctl_config_share_margin(cfg, 100) == 5);
	assert_true(gpuctl_config_share_margin(cfg, 10) == 1); /* 0.5 rounded up */
	assert_true(gpuctl_config_share_margin(cfg, 0) == 0);
	/* no overflow on absurd totals: 5% of 2^64-1 */
	assert_true(gpuctl_config_share_margin(cfg, UINT64_MAX) == UINT64_MAX / 20 + 1);
	gpuctl_config_free(cfg);

	cfg = parse_ok("share_margin = 50%\n");
	assert_true(gpuctl_config_share_margin(cfg, 80 * GiB) == 40 * GiB);
	gpuctl_config_free(cfg);
	cfg = parse_ok("share_margin = 0%\n");
	assert_true(gpuctl_config_share_margin(cfg, 80 * GiB) == 0);
	gpuctl_config_free(cfg);

	cfg = parse_ok("share_margin = 2GiB\n");
	assert_false(gpuctl_config_settings(cfg)->share_margin_is_pct);
	assert_true(gpuctl_config_settings(cfg)->share_margin == 2 * GiB);
	assert_true(gpuctl_config_share_margin(cfg, 80 * GiB) == 2 * GiB);
	assert_true(gpuctl_config_share_margin(cfg, 16 * GiB) == 2 * GiB);
	gpuctl_config_free(cfg);
	cfg = parse_ok("share_margin = 1.5G\n");
	assert_true(gpuctl_config_share_margin(cfg, 80 * GiB) == 3 * GiB / 2);
	gpuctl_config_free(cfg);
	cfg = parse_ok("share_margin = 0\n");
	assert_false(gpuctl_config_settings(cfg)->share_margin_is_pct);
	assert_true(gpuctl_config_share_margin(cfg, 80 * GiB) == 0);
	gpuctl_config_free(cfg);

	parse_err("share_margin = 60%\n", 1, "share_margin '60%'", "50%");
}

/* A user to test permissions with: not root, with a passwd entry. */
static bool test_user(uid_t *ret_uid, gid_t *ret_gid, char *name, size_t size)
{
	struct passwd *pw = getuid() != 0 ? getpwuid(getuid()) : getpwnam("nobody");

	if (!pw || pw->pw_uid == 0)
		return false;
	*ret_uid = pw->pw_uid;
	*ret_gid = getuid() != 0 ? getgid() : pw->pw_gid;
	(void)snprintf(name, size, "%s", pw->pw_name);
	return true;
}

static int allows(const char *text, uint32_t uid)
{
	struct gpuctl_config *cfg = parse_ok(text);
	int r = gpuctl_config_pool_allows(ctx, cfg, 0, uid);

	gpuctl_config_free(cfg);
	return r;
}

static void test_allows(void **state)
{
	char text[512], name[256];
	uid_t uid;
	gid_t gid;
	struct group *gr;

	(void)state;
	if (!test_user(&uid, &gid, name, sizeof(name))) {
		skip();
		return;
	}
	/* root, and an unrestricted pool */
	assert_int_equal(allows("[pool a]\ngpus = 0\nusers = 4242\n", 0), 1);
	assert_int_equal(allows("[pool a]\ngpus = 0\n", uid), 1);
	assert_int_equal(allows("[pool a]\ngpus = 0\nusers = *\n", uid), 1);
	assert_int_equal(allows("[pool a]\ngpus = 0\nusers = 4242, *\n", uid), 1);
	/* by name, by uid */
	(void)snprintf(text, sizeof(text), "[pool a]\ngpus = 0\nusers = nosuchuser9, %s\n", name);
	assert_int_equal(allows(text, uid), 1);
	(void)snprintf(text, sizeof(text), "[pool a]\ngpus = 0\nusers = 4242, %u\n", (unsigned)uid);
	assert_int_equal(allows(text, uid), 1);
	/* by group: its gid, its name */
	(void)snprintf(text, sizeof(text), "[pool a]\ngpus = 0\nusers = 4242\ngroups = %u\n",
	               (unsigned)gid);
	assert_int_equal(allows(text, uid), 1);
	gr = getgrgid(gid);
	if (gr) {
		(void)snprintf(text, sizeof(text),
		               "[pool a]\ngpus = 0\ngroups = nosuchgroup9, %s\n", gr->gr_name);
		assert_int_equal(allows(text, uid), 1);
	}
	/* only someone else: no, and the message says who may */
	assert_int_equal(allows("[pool other]\ngpus = 0\nusers = 4242\n", uid), 0);
	assert_string_equal(gpuctl_errmsg(ctx), "pool 'other' is restricted to user 4242");
	assert_int_equal(allows("[pool other]\ngpus = 0\nusers = 4242, nosuchuser9\n"
	                        "groups = nosuchgroup9\n",
	                        uid),
	                 0);
	assert_string_equal(gpuctl_errmsg(ctx), "pool 'other' is restricted to users 4242, "
	                                        "nosuchuser9 and group nosuchgroup9");
	/* a listed uid without a passwd entry matches by number */
	assert_int_equal(allows("[pool a]\ngpus = 0\nusers = 4242\n", 4242), 1);
	assert_int_equal(allows("[pool a]\ngpus = 0\ngroups = 4242\n", 4242), 0);
	/* a bad index */
	struct gpuctl_config *cfg = parse_ok("[pool a]\ngpus = 0\n");
	assert_int_equal(gpuctl_config_pool_allows(ctx, cfg, 1, uid), -EINVAL);
	gpuctl_config_free(cfg);
}

static void test_pool_find(void **state)
{
	struct gpuctl_config *cfg = parse_ok("[pool a]\ngpus = 0\n[pool b.2]\ngpus = 1\n");
	size_t i = 99;

	(void)state;
	assert_int_equal(gpuctl_config_pool_find(ctx, cfg, "b.2", &i), 0);
	assert_int_equal(i, 1);
	assert_int_equal(gpuctl_config_pool_find(ctx, cfg, "a", &i), 0);
	assert_int_equal(i, 0);
	i = 99;
	assert_int_equal(gpuctl_config_pool_find(ctx, cfg, "c", &i), -ENOENT);
	assert_int_equal(i, 99);
	assert_string_equal(gpuctl_errmsg(ctx), "no pool 'c' (pools: a, b.2, and default)");
	assert_int_equal(gpuctl_config_pool_find(ctx, cfg, "default", &i), -ENOENT);
	assert_int_equal(gpuctl_config_pool_find(ctx, cfg, "A", &i), -ENOENT);
	gpuctl_config_free(cfg);
	assert_int_equal(gpuctl_config_pool_find(ctx, NULL, "a", &i), -ENOENT);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "no pools"));
}

static char tmpdir[64];

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_load(void **state)
{
	char path[128], link[128], missing[128], fifo[128];
	struct gpuctl_config *cfg = NULL;
	uint32_t uid = 0, mode = 0;
	struct stat st;

	(void)state;
	(void)snprintf(tmpdir, sizeof(tmpdir), "/tmp/gpuctl-config-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	(void)snprintf(path, sizeof(path), "%s/gpuctl.conf", tmpdir);
	(void)snprintf(link, sizeof(link), "%s/link.conf", tmpdir);
	(void)snprintf(missing, sizeof(missing), "%s/missing.conf", tmpdir);
	(void)snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir);
	assert_int_equal(unsetenv("GPUCTL_CONFIG"), 0);

	/* a named missing file */
	cfg = (struct gpuctl_config *)0x1;
	assert_int_equal(gpuctl_config_load(ctx, missing, &cfg), -ENOENT);
	assert_ptr_equal(cfg, (struct gpuctl_config *)0x1);
	assert_non_null(strstr(gpuctl_errmsg(ctx), missing));
	/* a directory, a FIFO */
	assert_int_equal(gpuctl_config_load(ctx, tmpdir, &cfg), -EPERM);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "not a regular file"));
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(gpuctl_config_load(ctx, fifo, &cfg), -EPERM);
	assert_ptr_equal(cfg, (struct gpuctl_config *)0x1);
	assert_int_equal(gpuctl_config_load(ctx, "/dev/zero", &cfg), -EPERM);
	assert_ptr_equal(cfg, (struct gpuctl_config *)0x1);
	/* the null device, by its name or a symlink to it: no configuration (issue 25) */
	assert_int_equal(symlink("/dev/null", link), 0);
	for (int i = 0; i < 2; i++) {
		cfg = NULL;
		assert_int_equal(gpuctl_config_load(ctx, i ? link : "/dev/null", &cfg), 0);
		assert_null(gpuctl_config_path(cfg));
		assert_int_equal(gpuctl_config_file_owner(cfg, &uid, &mode), -ENOENT);
		assert_int_equal(gpuctl_config_pool_count(cfg), 0);
		gpuctl_config_free(cfg);
	}
	assert_int_equal(unlink(link), 0);
	cfg = (struct gpuctl_config *)0x1;

	/* a valid file: path, owner, mode */
	write_file(path, "busy_utilization = 30\n[pool a]\ngpus = 1\n", 0640);
	assert_int_equal(stat(path, &st), 0);
	cfg = NULL;
	assert_int_equal(gpuctl_config_load(ctx, path, &cfg), 0);
	assert_string_equal(gpuctl_config_path(cfg), path);
	assert_int_equal(gpuctl_config_file_owner(cfg, &uid, &mode), 0);
	assert_int_equal(uid, st.st_uid);
	assert_int_equal(mode, 0640);
	assert_int_equal(gpuctl_config_settings(cfg)->busy_utilization, 30);
	assert_int_equal(gpuctl_config_pool_count(cfg), 1);
	gpuctl_config_free(cfg);

	/* a symlink to a regular file is fine; the path is kept as named */
	assert_int_equal(symlink(path, link), 0);
	cfg = NULL;
	assert_int_equal(gpuctl_config_load(ctx, link, &cfg), 0);
	assert_string_equal(gpuctl_config_path(cfg), link);
	/* the file read is the one opened: its path and the symlink name it, another file does
	 * not, and neither does the symlink once it points elsewhere */
	assert_int_equal(gpuctl_config_is_file(cfg, path), 1);
	assert_int_equal(gpuctl_config_is_file(cfg, link), 1);
	assert_int_equal(gpuctl_config_is_file(cfg, tmpdir), 0);
	assert_int_equal(gpuctl_config_is_file(cfg, "/nonexistent/gpuctl.conf"), 0);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(symlink(tmpdir, link), 0);
	assert_int_equal(gpuctl_config_is_file(cfg, link), 0);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(symlink(path, link), 0);
	gpuctl_config_free(cfg);
	assert_int_equal(gpuctl_config_is_file(NULL, path), 0);

	/* $GPUCTL_CONFIG selects the file; a named missing one is -ENOENT */
	assert_int_equal(setenv("GPUCTL_CONFIG", path, 1), 0);
	cfg = NULL;
	assert_int_equal(gpuctl_config_load(ctx, NULL, &cfg), 0);
	assert_string_equal(gpuctl_config_path(cfg), path);
	assert_int_equal(gpuctl_config_settings(cfg)->busy_utilization, 30);
	gpuctl_config_free(cfg);
	assert_int_equal(setenv("GPUCTL_CONFIG", missing, 1), 0);
	assert_int_equal(gpuctl_config_load(ctx, NULL, &cfg), -ENOENT);
	/* the argument wins over the environment */
	cfg = NULL;
	assert_int_equal(gpuctl_config_load(ctx, path, &cfg), 0);
	gpuctl_config_free(cfg);
	assert_int_equal(unsetenv("GPUCTL_CONFIG"), 0);

	/* parse errors name the file and line */
	write_file(path, "# c\nbusy_memory = 10\n", 0644);
	assert_int_equal(gpuctl_config_load(ctx, path, &cfg), -EINVAL);
	char want[160];
	(void)snprintf(want, sizeof(want), "%s:2: busy_memory '10'", path);
	assert_int_equal(strncmp(gpuctl_errmsg(ctx), want, strlen(want)), 0);

	assert_int_equal(unlink(fifo), 0);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(tmpdir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_full_file),      cmocka_unit_test(test_defaults),
	        cmocka_unit_test(test_comments),       cmocka_unit_test(test_errors),
	        cmocka_unit_test(test_ranges_and_map), cmocka_unit_test(test_two_pools),
	        cmocka_unit_test(test_share_margin),   cmocka_unit_test(test_allows),
	        cmocka_unit_test(test_idle_actions),   cmocka_unit_test(test_enforce),
	        cmocka_unit_test(test_pool_find),      cmocka_unit_test(test_load),
	        cmocka_unit_test(test_quotas),         cmocka_unit_test(test_hooks),
	        cmocka_unit_test(test_status_page),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
