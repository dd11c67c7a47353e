// SPDX-License-Identifier: MIT
/*
 * status-json.c: the /api/v1/status document of `gpuctl agent` and `gpuctl exporter`
 * (docs/json.md, "/api/v1/status"; docs/status-page.md): each GPU with its holders, processes,
 * health and utilisation history, who waits, the pools and the peers, made from the sample
 * the server already took (status.h).
 *
 * Decisions:
 * - Made once per sample on the main thread and served as text (exporter-http.c): a request
 *   costs no NVML call, no /proc read and no rendering, like a scrape.
 * - Reads only what the sample lacks and NVML does not know: the queue (the lease directory's
 *   queue/, docs/leases.md "Waiting") and the workloads from the one cache.
 * - status_page_users = hide: every user name and uid is null, and so is a holder's command
 *   (a command line names home directories); "users_shown" says which. Workload labels stay:
 *   they name containers and jobs, which is what the page is for.
 * - A lost GPU is "lost": true with its health "LOST", never a free GPU: its other facts are
 *   null (the driver no longer answers for it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "format.h"
#include "status.h"

/* a workload's label, NULL when unknown */
static const char *workload_label(const struct status_input *in, uint32_t pid)
{
	const struct gpuctl_workload *w = NULL;

	if (!in->wls || !pid || gpuctl_workloads_get(in->ctx, in->wls, pid, 0, &w) < 0 || !w)
		return NULL;
	return w->label;
}

static json_t *holder_json(const struct status_input *in, const struct gpuctl_lease_owner *o,
                           bool shared, int mig, int64_t idle_ms, bool hide)
{
	json_t *h = json_object();
	uint64_t since = o->leased_since ? o->leased_since : o->start_time;
	const char *wl = workload_label(in, o->job_pid ? o->job_pid : o->pid);

	if (!h || json_put(h, "user", hide ? json_null() : json_string_or_null(o->user)) < 0 ||
	    json_put(h, "uid", hide ? json_null() : json_integer(o->uid)) < 0 ||
	    json_put(h, "kind", json_string(o->job_pid ? "run" : "hold")) < 0 ||
	    json_put(h, "shared", json_boolean(shared)) < 0 ||
	    json_put(h, "mig", mig >= 0 ? json_integer(mig) : json_null()) < 0 ||
	    json_put(h, "label", json_string_or_null(o->label)) < 0 ||
	    json_put(h, "command", hide ? json_null() : json_string_or_null(o->command)) < 0 ||
	    json_put(h, "workload", json_string_or_null(wl)) < 0 ||
	    json_put(h, "since", since ? json_integer((json_int_t)since) : json_null()) < 0 ||
	    json_put(h, "held_s",
	             since && in->wall >= (double)since
	                     ? json_integer((json_int_t)(in->wall - (double)since))
	                     : json_null()) < 0 ||
	    json_put(h, "idle_s", idle_ms >= 0 ? json_integer(idle_ms / 1000) : json_null()) < 0) {
		json_decref(h);
		return NULL;
	}
	return h;
}

/* Gpu g's entries in the lease list (the GPU's, then its MIG devices'): their holders into arr,
 * and the GPU's state name. A GPU counts as held when one of its MIG devices is
 * (docs/leases.md, "MIG"), so a free GPU with a MIG device held or shared is "held". */
