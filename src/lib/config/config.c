// SPDX-License-Identifier: MIT
/*
 * config.c: the configuration file (/etc/gpuctl/gpuctl.conf): global settings and GPU pools,
 * parsed into a struct gpuctl_config and queried by the CLI. The format is docs/config.md.
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
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctx.h"
#include "fileio.h"
#include "nss.h"
#include "parse.h"
#include "snapshot-internal.h"
#include "util.h"

#define CONFIG_FILE_MAX   (1024 * 1024) /* bytes in a file */
#define CONFIG_LINE_MAX   4096          /* bytes in a line, without its newline */
#define POOL_NAME_MAX     64            /* characters in a pool name */
#define ACCOUNT_NAME_MAX  256           /* characters in a user or group entry */
#define QUOTE_MAX         64            /* longest value quoted in a message */
#define NAME_QUOTE_MAX    200           /* longest file name quoted in a message */
#define DEFAULT_MARGIN_PC 5             /* share_margin default, percent */
#define MAX_MARGIN_PC     50            /* largest share_margin percentage */

enum global_key { G_LEASE_DIR, G_BUSY_MEMORY, G_BUSY_UTILIZATION, G_SHARE_MARGIN, G__COUNT };
static const char *const global_keys[G__COUNT] = {"lease_dir", "busy_memory", "busy_utilization",
                                                  "share_margin"};
enum pool_key { P_GPUS, P_USERS, P_GROUPS, P_DESCRIPTION, P__COUNT };
static const char *const pool_keys[P__COUNT] = {"gpus", "users", "groups", "description"};

/* One entry of a pool's gpus list. */
struct gpu_entry {
	char *text;    /* the entry as written (trimmed) */
	bool range;    /* "N-M" with both sides all digits */
	uint64_t lo;   /* first index of a range */
	uint64_t hi;   /* last index of a range (lo <= hi) */
	unsigned line; /* line of the gpus key */
};

struct pool {
	char *name;                  /* [pool NAME] */
	unsigned line;               /* line of the header */
	char *description;           /* NULL if none */
	struct gpu_entry *gpus;      /* owned, n_gpus entries */
	size_t n_gpus;               /* entries in gpus */
	char **users;                /* NULL-terminated, never NULL once the pool is complete */
	char **groups;               /* NULL-terminated, never NULL once the pool is complete */
	bool everyone;               /* users has "*" */
	unsigned key_line[P__COUNT]; /* line of each pool key (enum pool_key), 0: not given */
	size_t n_users;              /* entries in users */
	size_t n_groups;             /* entries in groups */
};

struct gpuctl_config {
	char *name;                             /* for messages: quoted file name */
	char *path;                             /* the file read, NULL if none */
	bool has_file;                          /* uid and mode are known */
	uint32_t uid;                           /* owner of the file read */
	uint32_t mode;                          /* st_mode & 07777 of the file read */
	uint64_t dev, ino;                      /* identity of the file read (as opened) */
	struct gpuctl_config_settings settings; /* lease_dir points into lease_dir_buf */
	char *lease_dir_buf;                    /* owned */
	struct pool *pools;                     /* owned, n_pools entries */
	size_t n_pools;                         /* entries in pools */
};

static const struct gpuctl_config_settings default_settings = {
        .lease_dir = NULL,
        .busy_memory = 0,
        .busy_utilization = -1,
        .share_margin_is_pct = true,
        .share_margin = DEFAULT_MARGIN_PC,
};

/* The state of one parse. */
struct parser {
	struct gpuctl_ctx *ctx;
	struct gpuctl_config *cfg;
	unsigned line;                  /* current line, from 1 */
	struct pool *cur;               /* the pool section being read, NULL: global section */
	unsigned global_line[G__COUNT]; /* line of each global key, 0: not given */
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
}

void gpuctl_config_free(struct gpuctl_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n_pools; i++)
		pool_done(&cfg->pools[i]);
	free(cfg->pools);
	free(cfg->lease_dir_buf);
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

static bool all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!is_digit(s[i]))
			return false;
	return true;
}

/* Decimal digits s[0..len) into *ret; false on overflow past UINT64_MAX. */
static bool digits_u64(const char *s, size_t len, uint64_t *ret)
{
	uint64_t v = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}

