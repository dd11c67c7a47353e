// SPDX-License-Identifier: MIT
/*
 * fuzz-cpuinfo.c: libFuzzer target for the /proc/cpuinfo reader (cpu_info_parse,
 * src/lib/model/cpuinfo.c).
 *
 * The input is raw cpuinfo bytes (not NUL-terminated: the parser must stop at the length).
 * Properties checked beyond "no crash, no leak": the strings are terminated and printable, the
 * class is one of the documented ones, and the figures are positive with an overhead of 1 or
 * 1.2.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpuinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t size)
{
	if (!memchr(s, '\0', size))
		abort();
	for (; *s; s++)
		if (!isprint((unsigned char)*s))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const classes[] = {
	        "Broadwell", "Skylake", "Sapphire Rapids", "Emerald Rapids", "AMD",
	        "Grace",     "Arm",     "unknown"};
	struct gpuctl_cpu c = GPUCTL_CPU_INIT;
	bool known = false;

	cpu_info_parse((const char *)data, size, &c);
	check_text(c.vendor, sizeof(c.vendor));
	check_text(c.name, sizeof(c.name));
	check_text(c.cpu_class, sizeof(c.cpu_class));
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		known |= strcmp(c.cpu_class, classes[i]) == 0;
	if (!known || c.inter_socket_gbps <= 0 || (c.p2p_overhead != 1.0 && c.p2p_overhead != 1.2))
		abort();
	if (c.family < -1 || c.family > 0xFFFF || c.model < -1 || c.model > 0xFFFF)
		abort();
	return 0;
}
