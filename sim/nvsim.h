/* nvsim internals shared by nvsim.c (main, exec, helpers) and nvsim-cmds.c (the state-changing
 * and inspecting commands). */
#ifndef NVSIM_H
#define NVSIM_H

#include "args.h"
#include "scenario.h"
#include "state.h"

#include <jansson.h>

#define EXIT_USAGE    2
#define EXIT_NOTFOUND 127

/* Prints "nvsim: <message>" on one line; returns code. */
__attribute__((format(printf, 2, 3))) int nvsim_err(int code, const char *fmt, ...);

/* A locked, loaded state directory for a read-modify-write. */
struct nvstate {
	char dir[4096];
	int lock_fd;
	json_t *scenario;        /* scenario.json */
	struct sim_scenario *sc; /* parsed scenario (without state) */
	json_t *state;           /* state.json ({} when absent) */
};

/* Opens $NVSIM_STATE_DIR (exit code on failure, message printed). */
int nvstate_open(struct nvstate *st);
/* Validates st->state against the scenario; on error prints "nvsim: <what>: <why>". */
int nvstate_validate(struct nvstate *st, const char *what);
int nvstate_save(struct nvstate *st);
void nvstate_close(struct nvstate *st);
/* Resolves a scenario argument (name or path) and loads it; prints errors. */
int nvsim_load_scenario(const char *arg, char **ret_buf, size_t *ret_len,
                        struct sim_scenario **ret);
const char *nvsim_scenario_dir(void);

int cmd_set(int argc, char **argv);
int cmd_fail(int argc, char **argv);
int cmd_hang(int argc, char **argv);
int cmd_unhang(int argc, char **argv);
int cmd_hung(int argc, char **argv);
int cmd_latency(int argc, char **argv);
int cmd_proc(int argc, char **argv);
int cmd_calls(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_scenarios(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_xid(int argc, char **argv);

#endif
