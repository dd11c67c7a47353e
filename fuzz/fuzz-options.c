// SPDX-License-Identifier: MIT
/*
 * fuzz-options.c: libFuzzer target for the command-line values no other target covers:
 * gpuctl's --color WHEN (src/cli/color.c) and nvsim's GPU lists and sizes (sim/args.c:
 * `nvsim proc add -i`, `--mem`, `nvsim set memory.used=`).
 *
 * The first byte picks the parser (0 --color, 1 nvsim size, 2 nvsim GPU list), the rest is one
 * NUL-terminated argument. Each result is checked against an oracle written here from the
 * documentation, not from the parser: --color takes exactly the words docs/gpuctl.1 and
 * cmd.h list; a size is decimal digits and one of TiB GiB MiB KiB B or nothing (MiB), at most
 * 2^54 bytes (sim/README.md); a GPU list is comma-separated decimal indices below the GPU
 * count or the scenario's UUIDs in any case. A refusal leaves the result untouched (sizes,
 * --color) or empty (GPU lists).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "args.h"
#include "cmd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_GPUS 12

static void check_color(const char *text)
{
	static const struct {
		const char *word;
		enum cli_color color;
	} words[] = {{"auto", CLI_COLOR_AUTO},   {"tty", CLI_COLOR_AUTO},
	             {"if-tty", CLI_COLOR_AUTO}, {"always", CLI_COLOR_ALWAYS},
	             {"yes", CLI_COLOR_ALWAYS},  {"force", CLI_COLOR_ALWAYS},
	             {"never", CLI_COLOR_NEVER}, {"no", CLI_COLOR_NEVER},
	             {"none", CLI_COLOR_NEVER}};
	enum cli_color c = (enum cli_color)77;
	int r = cli_color_parse(text, &c);

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcmp(text, words[i].word) == 0) {
			if (r != 0 || c != words[i].color)
				abort();
			return;
		}
	if (r != -EINVAL || c != (enum cli_color)77)
		abort();
}

static void check_size(const char *text)
{
	static const struct {
		const char *suffix;
		int shift;
	} units[] = {{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}, {"", 20}};
	size_t digits = strspn(text, "0123456789");
	unsigned __int128 v = 0, limit = (unsigned __int128)1 << 54;
	int shift = -1;
	unsigned long long got = 7;
	int r = nvsim_parse_size(text, &got);

	for (size_t i = 0; i < digits; i++) {
		v = v * 10 + (unsigned)(text[i] - '0');
		if (v > limit)
			v = limit + 1; /* saturate: too big whatever the unit */
	}
	for (size_t i = 0; digits && i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(text + digits, units[i].suffix) == 0)
			shift = units[i].shift;
	if (shift < 0) {
		if (r != -EINVAL || got != 7)
			abort();
	} else if ((v << shift) > limit) {
		if (r != -ERANGE || got != 7)
			abort();
	} else if (r != 0 || got != (unsigned long long)(v << shift)) {
		abort();
	}
}

static struct sim_scenario *machine(void)
{
	static struct sim_scenario *sc;
	char json[4096];
	size_t n;

	if (sc)
		return sc;
	n = (size_t)snprintf(
	        json, sizeof(json),
	        "{\"schema\": 1, \"name\": \"fuzz\", \"description\": \"fuzz-options\","
	        " \"sources\": [\"fuzz\"], \"defaults\": {\"pci_device_id\": 590352606,"
	        " \"name\": \"NVIDIA H100 80GB HBM3\", \"brand\": \"nvidia\","
	        " \"architecture\": \"hopper\", \"compute_capability\": \"9.0\","
	        " \"memory_total_mib\": 81559, \"pcie\": {\"gen\": 5, \"width\": 16},"
	        " \"numa_node\": 0}, \"gpus\": [");
	for (int i = 0; i < N_GPUS; i++)
		n += (size_t)snprintf(json + n, sizeof(json) - n,
		                      "%s{\"uuid\": \"GPU-aaaaaaaa-0000-0000-0000-0000000000%02d\","
		                      " \"pci_bus_id\": \"00000000:%02X:00.0\"}",
		                      i ? ", " : "", i, 0x10 + i);
	snprintf(json + n, sizeof(json) - n, "]}");
	char err[512];
	if (sim_scenario_parse(json, strlen(json), &sc, err, sizeof(err)) < 0 ||
	    sc->n_gpus != N_GPUS) {
		fprintf(stderr, "fuzz-options: the fixed scenario does not parse: %s\n", err);
		abort();
	}
	return sc;
}

static void check_gpus(const char *text)
{
	struct sim_scenario *sc = machine();
	bool sel[SIM_MAX_GPUS], want[SIM_MAX_GPUS] = {false};
	bool ok = true;
	int r = nvsim_parse_gpus(sc, text, sel);

	for (const char *tok = text; ok;) {
		size_t len = strcspn(tok, ",");
		size_t digits = strspn(tok, "0123456789");
		bool found = false;

		if (len == 0) {
			ok = false;
		} else if (digits >= len) {
			unsigned long v = 0;
			for (size_t i = 0; i < len && v < 1000; i++)
				v = v * 10 + (unsigned long)(tok[i] - '0');
			if (v < N_GPUS)
				want[v] = found = true;
			ok = found;
		} else {
			for (unsigned int i = 0; i < N_GPUS; i++)
				if (strlen(sc->gpus[i].uuid) == len &&
				    strncasecmp(sc->gpus[i].uuid, tok, len) == 0)
					want[i] = found = true;
			ok = found;
		}
		if (!tok[len])
			break;
		tok += len + 1;
	}
	if (!ok) {
		if (r != -ENOENT)
			abort();
		memset(want, 0, sizeof(want));
	} else if (r != 0) {
		abort();
	}
	if (memcmp(sel, want, sizeof(sel)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char *text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (strlen(text) == size - 1) { /* a NUL inside is not one argument */
		switch (data[0] % 3) {
		case 0:
			check_color(text);
			break;
		case 1:
			check_size(text);
			break;
		default:
			check_gpus(text);
			break;
		}
	}
	free(text);
	return 0;
}