static int holders_of(const struct status_input *in, size_t g, bool hide, json_t *arr,
                      const char **ret_state)
{
	static const char *const names[] = {"free", "held", "unusable", "uninitialised", "shared"};
	const char *dir = gpuctl_site_lease_dir_path(in->site);
	bool mig_held = false;

	/* no lease directory: nothing is leased (docs/leases.md); one that cannot be read: unknown
	 */
	*ret_state = in->leases || (dir && access(dir, F_OK) < 0 && errno == ENOENT) ? "free"
	                                                                             : "unknown";
	for (size_t i = 0; in->leases && i < gpuctl_lease_list_count(in->leases); i++) {
		const struct gpuctl_lease_owner *const *owners = NULL;
		enum gpuctl_lease_state st;
		size_t gpu, n = 0;
		int mig;

		if (gpuctl_lease_list_get(in->leases, i, &gpu, &mig, &st, NULL, NULL) < 0 ||
		    gpu != g)
			continue;
		if (mig < 0 && (unsigned)st < sizeof(names) / sizeof(names[0]))
			*ret_state = names[st];
		else if (mig >= 0)
			mig_held |= st == GPUCTL_LEASE_HELD || st == GPUCTL_LEASE_SHARED;
		int64_t idle = in->lease_idle_ms ? in->lease_idle_ms[i] : -1;
		if (gpuctl_lease_list_holders(in->leases, i, &owners, &n) < 0)
			n = 0;
		for (size_t k = 0; k < n; k++) {
			json_t *h = holder_json(in, owners[k], st == GPUCTL_LEASE_SHARED, mig, idle,
			                        hide);
			if (!h || json_array_append_new(arr, h) < 0)
				return -ENOMEM;
		}
	}
	if (mig_held && !strcmp(*ret_state, "free"))
		*ret_state = "held";
	return 0;
}

