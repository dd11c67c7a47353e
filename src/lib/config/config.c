// SPDX-License-Identifier: MIT
/*
 * config.c: the configuration file's parser (/etc/gpuctl/gpuctl.conf): global settings and GPU
 * pools, parsed and checked into a struct gpuctl_config, and the settings read back. The format is
 * docs/config.md. Reading the file is config-file.c; what the pools hold and who may draw from
 * them, config-pools.c (shared declarations: config-internal.h).
 *
 * Decisions:
 * - Line-based "key = value" with [pool NAME] sections: simple enough to edit with any editor
 *   and to parse without a library. Every error is one line "FILE:LINE: what is wrong", and
 *   parsing stops at the first one: a half-understood policy file must not be used.
 * - A '#' starts a comment at the start of a line or after a blank, so "GPU-#1" is no comment
 *   but "0,1  # spare" is; values cannot contain " #".
 * - Nothing is resolved at parse time: GPU ids need a snapshot (gpuctl_config_pool_map), user
 *   and group names the machine's databases (gpuctl_config_pool_allows). The same file can so
 *   be parsed on a machine where the users, groups or GPUs do not exist.
 * - gpus entries are kept as written (plus ranges "N-M", only when both sides are all digits,
 *   since UUIDs contain dashes) with their line, so pool_map's messages name the line.
 * - Sizes and percentages go through parse.c, the same parsers as the command line.
 * - Text echoed in messages goes through quote_text() (control bytes as '?', long text cut).
 * - Hooks (on_health, ..., hook_timeout, hook_max_running) are checked as text only: whether a
 *   program is safe for root to run is the agent's check when it starts and before each run
 *   (agent-hooks.c), so a command that never runs a hook never fails because of one.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config-internal.h"
#include "ctx.h"
#include "parse.h"
#include "util.h"

static const char *const global_keys[G__COUNT] = {"lease_dir",    "busy_memory", "busy_utilization",
                                                  "share_margin", "ledger",      "dev_dir",
                                                  "agent_socket"};
static const char *const pool_keys[P__COUNT] = {"gpus", "users", "groups", "description"};
static const char *const idle_keys[I__COUNT] = {"idle_warn", "idle_release", "max_lease_age"};

static const struct gpuctl_config_settings default_settings = {
        .lease_dir = NULL,
        .busy_memory = 0,
        .busy_utilization = -1,
        .share_margin_is_pct = true,
        .share_margin = DEFAULT_MARGIN_PC,
};

static void pool_done(struct pool *p)
{
	free(p->name);
	free(p->description);
	for (size_t i = 0; i < p->n_gpus; i++)
		free(p->gpus[i].text);
	free(p->gpus);
	for (size_t i = 0; p->users && p->users[i]; i++)
		free(p->users[i]);
	free(p->users);
	for (size_t i = 0; p->groups && p->groups[i]; i++)
		free(p->groups[i]);
	free(p->groups);
	config_quota_done(&p->quota);
}

void gpuctl_config_free(struct gpuctl_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n_pools; i++)
		pool_done(&cfg->pools[i]);
	free(cfg->pools);
	config_quota_done(&cfg->quota);
	free(cfg->lease_dir_buf);
	free(cfg->ledger_buf);
	free(cfg->dev_dir_buf);
	free(cfg->agent_socket_buf);
	config_hooks_free(&cfg->hooks);
	config_status_free(&cfg->status);
	free(cfg->name);
	free(cfg->path);
	free(cfg);
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A control byte other than tab (DEL included); bytes >= 0x80 (UTF-8) are not. */
static bool has_control(const char *s)
{
	for (; *s; s++)
		if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7f)
			return true;
	return false;
}

/* " in [pool NAME]" for the current section, "" in the global section. */
static const char *where(const struct parser *p, char *buf, size_t size)
{
	if (!p->cur)
		return "";
	(void)snprintf(buf, size, " in [pool %s]", p->cur->name);
	return buf;
}

/* Appends s (copied) to the NULL-terminated array *arr of *n entries. */
static int strv_push(char ***arr, size_t *n, const char *s, size_t len)
{
	char **a = realloc(*arr, (*n + 2) * sizeof(*a));

	if (!a)
		return -ENOMEM;
	*arr = a;
	a[*n] = strndup(s, len);
	if (!a[*n])
		return -ENOMEM;
	a[++*n] = NULL;
	return 0;
}

