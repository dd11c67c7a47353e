// SPDX-License-Identifier: MIT
/*
 * top-model.c: what `gpuctl top` shows, read once per refresh: a refreshed snapshot, the lease
 * list, the foreign processes, the wait queue, the health verdicts and each compute process's
 * host facts.
 *
 * Decisions:
 * - NVML is read on the sampler's thread (top_take, with its own context; sampler.h) and
 *   nothing else is: the rest of a refresh runs on the main thread once the sample is in
 *   (top_model_update), so a hung driver call stops the samples, never the screen.
 * - NVML is read as `gpuctl watch` reads it: the first snapshot reads identity, static facts
 *   and every health field; each refresh after it is a gpuctl_snapshot_refresh of the shown
 *   fields (utilisation, memory used, power, temperature) and the processes with their SM
 *   share, plus TOP_HEALTH_PER_REFRESH of the health fields in rotation, so the NVML part of
 *   a verdict is never more than a few refreshes old while a refresh costs no more NVML calls
 *   than `watch -s pucm --procs` would (tests/cli/test_top.py counts them).
 * - Everything else goes through the library exactly as `gpuctl ps` uses it: gpuctl_lease_list
 *   for holders and shares, gpuctl_foreign_scan for processes of no lease (the rule
 *   select-and-lease applies), gpuctl_wait_list for the queue, gpuctl_site_health for the
 *   verdict (the XIDs of the kernel log and the health state file included).
 * - The lease list and the wait queue are read again only when something they show may have
 *   changed. A name in the lease directory's parts (inotify on DIR, locks/, owners/, queue/
 *   and each owners/<uid>/ and queue/<uid>/): a holder's record written (every lease taken
 *   writes one), a record or ticket removed (release), a lock file made, a ticket closed by
 *   its waiter's end (a waiter writes its ticket, so its last close, killed or not, is
 *   IN_CLOSE_WRITE). What no event shows is a holder killed: lock files are opened read-only,
 *   and a close that is no write is not watched (every probe makes one). So each leased
 *   device is asked whether its lease is the one read (gpuctl_lease_list_current: held still
 *   locked exclusively, shared still declaring the same total), and a holder gone without a
 *   word is seen at the next refresh (/proc/locks would cost more: the kernel's global lock
 *   and a line per lock on the machine). A new snapshot's devices, or 10 s since the last read,
 *   read them too. The watches are set before the lists are read, so a change
 *   during a read is an event at the next refresh. Reading the lists costs a few syscalls per
 *   device (its lock probe) plus the records: most of an idle refresh's system time.
 * - The foreign-process scan (read_foreign) is redone with the lists, when the processes
 *   change, or after TOP_LISTS_MAX_AGE; in between the last scan's classification is judged
 *   again (gpuctl_foreign_rejudge: no file read).
 * - A lease directory that did not exist when top started is looked for at each refresh
 *   (one lstat); once it exists the site is opened again, as at a start.
 * - Each process's workload (gpuctl_workloads_get) comes from one cache kept for the life of
 *   top, asked with the start time the stat read of the process gives anyway: a process it
 *   knows costs no file, a reused PID (another start time) is read again. The cache is swept
 *   once per refresh, before the rows are made, so the rows' pointers into it stay valid
 *   until the next refresh, and a process that ended is forgotten one refresh later.
 * - A failed refresh keeps the last state and says why (m->error): the view shows a line and
 *   the sampler tries again at the next interval, refreshing the last good sample. A change
 *   in the number of GPUs takes a new snapshot.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "hostproc.h"
#include "nss.h"
#include "sampler.h"
#include "top.h"

#define TOP_HEALTH_PER_REFRESH 2
#define TOP_LISTS_MAX_AGE      10.0 /* seconds: the lease and wait lists are read again */
#define TOP_COMMAND_MAX_AGE    10.0 /* seconds: a process's command line is read again */

/* Read at every refresh: what the bars and the process list show. */
static const enum gpuctl_field shown_fields[] = {
        GPUCTL_F_UTIL_GPU,   GPUCTL_F_UTIL_MEMORY, GPUCTL_F_MEMORY_USED,
        GPUCTL_F_POWER_DRAW, GPUCTL_F_TEMP,
};
#define N_SHOWN (sizeof(shown_fields) / sizeof(shown_fields[0]))

