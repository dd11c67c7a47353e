// SPDX-License-Identifier: MIT
/*
 * ps-waiting.c: `gpuctl ps --waiting`: who waits for a device (run/select --hold --wait), first
 * in line first, as a table or JSON (docs/leases.md "Waiting", docs/json.md). cmd-ps.c has the
 * rest of ps: who holds what.
 *
 * Decisions:
 * - Only reads: without a lease directory nobody is waiting; one that cannot be read is one
 *   line and exit 1.
 * - A ticket the library could not parse is still listed (it holds its place in line), its
 *   request unknown: null in JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "format.h"
#include "ps.h"

static json_t *waiter_json(const struct gpuctl_wait_entry *w, size_t pos, time_t now)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (json_put(o, "position", json_integer((json_int_t)pos)) < 0 ||
	    json_put(o, "user", json_string_or_null(w->user)) < 0 ||
	    json_put(o, "uid", json_integer(w->uid)) < 0 ||
	    json_put(o, "pid", json_integer(w->pid)) < 0 ||
	    json_put(o, "arrival", json_integer((json_int_t)w->arrival)) < 0 ||
	    json_put(o, "waited_s",
	             json_int_or_null(w->since > 0 && now >= w->since ? 0 : -1,
	                              (int64_t)now - w->since)) < 0 ||
	    json_put(o, "readable", json_boolean(w->parsed)) < 0 ||
	    json_put(o, "count", json_int_or_null(w->parsed ? 0 : -1, w->count)) < 0 ||
	    json_put(o, "mig", json_string_or_null(w->parsed ? w->mig_profile : NULL)) < 0 ||
	    json_put(o, "only", json_string_or_null(w->parsed ? w->only : NULL)) < 0 ||
	    json_put(o, "exclude", json_string_or_null(w->parsed ? w->exclude : NULL)) < 0 ||
	    json_put(o, "numa",
	             json_int_or_null(w->parsed && w->numa_node >= 0 ? 0 : -1, w->numa_node)) < 0 ||
	    json_put(o, "min_free_mem",
	             json_int_or_null(w->parsed && w->min_free_mem ? 0 : -1,
	                              (int64_t)w->min_free_mem)) < 0 ||
	    json_put(o, "max_util",
	             json_int_or_null(w->parsed && w->max_util >= 0 ? 0 : -1, w->max_util)) < 0 ||
	    json_put(o, "no_procs", json_boolean(w->parsed && w->no_procs)) < 0 ||
	    json_put(o, "pool", json_string_or_null(w->parsed ? w->pool : NULL)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ps --waiting: the live tickets in order (docs/leases.md "Waiting"). */
int ps_waiting(struct cli *cli, const char *lease_dir, bool json)
{
	struct gpuctl_lease_dir *dir = NULL;
	struct gpuctl_wait_list *list = NULL;
	time_t now = time(NULL);
	int status = cli_site(cli, &cmd_ps_entry, lease_dir, 0), r = 0;
	if (status)
		return status;
	const char *path = gpuctl_site_lease_dir_path(cli->site);

	dir = gpuctl_site_lease_dir(cli->site);
	if (dir) {
		r = gpuctl_wait_list(cli->ctx, dir, &list);
		if (r < 0) {
			const char *msg = gpuctl_errmsg(cli->ctx);
			cli_error("ps: lease directory %s: %s", path,
			          msg && msg[0] ? msg : strerror(-r));
			return CLI_EXIT_FAILURE;
		}
	}
	size_t n = gpuctl_wait_list_count(list);
	if (json) {
		json_t *root = json_object(), *arr = json_array();
		r = root && arr ? 0 : -ENOMEM;
		for (size_t i = 0; r >= 0 && i < n; i++) {
			json_t *o = waiter_json(gpuctl_wait_list_get(list, i), i + 1, now);
			if (!o || json_array_append_new(arr, o) < 0)
				r = -ENOMEM;
		}
		if (r >= 0 && (json_put(root, "lease_dir", json_text(path)) < 0 ||
		               json_put(root, "waiting", arr) < 0))
			r = -ENOMEM;
		else if (r < 0)
			json_decref(arr);
		if (r >= 0)
			r = json_print(root);
		json_decref(root);
	} else if (n == 0) {
		puts("nobody is waiting");
	} else {
		static const char *const head[] = {"POS", "USER", "PID", "WAITED", "REQUEST"};
		struct text_table *t = NULL;
		r = text_table_new(5, &t);
		if (r >= 0)
			r = text_table_add(t, head);
		for (size_t i = 0; r >= 0 && i < n; i++) {
			const struct gpuctl_wait_entry *w = gpuctl_wait_list_get(list, i);
			char pos[24], user[48], pid[24], waited[24], req[512];
			snprintf(pos, sizeof(pos), "%zu", i + 1);
			if (w->user)
				snprintf(user, sizeof(user), "%s", w->user);
			else
				snprintf(user, sizeof(user), "%" PRIu32, w->uid);
			snprintf(pid, sizeof(pid), "%" PRIu32, w->pid);
			format_age(w->since > 0 ? (uint64_t)w->since : 0, waited, sizeof(waited));
			format_wait_request(w, req, sizeof(req));
			const char *cells[] = {pos, user, pid, waited, req};
			r = text_table_add(t, cells);
		}
		if (r >= 0)
			text_table_print(t, stdout, false);
		text_table_free(t);
	}
	if (r < 0 && r != -EIO) {
		cli_error("ps: %s", strerror(-r));
		status = CLI_EXIT_FAILURE;
	}
	gpuctl_wait_list_free(list);
	return cli_finish_output(status);
}