/* Stores "NAME:LINE: <fmt...>" on the context and returns -EINVAL. */
static int perr(struct parser *p, const char *fmt, ...) _printf_(2, 3);
static int perr(struct parser *p, const char *fmt, ...)
{
	char msg[CTX_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ctx_error(p->ctx, -EINVAL, "%s:%u: %s", p->cfg->name, p->line, msg);
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
			return perr(p, "%s: entry %zu of the list is empty", key, pos);
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
			return perr(p, "%s: '%s': not a GPU index, range, UUID or PCI bus id", key,
			            q);
	if (dash && all_digits(e, (size_t)(dash - e)) &&
	    all_digits(dash + 1, (size_t)(e + len - dash - 1))) {
		if (!digits_u64(e, (size_t)(dash - e), &ge.lo) ||
		    !digits_u64(dash + 1, (size_t)(e + len - dash - 1), &ge.hi))
			return perr(p, "%s: '%s': index too large", key, q);
		if (ge.lo > ge.hi)
			return perr(p, "%s: range '%s' goes backwards (N-M needs N <= M)", key, q);
		ge.range = true;
	} else if (all_digits(e, len) && !digits_u64(e, len, &ge.lo)) {
		return perr(p, "%s: '%s': index too large", key, q);
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
			return perr(p,
			            "groups: '*' is for users only (users = * lets everyone in)");
		return 0;
	}
	if (all_digits(e, len)) {
		if (!digits_u64(e, len, &id) || id >= UINT32_MAX)
			return perr(p, "%s: '%s': id too large", key, q);
		return 0;
	}
	if (len > ACCOUNT_NAME_MAX)
		return perr(p, "%s: '%s': name too long (at most %d characters)", key, q,
		            ACCOUNT_NAME_MAX);
	for (size_t i = 0; i < len; i++)
		if (is_blank(e[i]) || e[i] == ':' || e[i] == '*' || e[i] == '/')
			return perr(p, "%s: '%s': not a %s name or number", key, q,
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
		if (value[0] != '/')
			return perr(p, "lease_dir '%s': not an absolute path", q);
		if (strchr(value, '\t'))
			return perr(p, "lease_dir '%s': contains a control character", q);
		free(p->cfg->lease_dir_buf);
		p->cfg->lease_dir_buf = strdup(value);
		if (!p->cfg->lease_dir_buf)
			return ctx_error(p->ctx, -ENOMEM, "out of memory");
		st->lease_dir = p->cfg->lease_dir_buf;
		return 0;
	case G_BUSY_MEMORY:
		r = parse_size(value, &bytes, &why);
		if (r < 0)
			return perr(p, "busy_memory '%s': %s", q, why);
		st->busy_memory = bytes;
		return 0;
	case G_BUSY_UTILIZATION:
		r = parse_percent(value, &pct);
		if (r < 0)
			return perr(p, "busy_utilization '%s': not a percentage (0-100)", q);
		st->busy_utilization = pct;
		return 0;
	case G_SHARE_MARGIN:
		if (value[strlen(value) - 1] == '%') {
			r = parse_percent(value, &pct);
			if (r < 0 || pct > MAX_MARGIN_PC)
				return perr(p,
				            "share_margin '%s': not a percentage from 0%% to %d%% "
				            "(or give a size such as 2GiB)",
				            q, MAX_MARGIN_PC);
			st->share_margin_is_pct = true;
			st->share_margin = (uint64_t)pct;
			return 0;
		}
		r = parse_size(value, &bytes, &why);
		if (r < 0)
			return perr(p, "share_margin '%s': %s (or give a percentage such as 5%%)",
			            q, why);
		st->share_margin_is_pct = false;
		st->share_margin = bytes;
		return 0;
	case G__COUNT:
		break;
	}
	return perr(p, "internal error: bad key");
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
	return perr(p, "internal error: bad key");
}

static int lookup(const char *const *keys, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (streq(keys[i], key))
			return (int)i;
	return -1;
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
		return perr(p, "missing '=' in '%s' (expected KEY = VALUE)", q);
	}
	for (e = eq; e > key && is_blank(e[-1]); e--)
		;
	*e = '\0';
	for (value = eq + 1; is_blank(*value); value++)
		;
	quote_text(q, sizeof(q), key, strlen(key), QUOTE_MAX);
	if (!key[0])
		return perr(p, "missing key before '='%s", where(p, w, sizeof(w)));
	g = lookup(global_keys, G__COUNT, key);
	k = lookup(pool_keys, P__COUNT, key);
	if (!p->cur && k >= 0)
		return perr(p,
		            "key '%s' belongs in a [pool NAME] section, not before the first one",
		            q);
	if (p->cur && g >= 0)
		return perr(p,
		            "key '%s' in [pool %s]: it is a global setting (put it before the "
		            "first [pool NAME] header)",
		            q, p->cur->name);
	if (!p->cur && g < 0)
		return perr(p,
		            "unknown key '%s' (expected lease_dir, busy_memory, busy_utilization "
		            "or share_margin)",
		            q);
	if (p->cur && k < 0)
		return perr(p,
		            "unknown key '%s' in [pool %s] (expected gpus, users, groups or "
		            "description)",
		            q, p->cur->name);
	unsigned *seen = p->cur ? &p->cur->key_line[k] : &p->global_line[g];
	if (*seen)
		return perr(p, "key '%s' given twice%s (first on line %u)", q,
		            where(p, w, sizeof(w)), *seen);
	*seen = p->line;
	if (!value[0])
		return perr(p, "empty value for '%s'%s", q, where(p, w, sizeof(w)));
	if (has_control(value)) {
		char qv[QUOTE_MAX + 4];

		quote_text(qv, sizeof(qv), value, strlen(value), QUOTE_MAX);
		return perr(p, "%s '%s': contains a control character", q, qv);
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
		r = perr(p, "[pool %s] has no 'gpus' line (every pool needs its GPUs)", pool->name);
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
		return perr(p, "malformed section header '%s' (expected [pool NAME])", q);
	line[len - 1] = '\0';
	for (b = line + 1; is_blank(*b); b++)
		;
	if (strncmp(b, "pool", 4) != 0 || !(is_blank(b[4]) || !b[4]))
		return perr(p, "malformed section header '%s' (expected [pool NAME])", q);
	for (b += 4; is_blank(*b); b++)
		;
	for (e = b + strlen(b); e > b && is_blank(e[-1]); e--)
		;
	if (b == e)
		return perr(p, "section header '%s' names no pool (expected [pool NAME])", q);
	*e = '\0';
	quote_text(q, sizeof(q), b, (size_t)(e - b), QUOTE_MAX);
	if (!valid_pool_name(b, (size_t)(e - b)))
		return perr(p,
		            "bad pool name '%s' (1-%d letters, digits, '_', '.' or '-', starting "
		            "with a letter or digit)",
		            q, POOL_NAME_MAX);
	if (streq(b, "default"))
		return perr(p, "pool name 'default' is reserved (the default pool is the GPUs no "
		               "pool lists)");
	for (size_t i = 0; i < p->cfg->n_pools; i++)
		if (streq(p->cfg->pools[i].name, b))
			return perr(p, "pool '%s' defined twice (first on line %u)", q,
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

static char *quoted_name(const char *name)
{
	char q[NAME_QUOTE_MAX + 4];

	quote_text(q, sizeof(q), name, strlen(name), NAME_QUOTE_MAX);
	return strdup(q);
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
	cfg->name = quoted_name(name);
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
			return perr(&p, "contains a NUL byte (not a text file?)");
		if (n > CONFIG_LINE_MAX)
			return perr(&p, "line longer than %d bytes", CONFIG_LINE_MAX);
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

int gpuctl_config_load(struct gpuctl_ctx *ctx, const char *path, struct gpuctl_config **ret_cfg)
{
	_cleanup_(gpuctl_config_freep) struct gpuctl_config *cfg = NULL;
	_cleanup_free_ char *text = NULL, *q = NULL;
	_cleanup_close_ int fd = -1;
	bool named = true;
	struct stat st;
	size_t len = 0;
	int r;

	if (!ret_cfg)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!path) {
		path = getenv("GPUCTL_CONFIG");
		if (!path || !path[0]) {
			path = GPUCTL_CONFIG_DEFAULT_PATH;
			named = false;
		}
	}
	q = quoted_name(path);
	if (!q)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	/* O_NONBLOCK: a FIFO must not hang us before fstat() refuses it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT && !named) {
		r = gpuctl_config_parse(ctx, path, "", 0, &cfg);
		if (r < 0)
			return r;
		*ret_cfg = TAKE_PTR(cfg);
		return 0;
	}
	if (fd < 0) {
		r = -errno;
		if (r == -ENOENT)
			return ctx_error(ctx, r, "%s: configuration file not found", q);
		return ctx_error(ctx, r, "%s: cannot open: %s", q, strerror(-r));
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		return ctx_error(ctx, r, "%s: cannot stat: %s", q, strerror(-r));
	}
	if (!S_ISREG(st.st_mode))
		return ctx_error(ctx, -EPERM, "%s: not a regular file (%s)", q,
		                 S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket");
	r = fd_read_all(fd, CONFIG_FILE_MAX, &text, &len);
	if (r == -EFBIG)
		return ctx_error(ctx, -EINVAL, "%s: larger than 1 MiB", q);
	if (r < 0)
		return ctx_error(ctx, r, "%s: cannot read: %s", q, strerror(-r));
	r = gpuctl_config_parse(ctx, path, text, len, &cfg);
	if (r < 0)
		return r;
	cfg->path = strdup(path);
	if (!cfg->path)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	cfg->has_file = true;
	cfg->uid = (uint32_t)st.st_uid;
	cfg->mode = (uint32_t)(st.st_mode & 07777);
	cfg->dev = (uint64_t)st.st_dev;
	cfg->ino = (uint64_t)st.st_ino;
	*ret_cfg = TAKE_PTR(cfg);
	return 0;
}

const char *gpuctl_config_path(const struct gpuctl_config *cfg)
{
	return cfg ? cfg->path : NULL;
}

int gpuctl_config_is_file(const struct gpuctl_config *cfg, const char *path)
{
	struct stat st;

	if (!cfg || !cfg->has_file || !path || stat(path, &st) < 0)
		return 0;
	return (uint64_t)st.st_dev == cfg->dev && (uint64_t)st.st_ino == cfg->ino;
}

int gpuctl_config_file_owner(const struct gpuctl_config *cfg, uint32_t *ret_uid, uint32_t *ret_mode)
{
	if (!cfg || !cfg->has_file)
		return -ENOENT;
	if (ret_uid)
		*ret_uid = cfg->uid;
	if (ret_mode)
		*ret_mode = cfg->mode;
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

size_t gpuctl_config_pool_count(const struct gpuctl_config *cfg)
{
	return cfg ? cfg->n_pools : 0;
}

static bool pool_restricted(const struct pool *pool)
{
	return (pool->n_users > 0 || pool->n_groups > 0) && !pool->everyone;
}

int gpuctl_config_pool_get(const struct gpuctl_config *cfg, size_t i, const char **ret_name,
                           const char **ret_description, bool *ret_restricted,
                           const char *const **ret_users, const char *const **ret_groups)
{
	const struct pool *pool;

	if (!cfg || i >= cfg->n_pools)
		return -EINVAL;
	pool = &cfg->pools[i];
	if (ret_name)
		*ret_name = pool->name;
	if (ret_description)
		*ret_description = pool->description;
	if (ret_restricted)
		*ret_restricted = pool_restricted(pool);
	if (ret_users)
		*ret_users = (const char *const *)pool->users;
	if (ret_groups)
		*ret_groups = (const char *const *)pool->groups;
	return 0;
}

/* The snapshot index of a single-GPU entry, through gpuctl_ids_resolve. */
static int resolve_entry(struct parser *p, const struct gpuctl_snapshot *snap,
                         const struct gpu_entry *ge, size_t *ret)
{
	_cleanup_free_ size_t *idx = NULL;
	char msg[CTX_ERRMSG_MAX];
	size_t n = 0;
	int r;

	r = gpuctl_ids_resolve(p->ctx, snap, ge->text, &idx, &n);
	if (r < 0) {
		if (r == -ENOMEM)
			return r;
		strscpy(msg, sizeof(msg), gpuctl_errmsg(p->ctx));
		return perr(p, "[pool %s] gpus: %s", p->cur->name, msg);
	}
	if (n != 1)
		return perr(p, "[pool %s] gpus: '%s' names no single GPU", p->cur->name, ge->text);
	*ret = idx[0];
	return 0;
}

/* Gives GPU g to pool pi (a GPU named twice by one pool is fine). */
static int assign(struct parser *p, const struct gpuctl_snapshot *snap, int *map, size_t g, int pi)
{
	const struct pool *other;
	const char *uuid;

	if (map[g] < 0 || map[g] == pi) {
		map[g] = pi;
		return 0;
	}
	other = &p->cfg->pools[map[g]];
	uuid = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, g), GPUCTL_F_UUID);
	return perr(p, "GPU %zu%s%s%s is in two pools: '%s' (line %u) and '%s'", g,
	            uuid ? " (" : "", uuid ? uuid : "", uuid ? ")" : "", other->name,
	            other->key_line[P_GPUS], p->cur->name);
}

int gpuctl_config_pool_map(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                           const struct gpuctl_snapshot *snap, int **ret_pool)
{
	struct parser p = {.ctx = ctx, .cfg = (struct gpuctl_config *)cfg};
	_cleanup_free_ int *map = NULL;
	size_t n_gpus;
	int r;

	if (!snap || !ret_pool)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	n_gpus = gpuctl_snapshot_gpu_count(snap);
	map = malloc((n_gpus ? n_gpus : 1) * sizeof(*map));
	if (!map)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t g = 0; g < n_gpus; g++)
		map[g] = -1;
	for (size_t i = 0; cfg && i < cfg->n_pools; i++) {
		/* Only read through p: the const is cast away for the shared perr(). */
		p.cur = &p.cfg->pools[i];
		for (size_t k = 0; k < p.cur->n_gpus; k++) {
			const struct gpu_entry *ge = &p.cur->gpus[k];
			size_t g = 0;

			p.line = ge->line;
			if (ge->range) {
				if (ge->hi >= n_gpus)
					return perr(
					        &p,
					        "[pool %s] gpus: '%s': no GPU with index %" PRIu64
					        " (%zu GPUs)",
					        p.cur->name, ge->text, ge->hi, n_gpus);
				for (uint64_t x = ge->lo; x <= ge->hi; x++) {
					r = assign(&p, snap, map, (size_t)x, (int)i);
					if (r < 0)
						return r;
				}
				continue;
			}
			r = resolve_entry(&p, snap, ge, &g);
			if (r < 0)
				return r;
			r = assign(&p, snap, map, g, (int)i);
			if (r < 0)
				return r;
		}
	}
	*ret_pool = TAKE_PTR(map);
	return 0;
}

int gpuctl_config_pool_find(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                            const char *name, size_t *ret_index)
{
	size_t n = gpuctl_config_pool_count(cfg);
	char list[CTX_ERRMSG_MAX / 2] = "", q[QUOTE_MAX + 4];
	size_t off = 0;

	if (!name || !ret_index)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	for (size_t i = 0; i < n; i++)
		if (streq(cfg->pools[i].name, name)) {
			*ret_index = i;
			return 0;
		}
	quote_text(q, sizeof(q), name, strlen(name), QUOTE_MAX);
	if (n == 0)
		return ctx_error(ctx, -ENOENT, "no pool '%s' (no pools are configured)", q);
	for (size_t i = 0; i < n; i++) {
		int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
		                 cfg->pools[i].name);

		if (w < 0 || (size_t)w >= sizeof(list) - off) {
			/* cut: end with ", ..." where there is room */
			off = off > sizeof(list) - 6 ? sizeof(list) - 6 : off;
			(void)snprintf(list + off, sizeof(list) - off, ", ...");
			break;
		}
		off += (size_t)w;
	}
	return ctx_error(ctx, -ENOENT, "no pool '%s' (pools: %s, and default)", q, list);
}