/* Read once, with the first snapshot: the scales of the bars. */
static const enum gpuctl_field static_fields[] = {
        GPUCTL_F_MEMORY_TOTAL,
        GPUCTL_F_POWER_LIMIT,
        GPUCTL_F_MIG_MODE,
};
#define N_STATIC (sizeof(static_fields) / sizeof(static_fields[0]))

size_t top_shown_fields(enum gpuctl_field *out, size_t max)
{
	size_t n = 0;
	for (; n < N_SHOWN && n < max; n++)
		out[n] = shown_fields[n];
	return n;
}

/* Whether health field f needs re-reading in the rotation: identity and what every refresh
 * reads anyway do not. */
static bool rotated(enum gpuctl_field f)
{
	if (f == GPUCTL_F_UUID || f == GPUCTL_F_NAME)
		return false;
	for (size_t k = 0; k < N_SHOWN; k++)
		if (shown_fields[k] == f)
			return false;
	return true;
}

/* The first snapshot's fields: shown, static and every health field. */
static size_t first_fields(enum gpuctl_field *out)
{
	size_t n = 0, nh = 0;
	const enum gpuctl_field *hf = gpuctl_health_fields(&nh);

	for (size_t k = 0; k < N_SHOWN; k++)
		out[n++] = shown_fields[k];
	for (size_t k = 0; k < N_STATIC; k++)
		out[n++] = static_fields[k];
	for (size_t k = 0; k < nh; k++)
		out[n++] = hf[k];
	return n;
}

static void set_error(struct top_model *m, const char *what, int r)
{
	const char *msg = gpuctl_errmsg(m->cli->ctx);
	snprintf(m->error, sizeof(m->error), "%s: %s", what, msg && msg[0] ? msg : strerror(-r));
}

/* GPU g's pool names, from the configuration (as gpuctl ps). 0, or -errno (message on ctx). */
static int read_pools(struct top_model *m)
{
	const struct gpuctl_config *cfg = gpuctl_site_config(m->cli->site);
	int *map = NULL;

	for (size_t g = 0; g < m->n_gpus; g++)
		m->gpus[g].pool = "default";
	if (gpuctl_config_pool_count(cfg) == 0)
		return 0;
	int r = gpuctl_config_pool_map(m->cli->ctx, cfg, m->snap, &map);
	if (r < 0)
		return r;
	for (size_t g = 0; g < m->n_gpus; g++)
		if (map[g] >= 0)
			(void)gpuctl_config_pool_get(cfg, (size_t)map[g], &m->gpus[g].pool, NULL,
			                             NULL, NULL, NULL);
	free(map);
	return 0;
}

/* Adds the snapshot's utilisation and memory to the history rings. */
static void record_history(struct top_model *m)
{
	for (size_t g = 0; g < m->n_gpus; g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(m->snap, g);
		int64_t u = -1, used, total;
		int8_t mem = -1;

		if (gpuctl_gpu_int(gpu, GPUCTL_F_UTIL_GPU, &u) < 0 || u < 0 || u > 100)
			u = -1;
		if (gpuctl_gpu_int(gpu, GPUCTL_F_MEMORY_USED, &used) == 0 &&
		    gpuctl_gpu_int(gpu, GPUCTL_F_MEMORY_TOTAL, &total) == 0 && total > 0 &&
		    used >= 0 && used <= total)
			mem = (int8_t)(used * 100 / total);
		m->gpus[g].util[m->hist_pos] = (int8_t)u;
		m->gpus[g].mem[m->hist_pos] = mem;
	}
	m->hist_pos = (m->hist_pos + 1) % TOP_HISTORY;
	if (m->hist_len < TOP_HISTORY)
		m->hist_len++;
}

/* The row of the previous refresh for the same process (pid and start time), or NULL. */
static const struct top_proc *previous(const struct top_proc *old, size_t n_old, uint32_t pid,
                                       uint64_t start)
{
	for (size_t i = 0; i < n_old; i++)
		if (old[i].pid == pid && old[i].start_ticks == start)
			return &old[i];
	return NULL;
}

