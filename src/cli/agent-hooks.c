// SPDX-License-Identifier: MIT
/*
 * agent-hooks.c: the node agent's hooks (agent-hooks.h; docs/hooks.md).
 *
 * Decisions:
 * - One thread of the hooks' own starts, watches and reaps them; the sample loop only queues
 *   (agent_hooks_fire: a lock held for a copy), so a hook that hangs, floods its output or
 *   ignores SIGTERM costs the loop nothing. Its poll(2) waits on an eventfd (new events, stop),
 *   each run's output pipe and each run's pidfd (the leader's exit), with the nearest deadline
 *   as timeout: children are reaped as they end (waitpid on their own pid, never -1).
 * - A run: posix_spawn (no fork of a process with NVML's threads), the program with argv
 *   {path, event} and a fixed minimal environment, in "/", in a process group of its own (its
 *   timeout ends all it started), every signal at its default and none blocked (the agent
 *   ignores SIGXFSZ and blocks SIGINT/SIGTERM, which a child would inherit), stdin a sealed
 *   memfd holding the event (never a pipe to keep fed; a hook that does not read it blocks
 *   nothing), stdout and stderr one pipe read into a bounded buffer, logged when it ends.
 * - At hook_timeout: SIGTERM to the group, SIGKILL HOOK_KILL_GRACE_S later. A leader that has
 *   exited while something it started keeps the pipe open ends the run at the timeout too
 *   (its group is killed).
 * - At most hook_max_running runs; further events wait, AGENT_HOOKS_QUEUE_MAX of them, in order;
 *   past that they are dropped, said when a streak of drops starts and with its count when it
 *   ends. A failure (exit status, signal, timeout, a program that cannot run or that is no
 *   longer safe to run) is one line; a success says nothing but the hook's own output.
 * - When the agent stops, the hooks running get at most HOOK_STOP_WAIT_S more (a supervisor
 *   waits for us, and hook_timeout may be an hour); the events waiting are not run.
 * - The program is checked when the agent starts (a config error, FILE:LINE) and before each run
 *   (it may have changed): root runs it, so nobody but root and the configuration's owner may
 *   have been able to change it or its directories.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent-hooks.h"
#include "format.h"

#define AGENT_HOOKS_QUEUE_MAX 64   /* events waiting for a free run */
#define HOOK_KILL_GRACE_S     2.0  /* SIGTERM to SIGKILL */
#define HOOK_OUTPUT_MAX       4096 /* bytes of a run's output logged */
#define HOOK_LINE_MAX         500  /* characters of one line of it logged */
#define HOOK_STOP_WAIT_S      5.0  /* at the agent's stop, the longest a hook is still given */

/* One hook running. */
struct run {
	int event;   /* enum gpuctl_hook_event */
	pid_t pid;   /* leader of its process group */
	int pidfd;   /* readable once it has exited; -1: none (looked at often) */
	bool reaped; /* the leader has exited: status is its */
	int out;     /* its stdout and stderr; -1 at EOF */
	char buf[HOOK_OUTPUT_MAX];
	size_t len;      /* bytes in buf */
	size_t more;     /* bytes read past buf (not logged) */
	double deadline; /* CLOCK_MONOTONIC: SIGTERM */
	double kill_at;  /* after SIGTERM: SIGKILL; 0 before */
	bool killed;     /* SIGKILL sent */
	bool orphans;    /* the leader had exited; what it started, holding the pipe, was killed */
	bool stopped;    /* its deadline was brought forward: the agent stops */
	int status;      /* its wait status once reaped */
};

/* An event waiting for a run. */
struct queued {
	int event;
	char *text; /* the JSON object and a newline */
};

struct agent_hooks {
	char *path[GPUCTL_HOOK_COUNT_]; /* the programs, NULL: none */
	uint32_t config_uid;            /* owner of the configuration file */
	double timeout_s;
	unsigned max_running;
	char host[256];

	pthread_mutex_t lock; /* guards the queue, dropped, dropping and stopping */
	struct queued queue[AGENT_HOOKS_QUEUE_MAX];
	size_t q_head, q_n;
	uint64_t dropped; /* events dropped in the current streak */
	bool stopping;
	int wake; /* eventfd: the thread looks at the queue again */
	pthread_t thread;
	bool started;

	/* the thread's own */
	struct run *runs;
	size_t n_runs;
};

static const char *const env[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
        "HOME=/", NULL};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int event_index(const char *event)
{
	for (int i = 0; i < GPUCTL_HOOK_COUNT_; i++)
		if (!strcmp(gpuctl_hook_event_name(i), event))
			return i;
	return -1;
}