struct user_info {
	char *name;    /* NULL: the uid has no passwd entry */
	gid_t gid;     /* primary group, if name */
	gid_t *groups; /* getgrouplist(), owned */
	int n_groups;  /* entries in groups */
};

static int user_info_get(uint32_t uid, struct user_info *ret)
{
	_cleanup_free_ char *buf = NULL;
	struct passwd pw;
	int r;

	*ret = (struct user_info){0};
	r = nss_passwd((uid_t)uid, &pw, &buf);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0; /* no name: matched by number only */
	ret->name = strdup(pw.pw_name);
	if (!ret->name)
		return -ENOMEM;
	ret->gid = pw.pw_gid;
	for (int n = 32;;) {
		gid_t *g = realloc(ret->groups, (size_t)n * sizeof(*g));
		int want = n;

		if (!g)
			return -ENOMEM;
		ret->groups = g;
		if (getgrouplist(ret->name, ret->gid, g, &want) >= 0) {
			ret->n_groups = want;
			return 0;
		}
		if (want <= n)
			want = n * 2;
		if (want > 65536)
			return 0; /* absurd: keep the primary group only */
		n = want;
	}
}

static void user_info_done(struct user_info *u)
{
	free(u->name);
	free(u->groups);
}

static bool user_matches(struct gpuctl_ctx *ctx, const struct pool *pool, const char *e,
                         uint32_t uid, const struct user_info *u)
{
	uint64_t id;

	if (streq(e, "*"))
		return true;
	if (all_digits(e, strlen(e)))
		return digits_u64(e, strlen(e), &id) && id == uid;
	if (u->name && streq(e, u->name))
		return true;
	if (!nss_user_exists(e))
		ctx_log(ctx, GPUCTL_LOG_DEBUG,
		        "config: pool '%s': user '%s' (line %u) does not exist", pool->name, e,
		        pool->key_line[P_USERS]);
	return false;
}