/* The compute processes of snap's GPUs, those of lost GPUs (which top shows no rows of)
 * included or not. */
static size_t snapshot_procs(const struct gpuctl_snapshot *snap, bool lost_too)
{
	size_t n = 0;

	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
		n += gpuctl_gpu_lost(gpu) && !lost_too ? 0 : gpuctl_gpu_proc_count(gpu);
	}
	return n;
}

/* The name of uid into buf (its number when it has none), as the library names a process's
 * owner. */
static void user_name(uint32_t uid, char *buf, size_t size)
{
	char *name = nss_user_name((uid_t)uid);

	if (name)
		snprintf(buf, size, "%s", name);
	else
		snprintf(buf, size, "%" PRIu32, uid);
	free(name);
}

/* A row's owner and command: from the row of the previous refresh for the same process
 * (before, NULL if none) where they cannot have changed, else from /proc. The owner is the
 * stat file's (uid), its name looked up again only when the uid changed; the command line is
 * read again when the kernel's name of the process changed (an exec) or it is
 * TOP_COMMAND_MAX_AGE old (a process may rewrite its own arguments). */
static void identify(struct top_proc *row, const struct top_proc *before,
                     const struct hostproc_stat *st, uint32_t uid, double now)
{
	row->uid = uid;
	row->has_uid = true;
	if (before && before->has_uid && before->uid == uid)
		memcpy(row->user, before->user, sizeof(row->user));
	else
		user_name(uid, row->user, sizeof(row->user));
	if (before && strcmp(before->comm, st->comm) == 0 &&
	    now - before->command_time < TOP_COMMAND_MAX_AGE) {
		memcpy(row->command, before->command, sizeof(row->command));
		row->command_time = before->command_time;
	} else {
		hostproc_cmdline((pid_t)row->pid, row->command, sizeof(row->command));
		row->command_time = now;
	}
	memcpy(row->comm, st->comm, sizeof(row->comm));
	if (!row->command[0]) /* a kernel thread, a zombie: the kernel's name */
		snprintf(row->command, sizeof(row->command), "%s", st->comm[0] ? st->comm : "?");
}

/* Reads pid's stat, and its owner (uid): the previous refresh's for the same process (pid and
 * start time), else the stat file's (one fstat fewer per process and refresh; a process that
 * changes its effective uid keeps the owner top first saw). 0, or -errno as
 * hostproc_read_stat. */
static int read_stat(uint32_t pid, const struct top_proc *old, size_t n_old,
                     struct hostproc_stat *st, uint32_t *ret_uid)
{
	const struct top_proc *seen = NULL, *before;
	int r;

	for (size_t i = 0; i < n_old && !seen; i++)
		if (old[i].pid == pid && old[i].has_uid)
			seen = &old[i];
	r = hostproc_read_stat_uid((pid_t)pid, st, seen ? NULL : ret_uid);
	if (r < 0 || !seen)
		return r;
	before = previous(old, n_old, pid, st->start_ticks);
	if (!before) /* the pid is another process's now */
		return hostproc_read_stat_uid((pid_t)pid, st, ret_uid);
	*ret_uid = before->uid;
	return 0;
}

/* Fills m->procs from m->snap and /proc; old/n_old: the rows of the previous refresh (for
 * %CPU, owner and command) taken `dt` seconds before, `now` (CLOCK_MONOTONIC). The snapshot
 * has no owner or command (GPUCTL_SNAP_NO_PROC_IDENTITY): one read of /proc/PID/stat per
 * process gives CPU, memory, start time, owner and name. -ENOMEM. */