/* Calls fn for each comma-separated entry of value, trimmed; an empty entry is an error. */
typedef int (*entry_fn)(struct parser *p, const char *key, const char *e, size_t len);
static int for_each_entry(struct parser *p, const char *key, const char *value, entry_fn fn)
{
	size_t pos = 0;

	for (const char *s = value;;) {
		const char *comma = strchr(s, ',');
		const char *b = s, *e = comma ? comma : s + strlen(s);
		int r;

		pos++;
		while (b < e && is_blank(*b))
			b++;
		while (e > b && is_blank(e[-1]))
			e--;
		if (b == e)
			return config_perr(p, "%s: entry %zu of the list is empty", key, pos);
		r = fn(p, key, b, (size_t)(e - b));
		if (r < 0)
			return r;
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

/* A gpus entry: an index, a range N-M, or an id for gpuctl_ids_resolve (checked by pool_map). */
static int add_gpu_entry(struct parser *p, const char *key, const char *e, size_t len)
{
	struct pool *pool = p->cur;
	struct gpu_entry ge = {.line = p->line};
	const char *dash = memchr(e, '-', len);
	char q[QUOTE_MAX + 4];
	struct gpu_entry *g;

	quote_text(q, sizeof(q), e, len, QUOTE_MAX);
	for (size_t i = 0; i < len; i++)
		if (!is_alnum(e[i]) && e[i] != '-' && e[i] != ':' && e[i] != '.')
			return config_perr(
			        p, "%s: '%s': not a GPU index, range, UUID or PCI bus id", key, q);
	if (dash && config_all_digits(e, (size_t)(dash - e)) &&
	    config_all_digits(dash + 1, (size_t)(e + len - dash - 1))) {
		if (!config_digits_u64(e, (size_t)(dash - e), &ge.lo) ||
		    !config_digits_u64(dash + 1, (size_t)(e + len - dash - 1), &ge.hi))
			return config_perr(p, "%s: '%s': index too large", key, q);
		if (ge.lo > ge.hi)
			return config_perr(p, "%s: range '%s' goes backwards (N-M needs N <= M)",
			                   key, q);
		ge.range = true;
	} else if (config_all_digits(e, len) && !config_digits_u64(e, len, &ge.lo)) {
		return config_perr(p, "%s: '%s': index too large", key, q);
	}
	g = realloc(pool->gpus, (pool->n_gpus + 1) * sizeof(*g));
	if (!g)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	pool->gpus = g;
	ge.text = strndup(e, len);
	if (!ge.text)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	pool->gpus[pool->n_gpus++] = ge;
	return 0;
}

/* A users or groups entry: "*" (users only), a decimal id, or a name (not resolved here). */
static int check_account(struct parser *p, const char *key, const char *e, size_t len)
{
	char q[QUOTE_MAX + 4];
	uint64_t id;

	quote_text(q, sizeof(q), e, len, QUOTE_MAX);
	if (len == 1 && e[0] == '*') {
		if (streq(key, "groups"))
			return config_perr(
			        p, "groups: '*' is for users only (users = * lets everyone in)");
		return 0;
	}
	if (config_all_digits(e, len)) {
		if (!config_digits_u64(e, len, &id) || id >= UINT32_MAX)
			return config_perr(p, "%s: '%s': id too large", key, q);
		return 0;
	}
	if (len > ACCOUNT_NAME_MAX)
		return config_perr(p, "%s: '%s': name too long (at most %d characters)", key, q,
		                   ACCOUNT_NAME_MAX);
	for (size_t i = 0; i < len; i++)
		if (is_blank(e[i]) || e[i] == ':' || e[i] == '*' || e[i] == '/')
			return config_perr(p, "%s: '%s': not a %s name or number", key, q,
			                   streq(key, "users") ? "user" : "group");
	return 0;
}

static int add_user(struct parser *p, const char *key, const char *e, size_t len)
{
	int r = check_account(p, key, e, len);

	if (r < 0)
		return r;
	if (len == 1 && e[0] == '*')
		p->cur->everyone = true;
	if (strv_push(&p->cur->users, &p->cur->n_users, e, len) < 0)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	return 0;
}

static int add_group(struct parser *p, const char *key, const char *e, size_t len)
{
	int r = check_account(p, key, e, len);

	if (r < 0)
		return r;
	if (strv_push(&p->cur->groups, &p->cur->n_groups, e, len) < 0)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	return 0;
}

/* A path setting (lease_dir, ledger, dev_dir, agent_socket): absolute, no tab; kept in *buf,
 * *field points at it. */
static int set_path(struct parser *p, const char *key, const char *value, const char *quoted,
                    char **buf, const char **field)
{
	if (value[0] != '/')
		return config_perr(p, "%s '%s': not an absolute path", key, quoted);
	if (strchr(value, '\t'))
		return config_perr(p, "%s '%s': contains a control character", key, quoted);
	free(*buf);
	*buf = strdup(value);
	if (!*buf)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	*field = *buf;
	return 0;
}

static int set_global(struct parser *p, enum global_key k, const char *value)
{
	struct gpuctl_config_settings *st = &p->cfg->settings;
	const char *why = NULL;
	char q[QUOTE_MAX + 4];
	uint64_t bytes = 0;
	int pct = 0, r;

	quote_text(q, sizeof(q), value, strlen(value), QUOTE_MAX);
	switch (k) {
	case G_LEASE_DIR:
		return set_path(p, global_keys[k], value, q, &p->cfg->lease_dir_buf,
		                &st->lease_dir);
	case G_LEDGER:
		return set_path(p, global_keys[k], value, q, &p->cfg->ledger_buf, &st->ledger);
	case G_DEV_DIR:
		return set_path(p, global_keys[k], value, q, &p->cfg->dev_dir_buf, &st->dev_dir);
	case G_AGENT_SOCKET:
		return set_path(p, global_keys[k], value, q, &p->cfg->agent_socket_buf,
		                &st->agent_socket);
	case G_BUSY_MEMORY:
		r = parse_size(value, &bytes, &why);
		if (r < 0)
			return config_perr(p, "busy_memory '%s': %s", q, why);
		st->busy_memory = bytes;
		return 0;
	case G_BUSY_UTILIZATION:
		r = parse_percent(value, &pct);
		if (r < 0)
			return config_perr(p, "busy_utilization '%s': not a percentage (0-100)", q);
		st->busy_utilization = pct;
		return 0;
	case G_SHARE_MARGIN:
		if (value[strlen(value) - 1] == '%') {
			r = parse_percent(value, &pct);
			if (r < 0 || pct > MAX_MARGIN_PC)
				return config_perr(
				        p,
				        "share_margin '%s': not a percentage from 0%% to %d%% "
				        "(or give a size such as 2GiB)",
				        q, MAX_MARGIN_PC);
			st->share_margin_is_pct = true;
			st->share_margin = (uint64_t)pct;
			return 0;
		}
		r = parse_size(value, &bytes, &why);
		if (r < 0)
			return config_perr(
			        p, "share_margin '%s': %s (or give a percentage such as 5%%)", q,
			        why);
		st->share_margin_is_pct = false;
		st->share_margin = bytes;
		return 0;
	case G__COUNT:
		break;
	}
	return config_perr(p, "internal error: bad key");
}

static int set_pool_key(struct parser *p, enum pool_key k, const char *value)
{
	struct pool *pool = p->cur;

	switch (k) {
	case P_GPUS:
		return for_each_entry(p, "gpus", value, add_gpu_entry);
	case P_USERS:
		return for_each_entry(p, "users", value, add_user);
	case P_GROUPS:
		return for_each_entry(p, "groups", value, add_group);
	case P_DESCRIPTION:
		pool->description = strdup(value);
		if (!pool->description)
			return ctx_error(p->ctx, -ENOMEM, "out of memory");
		return 0;
	case P__COUNT:
		break;
	}
	return config_perr(p, "internal error: bad key");
}

static int lookup(const char *const *keys, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (streq(keys[i], key))
			return (int)i;
	return -1;
}

/* idle_warn, idle_release, max_lease_age: in a pool for it, in the global section for every
 * pool that does not say (docs/config.md "Idle actions"). */
static int set_idle(struct parser *p, enum idle_key k, const char *key, const char *value)
{
	struct idle_keys *ik = p->cur ? &p->cur->idle : &p->cfg->idle;
	char q[QUOTE_MAX + 4], w[POOL_NAME_MAX + 16];
	uint64_t sec = 0;
	int r;

	if (ik->line[k])
		return config_perr(p, "key '%s' given twice%s (first on line %u)", key,
		                   where(p, w, sizeof(w)), ik->line[k]);
	ik->line[k] = p->line;
	if (!value[0])
		return config_perr(p, "empty value for '%s'%s", key, where(p, w, sizeof(w)));
	quote_text(q, sizeof(q), value, strlen(value), QUOTE_MAX);
	r = parse_duration(value, &sec);
	if (r == -ERANGE)
		return config_perr(p, "%s '%s': longer than 366 days", key, q);
	if (r < 0)
		return config_perr(p,
		                   "%s '%s': not a duration (a number and s, m, h or d: 90s, 30m, "
		                   "8h; 0: off)",
		                   key, q);
	ik->s[k] = sec;
	return 0;
}

/* enforce, violation_action, terminate_grace, terminate_system (docs/config.md "Enforcement"): in
 * a pool for it, in the global section for every pool that does not say. Words, not numbers or
 * booleans of many spellings: a misspelt policy is an error, never a silent default. */
static const char *const enforce_keys[E__COUNT] = {"enforce", "violation_action", "terminate_grace",
                                                   "terminate_system"};
const char *const config_enforce_words[] = {"off", "watch", "acl", "cgroup", NULL};
const char *const config_action_words[] = {"log", "notify", "terminate", NULL};
static const char *const yesno_words[] = {"no", "yes", NULL};

const struct enforce_keys config_enforce_default = {
        .v = {[E_ENFORCE] = GPUCTL_ENFORCE_OFF,
              [E_ACTION] = GPUCTL_VIOLATION_LOG,
              [E_GRACE] = GPUCTL_TERMINATE_GRACE_DEFAULT,
              [E_SYSTEM] = 0},
};

static int config_enforce_key(const char *key)
{
	for (int i = 0; i < E__COUNT; i++)
		if (streq(enforce_keys[i], key))
			return i;
	return -1;
}

static int word_index(const char *const *words, const char *value)
{
	for (int i = 0; words[i]; i++)
		if (streq(words[i], value))
			return i;
	return -1;
}

static int config_set_enforce(struct parser *p, enum enforce_key k, const char *value)
{
	struct enforce_keys *ek = p->cur ? &p->cur->enforce : &p->cfg->enforce;
	const char *key = enforce_keys[k];
	char q[QUOTE_MAX + 4];
	uint64_t sec = 0;
	int i, r;

	if (ek->line[k]) {
		if (p->cur)
			return config_perr(p,
			                   "key '%s' given twice in [pool %s] (first on line %u)",
			                   key, p->cur->name, ek->line[k]);
		return config_perr(p, "key '%s' given twice (first on line %u)", key, ek->line[k]);
	}
	ek->line[k] = p->line;
	if (!value[0])
		return config_perr(p, "empty value for '%s'", key);
	quote_text(q, sizeof(q), value, strlen(value), QUOTE_MAX);
	switch (k) {
	case E_ENFORCE:
		i = word_index(config_enforce_words, value);
		if (i < 0)
			return config_perr(p, "enforce '%s': not off, watch, acl or cgroup", q);
		ek->v[k] = (uint64_t)i;
		return 0;
	case E_ACTION:
		i = word_index(config_action_words, value);
		if (i < 0)
			return config_perr(p, "violation_action '%s': not log, notify or terminate",
			                   q);
		ek->v[k] = (uint64_t)i;
		return 0;
	case E_SYSTEM:
		i = word_index(yesno_words, value);
		if (i < 0)
			return config_perr(p, "terminate_system '%s': not no or yes", q);
		ek->v[k] = (uint64_t)i;
		return 0;
	case E_GRACE:
		r = parse_duration(value, &sec);
		if (r == -ERANGE)
			return config_perr(p, "terminate_grace '%s': longer than 366 days", q);
		if (r < 0)
			return config_perr(
			        p,
			        "terminate_grace '%s': not a duration (a number and s, m, "
			        "h or d: 10s, 1m; 0: at once)",
			        q);
		ek->v[k] = sec;
		return 0;
	case E__COUNT:
		break;
	}
	return config_perr(p, "internal error: bad key");
}

/* ---- the agent's hooks (docs/config.md "Hooks"; queries in config-hooks.c) ---- */

enum { H_TIMEOUT = GPUCTL_HOOK_COUNT_, H_MAX_RUNNING, H__COUNT };

static const char *const hook_keys[H__COUNT] = {"on_health",       "on_lease_start", "on_lease_end",
                                                "on_idle",         "on_violation",   "hook_timeout",
                                                "hook_max_running"};

void config_hooks_free(struct hook_keys *h)
{
	for (size_t i = 0; i < GPUCTL_HOOK_COUNT_; i++)
		free(h->path[i]);
}

/* The value of hook key k (given once, in the global section, not empty). */
static int set_value(struct parser *p, struct hook_keys *h, int k, const char *value, const char *q)
{
	uint64_t sec = 0;
	unsigned long n = 0;
	int r;

	if (k == H_TIMEOUT) {
		r = parse_duration(value, &sec);
		if (r < 0 && r != -ERANGE)
			return config_perr(
			        p,
			        "hook_timeout '%s': not a duration (a number and s, m, h "
			        "or d: 10s, 2m)",
			        q);
		if (r < 0 || sec < 1 || sec > HOOK_MAX_TIMEOUT_S)
			return config_perr(p, "hook_timeout '%s': not from 1s to 1h", q);
		h->timeout_s = sec;
		return 0;
	}
	if (k == H_MAX_RUNNING) {
		if (parse_uint(value, 1, HOOK_MAX_RUNNING, &n) < 0)
			return config_perr(p, "hook_max_running '%s': not a number from 1 to %d", q,
			                   HOOK_MAX_RUNNING);
		h->max_running = (unsigned)n;
		return 0;
	}
	if (value[0] != '/')
		return config_perr(p, "%s '%s': not an absolute path", hook_keys[k], q);
	for (const char *s = value; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return config_perr(p, "%s '%s': contains a control character", hook_keys[k],
			                   q);
	if (!(h->path[k] = strdup(value)))
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	return 0;
}

int config_hook_key(struct parser *p, const char *key, const char *value)
{
	struct hook_keys *h = &p->cfg->hooks;
	char q[QUOTE_MAX + 4];
	int k = -1;

	for (int i = 0; i < H__COUNT && k < 0; i++)
		if (streq(hook_keys[i], key))
			k = i;
	if (k < 0)
		return 1;
	if (p->cur)
		return config_perr(
		        p,
		        "key '%s' in [pool %s]: it is a global setting (put it before the "
		        "first [pool NAME] header)",
		        key, p->cur->name);
	if (h->line[k])
		return config_perr(p, "key '%s' given twice (first on line %u)", key, h->line[k]);
	h->line[k] = p->line;
	if (!value[0])
		return config_perr(p, "empty value for '%s'", key);
	quote_text(q, sizeof(q), value, strlen(value), QUOTE_MAX);
	return set_value(p, h, k, value, q);
}

/* "key = value" (line already stripped of comments and trimmed, NUL-terminated). */
static int parse_assignment(struct parser *p, char *line)
{
	char *eq = strchr(line, '=');
	char *key = line, *value, *e;
	char q[QUOTE_MAX + 4], w[POOL_NAME_MAX + 16];
	int g, k;

	if (!eq) {
		quote_text(q, sizeof(q), line, strlen(line), QUOTE_MAX);
		return config_perr(p, "missing '=' in '%s' (expected KEY = VALUE)", q);
	}
	for (e = eq; e > key && is_blank(e[-1]); e--)
		;
	*e = '\0';
	for (value = eq + 1; is_blank(*value); value++)
		;
	quote_text(q, sizeof(q), key, strlen(key), QUOTE_MAX);
	if (!key[0])
		return config_perr(p, "missing key before '='%s", where(p, w, sizeof(w)));
	if ((k = lookup(idle_keys, I__COUNT, key)) >= 0)
		return set_idle(p, (enum idle_key)k, key, value);
	if ((k = config_enforce_key(key)) >= 0)
		return config_set_enforce(p, (enum enforce_key)k, value);
	if ((k = config_quota_set(p, key, value)) <= 0)
		return k; /* a quota key (docs/config.md "Quotas") */
	if ((k = config_hook_key(p, key, value)) <= 0)
		return k;
	if ((k = config_status_key(p, key, value)) <= 0)
		return k; /* the status page's (docs/config.md "Status page") */
	g = lookup(global_keys, G__COUNT, key);
	k = lookup(pool_keys, P__COUNT, key);
	if (!p->cur && k >= 0)
		return config_perr(
		        p, "key '%s' belongs in a [pool NAME] section, not before the first one",
		        q);
	if (p->cur && g >= 0)
		return config_perr(
		        p,
		        "key '%s' in [pool %s]: it is a global setting (put it before the "
		        "first [pool NAME] header)",
		        q, p->cur->name);
	if (!p->cur && g < 0)
		return config_perr(
		        p,
		        "unknown key '%s' (expected lease_dir, busy_memory, busy_utilization, "
		        "share_margin, ledger, dev_dir, agent_socket, idle_warn, idle_release, "
		        "max_lease_age, enforce, violation_action, terminate_grace, "
		        "terminate_system, on_health, on_lease_start, on_lease_end, on_idle, "
		        "on_violation, hook_timeout, hook_max_running, peers, "
		        "status_page_users or status_page)",
		        q);
	if (p->cur && k < 0)
		return config_perr(p,
		                   "unknown key '%s' in [pool %s] (expected gpus, users, groups, "
		                   "description, idle_warn, idle_release, max_lease_age, enforce, "
		                   "violation_action, terminate_grace or terminate_system)",
		                   q, p->cur->name);
	unsigned *seen = p->cur ? &p->cur->key_line[k] : &p->global_line[g];
	if (*seen)
		return config_perr(p, "key '%s' given twice%s (first on line %u)", q,
		                   where(p, w, sizeof(w)), *seen);
	*seen = p->line;
	if (!value[0])
		return config_perr(p, "empty value for '%s'%s", q, where(p, w, sizeof(w)));
	if (has_control(value)) {
		char qv[QUOTE_MAX + 4];

		quote_text(qv, sizeof(qv), value, strlen(value), QUOTE_MAX);
		return config_perr(p, "%s '%s': contains a control character", q, qv);
	}
	return p->cur ? set_pool_key(p, (enum pool_key)k, value)
	              : set_global(p, (enum global_key)g, value);
}

/* The end of a pool section: it needs gpus; users/groups become (empty) arrays. */
static int finish_pool(struct parser *p)
{
	struct pool *pool = p->cur;
	unsigned line = p->line;
	int r = 0;

	if (!pool)
		return 0;
	if (!pool->key_line[P_GPUS]) {
		p->line = pool->line;
		r = config_perr(p, "[pool %s] has no 'gpus' line (every pool needs its GPUs)",
		                pool->name);
		p->line = line;
		return r;
	}
	if (!pool->users)
		pool->users = calloc(1, sizeof(char *));
	if (!pool->groups)
		pool->groups = calloc(1, sizeof(char *));
	if (!pool->users || !pool->groups)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	p->cur = NULL;
	return 0;
}

static bool valid_pool_name(const char *s, size_t len)
{
	if (len == 0 || len > POOL_NAME_MAX || !is_alnum(s[0]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!is_alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
			return false;
	return true;
}

/* "[pool NAME]", blanks allowed inside the brackets. */
static int parse_header(struct parser *p, char *line)
{
	size_t len = strlen(line);
	char q[QUOTE_MAX + 4], *b, *e;
	struct pool *pools;
	int r;

	r = finish_pool(p);
	if (r < 0)
		return r;
	quote_text(q, sizeof(q), line, len, QUOTE_MAX);
	if (line[len - 1] != ']')
		return config_perr(p, "malformed section header '%s' (expected [pool NAME])", q);
	line[len - 1] = '\0';
	for (b = line + 1; is_blank(*b); b++)
		;
	if (strncmp(b, "pool", 4) != 0 || !(is_blank(b[4]) || !b[4]))
		return config_perr(p, "malformed section header '%s' (expected [pool NAME])", q);
	for (b += 4; is_blank(*b); b++)
		;
	for (e = b + strlen(b); e > b && is_blank(e[-1]); e--)
		;
	if (b == e)
		return config_perr(p, "section header '%s' names no pool (expected [pool NAME])",
		                   q);
	*e = '\0';
	quote_text(q, sizeof(q), b, (size_t)(e - b), QUOTE_MAX);
	if (!valid_pool_name(b, (size_t)(e - b)))
		return config_perr(
		        p,
		        "bad pool name '%s' (1-%d letters, digits, '_', '.' or '-', starting "
		        "with a letter or digit)",
		        q, POOL_NAME_MAX);
	if (streq(b, "default"))
		return config_perr(
		        p, "pool name 'default' is reserved (the default pool is the GPUs no "
		           "pool lists)");
	for (size_t i = 0; i < p->cfg->n_pools; i++)
		if (streq(p->cfg->pools[i].name, b))
			return config_perr(p, "pool '%s' defined twice (first on line %u)", q,
			                   p->cfg->pools[i].line);
	pools = realloc(p->cfg->pools, (p->cfg->n_pools + 1) * sizeof(*pools));
	if (!pools)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	p->cfg->pools = pools;
	p->cur = &pools[p->cfg->n_pools];
	*p->cur = (struct pool){.line = p->line};
	p->cfg->n_pools++;
	p->cur->name = strdup(b);
	if (!p->cur->name)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	return 0;
}

/* One line without its newline (len <= CONFIG_LINE_MAX, no NUL), copied into buf. */
static int parse_line(struct parser *p, char *buf, const char *text, size_t len)
{
	char *s, *e;

	memcpy(buf, text, len);
	buf[len] = '\0';
	for (s = buf; is_blank(*s); s++)
		;
	if (*s == '#' || !*s)
		return 0;
	for (e = s + 1; *e; e++)
		if (*e == '#' && is_blank(e[-1])) {
			*e = '\0';
			break;
		}
	for (e = s + strlen(s); e > s && is_blank(e[-1]); e--)
		;
	*e = '\0';
	if (*s == '[')
		return parse_header(p, s);
	return parse_assignment(p, s);
}

int gpuctl_config_parse(struct gpuctl_ctx *ctx, const char *name, const char *text, size_t len,
                        struct gpuctl_config **ret_cfg)
{
	_cleanup_(gpuctl_config_freep) struct gpuctl_config *cfg = NULL;
	_cleanup_free_ char *buf = NULL;
	struct parser p = {.ctx = ctx};
	int r;

	if (!name || (!text && len) || !ret_cfg)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	cfg = calloc(1, sizeof(*cfg));
	buf = malloc(CONFIG_LINE_MAX + 1);
	if (!cfg || !buf)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	cfg->settings = default_settings;
	cfg->enforce = config_enforce_default;
	cfg->name = config_quoted_name(name);
	if (!cfg->name)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	p.cfg = cfg;
	if (len > CONFIG_FILE_MAX)
		return ctx_error(ctx, -EINVAL, "%s: larger than 1 MiB (%zu bytes)", cfg->name, len);

	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;

		p.line++;
		if (memchr(text + pos, '\0', n))
			return config_perr(&p, "contains a NUL byte (not a text file?)");
		if (n > CONFIG_LINE_MAX)
			return config_perr(&p, "line longer than %d bytes", CONFIG_LINE_MAX);
		r = parse_line(&p, buf, text + pos, n);
		if (r < 0)
			return r;
		pos += n + 1;
	}
	r = finish_pool(&p);
	if (r < 0)
		return r;
	*ret_cfg = TAKE_PTR(cfg);
	return 0;
}

const struct gpuctl_config_settings *gpuctl_config_settings(const struct gpuctl_config *cfg)
{
	return cfg ? &cfg->settings : &default_settings;
}

uint64_t gpuctl_config_share_margin(const struct gpuctl_config *cfg, uint64_t total_bytes)
{
	const struct gpuctl_config_settings *st = gpuctl_config_settings(cfg);
	__extension__ typedef unsigned __int128 u128;

	if (!st->share_margin_is_pct)
		return st->share_margin;
	/* pct <= 50, so the result fits; rounded up: the margin is "at least". */
	return (uint64_t)(((u128)total_bytes * st->share_margin + 99) / 100);
}
