/* nvsim's command-line values (args.h). Indices are decimal only: "010" is GPU 10, never an
 * octal 8, and "0x1" is no index (it can only be a UUID, which it is not). */
#include "args.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool decimal(const char *s)
{
	return strspn(s, "0123456789") == strlen(s);
}

static int parse_gpus(const struct sim_scenario *sc, char *list, bool *sel)
{
	char *tok, *next;

	for (tok = list; tok; tok = next) {
		bool found = false;

		next = strchr(tok, ',');
		if (next)
			*next++ = '\0';
		if (!*tok)
			return -ENOENT;
		if (decimal(tok)) {
			unsigned long idx;

			errno = 0;
			idx = strtoul(tok, NULL, 10);
			if (errno || idx >= sc->n_gpus)
				return -ENOENT;
			sel[idx] = true;
			continue;
		}
		for (unsigned int i = 0; i < sc->n_gpus; i++)
			if (strcasecmp(sc->gpus[i].uuid, tok) == 0) {
				sel[i] = true;
				found = true;
			}
		if (!found)
			return -ENOENT;
	}
	return 0;
}

int nvsim_parse_gpus(const struct sim_scenario *sc, const char *list, bool *sel)
{
	_cleanup_free_ char *copy = strdup(list);
	int r;

	memset(sel, 0, SIM_MAX_GPUS * sizeof(bool));
	if (!copy)
		return -ENOMEM;
	r = parse_gpus(sc, copy, sel);
	if (r < 0)
		memset(sel, 0, SIM_MAX_GPUS * sizeof(bool));
	return r;
}

int nvsim_parse_size(const char *s, unsigned long long *ret_bytes)
{
	static const struct {
		const char *suffix;
		unsigned long long mult;
	} units[] = {{"TiB", 1ULL << 40},
	             {"GiB", 1ULL << 30},
	             {"MiB", 1ULL << 20},
	             {"KiB", 1ULL << 10},
	             {"B", 1},
	             {"", 1ULL << 20}};
	char *end;
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	for (size_t i = 0; i < SIM_ELEMENTSOF(units); i++)
		if (strcmp(end, units[i].suffix) == 0) {
			if (errno == ERANGE || v > (1ULL << 54) / units[i].mult)
				return -ERANGE;
			*ret_bytes = v * units[i].mult;
			return 0;
		}
	return -EINVAL;
}