static int read_procs(struct top_model *m, const struct top_proc *old, size_t n_old, double dt,
                      double now)
{
	size_t n = snapshot_procs(m->snap, false);
	long hz = sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);
	struct timespec boot;
	/* seconds since boot: /proc/uptime's clock, read without a file */
	double up = n && clock_gettime(CLOCK_BOOTTIME, &boot) == 0
	                    ? (double)boot.tv_sec + (double)boot.tv_nsec / 1e9
	                    : -1;

	struct top_proc *rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	n = 0;
	if (m->wls) /* forgets those not asked for since the last refresh: ended */
		(void)gpuctl_workloads_sweep(m->wls);
	for (size_t i = 0; i < m->n_shown; i++) {
		size_t g = m->shown[i];
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(m->snap, g);
		size_t np = gpuctl_gpu_lost(gpu) ? 0 : gpuctl_gpu_proc_count(gpu);
		for (size_t k = 0; k < np; k++) {
			const struct gpuctl_proc *p = gpuctl_gpu_proc(gpu, k);
			struct top_proc *row = &rows[n++];
			struct hostproc_stat st;
			uint32_t uid;

			row->gpu = g;
			row->pid = gpuctl_proc_pid(p);
			row->foreign = m->foreign && gpuctl_foreign_proc(m->foreign, g, k);
			if (gpuctl_proc_used_memory(p, &row->gpu_mem) < 0)
				row->gpu_mem = -1;
			if (gpuctl_proc_util(p, GPUCTL_PROC_SM, &row->sm) < 0)
				row->sm = -1;
			snprintf(row->user, sizeof(row->user), "?");
			snprintf(row->command, sizeof(row->command), "?");
			row->cpu = row->elapsed = -1;
			row->host_mem = -1;
			if (row->pid > 0 && read_stat(row->pid, old, n_old, &st, &uid) == 0) {
				const struct top_proc *before =
				        previous(old, n_old, row->pid, st.start_ticks);
				identify(row, before, &st, uid, now);
				row->start_ticks = st.start_ticks;
				if (m->wls && gpuctl_workloads_get(m->cli->ctx, m->wls, row->pid,
				                                   st.start_ticks, &row->wl) < 0)
					row->wl = NULL;
				row->cpu_ticks = st.cpu_ticks;
				if (page > 0)
					row->host_mem = (int64_t)st.rss_pages * page;
				if (hz > 0 && up >= 0)
					row->elapsed = up - (double)st.start_ticks / (double)hz;
				if (row->elapsed < 0 && row->elapsed != -1)
					row->elapsed = 0;
				if (before && hz > 0 && dt > 0 && st.cpu_ticks >= before->cpu_ticks)
					row->cpu = (double)(st.cpu_ticks - before->cpu_ticks) /
					           (double)hz / dt * 100.0;
			}
		}
	}
	free(m->procs);
	m->procs = rows;
	m->n_procs = n;
	return 0;
}

/* ---- when to read the lease directory again ---- */

#define WATCH_MASK                                                                                 \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB |        \
	 IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)

static uint64_t hash_str(uint64_t h, const char *str)
{
	for (const char *c = str ? str : ""; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ull;
	return (h ^ 0xff) * 1099511628211ull; /* an end mark: "ab","c" is not "a","bc" */
}

/* Watches path/name (name NULL: path itself). */
static void watch(int ifd, const char *path, const char *name)
{
	char p[4096];

	if (snprintf(p, sizeof(p), "%s%s%s", path, name ? "/" : "", name ? name : "") <
	    (int)sizeof(p))
		(void)inotify_add_watch(ifd, p, WATCH_MASK);
}

/* Watches path/part and each directory in it (a user's owners/<uid>/ or queue/<uid>/). */
static void watch_part(int ifd, const char *path, const char *part)
{
	char p[4096];
	DIR *d;
	struct dirent *de;

	if (snprintf(p, sizeof(p), "%s/%s", path, part) >= (int)sizeof(p))
		return;
	(void)inotify_add_watch(ifd, p, WATCH_MASK);
	d = opendir(p);
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			watch(ifd, p, de->d_name);
	if (d)
		closedir(d);
}

/* Whether the leases are as they were read (gpuctl_lease_list_current for each leased
 * device): what ends without a watched event, a holder killed. A device that is taken, a
 * shared lease or a waiter that arrives or goes, show in a name or a ticket's close. */
static bool locks_unchanged(const struct top_model *m, struct gpuctl_lease_dir *dir)
{
	if (!m->leases || !m->waiters)
		return false;
	for (size_t i = 0; i < gpuctl_lease_list_count(m->leases); i++) {
		enum gpuctl_lease_state st;
		if (gpuctl_lease_list_get(m->leases, i, NULL, NULL, &st, NULL, NULL) < 0)
			return false;
		if ((st == GPUCTL_LEASE_SHARED || st == GPUCTL_LEASE_HELD) &&
		    !gpuctl_lease_list_current(m->leases, i, dir, m->snap))
			return false;
	}
	return true;
}

/* Whether an inotify event came (the queue read to its end). */
static bool drain(int ifd)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool any = false;

	while (read(ifd, buf, sizeof(buf)) > 0)
		any = true;
	return any;
}

