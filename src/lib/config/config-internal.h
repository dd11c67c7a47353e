/* SPDX-License-Identifier: MIT */
/*
 * config-internal.h: what the configuration room's files share: the parsed file (struct
 * gpuctl_config and its pools), the parser's state (pool maps report their errors through it,
 * naming the line), and the few helpers more than one file needs. Private to src/lib/config:
 * config.c parses, config-file.c reads the file, config-pools.c answers which GPUs a pool holds
 * and who may draw from it.
 */
#ifndef GPUCTL_CONFIG_INTERNAL_H
#define GPUCTL_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuctl/gpuctl.h"
#include "util.h"

#define CONFIG_FILE_MAX   (1024 * 1024) /* bytes in a file */
#define CONFIG_LINE_MAX   4096          /* bytes in a line, without its newline */
#define POOL_NAME_MAX     64            /* characters in a pool name */
#define ACCOUNT_NAME_MAX  256           /* characters in a user or group entry */
#define QUOTE_MAX         64            /* longest value quoted in a message */
#define NAME_QUOTE_MAX    200           /* longest file name quoted in a message */
#define DEFAULT_MARGIN_PC 5             /* share_margin default, percent */
#define MAX_MARGIN_PC     50            /* largest share_margin percentage */

enum global_key {
	G_LEASE_DIR,
	G_BUSY_MEMORY,
	G_BUSY_UTILIZATION,
	G_SHARE_MARGIN,
	G_LEDGER,
	G_DEV_DIR,
	G_AGENT_SOCKET,
	G__COUNT
};
enum pool_key { P_GPUS, P_USERS, P_GROUPS, P_DESCRIPTION, P__COUNT };
/* The idle actions' keys (docs/config.md "Idle actions"): in a pool, and in the global section as
 * every pool's default. */
enum idle_key { I_WARN, I_RELEASE, I_MAX_AGE, I__COUNT };

/* The idle actions of a section: seconds (0: off), and each key's line (0: not given). */
struct idle_keys {
	uint64_t s[I__COUNT];
	unsigned line[I__COUNT];
};

/* The enforcement keys (docs/config.md "Enforcement"; config-enforce.c): in a pool, and in the
 * global section as every pool's default. */
enum enforce_key { E_ENFORCE, E_ACTION, E_GRACE, E_SYSTEM, E__COUNT };

/* The enforcement keys of a section: each value (an enum's number, seconds, or 0/1), and each
 * key's line (0: not given). */
struct enforce_keys {
	uint64_t v[E__COUNT];
	unsigned line[E__COUNT];
};

/* The quota keys (docs/config.md "Quotas"; config-quota.c): in a pool, and in the global
 * section as every pool's default. */
enum quota_key { Q_GPUS, Q_LEASE_LENGTH, Q_HOURS_DAY, Q_HOURS_WEEK, Q__COUNT };

/* One entry of a quota key: the default (who NULL), a user (name or decimal uid) or a group
 * ("@NAME" or "@GID", group true, who without the '@'). */
struct quota_entry {
	char *who;    /* owned; NULL: the default of everyone the key names not */
	bool group;   /* who is a group */
	double value; /* GPUs, seconds or GPU-hours; < 0: no limit */
};

/* The quota keys of a section: each key's entries and line (0: not given). */
struct quota_keys {
	struct quota_entry *e[Q__COUNT];
	size_t n[Q__COUNT];
	unsigned line[Q__COUNT];
};

#define HOOK_DEFAULT_TIMEOUT_S 10   /* hook_timeout default */
#define HOOK_MAX_TIMEOUT_S     3600 /* longest hook_timeout */
#define HOOK_DEFAULT_RUNNING   4    /* hook_max_running default */
#define HOOK_MAX_RUNNING       64   /* largest hook_max_running */

/* The hooks' settings (config-hooks.c): the programs, and the limits. */
struct hook_keys {
	char *path[GPUCTL_HOOK_COUNT_];        /* owned, NULL: none */
	unsigned line[GPUCTL_HOOK_COUNT_ + 2]; /* each key's line (then hook_timeout,
	                                        * hook_max_running), 0: not given */
	uint64_t timeout_s;
	unsigned max_running;
};

#define CONFIG_MAX_PEERS    16  /* most peers a status page shows */
#define CONFIG_MAX_PEER_LEN 256 /* longest peer URL */

