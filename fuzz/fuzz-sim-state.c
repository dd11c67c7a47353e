/* fuzz-sim-state: libFuzzer target over the simulator's reading of state.json's dynamic facts
 * (sim/state.c, sim_dyn_from_json: per-GPU lost/cuda/nvlink facts, "fail" and "hang" rules).
 * Any JSON must give the facts or a one-line error, never a crash, leak or out-of-range rule;
 * input that is not JSON is skipped (jansson's own parser is not ours to fuzz). Seeds in
 * fuzz/corpus/fuzz-sim-state/. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sim_dyn dyn; /* large: not on the stack */
	json_t *state = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	char err[512];

	if (!state)
		return 0;
	memset(&dyn, 0, sizeof(dyn));
	err[0] = '\0';
	if (sim_dyn_from_json(state, 8, &dyn, err, sizeof(err)) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort(); /* every failure explains itself in one line */
	} else {
		if (dyn.n_fails > SIM_MAX_FAILS || dyn.n_hangs > SIM_MAX_FAILS)
			abort();
		for (size_t i = 0; i < dyn.n_hangs; i++)
			if (!memchr(dyn.hangs[i].function, '\0', sizeof(dyn.hangs[i].function)))
				abort(); /* names are always terminated */
	}
	json_decref(state);
	return 0;
}