/* The devices of snap (GPUs and MIG devices, by UUID, in order), which the lists are of. */
static uint64_t devices_hash(const struct gpuctl_snapshot *snap)
{
	uint64_t h = 14695981039346656037ull;

	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
		h = hash_str(h, gpuctl_gpu_str(gpu, GPUCTL_F_UUID));
		for (size_t k = 0; k < gpuctl_gpu_mig_count(gpu); k++)
			h = hash_str(h, gpuctl_mig_uuid(gpuctl_gpu_mig(gpu, k)));
	}
	return h;
}

/* Whether the lease and wait lists must be read again. */
static bool lists_stale(struct top_model *m, struct gpuctl_lease_dir *dir, double now)
{
	bool stale = !m->lists_current || m->lease_ifd < 0 ||
	             devices_hash(m->snap) != m->lists_devices ||
	             now - m->lists_time >= TOP_LISTS_MAX_AGE;

	if (m->lease_ifd >= 0 && drain(m->lease_ifd))
		stale = true;
	return stale || !locks_unchanged(m, dir);
}

/* Reads the lease list and the wait queue of dir again; the watches are set first, so what
 * changes during the read is an event at the next refresh. */
static void read_lists(struct top_model *m, struct gpuctl_lease_dir *dir, double now)
{
	int r, r2;

	gpuctl_lease_list_free(m->leases);
	m->leases = NULL;
	gpuctl_wait_list_free(m->waiters);
	m->waiters = NULL;
	if (m->lease_ifd >= 0) {
		const char *path = gpuctl_lease_dir_path(dir);
		watch(m->lease_ifd, path, NULL);
		watch(m->lease_ifd, path, "locks");
		watch_part(m->lease_ifd, path, "owners");
		watch_part(m->lease_ifd, path, "queue");
	}
	r = gpuctl_lease_list(m->cli->ctx, dir, m->snap, &m->leases);
	if (r < 0)
		set_error(m, "lease directory", r);
	r2 = gpuctl_wait_list(m->cli->ctx, dir, &m->waiters);
	if (r2 < 0)
		set_error(m, "wait queue", r2);
	m->lists_current = r >= 0 && r2 >= 0;
	m->lists_devices = devices_hash(m->snap);
	m->lists_time = now;
}

/* The lease directory, when the site had none (it did not exist when top started) and it
 * exists now: the site is opened again (its configuration may be the directory's), and the
 * pools and thresholds read from it. */
static struct gpuctl_lease_dir *late_lease_dir(struct top_model *m)
{
	const char *path = gpuctl_site_lease_dir_path(m->cli->site);
	struct gpuctl_site *site = NULL;
	struct stat st;
	int r;

	if (!path || lstat(path, &st) < 0)
		return NULL;
	r = gpuctl_site_open(m->cli->ctx, m->cli->config_path, path, 0, &site);
	if (r < 0) {
		set_error(m, "lease directory", r);
		return NULL;
	}
	gpuctl_site_free(m->cli->site);
	m->cli->site = site;
	m->lreq = (struct gpuctl_lease_request)GPUCTL_LEASE_REQUEST_INIT;
	(void)gpuctl_site_lease_defaults(site, &m->lreq);
	r = read_pools(m);
	if (r < 0)
		set_error(m, "pools", r);
	m->lists_current = false;
	return gpuctl_site_lease_dir(site);
}