static bool group_matches(struct gpuctl_ctx *ctx, const struct pool *pool, const char *e,
                          const struct user_info *u)
{
	uint64_t id;
	gid_t gid;

	if (all_digits(e, strlen(e))) {
		if (!digits_u64(e, strlen(e), &id) || id >= UINT32_MAX)
			return false;
		gid = (gid_t)id;
	} else if (nss_group_gid(e, &gid) < 0) {
		ctx_log(ctx, GPUCTL_LOG_DEBUG,
		        "config: pool '%s': group '%s' (line %u) does not exist", pool->name, e,
		        pool->key_line[P_GROUPS]);
		return false;
	}
	if (!u->name)
		return false;
	if (gid == u->gid)
		return true;
	for (int i = 0; i < u->n_groups; i++)
		if (u->groups[i] == gid)
			return true;
	return false;
}

/* Appends text to buf[size] at *off, cutting what does not fit (buf stays NUL-terminated). */
static void append(char *buf, size_t size, size_t *off, const char *text)
{
	size_t n = strlen(text);

	if (*off + 1 >= size)
		return;
	if (n > size - 1 - *off)
		n = size - 1 - *off;
	memcpy(buf + *off, text, n);
	*off += n;
	buf[*off] = '\0';
}

/* Appends "users a, b" (or "user a") of list to buf. */
static void append_list(char *buf, size_t size, size_t *off, const char *what, char *const *list,
                        size_t n)
{
	append(buf, size, off, what);
	append(buf, size, off, n == 1 ? " " : "s ");
	for (size_t i = 0; i < n; i++) {
		if (i)
			append(buf, size, off, ", ");
		append(buf, size, off, list[i]);
	}
}