static json_t *processes_of(const struct status_input *in, const struct gpuctl_gpu *gpu, bool hide)
{
	json_t *arr = json_array();

	for (size_t k = 0; arr && k < gpuctl_gpu_proc_count(gpu); k++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(gpu, k);
		uint32_t pid = gpuctl_proc_pid(p);
		int64_t mem = 0;
		int have_mem = gpuctl_proc_used_memory(p, &mem);
		json_t *o = json_object();

		if (!o || json_put(o, "pid", json_integer(pid)) < 0 ||
		    json_put(o, "user",
		             hide ? json_null() : json_string_or_null(gpuctl_proc_user(p))) < 0 ||
		    json_put(o, "workload", json_string_or_null(workload_label(in, pid))) < 0 ||
		    json_put(o, "used_memory", json_int_or_null(have_mem, mem)) < 0 ||
		    json_array_append_new(arr, o) < 0) {
			json_decref(o);
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static json_t *int_field(const struct gpuctl_gpu *gpu, enum gpuctl_field f)
{
	int64_t v = 0;
	int r = gpuctl_gpu_lost(gpu) ? -ENODATA : gpuctl_gpu_int(gpu, f, &v);

	return json_int_or_null(r, v);
}

static json_t *health_reasons(const struct status_input *in, size_t g)
{
	json_t *arr = json_array();

	for (size_t k = 0; arr && in->health && k < gpuctl_health_finding_count(in->health); k++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(in->health, k);
		if (f->gpu != g || f->severity == GPUCTL_HEALTH_OK)
			continue;
		if (json_array_append_new(arr, json_string_or_null(f->message)) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static json_t *gpu_json(const struct status_input *in, size_t g, bool hide)
{
	const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(in->snap, g);
	const char *uuid = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
	bool lost = gpuctl_gpu_lost(gpu);
	int verdict = in->health ? gpuctl_health_verdict(in->health, g) : -1;
	const char *health = lost           ? "LOST"
	                     : verdict >= 0 ? gpuctl_health_severity_name(verdict)
	                                    : "UNKNOWN";
	const char *state = NULL;
	json_t *o = json_object(), *holders = json_array();

	if (!o || !holders || holders_of(in, g, hide, holders, &state) < 0 ||
	    json_put(o, "index", json_integer((json_int_t)g)) < 0 ||
	    json_put(o, "uuid", json_string_or_null(uuid)) < 0 ||
	    json_put(o, "pci_bus_id",
	             json_string_or_null(gpuctl_gpu_str(gpu, GPUCTL_F_PCI_BUS_ID))) < 0 ||
	    json_put(o, "name", json_string_or_null(gpuctl_gpu_str(gpu, GPUCTL_F_NAME))) < 0 ||
	    json_put(o, "lost", json_boolean(lost)) < 0 ||
	    json_put(o, "pool", json_string_or_null(in->pool_of ? in->pool_of[g] : NULL)) < 0 ||
	    json_put(o, "utilization", int_field(gpu, GPUCTL_F_UTIL_GPU)) < 0 ||
	    json_put(o, "memory_used", int_field(gpu, GPUCTL_F_MEMORY_USED)) < 0 ||
	    json_put(o, "memory_total", int_field(gpu, GPUCTL_F_MEMORY_TOTAL)) < 0 ||
	    json_put(o, "temperature", int_field(gpu, GPUCTL_F_TEMP)) < 0 ||
	    json_put(o, "health", json_string(health)) < 0 ||
	    json_put(o, "health_reasons", health_reasons(in, g)) < 0 ||
	    json_put(o, "lease", json_string(lost ? "lost" : state)) < 0 ||
	    json_put(o, "holders", json_incref(holders)) < 0 ||
	    json_put(o, "processes", processes_of(in, gpu, hide)) < 0 ||
	    json_put(o, "history",
	             in->history ? status_history_json(in->history, uuid, in->wall)
	                         : json_array()) < 0) {
		json_decref(holders);
		json_decref(o);
		return NULL;
	}
	json_decref(holders);
	return o;
}

/* who waits (docs/leases.md "Waiting"); NULL in *ret when the lease directory cannot be read */
static int waiting_json(const struct status_input *in, bool hide, json_t **ret)
{
	struct gpuctl_lease_dir *dir = NULL;
	struct gpuctl_wait_list *list = NULL;
	const char *path = gpuctl_site_lease_dir_path(in->site);
	json_t *arr;
	int r = 0;

	*ret = NULL;
	if (!in->ctx)
		return 0;
	if (path && access(path, F_OK) == 0)
		r = gpuctl_lease_dir_open(in->ctx, path, &dir);
	if (r >= 0 && dir)
		r = gpuctl_wait_list(in->ctx, dir, &list);
	gpuctl_lease_dir_free(dir);
	if (r < 0)
		return 0; /* unknown: null */
	arr = json_array();
	size_t n = gpuctl_wait_list_count(list);
	for (size_t i = 0; arr && i < n; i++) {
		const struct gpuctl_wait_entry *w = gpuctl_wait_list_get(list, i);
		char req[512], reason[600];
		json_t *o = json_object();

		if (w->parsed)
			format_wait_request(w, req, sizeof(req));
		else
			snprintf(req, sizeof(req), "unreadable request");
		if (i == 0)
			snprintf(reason, sizeof(reason),
			         "first in line: no free GPU fits the request yet");
		else
			snprintf(reason, sizeof(reason), "behind %zu earlier request%s", i,
			         i == 1 ? "" : "s");
		if (!o || json_put(o, "position", json_integer((json_int_t)i + 1)) < 0 ||
		    json_put(o, "user", hide ? json_null() : json_string_or_null(w->user)) < 0 ||
		    json_put(o, "uid", hide ? json_null() : json_integer(w->uid)) < 0 ||
		    json_put(o, "waited_s",
		             w->since > 0 && in->wall >= (double)w->since
		                     ? json_integer((json_int_t)(in->wall - (double)w->since))
		                     : json_null()) < 0 ||
		    json_put(o, "request", json_text(req)) < 0 ||
		    json_put(o, "reason", json_text(reason)) < 0 ||
		    json_array_append_new(arr, o) < 0) {
			json_decref(o);
			json_decref(arr);
			arr = NULL;
		}
	}
	gpuctl_wait_list_free(list);
	if (!arr)
		return -ENOMEM;
	*ret = arr;
	return 0;
}

/* The pools in order of their first GPU, each with its GPUs' indices and description. */
static json_t *pools_json(const struct status_input *in)
{
	const struct gpuctl_config *cfg = gpuctl_site_config(in->site);
	size_t n = gpuctl_snapshot_gpu_count(in->snap);
	json_t *arr = json_array();

	for (size_t g = 0; arr && in->pool_of && g < n; g++) {
		const char *name = in->pool_of[g];
		const char *desc = NULL;
		bool restricted = false, seen = false;
		size_t idx;

		if (!name || !name[0])
			continue;
		for (size_t k = 0; k < g && !seen; k++)
			seen = in->pool_of[k] && !strcmp(in->pool_of[k], name);
		if (seen)
			continue;
		if (gpuctl_config_pool_find(NULL, cfg, name, &idx) >= 0)
			(void)gpuctl_config_pool_get(cfg, idx, NULL, &desc, &restricted, NULL,
			                             NULL);
		json_t *o = json_object(), *gpus = json_array();
		for (size_t k = g; gpus && k < n; k++)
			if (in->pool_of[k] && !strcmp(in->pool_of[k], name) &&
			    json_array_append_new(gpus, json_integer((json_int_t)k)) < 0) {
				json_decref(gpus);
				gpus = NULL;
			}
		if (!o || !gpus || json_put(o, "name", json_text(name)) < 0 ||
		    json_put(o, "description", json_string_or_null(desc)) < 0 ||
		    json_put(o, "restricted", json_boolean(restricted)) < 0 ||
		    json_put(o, "gpus", gpus) < 0 || json_array_append_new(arr, o) < 0) {
			json_decref(o);
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static json_t *peers_json(const struct gpuctl_config_status_page *sp)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && sp->peers[i]; i++)
		if (json_array_append_new(arr, json_text(sp->peers[i])) < 0) {
			json_decref(arr);
			return NULL;
		}
	return arr;
}

int status_render(const struct status_input *in, char **ret_text, size_t *ret_len)
{
	struct gpuctl_config_status_page sp;
	size_t n = gpuctl_snapshot_gpu_count(in->snap);
	json_t *root = json_object(), *gpus = json_array(), *waiting = NULL;
	int r = root && gpus ? 0 : -ENOMEM;

	gpuctl_config_status_page(gpuctl_site_config(in->site), &sp);
	for (size_t g = 0; r >= 0 && g < n; g++) {
		json_t *o = gpu_json(in, g, sp.hide_users);
		if (!o || json_array_append_new(gpus, o) < 0)
			r = -ENOMEM;
	}
	if (r >= 0)
		r = waiting_json(in, sp.hide_users, &waiting);
	if (r >= 0 && json_put(root, "waiting", waiting ? waiting : json_null()) < 0)
		r = -ENOMEM;
	if (r >= 0 && (json_put(root, "version", json_integer(STATUS_VERSION)) < 0 ||
	               json_put(root, "source", json_string(in->source)) < 0 ||
	               json_put(root, "host", json_text(in->hostname)) < 0 ||
	               json_put(root, "time", json_real(in->wall)) < 0 ||
	               json_put(root, "interval_s", json_real(in->interval)) < 0 ||
	               json_put(root, "users_shown", json_boolean(!sp.hide_users)) < 0 ||
	               json_put(root, "history_since",
	                        in->history ? json_real(status_history_since(in->history))
	                                    : json_null()) < 0 ||
	               json_put(root, "history_bucket_s", json_integer(STATUS_BUCKET_S)) < 0 ||
	               json_put(root, "gpus", json_incref(gpus)) < 0 ||
	               json_put(root, "pools", pools_json(in)) < 0 ||
	               json_put(root, "peers", peers_json(&sp)) < 0))
		r = -ENOMEM;
	json_decref(gpus);
	if (r >= 0) {
		char *text = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII);
		if (!text)
			r = -ENOMEM;
		else {
			*ret_text = text;
			*ret_len = strlen(text);
		}
	}
	json_decref(root);
	return r;
}

int status_origin(const char *url, char *buf, size_t size)
{
	const char *p = strstr(url, "://");
	size_t scheme, end, port_at;

	if (!p)
		return -EINVAL;
	scheme = (size_t)(p - url);
	end = scheme + 3 + strcspn(p + 3, "/");
	if (end >= size)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < end; i++)
		buf[i] = (char)(url[i] >= 'A' && url[i] <= 'Z' ? url[i] - 'A' + 'a' : url[i]);
	buf[end] = '\0';
	/* the browser leaves the scheme's default port out (RFC 6454, 6.2) */
	port_at = end;
	while (port_at > scheme + 3 && buf[port_at - 1] != ':' && buf[port_at - 1] != ']')
		port_at--;
	if (port_at > scheme + 3 && buf[port_at - 1] == ':' &&
	    ((!strncmp(buf, "http:", 5) && !strcmp(buf + port_at, "80")) ||
	     (!strncmp(buf, "https:", 6) && !strcmp(buf + port_at, "443"))))
		buf[port_at - 1] = '\0';
	return 0;
}
