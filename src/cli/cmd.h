/* SPDX-License-Identifier: MIT */
/*
 * cmd.h: what every gpuctl command file sees: the command entry, the exit codes, and the few
 * helpers that make errors and snapshots look the same in every command.
 *
 * Decisions:
 * - One cmd-<name>.c per command, each defining one `const struct cmd_entry` (tmux style); the
 *   table in cmd.c lists them alphabetically. main.c parses only the global options.
 * - A command's exec() returns the process exit status; it prints its own errors with
 *   cli_error() (one line, "gpuctl: <what>: <why>") before returning non-zero.
 * - The library is reached only through include/gpuctl/gpuctl.h.
 */
#ifndef GPUCTL_CLI_CMD_H
#define GPUCTL_CLI_CMD_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "gpuctl/gpuctl.h"

/* Exit statuses, documented in docs/gpuctl.1 (EXIT STATUS) and in `gpuctl --help`. */
enum cli_exit {
	CLI_EXIT_OK = 0,       /* success */
	CLI_EXIT_FAILURE = 1,  /* failure while running: NVML error, I/O error, out of memory */
	CLI_EXIT_USAGE = 2,    /* bad option or argument, unknown field, unknown GPU id, a
	                        * configuration file that does not parse */
	CLI_EXIT_NOMATCH = 3,  /* no GPU satisfies the request (select/run) */
	CLI_EXIT_NODRIVER = 4, /* no NVIDIA driver: NVML not found or cannot initialise */
	CLI_EXIT_BUSY = 6,     /* the lease directory's select.lock was held past its bound by
	                        * another process (the line names it; docs/leases.md "Bounds") */
	CLI_EXIT_HUNG = 7,     /* an NVML call did not return within GPUCTL_NVML_TIMEOUT (the
	                        * line names the call and the GPU; watchdog.h) */
	CLI_EXIT_NOLEDGER = 8, /* report: no ledger at the path (no agent has written one) */
	CLI_EXIT_QUOTA = 9,    /* select/run: over a quota of the pool (docs/config.md "Quotas") */
};

/* --color=WHEN (docs/gpuctl.1, "Colour"). */
enum cli_color {
	CLI_COLOR_AUTO = 0, /* on a terminal, unless NO_COLOR is set and not empty */
	CLI_COLOR_ALWAYS,   /* even into a pipe, and despite NO_COLOR (an explicit request) */
	CLI_COLOR_NEVER,
};

/* State shared by main.c and the commands. */
struct cli {
	bool verbose;             /* -v: library debug messages go to stderr */
	enum cli_color color;     /* --color: whether tables colour their cells (cli_use_color) */
	struct gpuctl_ctx *ctx;   /* created on first use by cli_snapshot(); freed by main.c */
	const char *config_path;  /* --config FILE, NULL: $GPUCTL_CONFIG or the default */
	struct gpuctl_site *site; /* configuration and lease directory, opened on first use
	                           * (cli_site); freed by main.c */
	bool oneshot;             /* a one-shot command: cli_context() arms the NVML watchdog
	                           * (watchdog.h); set by main.c from CMD_EXITS_HUNG, cleared by
	                           * a command that turns out to run on (health --watch) */
};

struct cmd_entry {
	const char *name;    /* the command word */
	const char *usage;   /* arguments after the name, for the usage line */
	const char *summary; /* one line for `gpuctl --help` */
	const char *options; /* the option list for `gpuctl COMMAND --help`, one per line */
	/* The command's options, declared once: getopt_long's table and short options, which
	 * cmd_getopt parses with; tests/unit/test-cli-options.c checks `options` against them. */
	const struct option *long_options;
	const char *short_options;
	/* --format's values, NULL-terminated, parsed by cmd_parse_format; NULL: no --format, or a
	 * richer one the command reads itself (list, select, run) */
	const char *const *formats;
	/* long options --help leaves out on purpose (what gpuctl passes to itself),
	 * NULL-terminated; or NULL */
	const char *const *internal_options;
	const char *notes; /* text printed right after options (NULL: none): a second string
	                    * literal, so that neither reaches C's 4095-character limit */
	int (*exec)(struct cli *cli, int argc, char **argv); /* argv[0] is the command name */
	unsigned exits; /* CMD_EXITS_*: the statuses beyond 0, 1 and 2 it can end with,
	                 * which its --help lists (docs/gpuctl.1, EXIT STATUS) */
};