/* The foreign processes of m->snap. No compute process, no foreign one: the scan
 * (select.lock, the owner records) is skipped, and a NULL m->foreign answers false for every
 * process and device. Where the leases did not change since the last scan (its classification
 * still there, read_rest dropped it otherwise), the processes are the same and it is less than
 * TOP_LISTS_MAX_AGE old (a process's parents can change: its parent's end), the last scan's
 * classification is judged again with this snapshot's memory and utilisation, without a read. */
static void read_foreign(struct top_model *m, struct gpuctl_lease_dir *dir, double now)
{
	struct gpuctl_foreign *f = NULL;
	int r = -ESTALE;

	if (snapshot_procs(m->snap, true) == 0) {
		gpuctl_foreign_free(m->foreign);
		m->foreign = NULL;
		return;
	}
	if (m->foreign && now - m->foreign_time < TOP_LISTS_MAX_AGE)
		r = gpuctl_foreign_rejudge(m->cli->ctx, m->foreign, m->snap, &m->lreq, &f);
	if (r == -ESTALE) {
		r = gpuctl_foreign_scan(m->cli->ctx, dir, m->snap, &m->lreq, &f);
		m->foreign_time = now;
	}
	gpuctl_foreign_free(m->foreign);
	m->foreign = f;
	if (r < 0)
		set_error(m, "foreign processes", r);
}

/* Feeds the refresh to the idle tracker (made at the first) and marks the idle processes. */
static void track_idle(struct top_model *m, double now)
{
	struct gpuctl_idle_config cfg = GPUCTL_IDLE_CONFIG_INIT;

	cfg.window_s = m->idle_window ? m->idle_window : cfg.window_s;
	if (!m->idle && gpuctl_idle_new(&cfg, &m->idle) < 0)
		m->idle = NULL;
	if (m->idle &&
	    gpuctl_idle_feed(m->cli->ctx, m->idle, (uint64_t)(now * 1000), m->snap, m->leases) < 0)
		set_error(m, "idle", -ENOMEM);
	for (size_t i = 0; i < m->n_procs; i++) {
		struct top_proc *p = &m->procs[i];
		const char *uuid =
		        gpuctl_gpu_str(gpuctl_snapshot_gpu(m->snap, p->gpu), GPUCTL_F_UUID);
		uint64_t ms = 0;
		p->idle = m->idle && gpuctl_idle_proc(m->idle, uuid, p->pid, &ms) == 1;
		p->idle_ms = p->idle ? ms : 0;
	}
}

/* Everything but NVML, for m->snap: leases, foreign processes, waiters, health, processes.
 * A part that cannot be read is left empty and named in m->error. */
static void read_rest(struct top_model *m, double now)
{
	struct gpuctl_lease_dir *dir = gpuctl_site_lease_dir(m->cli->site);
	struct top_proc *old = m->procs;
	size_t n_old = m->n_procs;
	double dt = m->sample_time > 0 ? now - m->sample_time : 0;
	int r;

	if (!dir)
		dir = late_lease_dir(m);
	gpuctl_health_report_free(m->health);
	m->health = NULL;
	if (dir && lists_stale(m, dir, now)) {
		read_lists(m, dir, now);
		gpuctl_foreign_free(m->foreign); /* the leases may have changed: a new scan */
		m->foreign = NULL;
	}
	read_foreign(m, dir, now);
	r = gpuctl_site_health(m->cli->ctx, m->cli->site, m->snap, &m->health);
	if (r < 0)
		set_error(m, "health", r);
	m->procs = NULL; /* old is kept until the new rows are made */
	m->n_procs = 0;
	r = read_procs(m, old, n_old, dt, now);
	if (r < 0)
		set_error(m, "processes", r);
	free(old);
	record_history(m);
	m->sample_time = now;
	track_idle(m, now);
}

