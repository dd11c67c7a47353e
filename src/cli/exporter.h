/* SPDX-License-Identifier: MIT */
/*
 * exporter.h: the exporter's sampling and serving loop (cmd-exporter.c), shared by `gpuctl
 * exporter` and `gpuctl agent` (cmd-agent.c): one sampler thread, one page per sample, and for
 * the agent a hook that sees each sample on the main thread after its page is published.
 */
#ifndef GPUCTL_CLI_EXPORTER_H
#define GPUCTL_CLI_EXPORTER_H

#include <stdbool.h>
#include <stddef.h>

#include "cmd.h"
#include "listen.h"

#define EXPORTER_MIN_INTERVAL 0.1
#define EXPORTER_MAX_INTERVAL 86400.0

/* The options both commands take (getopt values); a command's own start at OPT_EXPORTER_END_. */
enum {
	OPT_LISTEN = 0x100,
	OPT_INTERVAL,
	OPT_LEASE_DIR,
	OPT_MAX_PROCESSES,
	OPT_IDLE_WINDOW,
	OPT_EXPORTER_END_,
};
#define EXPORTER_OPTIONS                                                                           \
	{"listen", required_argument, NULL, OPT_LISTEN},                                           \
	        {"interval", required_argument, NULL, OPT_INTERVAL},                               \
	        {"lease-dir", required_argument, NULL, OPT_LEASE_DIR},                             \
	        {"max-processes", required_argument, NULL, OPT_MAX_PROCESSES},                     \
	{                                                                                          \
		"idle-window", required_argument, NULL, OPT_IDLE_WINDOW                            \
	}

struct sampler_sample;

/* One sample as a hook sees it (valid during the call only). */
struct exporter_view {
	const struct gpuctl_snapshot *snap;     /* never NULL (failed samples are not handed on) */
	const struct gpuctl_lease_list *leases; /* NULL: no lease directory, or unreadable */
	const struct gpuctl_foreign *foreign;   /* its processes of no lease, NULL: unknown */
	const char *const *pool_of;             /* each GPU's pool label */
	double wall;                            /* CLOCK_REALTIME seconds: the sample began */
	double mono;                            /* CLOCK_MONOTONIC seconds of the same moment */
	const struct gpuctl_site *site;         /* the configuration and lease directory */
	struct gpuctl_ctx *ctx;                 /* the main thread's context (no NVML) */
	struct gpuctl_workloads *wls;           /* the one workload cache; NULL: none */
	bool *held; /* per GPU of snap, for the usage counters (exporter_view_held); NULL: none */
	bool *held_set; /* whether the hook said which GPUs are held */
	/* the sample: sampler_hold it to keep snap past the call (exporter_sample_snapshot) */
	const struct sampler_sample *sample;
	/* the XIDs NVML's events gave since the last sample (drained with it, on the sampler's
	 * thread); NULL: the exporter has no XID events (the kernel log is the only source) */
	const struct gpuctl_xid_log *xid_events;
	const int64_t *lease_idle_ms; /* per entry of leases: how long its lease has been idle by
	                               * the sampler's idle tracker (idle_view_lease_ms), -1 not
	                               * idle; NULL: not known */
};

/* For a hook that records holders (the agent's ledger): the usage counters (usage-counters.h)
 * are to count the GPUs the hook names at this sample, not the exporter's own look. Call it
 * once with uuid NULL (this sample's holders are the hook's, maybe none), then once per GPU
 * it recorded a holder on. */
void exporter_view_held(const struct exporter_view *v, const char *uuid);

/* What a command adds to the loop; every function runs on the main thread. */
struct exporter_hook {
	void *userdata;
	/* each good sample, after its page is published and before the workload cache is swept */
	void (*on_sample)(void *userdata, const struct exporter_view *v);
	/* NULL, or when the samples become overdue (no sample for two intervals: NVML hangs;
	 * silent_s seconds since the last) and, overdue false, when one comes again (before its
	 * on_sample) */
	void (*on_overdue)(void *userdata, bool overdue, double silent_s);
	/* NULL, or the violations found so far per kind (agent-watch.h, AGENT_VIOLATION_KINDS
	 * entries), rendered as gpuctl_violations_total on each page (a sample's own on the
	 * next page: the page is published before the hook sees the sample) */
	const uint64_t *violations;
	/* NULL, or called when fd is readable (the agent's socket, agent-socket.h): the loop
	 * polls fd beside the sampler's */
	void (*on_fd)(void *userdata);
	int fd;
};

struct exporter_args {
	const struct cmd_entry *entry; /* the command (its usage errors and site) */
	const char *listen_text;       /* --listen, as given (for the messages) */
	struct listen_spec spec;       /* --listen, parsed */
	double interval;               /* --interval: seconds between samples */
	const char *lease_dir;         /* --lease-dir, NULL: the site's */
	unsigned timeout;              /* GPUCTL_EXPORTER_TIMEOUT: a connection's idle timeout, s */
	size_t max_processes;          /* --max-processes */
	uint32_t idle_window;          /* --idle-window: seconds (docs/idle.md) */
	const struct exporter_hook *hook; /* NULL: none */
};

/* One of the shared options (opt, optarg) into a: CMD_GO_ON, or the exit status of its usage
 * error. An opt that is not one of them is cmd_bad_option's. */
int exporter_option(struct exporter_args *a, int opt, char **argv);
/* After the options: no operands, --listen parsed, GPUCTL_EXPORTER_TIMEOUT read. CMD_GO_ON or
 * the exit status. */
int exporter_options_done(struct exporter_args *a, int argc, char **argv);

/* The snapshot of a sample a hook holds (exporter_view.sample); NULL for a failed one. */
const struct gpuctl_snapshot *exporter_sample_snapshot(const struct sampler_sample *m);

/* Samples, serves and calls the hook until SIGINT or SIGTERM: the exit status. */
int exporter_run(struct cli *cli, const struct exporter_args *a);

#endif /* GPUCTL_CLI_EXPORTER_H */
