/* The simulator's command-line values: GPU lists (nvsim -i) and sizes (nvsim --mem and
 * memory.used, nvsim-load --mem). Apart from nvsim.c so that nvsim-load and
 * fuzz/fuzz-options.c link them without nvsim's main. */
#ifndef NVSIM_ARGS_H
#define NVSIM_ARGS_H

#include "scenario.h"

#include <stdbool.h>

/* Resolves a "-i" list: comma-separated decimal indices (below sc->n_gpus) or UUIDs of the
 * scenario's GPUs (any case), into sel[SIM_MAX_GPUS]. -ENOENT for an empty item or one that
 * names no GPU, -ENOMEM; sel is all false after a failure. */
int nvsim_parse_gpus(const struct sim_scenario *sc, const char *list, bool *sel);
/* Parses sizes: "512MiB", "10GiB", "1TiB", "123456B", a bare decimal number = MiB, at most
 * 2^54 bytes. -EINVAL (not a size) or -ERANGE; *ret_bytes is untouched then. */
int nvsim_parse_size(const char *s, unsigned long long *ret_bytes);

#endif