/* Makes m->gpus fit m->snap (after the first or a new snapshot). -ENOMEM. */
static int fit_gpus(struct top_model *m)
{
	size_t n = gpuctl_snapshot_gpu_count(m->snap);
	struct top_gpu *g = calloc(n ? n : 1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	free(m->gpus);
	m->gpus = g;
	m->n_gpus = n;
	m->hist_pos = m->hist_len = 0;
	free(m->shown); /* resolved again for this snapshot (resolve_shown) */
	m->shown = NULL;
	m->n_shown = 0;
	return 0;
}

/* ---- the sampler's side ---- */

/* One sample: a snapshot, and whether it is a first one (identity and static facts read
 * anew: the model fits its GPUs to it). */
struct top_sample {
	struct gpuctl_snapshot *snap; /* owned */
	bool whole;
};

/* the health verdicts' facts but the NVLink error counters: refreshes keep the first
 * snapshot's NVLink states and read no counters, so no refresh could judge their rate */
#define TOP_SNAP_FLAGS                                                                             \
	(GPUCTL_SNAP_PROC_UTIL | GPUCTL_SNAP_MIG | GPUCTL_SNAP_HEALTH | GPUCTL_SNAP_NVLINK_STATE | \
	 GPUCTL_SNAP_NO_RATE_COUNTERS | GPUCTL_SNAP_NO_PROC_IDENTITY)

void top_sample_free(void *data)
{
	struct top_sample *t = data;

	gpuctl_snapshot_free(t->snap);
	free(t);
}

/* A first snapshot: the shown and static fields and every health field. */
static int take_whole(struct gpuctl_ctx *ctx, struct gpuctl_snapshot **ret_snap)
{
	enum gpuctl_field fields[N_SHOWN + N_STATIC + GPUCTL__F_COUNT];
	size_t n = first_fields(fields);

	return gpuctl_snapshot_take_fields(ctx, TOP_SNAP_FLAGS, fields, n, ret_snap);
}

/* A refresh of prev: the shown fields and the next TOP_HEALTH_PER_REFRESH health fields of
 * the rotation. */
static int take_refresh(struct gpuctl_ctx *ctx, struct top_sampling *ts,
                        const struct gpuctl_snapshot *prev, struct gpuctl_snapshot **ret_snap)
{
	enum gpuctl_field fields[N_SHOWN + TOP_HEALTH_PER_REFRESH];
	size_t n = 0, nh = 0, tried = 0;
	const enum gpuctl_field *hf = gpuctl_health_fields(&nh);

	for (size_t k = 0; k < N_SHOWN; k++)
		fields[n++] = shown_fields[k];
	while (n < N_SHOWN + TOP_HEALTH_PER_REFRESH && tried < nh) {
		enum gpuctl_field f = hf[ts->health_next % nh];
		ts->health_next = (ts->health_next + 1) % nh;
		tried++;
		if (rotated(f))
			fields[n++] = f;
	}
	return gpuctl_snapshot_refresh(
	        ctx, prev, GPUCTL_SNAP_PROC_UTIL | GPUCTL_SNAP_MIG | GPUCTL_SNAP_NO_PROC_IDENTITY,
	        fields, n, ret_snap);
}

int top_take(struct gpuctl_ctx *ctx, void *userdata, const void *prevp, void **ret_data)
{
	const struct top_sample *prev = prevp;
	struct top_sample *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return -ENOMEM;
	r = prev ? take_refresh(ctx, userdata, prev->snap, &t->snap) : -ESTALE;
	if (r == -ESTALE) { /* the first, or the number of GPUs changed */
		t->whole = true;
		r = take_whole(ctx, &t->snap);
	}
	if (r < 0) {
		free(t);
		return r;
	}
	*ret_data = t;
	return 0;
}

/* ---- the main thread's side ---- */

void top_model_init(struct top_model *m, struct cli *cli, const char *ids)
{
	m->cli = cli;
	m->ids = ids;
	m->lease_ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (gethostname(m->host, sizeof(m->host) - 1) < 0)
		m->host[0] = '\0';
	m->lreq = (struct gpuctl_lease_request)GPUCTL_LEASE_REQUEST_INIT;
	(void)gpuctl_site_lease_defaults(cli->site, &m->lreq);
	if (gpuctl_workloads_new(cli->ctx, &m->wls) < 0)
		m->wls = NULL; /* every workload unknown ("?") */
}

/* The GPUs shown of m->snap: -i's, else every one. 0, or -errno (-EINVAL: an entry that does
 * not resolve, message on the context); none shown then. */
static int resolve_shown(struct top_model *m)
{
	size_t *v = NULL, n = gpuctl_snapshot_gpu_count(m->snap);
	int r = 0;

	free(m->shown);
	m->shown = NULL;
	m->n_shown = 0;
	if (m->ids) {
		r = gpuctl_ids_resolve(m->cli->ctx, m->snap, m->ids, &v, &n);
		if (r < 0)
			return r;
	} else {
		v = calloc(n ? n : 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			v[i] = i;
	}
	m->shown = v;
	m->n_shown = n;
	return 0;
}

/* Makes smp (a good sample) the current one: a whole snapshot fits the GPUs and their pools
 * to it. 0, or -errno from the pools (message on the context). */
static int take_sample(struct top_model *m, const struct sampler_sample *smp)
{
	const struct top_sample *t = smp->data;
	int r = 0;

	sampler_put(m->sample);
	m->sample = sampler_hold(smp);
	m->snap = t->snap;
	m->values_time = smp->wall;
	if (t->whole) {
		free(m->procs);
		m->procs = NULL;
		m->n_procs = 0;
		r = fit_gpus(m);
		if (r >= 0)
			r = read_pools(m);
	}
	return r;
}

int top_model_start(struct top_model *m, const struct sampler_sample *smp)
{
	int r;

	if (smp->status < 0)
		return cli_driver_error_msg(smp->status, smp->error);
	r = take_sample(m, smp);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(m->cli->ctx);
		cli_error("top: %s", msg && msg[0] ? msg : strerror(-r));
		return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
	}
	r = resolve_shown(m);
	if (r < 0) { /* as cli_select_gpus says it for list -i */
		const char *msg = gpuctl_errmsg(m->cli->ctx);
		if (r == -EINVAL && msg && msg[0])
			cli_error("--id: %s", msg);
		else
			cli_error("--id: '%s': %s", m->ids, strerror(-r));
		return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
	}
	read_rest(m, cli_now(CLOCK_MONOTONIC));
	m->refreshes = 1;
	return 0;
}

int top_model_update(struct top_model *m, const struct sampler_sample *smp)
{
	int r;

	m->error[0] = '\0';
	if (smp->status < 0) {
		snprintf(m->error, sizeof(m->error), "NVML: %.*s", (int)sizeof(m->error) - 8,
		         smp->error);
		return smp->status;
	}
	r = take_sample(m, smp);
	if (r < 0)
		set_error(m, "pools", r);
	/* a new snapshot (the number of GPUs changed): -i names them anew, or says why not */
	if (!m->shown && (r = resolve_shown(m)) < 0)
		set_error(m, "--id", r);
	read_rest(m, cli_now(CLOCK_MONOTONIC));
	m->refreshes++;
	return 0;
}

void top_model_free(struct top_model *m)
{
	sampler_put(m->sample);
	gpuctl_health_report_free(m->health);
	gpuctl_lease_list_free(m->leases);
	gpuctl_foreign_free(m->foreign);
	gpuctl_wait_list_free(m->waiters);
	free(m->gpus);
	free(m->shown);
	free(m->procs);
	gpuctl_workloads_free(m->wls);
	gpuctl_idle_free(m->idle);
	if (m->lease_ifd >= 0)
		close(m->lease_ifd);
	memset(m, 0, sizeof(*m));
	m->lease_ifd = -1;
}

int top_gpu_verdict(const struct top_model *m, size_t g, char *finding, size_t size)
{
	if (size)
		finding[0] = '\0';
	if (!m->health)
		return -1;
	for (size_t i = 0; i < gpuctl_health_finding_count(m->health); i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(m->health, i);
		if (f->gpu != g || f->severity == GPUCTL_HEALTH_OK)
			continue;
		char msg[1024];

		snprintf(finding, size, "%s: %s", f->check,
		         format_health_words(f->message, msg, sizeof(msg)));
		break;
	}
	return gpuctl_health_verdict(m->health, g);
}