/* ---- the program's safety ---- */

/* Why the directory dir (stat'ed as st) is not safe, NULL when it is. */
static const char *dir_why(const char *dir, const struct stat *st, uint32_t uid, char *buf,
                           size_t size)
{
	if (st->st_uid != 0 && st->st_uid != uid)
		(void)snprintf(buf, size, "its directory %s is owned by uid %u", dir,
		               (unsigned)st->st_uid);
	else if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
		(void)snprintf(buf, size, "its directory %s is writable by group or others", dir);
	else
		return NULL;
	return buf;
}

/* Every directory above absolute path p checked. */
static const char *dirs_why(const char *p, uint32_t uid, char *buf, size_t size)
{
	char dir[PATH_MAX];
	size_t len = strlen(p);

	if (len >= sizeof(dir))
		return "path too long";
	for (size_t i = 0; i < len; i++) {
		struct stat st;

		if (p[i] != '/')
			continue;
		memcpy(dir, p, i ? i : 1);
		dir[i ? i : 1] = '\0';
		if (stat(dir, &st) < 0) {
			(void)snprintf(buf, size, "its directory %s: %s", dir, strerror(errno));
			return buf;
		}
		if (dir_why(dir, &st, uid, buf, size))
			return buf;
	}
	return NULL;
}