static int refuse(struct gpuctl_ctx *ctx, const struct pool *pool)
{
	char buf[CTX_ERRMSG_MAX - 2 * POOL_NAME_MAX] = "";
	size_t off = 0;

	if (pool->n_users)
		append_list(buf, sizeof(buf), &off, "user", pool->users, pool->n_users);
	if (pool->n_users && pool->n_groups)
		append(buf, sizeof(buf), &off, " and ");
	if (pool->n_groups)
		append_list(buf, sizeof(buf), &off, "group", pool->groups, pool->n_groups);
	return ctx_error(ctx, 0, "pool '%s' is restricted to %s", pool->name, buf);
}

int gpuctl_config_pool_allows(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg, size_t i,
                              uint32_t uid)
{
	_cleanup_(user_info_done) struct user_info u = {0};
	const struct pool *pool;
	int r;

	if (!cfg || i >= cfg->n_pools)
		return ctx_error(ctx, -EINVAL, "no pool number %zu", i);
	pool = &cfg->pools[i];
	if (uid == 0 || !pool_restricted(pool))
		return 1;
	r = user_info_get(uid, &u);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	for (size_t k = 0; k < pool->n_users; k++)
		if (user_matches(ctx, pool, pool->users[k], uid, &u))
			return 1;
	for (size_t k = 0; k < pool->n_groups; k++)
		if (group_matches(ctx, pool, pool->groups[k], &u))
			return 1;
	return refuse(ctx, pool);
}