enum {
	CMD_EXITS_DRIVER = 1u << 0,  /* 4: no NVIDIA driver (it reads NVML) */
	CMD_EXITS_NOMATCH = 1u << 1, /* 3: no GPU satisfies the request */
	CMD_EXITS_RETRY = 1u << 2,   /* 5: run --retry gave up */
	CMD_EXITS_HEALTH = 1u << 3,  /* 10, 20: health's verdicts */
	CMD_EXITS_JOB = 1u << 4,     /* the command's own status once it started */
	CMD_EXITS_BUSY = 1u << 5,    /* 6: select.lock held past its bound (docs/leases.md) */
	CMD_EXITS_HUNG = 1u << 6,    /* 7: a one-shot command: a hung NVML call ends it past
	                              * GPUCTL_NVML_TIMEOUT (main.c arms the watchdog for it) */
	CMD_EXITS_LEDGER = 1u << 7,  /* 8: report found no ledger */
	CMD_EXITS_QUOTA = 1u << 8,   /* 9: over a quota (docs/config.md "Quotas") */
	CMD_EXITS_CONFINE = 1u << 9, /* 11: run: enforce = cgroup, and the agent did not confine */
};

/* The options several commands take, declared once: their getopt_long table entries, and the
 * values of those without a letter (above any command's own OPT_* values, which start at
 * 0x100). Each is parsed in one place: -i's IDS by cli_select_gpus, --format's values by
 * cmd_parse_format (or the command's richer reader), --color's WHEN by cli_color_option. */
enum {
	CMD_OPT_FORMAT = 0x1000, /* --format VALUE */
	CMD_OPT_COLOR,           /* --color WHEN */
};
/* clang-format off */
#define CMD_OPTIONS_IDS \
	{"id", required_argument, NULL, 'i'}, {"only", required_argument, NULL, 'i'}
#define CMD_OPTION_FORMAT {"format", required_argument, NULL, CMD_OPT_FORMAT}
#define CMD_OPTION_COLOR  {"color", required_argument, NULL, CMD_OPT_COLOR}
#define CMD_OPTION_HELP   {"help", no_argument, NULL, 'h'}
/* clang-format on */

extern const struct cmd_entry cmd_agent_entry;
extern const struct cmd_entry cmd_health_entry;
extern const struct cmd_entry cmd_exporter_entry;
extern const struct cmd_entry cmd_help_entry;
extern const struct cmd_entry cmd_info_entry;
extern const struct cmd_entry cmd_lease_entry;
extern const struct cmd_entry cmd_list_entry;
extern const struct cmd_entry cmd_ps_entry;
extern const struct cmd_entry cmd_quota_entry;
extern const struct cmd_entry cmd_release_entry;
extern const struct cmd_entry cmd_report_entry;
extern const struct cmd_entry cmd_run_entry;
extern const struct cmd_entry cmd_select_entry;
extern const struct cmd_entry cmd_slurm_entry;
extern const struct cmd_entry cmd_top_entry;
extern const struct cmd_entry cmd_topo_entry;
extern const struct cmd_entry cmd_watch_entry;

/* The command table (cmd.c), alphabetical and NULL-terminated. */
extern const struct cmd_entry *const cmd_table[];

/* Finds a command by its exact name; NULL if there is none. */
const struct cmd_entry *cmd_find(const char *name);

/* Prints the global usage (commands, global options, exit codes) to f. */
void cli_usage(FILE *f);
/* Prints one command's usage, options and the exit codes to f. */
void cmd_usage(const struct cmd_entry *entry, FILE *f);

/* Prints "gpuctl: " + the formatted message + newline to stderr, as one line (newlines in the
 * message become spaces). Returns nothing; callers return their exit status. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Reports a usage error for a command ("gpuctl: <cmd>: ...", plus a hint to --help) and
 * returns CLI_EXIT_USAGE. Used by the getopt loops. */