/* The status page's settings (config-status.c). */
struct status_keys {
	char **peers;                          /* owned, NULL-terminated; NULL: none given */
	bool hide_users;                       /* status_page_users = hide */
	enum gpuctl_status_page_access access; /* status_page (0, off, until given: the
	                                        * query answers local then) */
	unsigned line[3]; /* the line of peers, status_page_users, status_page; 0: not given */
};

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
	struct idle_keys idle;       /* its idle actions; a key not given: the global one */
	struct enforce_keys enforce; /* its enforcement; a key not given: the global one */
	struct quota_keys quota;     /* its quotas; a key not given: the global one */
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
	char *ledger_buf;                       /* owned; settings.ledger points into it */
	char *dev_dir_buf;                      /* owned; settings.dev_dir points into it */
	char *agent_socket_buf;                 /* owned; settings.agent_socket points into it */
	struct pool *pools;                     /* owned, n_pools entries */
	size_t n_pools;                         /* entries in pools */
	struct idle_keys idle;                  /* the global section's idle actions */
	struct enforce_keys enforce;            /* the global section's enforcement */
	struct quota_keys quota;                /* the global section's quotas */
	struct hook_keys hooks;                 /* the agent's hooks (config-hooks.c) */
	struct status_keys status;              /* the status page's (config-status.c) */
};

/* The state of one parse; gpuctl_config_pool_map reuses it so its messages name the line. */
struct parser {
	struct gpuctl_ctx *ctx;
	struct gpuctl_config *cfg;
	unsigned line;                  /* current line, from 1 */
	struct pool *cur;               /* the pool section being read, NULL: global section */
	unsigned global_line[G__COUNT]; /* line of each global key, 0: not given */
};

/* Stores "NAME:LINE: <fmt...>" on the context and returns -EINVAL. */
int config_perr(struct parser *p, const char *fmt, ...) _printf_(2, 3);

/* A hook key (on_health, ..., hook_timeout, hook_max_running) into p's configuration: 0, 1 when
 * key is no hook key, or -errno (message "FILE:LINE: ..." on the context). config-hooks.c. */
int config_hook_key(struct parser *p, const char *key, const char *value);
/* Frees what config_hook_key kept. */
void config_hooks_free(struct hook_keys *h);

/* peers or status_page_users into p's configuration: 0, 1 when key is neither, or -errno
 * (message "FILE:LINE: ..." on the context). config-status.c. */
int config_status_key(struct parser *p, const char *key, const char *value);
/* Frees what config_status_key kept. */
void config_status_free(struct status_keys *s);

/* Whether s[0..len) is one or more decimal digits. */
bool config_all_digits(const char *s, size_t len);

/* Decimal digits s[0..len) into *ret; false on overflow past UINT64_MAX. */
bool config_digits_u64(const char *s, size_t len, uint64_t *ret);

/* name quoted for messages (quote_text, cut at NAME_QUOTE_MAX), malloc'ed; NULL: no memory. */
char *config_quoted_name(const char *name);

/* The words of enforce (enum gpuctl_enforce order) and violation_action (enum
 * gpuctl_violation_action order), NULL-terminated (config.c). */
extern const char *const config_enforce_words[];
extern const char *const config_action_words[];
#define CONFIG_ENFORCE_WORDS 4
#define CONFIG_ACTION_WORDS  3
/* The enforcement keys' defaults: off, log, 10s, no (config.c). */
extern const struct enforce_keys config_enforce_default;

/* A user's passwd facts for the pools' and quotas' group rules (config-pools.c). */
struct config_user_info {
	char *name;    /* NULL: the uid has no passwd entry */
	gid_t gid;     /* primary group, if name */
	gid_t *groups; /* getgrouplist(), owned */
	int n_groups;  /* entries in groups */
};
/* uid's name, primary group and groups (an empty info, no error, for a uid without an entry);
 * -ENOMEM. */
int config_user_info_get(uint32_t uid, struct config_user_info *ret);
void config_user_info_done(struct config_user_info *u);
/* Whether u is in group entry e (a name, or a gid in decimal): 1 or 0; -ENOENT when no group has
 * that name. */
int config_in_group(const char *e, const struct config_user_info *u);

/* config-quota.c: a quota_* key's line: 1 when key is no quota key (nothing done), else 0 or
 * the -EINVAL of config_perr. */
int config_quota_set(struct parser *p, const char *key, const char *value);
void config_quota_done(struct quota_keys *q);

#endif
