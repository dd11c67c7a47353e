// SPDX-License-Identifier: MIT
/*
 * fuzz-driver-proc.c: libFuzzer target for the reader of the NVIDIA driver's per-GPU
 * information file (driver_proc_bus_location, src/lib/nvml/driver-proc.c).
 *
 * The input is the raw file (not NUL-terminated: the reader must stop at the length).
 * Properties checked beyond "no crash, no leak": a bus location read is a valid PCI address
 * (device < 32, function < 8), and written in NVML's spelling it reads back as the same number.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver-proc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[64], line[96];
	uint64_t bus, again;

	if (!driver_proc_bus_location((const char *)data, size, &bus))
		return 0;
	if ((bus >> 3 & 0x1f) > 0x1f || (bus & 7) > 7 || bus >> 16 > UINT32_MAX)
		abort();
	driver_proc_bus_text(bus, text, sizeof(text));
	(void)snprintf(line, sizeof(line), "Bus Location: \t %s\n", text);
	if (!driver_proc_bus_location(line, strlen(line), &again) || again != bus)
		abort();
	return 0;
}
