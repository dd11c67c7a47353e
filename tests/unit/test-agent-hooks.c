// SPDX-License-Identifier: MIT
/*
 * test-agent-hooks.c: the agent's hook runner (src/cli/agent-hooks.c) with a hook of the test's
 * own that waits for a file before it reads its event: the queue behind one running hook holds
 * 64 events (docs/hooks.md, "How a hook is run"), the ones past it are dropped, said once when
 * the streak starts and once with its count when an event is taken again; each event reaches
 * the hook whole, with the fields every event has first. Waits are for files, each bounded by a
 * generous deadline; nothing asserts how long anything took.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent-hooks.h"

#define DEADLINE_MS 30000 /* a wait that never ends fails here instead */

static char dir[64];

static char *path_of(const char *name)
{
	static char buf[4][128];
	static int k;

	k = (k + 1) % 4;
	(void)snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
	return buf[k];
}

/* The lines of file name (0 when it is missing). */
static size_t lines_of(const char *name)
{
	FILE *f = fopen(path_of(name), "r");
	size_t n = 0;
	int c;

	if (!f)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void wait_lines(const char *name, size_t n)
{
	for (int ms = 0; lines_of(name) < n; ms += 10) {
		assert_true(ms < DEADLINE_MS);
		(void)nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
	}
}

static size_t count_in(const char *text, const char *needle)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static json_t *event(int n)
{
	json_t *o = json_object();

	assert_non_null(o);
	assert_int_equal(json_object_set_new(o, "n", json_integer(n)), 0);
	return o;
}

static void test_queue_drops_and_says_so(void **state)
{
	struct gpuctl_config *cfg = NULL;
	struct gpuctl_ctx *ctx = NULL;
	struct agent_hooks *h = NULL;
	char conf[256], err[65536];
	int saved, fd;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(strcpy(dir, "/tmp/gpuctl-hooks-unit-XXXXXX")));
	assert_int_equal(chmod(dir, 0755), 0);
	f = fopen(path_of("hook"), "w");
	assert_non_null(f);
	/* each run: says it started, waits for "go", then appends its event */
	fprintf(f, "#!/bin/sh\necho >> %s\nwhile [ ! -e %s ]; do sleep 0.02; done\ncat >> %s\n",
	        path_of("started"), path_of("go"), path_of("events"));
	fclose(f);
	assert_int_equal(chmod(path_of("hook"), 0755), 0);
	(void)snprintf(conf, sizeof(conf), "on_health = %s\nhook_max_running = 1\n",
	               path_of("hook"));
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_config_parse(ctx, "t.conf", conf, strlen(conf), &cfg), 0);

	/* what the runner says goes to a file */
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	fd = open(path_of("err"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	close(fd);

	assert_int_equal(agent_hooks_new(cfg, &h), CLI_EXIT_OK);
	assert_non_null(h);
	assert_true(agent_hooks_wants(h, "health"));
	assert_false(agent_hooks_wants(h, "idle"));
	agent_hooks_fire(h, "idle", event(-1)); /* no hook: freed, nothing runs */
	agent_hooks_fire(h, "health", event(0));
	wait_lines("started", 1);
	/* one runs; 64 wait; 5 + 1 dropped */
	for (int i = 1; i <= 70; i++)
		agent_hooks_fire(h, "health", event(i));
	/* the first run ends, the second starts: one place free */
	fd = open(path_of("go"), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	wait_lines("events", 2);
	agent_hooks_fire(h, "health", event(71));
	wait_lines("events", 66); /* 0, the 64 that waited, and 71 */
	agent_hooks_free(h);
	fflush(stderr);
	assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
	close(saved);

	f = fopen(path_of("err"), "r");
	assert_non_null(f);
	err[fread(err, 1, sizeof(err) - 1, f)] = '\0';
	fclose(f);
	assert_int_equal(count_in(err, "\n"), 2);
	assert_int_equal(count_in(err, "gpuctl: agent: hooks: 64 events wait for a run "
	                               "(hook_max_running 1): dropping events until one starts\n"),
	                 1);
	assert_int_equal(
	        count_in(err, "gpuctl: agent: hooks: 6 events dropped (too many waiting)\n"), 1);
	/* the events that ran, in order, each whole: 0, 1..64, 71 */
	f = fopen(path_of("events"), "r");
	assert_non_null(f);
	for (int i = 0; i < 66; i++) {
		char line[512];
		json_t *o;
		const char *key;
		json_t *v;
		int k = 0;
		static const char *const first[] = {"version", "event", "time", "host", "n"};

		assert_non_null(fgets(line, sizeof(line), f));
		o = json_loads(line, 0, NULL);
		assert_non_null(o);
		json_object_foreach(o, key, v) assert_string_equal(key, first[k++]);
		assert_int_equal(k, 5);
		assert_int_equal(json_integer_value(json_object_get(o, "version")), 1);
		assert_string_equal(json_string_value(json_object_get(o, "event")), "health");
		assert_int_equal(json_integer_value(json_object_get(o, "n")), i < 65 ? i : 71);
		json_decref(o);
	}
	fclose(f);
	gpuctl_config_free(cfg);
	gpuctl_ctx_free(ctx);
	(void)system(strcat(strcpy(conf, "rm -rf "), dir));
}

static void test_no_hooks(void **state)
{
	struct agent_hooks *h = (struct agent_hooks *)&h;

	(void)state;
	assert_int_equal(agent_hooks_new(NULL, &h), CLI_EXIT_OK);
	assert_null(h);
	assert_false(agent_hooks_wants(NULL, "health"));
	agent_hooks_fire(NULL, "health", event(1)); /* freed */
	agent_hooks_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_queue_drops_and_says_so),
	        cmocka_unit_test(test_no_hooks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
