// SPDX-License-Identifier: MIT
/*
 * fuzz-slurm.c: libFuzzer target for the `scontrol show node` parser of `gpuctl health --slurm`
 * (slurm_parse_node, src/cli/slurm.c).
 *
 * The input is raw scontrol output (not NUL-terminated). Properties checked beyond "no crash":
 * the reason is a NUL-terminated string that fits its buffer and holds no newline; a drain is
 * resumed only when the reason is gpuctl's; a FAIL never resumes and never drains twice.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slurm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct slurm_node node;
	enum slurm_action ok, fail;

	slurm_parse_node((const char *)data, size, &node);
	if (memchr(node.reason, '\0', sizeof(node.reason)) == NULL || strchr(node.reason, '\n'))
		abort();
	ok = slurm_decide(&node, false);
	fail = slurm_decide(&node, true);
	if (ok == SLURM_DRAIN || (ok == SLURM_RESUME && !slurm_reason_is_ours(node.reason)) ||
	    (ok == SLURM_RESUME && !node.drained))
		abort();
	if (fail == SLURM_RESUME || (fail == SLURM_DRAIN && node.drained))
		abort();
	return 0;
}
