/* fuzz-scenario: libFuzzer target over the simulator's scenario parser (sim/scenario.c).
 * Any input must give either a scenario or a one-line "PATH: what" error, never a crash,
 * leak or hang; the derivation helpers are exercised on whatever parses. The seed corpus is
 * sim/scenarios/NAME.json plus the unit-test fixtures, copied next to the binary at build time
 * (build/fuzz/corpus-fuzz-scenario/, the scratch corpus scripts/fuzz.sh uses). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sim_scenario *s = NULL;
	char err[512];

	err[0] = '\0';
	if (sim_scenario_parse((const char *)data, size, &s, err, sizeof(err)) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort(); /* every failure explains itself in one line */
		return 0;
	}
	for (unsigned int a = 0; a < s->n_gpus && a < 8; a++)
		for (unsigned int b = 0; b < s->n_gpus && b < 8; b++)
			if (a != b) {
				(void)sim_common_ancestor(s, a, b);
				(void)sim_p2p_status(s, a, b);
				(void)sim_nvlink_connected(s, a, b);
			}
	sim_scenario_free(s);
	return 0;
}
