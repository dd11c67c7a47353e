// SPDX-License-Identifier: MIT
/*
 * fuzz-gres.c: libFuzzer target for the gres.conf reader (gres_conf_parse, src/lib/devices/gres.c)
 * and the hostlist expander under it, which decide which GPU a Slurm job gets.
 *
 * The input is raw gres.conf text (not NUL-terminated), read for node "gpu02". Properties
 * checked beyond "no crash": on success every device file is a non-empty NUL-terminated name
 * without blanks, commas or brackets, there are at most GRES_MAX_FILES of them, and parsing the
 * same text again gives the same files; on failure the reason is a one-line string.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gres.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gres_gpus a = {0}, b = {0};
	char why[256] = "";
	int r = gres_conf_parse((const char *)data, size, "gpu02", &a, why, sizeof(why));

	if (r < 0) {
		if (r != -EINVAL && r != -ENOMEM)
			abort();
		if (r == -EINVAL && (!why[0] || strchr(why, '\n')))
			abort();
		return 0;
	}
	if (a.n > GRES_MAX_FILES)
		abort();
	for (size_t i = 0; i < a.n; i++)
		if (!a.files[i] || !a.files[i][0] || strpbrk(a.files[i], " \t\n,[]"))
			abort();
	if (gres_conf_parse((const char *)data, size, "gpu02", &b, why, sizeof(why)) != 0 ||
	    b.n != a.n || b.autodetect != a.autodetect || b.multiple_files != a.multiple_files)
		abort();
	for (size_t i = 0; i < a.n; i++)
		if (strcmp(a.files[i], b.files[i]) != 0)
			abort();
	gres_gpus_free(&a);
	gres_gpus_free(&b);
	return 0;
}