int cmd_usage_error(const struct cmd_entry *entry, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* The refresh options of the live commands (watch, top): a delay in seconds, 0.1 to 86400
 * (-d), and a count of refreshes, 1 to 1000000000 (-c, -n). 0, or the usage error's exit
 * status after its line ("-d: 'x' is not a number of seconds from 0.1 to 86400"). */
#define CMD_MIN_DELAY 0.1
#define CMD_MAX_DELAY 86400.0
int cmd_parse_delay(const struct cmd_entry *entry, const char *opt, const char *arg,
                    double *ret_seconds);
/* --idle-window SECONDS (exporter, top; docs/idle.md): 1 to CMD_MAX_IDLE_WINDOW (a week). 0, or
 * the usage error's exit status (printed). */
#define CMD_MAX_IDLE_WINDOW 604800
int cmd_parse_idle_window(const struct cmd_entry *entry, const char *arg, uint32_t *ret_seconds);
int cmd_parse_count(const struct cmd_entry *entry, const char *opt, const char *arg,
                    unsigned long *ret_count);

/* The next option of entry's command line (getopt_long over entry->short_options and
 * entry->long_options): the option's value, '?' or ':' for a bad one, -1 at the end. */
int cmd_getopt(const struct cmd_entry *entry, int argc, char **argv);

/* What a command's parse_options returns when the command goes on (any other value is the exit
 * status to return now: after --help, a usage error). */
#define CMD_GO_ON (-1)

/* --format's value among entry->formats: 0 and *ret_index (its position in the list), or the
 * usage error's exit status after "--format: unknown format 'x' (text or json)". */
int cmd_parse_format(const struct cmd_entry *entry, const char *arg, int *ret_index);

/* Standard getopt error handling for a command: call on '?' and ':' returns. */
int cmd_bad_option(const struct cmd_entry *entry, int opt, char **argv);
/* Describes the option getopt_long just refused ('?' or ':' in opt), naming it as typed. */
void cli_bad_option_text(int opt, char **argv, char *buf, size_t size);

/* Creates the context once (with -v, the library's log goes to stderr), reads
 * GPUCTL_LOCK_WAIT and GPUCTL_NVML_TIMEOUT and, for a one-shot command (cli->oneshot), arms the
 * NVML watchdog with the latter. 0, or the exit status after printing the error
 * (CLI_EXIT_USAGE for a bad variable, CLI_EXIT_FAILURE). */
int cli_context(struct cli *cli);

/* A new context set up as cli_context sets up cli->ctx (the log hook with -v, GPUCTL_LOCK_WAIT),
 * for another thread (a sampler's). 0, or the exit status after printing the error. */
int cli_context_new(const struct cli *cli, struct gpuctl_ctx **ret_ctx);

/* Opens the site once (gpuctl_site_open with --config and lease_dir: --lease-dir or NULL;
 * flags as there) into cli->site, which the command then reads. On failure prints the one-line
 * error and returns CLI_EXIT_USAGE for a bad configuration, else CLI_EXIT_FAILURE. Creates the
 * context if needed. */
int cli_site(struct cli *cli, const struct cmd_entry *entry, const char *lease_dir, unsigned flags);

/* Shows the caller's unseen eviction notices of the lease directory at lease_dir (NULL:
 * $GPUCTL_LEASE_DIR, else /run/gpuctl) on stderr, one line each, and marks them seen
 * (notices.c). Once per directory and process; costs one open when there are none. */
void cli_notices_show(const char *lease_dir);

/* The usage ledger's path (docs/ledger.md): given (--ledger), else $GPUCTL_LEDGER, else the
 * configuration's `ledger` (read through cli_site), else GPUCTL_LEDGER_PATH. 0 or the exit
 * status (an empty $GPUCTL_LEDGER is a usage error). */
int cli_ledger_path(struct cli *cli, const struct cmd_entry *entry, const char *given,
                    const char **ret);

/* Prints a failure to load NVML (or to take a snapshot) as one line and returns its exit
 * status: CLI_EXIT_NODRIVER for -ENOENT/-ENODEV ("no NVIDIA driver: ..."), else
 * CLI_EXIT_FAILURE ("NVML: ..."; for -EPERM, GPUCTL_NVML_LIBRARY or GPUCTL_CPUINFO naming what
 * is not a regular file, the library's line alone). */
int cli_driver_error(struct cli *cli, int r);
/* The same for a failure r whose message is msg (NULL or "": strerror), as a sampler thread's
 * context kept it (sampler.h). */
int cli_driver_error_msg(int r, const char *msg);

/* Creates the context (once) and takes a snapshot with the given flags. On failure prints the
 * one-line error and returns the exit status (CLI_EXIT_NODRIVER for -ENOENT/-ENODEV, else
 * CLI_EXIT_FAILURE); on success returns 0 and sets *ret_snap. */
int cli_snapshot(struct cli *cli, unsigned flags, struct gpuctl_snapshot **ret_snap);
/* Like cli_snapshot, reading only these per-GPU fields (gpuctl_snapshot_take_fields): a
 * command reads what it prints and no more. */
int cli_snapshot_fields(struct cli *cli, unsigned flags, const enum gpuctl_field *fields,
                        size_t n_fields, struct gpuctl_snapshot **ret_snap);

/* Resolves an -i/--id list against snap (gpuctl_ids_resolve). With ids == NULL selects every GPU
 * in index order. Prints the error and returns CLI_EXIT_USAGE / CLI_EXIT_FAILURE on failure. */
int cli_select_gpus(struct cli *cli, const struct gpuctl_snapshot *snap, const char *ids,
                    size_t **ret_indices, size_t *ret_count);

/* Seconds on clock: CLOCK_MONOTONIC for intervals and deadlines, CLOCK_REALTIME for
 * timestamps. */
double cli_now(clockid_t clock);
/* Waits until `until` (CLOCK_MONOTONIC seconds), taking a signal of stop if one comes (the
 * caller has them blocked). Returns the signal's number, or 0 when the time came. */
int cli_wait_until(double until, const sigset_t *stop);
/* Waits until one of fds (at most CLI_WAIT_MAX_FDS) is ready (their revents are set), until
 * `until` (CLOCK_MONOTONIC seconds; INFINITY: no limit), or a signal of stop comes (the caller
 * has them blocked; taken through a signalfd). Returns the signal's number, else 0. */
#define CLI_WAIT_MAX_FDS 8
struct pollfd;
int cli_wait_fds(struct pollfd *fds, size_t n, double until, const sigset_t *stop);
/* Ends the process now, with status (1 after a write error on stdout), without running exit
 * handlers or freeing anything: for a program whose sampler thread is stuck in a driver call
 * (sampler.h), which can be neither joined nor safely unloaded under. Flushes stdout and
 * stderr first; a screen must have been restored (endwin) by the caller. */
_Noreturn void cli_exit_now(int status);

/* Waits for s's first sample (sampler.h) with the signals of stop blocked by the caller: 0 and
 * *ret_sample (a reference), or the number of the signal that came first. While the sample is
 * overdue it says so once on stderr ("gpuctl: WHO: NVML not answering for N s"). */
struct sampler;
struct sampler_sample;
int cli_first_sample(struct sampler *s, const char *who, const sigset_t *stop,
                     const struct sampler_sample **ret_sample);

/* The tick after `tick` for a loop that runs every interval seconds (CLOCK_MONOTONIC): tick +
 * interval, or an interval from now when that is already past, so a pass that overran does not
 * make the next ones pile up. */
double cli_next_tick(double tick, double interval);

/* Parses --color's WHEN: "auto", "always", "never" (and GNU's synonyms yes/force, no/none,
 * tty/if-tty). 0, or -EINVAL. */
int cli_color_parse(const char *when, enum cli_color *ret_color);
/* A command's --color WHEN (the same as the global option, for the commands that colour):
 * sets cli->color; 0, or the usage error's status after printing it. */
int cli_color_option(struct cli *cli, const struct cmd_entry *entry, const char *when);
/* Whether this run colours its tables on stdout: always, never, or (auto) when stdout is a
 * terminal, NO_COLOR is unset or empty (https://no-color.org) and TERM is not "dumb". Machine
 * formats (JSON, CSV) never colour, whatever this says. */
bool cli_use_color(const struct cli *cli);

/* Flushes stdout and reports a write error (exit status 1) if one happened. */
int cli_finish_output(int status);

#endif /* GPUCTL_CLI_CMD_H */