const char *hook_check(const char *path, uint32_t config_uid, char *buf, size_t size)
{
	char real[PATH_MAX];
	struct stat st;

	if (path[0] != '/')
		return "not an absolute path";
	if (stat(path, &st) < 0 || !realpath(path, real)) {
		(void)snprintf(buf, size, "%s", strerror(errno));
		return buf;
	}
	if (!S_ISREG(st.st_mode))
		return "not a regular file";
	if (!(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
		return "not executable";
	if (st.st_uid != 0 && st.st_uid != config_uid) {
		(void)snprintf(buf, size, "owned by uid %u (not root or the configuration's owner)",
		               (unsigned)st.st_uid);
		return buf;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return "writable by group or others";
	if (dirs_why(path, config_uid, buf, size) || dirs_why(real, config_uid, buf, size))
		return buf;
	return NULL;
}

/* ---- one run ---- */

/* A sealed memfd holding text: the hook's stdin. -errno. */
static int event_file(const char *text)
{
	size_t len = strlen(text), off = 0;
	int fd = memfd_create("gpuctl-hook-event", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int r = w < 0 ? -errno : -EIO;
			close(fd);
			return r;
		}
		off += (size_t)w;
	}
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
	if (lseek(fd, 0, SEEK_SET) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* posix_spawn's attributes for a hook: its own process group, default signals, none blocked. */
static void hook_attr(posix_spawnattr_t *attr)
{
	sigset_t all, none;

	sigfillset(&all);
	sigemptyset(&none);
	posix_spawnattr_init(attr);
	posix_spawnattr_setflags(attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
	                                       POSIX_SPAWN_SETSIGMASK);
	posix_spawnattr_setpgroup(attr, 0);
	posix_spawnattr_setsigdefault(attr, &all);
	posix_spawnattr_setsigmask(attr, &none);
}

/* Starts path for event with text on stdin into *r. 0 or -errno. */
static int run_start(const char *path, int event, const char *text, double timeout_s, struct run *r)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	char *argv[] = {(char *)path, (char *)gpuctl_hook_event_name(event), NULL};
	int fds[2], in, e;
	pid_t pid = 0;

	if ((in = event_file(text)) < 0)
		return in;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		e = -errno;
		close(in);
		return e;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
	posix_spawn_file_actions_addchdir_np(&fa, "/");
	hook_attr(&attr);
	e = posix_spawn(&pid, path, &fa, &attr, argv, (char *const *)env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(in);
	close(fds[1]);
	if (e != 0) {
		close(fds[0]);
		return -e;
	}
	(void)fcntl(fds[0], F_SETFL, O_NONBLOCK);
	*r = (struct run){.event = event, .pid = pid, .out = fds[0]};
	r->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	r->deadline = now_s() + timeout_s;
	return 0;
}

/* Reads what r's pipe has (to EOF: closed). */
static void run_read(struct run *r)
{
	for (;;) {
		char sink[1024];
		bool full = r->len >= sizeof(r->buf);
		ssize_t got = full ? read(r->out, sink, sizeof(sink))
		                   : read(r->out, r->buf + r->len, sizeof(r->buf) - r->len);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EAGAIN)
			return;
		if (got <= 0) {
			close(r->out);
			r->out = -1;
			return;
		}
		if (full)
			r->more += (size_t)got;
		else
			r->len += (size_t)got;
	}
}

/* Reaps r when it has exited. */
static void run_reap(struct run *r)
{
	int st = 0;
	pid_t p = waitpid(r->pid, &st, WNOHANG);

	if (p == r->pid || (p < 0 && errno == ECHILD)) {
		r->status = p == r->pid ? st : 0;
		r->reaped = true;
		if (r->pidfd >= 0)
			close(r->pidfd);
		r->pidfd = -1;
	}
}

/* r's output, one log line per line of it. */
static void log_output(const struct agent_hooks *h, const struct run *r)
{
	const char *name = gpuctl_hook_event_name(r->event);
	size_t b = 0;

	while (b < r->len) {
		const char *nl = memchr(r->buf + b, '\n', r->len - b);
		size_t n = nl ? (size_t)(nl - (r->buf + b)) : r->len - b;
		char raw[HOOK_OUTPUT_MAX + 1], line[4 * HOOK_LINE_MAX + 1];

		memcpy(raw, r->buf + b, n);
		raw[n] = '\0';
		format_cell_text(raw, HOOK_LINE_MAX, line, sizeof(line));
		cli_error("agent: hook on_%s (%s, pid %d): %s", name, h->path[r->event],
		          (int)r->pid, line);
		b += n + 1;
	}
	if (r->more)
		cli_error("agent: hook on_%s (%s, pid %d): (%zu more bytes of output not logged)",
		          name, h->path[r->event], (int)r->pid, r->more);
}

/* The end of r: its output and, for a failure, one line. */
static void run_finish(const struct agent_hooks *h, struct run *r)
{
	const char *name = gpuctl_hook_event_name(r->event);
	char why[256] = "";

	log_output(h, r);
	if (r->kill_at > 0 && r->stopped)
		(void)snprintf(why, sizeof(why),
		               "not done %.0fs after the agent stopped (SIGTERM to its process "
		               "group%s)",
		               HOOK_STOP_WAIT_S, r->killed ? ", SIGKILL 2s later" : "");
	else if (r->kill_at > 0)
		(void)snprintf(why, sizeof(why),
		               "timed out after %.0fs (SIGTERM to its process group%s)",
		               h->timeout_s, r->killed ? ", SIGKILL 2s later" : "");
	else if (WIFEXITED(r->status) && WEXITSTATUS(r->status))
		(void)snprintf(why, sizeof(why), "exited with status %d", WEXITSTATUS(r->status));
	else if (WIFSIGNALED(r->status))
		(void)snprintf(why, sizeof(why), "killed by signal %d (%s)", WTERMSIG(r->status),
		               strsignal(WTERMSIG(r->status)));
	if (r->orphans) {
		size_t n = strlen(why);
		(void)snprintf(why + n, sizeof(why) - n,
		               "%swhat it started held its output past %.0fs: killed",
		               n ? "; " : "", h->timeout_s);
	}
	if (why[0])
		cli_error("agent: hook on_%s (%s, pid %d): %s", name, h->path[r->event],
		          (int)r->pid, why);
}

/* The deadlines of r at now: SIGTERM, SIGKILL; a leader gone with its pipe held past the
 * timeout ends the run. */
static void run_deadlines(struct run *r, double now)
{
	if (now < r->deadline)
		return;
	if (r->reaped) { /* the leader is gone: what holds the pipe is killed */
		(void)kill(-r->pid, SIGKILL);
		r->orphans = r->kill_at == 0; /* else ended by the timeout's kill */
		if (r->out >= 0)
			close(r->out);
		r->out = -1;
		return;
	}
	if (r->kill_at == 0) {
		(void)kill(-r->pid, SIGTERM);
		r->kill_at = now + HOOK_KILL_GRACE_S;
	} else if (now >= r->kill_at && !r->killed) {
		(void)kill(-r->pid, SIGKILL);
		r->killed = true;
	}
}

/* ---- the thread ---- */

/* Starts event (text taken) or says why it cannot. */
static void start_one(struct agent_hooks *h, int event, char *text)
{
	const char *path = h->path[event], *why;
	char buf[PATH_MAX + 64];
	int r = -EINVAL;

	if ((why = hook_check(path, h->config_uid, buf, sizeof(buf))))
		cli_error("agent: hook on_%s (%s): not run: %s", gpuctl_hook_event_name(event),
		          path, why);
	else if ((r = run_start(path, event, text, h->timeout_s, &h->runs[h->n_runs])) < 0)
		cli_error("agent: hook on_%s (%s): cannot run: %s", gpuctl_hook_event_name(event),
		          path, strerror(-r));
	else
		h->n_runs++;
	free(text);
}

/* Takes what can start from the queue; whether to stop (nothing runs, stopping). */
static bool take_queue(struct agent_hooks *h)
{
	struct queued take[AGENT_HOOKS_QUEUE_MAX];
	size_t n = 0, dropped = 0;
	bool stopping;

	pthread_mutex_lock(&h->lock);
	stopping = h->stopping;
	while (h->q_n && (stopping || h->n_runs + n < h->max_running)) {
		take[n++] = h->queue[h->q_head];
		h->q_head = (h->q_head + 1) % AGENT_HOOKS_QUEUE_MAX;
		h->q_n--;
	}
	pthread_mutex_unlock(&h->lock);
	for (size_t i = 0; stopping && i < h->n_runs; i++) {
		double last = now_s() + HOOK_STOP_WAIT_S;
		if (h->runs[i].deadline > last) { /* the agent stops: a short time to finish */
			h->runs[i].deadline = last;
			h->runs[i].stopped = true;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (stopping) {
			free(take[i].text);
			dropped++;
		} else {
			start_one(h, take[i].event, take[i].text);
		}
	}
	if (dropped)
		cli_error("agent: hooks: %zu event%s not run: the agent stops", dropped,
		          dropped == 1 ? "" : "s");
	return stopping && h->n_runs == 0;
}

/* One wait: poll the wake-up, the pipes and the pidfds until the nearest deadline. */
static void wait_once(struct agent_hooks *h)
{
	struct pollfd pfd[1 + 2 * AGENT_HOOKS_RUN_MAX];
	double now = now_s(), until = now + 3600;
	size_t n = 1;
	uint64_t v;

	pfd[0] = (struct pollfd){.fd = h->wake, .events = POLLIN};
	for (size_t i = 0; i < h->n_runs; i++) {
		struct run *r = &h->runs[i];
		pfd[n++] = (struct pollfd){.fd = r->out, .events = POLLIN};
		pfd[n++] = (struct pollfd){.fd = r->pidfd, .events = POLLIN};
		double d = r->kill_at > 0 && !r->killed ? r->kill_at : r->deadline;
		if (r->killed || (r->pidfd < 0 && !r->reaped))
			d = now + 0.1; /* SIGKILL landing, or no pidfd: look again soon */
		if (d < until)
			until = d;
	}
	int ms = until <= now ? 0 : (int)((until - now) * 1000) + 1;
	if (poll(pfd, n, ms) > 0 && (pfd[0].revents & POLLIN))
		(void)read(h->wake, &v, sizeof(v));
	now = now_s();
	for (size_t i = 0; i < h->n_runs; i++) {
		struct run *r = &h->runs[i];
		if (r->out >= 0)
			run_read(r);
		if (!r->reaped)
			run_reap(r);
		run_deadlines(r, now);
	}
	/* the ended ones: leader reaped and output at EOF */
	size_t k = 0;
	for (size_t i = 0; i < h->n_runs; i++) {
		if (h->runs[i].reaped && h->runs[i].out < 0)
			run_finish(h, &h->runs[i]);
		else
			h->runs[k++] = h->runs[i];
	}
	h->n_runs = k;
}

static void *hooks_thread(void *arg)
{
	struct agent_hooks *h = arg;

	while (!take_queue(h))
		wait_once(h);
	return NULL;
}

/* ---- the agent's side ---- */

static void hooks_free_fields(struct agent_hooks *h)
{
	for (size_t i = 0; i < GPUCTL_HOOK_COUNT_; i++)
		free(h->path[i]);
	for (size_t i = 0; i < h->q_n; i++)
		free(h->queue[(h->q_head + i) % AGENT_HOOKS_QUEUE_MAX].text);
	if (h->wake >= 0)
		close(h->wake);
	free(h->runs);
	free(h);
}

/* The thread, with every signal blocked (the agent's signalfd takes SIGINT and SIGTERM). */
static int start_thread(struct agent_hooks *h)
{
	sigset_t all, old;
	int e;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	e = pthread_create(&h->thread, NULL, hooks_thread, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	h->started = e == 0;
	return -e;
}

int agent_hooks_new(const struct gpuctl_config *cfg, struct agent_hooks **ret_hooks)
{
	struct gpuctl_config_hooks c;
	struct agent_hooks *h;
	uint32_t uid = 0, mode;
	bool any = false;
	char buf[PATH_MAX + 64];

	*ret_hooks = NULL;
	gpuctl_config_hooks(cfg, &c);
	if (gpuctl_config_file_owner(cfg, &uid, &mode) < 0)
		uid = 0;
	for (int i = 0; i < GPUCTL_HOOK_COUNT_; i++) {
		const char *why;

		if (!c.path[i])
			continue;
		any = true;
		if ((why = hook_check(c.path[i], uid, buf, sizeof(buf)))) {
			cli_error("%s:%u: on_%s '%s': %s (the agent runs it as root)",
			          gpuctl_config_path(cfg), c.line[i], gpuctl_hook_event_name(i),
			          c.path[i], why);
			return CLI_EXIT_USAGE;
		}
	}
	if (!any)
		return CLI_EXIT_OK;
	if (!(h = calloc(1, sizeof(*h))))
		goto oom;
	h->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	h->config_uid = uid;
	h->timeout_s = (double)c.timeout_s;
	h->max_running = c.max_running;
	if (gethostname(h->host, sizeof(h->host)) < 0)
		h->host[0] = '\0';
	h->host[sizeof(h->host) - 1] = '\0';
	h->runs = calloc(c.max_running, sizeof(*h->runs));
	if (h->wake < 0 || !h->runs)
		goto fail;
	for (int i = 0; i < GPUCTL_HOOK_COUNT_; i++)
		if (c.path[i] && !(h->path[i] = strdup(c.path[i])))
			goto fail;
	pthread_mutex_init(&h->lock, NULL);
	if (start_thread(h) < 0) {
		pthread_mutex_destroy(&h->lock);
		goto fail;
	}
	*ret_hooks = h;
	return CLI_EXIT_OK;
fail:
	hooks_free_fields(h);
oom:
	cli_error("agent: hooks: %s", strerror(ENOMEM));
	return CLI_EXIT_FAILURE;
}

bool agent_hooks_wants(const struct agent_hooks *h, const char *event)
{
	int i = h ? event_index(event) : -1;

	return i >= 0 && h->path[i];
}

/* The event's object: version, event, time and host, then payload's keys. NULL: no memory. */
static char *event_text(const struct agent_hooks *h, const char *event, json_t *payload)
{
	char when[32];
	time_t t = time(NULL);
	struct tm tm;
	json_t *o = json_object();
	char *text = NULL, *line = NULL;

	if (!gmtime_r(&t, &tm) || !strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
		(void)snprintf(when, sizeof(when), "%lld", (long long)t);
	if (o && json_put(o, "version", json_integer(AGENT_HOOKS_VERSION)) >= 0 &&
	    json_put(o, "event", json_text(event)) >= 0 &&
	    json_put(o, "time", json_text(when)) >= 0 &&
	    json_put(o, "host", json_text(h->host)) >= 0 && json_object_update(o, payload) == 0)
		text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (text && asprintf(&line, "%s\n", text) < 0)
		line = NULL;
	free(text);
	return line;
}

void agent_hooks_fire(struct agent_hooks *h, const char *event, json_t *payload)
{
	int i = h ? event_index(event) : -1;
	char *text;
	uint64_t one = 1, said = 0;
	bool first_drop = false;

	if (i < 0 || !h->path[i] || !payload) {
		json_decref(payload);
		return;
	}
	text = event_text(h, event, payload);
	json_decref(payload);
	if (!text) {
		cli_error("agent: hook on_%s: %s (event not run)", event, strerror(ENOMEM));
		return;
	}
	pthread_mutex_lock(&h->lock);
	if (h->q_n == AGENT_HOOKS_QUEUE_MAX) {
		first_drop = h->dropped++ == 0;
		free(text);
	} else {
		h->queue[(h->q_head + h->q_n++) % AGENT_HOOKS_QUEUE_MAX] =
		        (struct queued){.event = i, .text = text};
		said = h->dropped;
		h->dropped = 0;
	}
	pthread_mutex_unlock(&h->lock);
	if (first_drop)
		cli_error("agent: hooks: %d events wait for a run (hook_max_running %u): dropping "
		          "events until one starts",
		          AGENT_HOOKS_QUEUE_MAX, h->max_running);
	if (said)
		cli_error("agent: hooks: %llu events dropped (too many waiting)",
		          (unsigned long long)said);
	(void)write(h->wake, &one, sizeof(one));
}

void agent_hooks_free(struct agent_hooks *h)
{
	uint64_t one = 1;

	if (!h)
		return;
	if (h->started) {
		pthread_mutex_lock(&h->lock);
		h->stopping = true;
		pthread_mutex_unlock(&h->lock);
		(void)write(h->wake, &one, sizeof(one));
		pthread_join(h->thread, NULL);
		pthread_mutex_destroy(&h->lock);
	}
	hooks_free_fields(h);
}
