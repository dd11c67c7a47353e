// SPDX-License-Identifier: MIT
/*
 * fuzz-driver-proc.c: libFuzzer target for the reader of the NVIDIA driver's per-GPU
 * information file (driver_proc_bus_location, src/lib/nvml/driver-proc.c).
 *
 * The input is the raw file (not NUL-terminated: the reader must stop at the length).
 * Properties checked beyond "no crash, no leak": a bus location read is a valid PCI address
 * (device < 32, function < 8), and written in NVML's spelling it reads back as the same number;
 * a device minor read is below the kernel's limit and reads back the same.
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
	uint32_t minor, minor2;

	if (driver_proc_device_minor((const char *)data, size, &minor)) {
		int n = snprintf(line, sizeof(line), "Device Minor: \t %u\n", minor);
		if (minor >= DRIVER_PROC_MINOR_LIMIT ||
		    !driver_proc_device_minor(line, (size_t)n, &minor2) || minor2 != minor)
			abort();
	}
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
