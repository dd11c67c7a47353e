/* Scenario parser and validator (schema 1, sim/SCENARIO.md), plus the derivation rules the
 * NVML functions need (common ancestor, P2P, NVLink wiring).
 *
 * Decisions:
 * - Every object's keys are checked against a list: an unknown key is an error, so a typo
 *   never becomes a default silently.
 * - `defaults` is validated on its own first (as a partial GPU, required keys not enforced),
 *   so an error inside it names `defaults.KEY`; each GPU is then the deep merge of defaults and
 *   its own object and is validated in full under `gpus[N]`.
 * - Limits (128 GPUs, 16 MiB file, string lengths that fit NVML's buffers, cpulists up to CPU
 *   8191) make hostile input cheap to reject; jansson already rejects NULs inside strings
 *   and nesting deeper than its own limit; duplicate keys are rejected (JSON_REJECT_DUPLICATES).
 * - All errors are "PATH: what is wrong"; the caller adds "nvsim: FILE: ". */
#include "scenario.h"
#include "util.h"

#include <stdarg.h>

struct pctx {
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 3, 4))) static int fail(struct pctx *c, const char *path,
                                                      const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (c->err && c->errlen)
		snprintf(c->err, c->errlen, "%s: %s", path && *path ? path : "(top level)", what);
	return -EINVAL;
}

/* A short printable rendering of a JSON value for messages. */
static void describe(const json_t *v, char *buf, size_t len)
{
	_cleanup_free_ char *s = NULL;

	if (!v) {
		sim_strlcpy(buf, "nothing", len);
		return;
	}
	s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	if (!s) {
		sim_strlcpy(buf, "?", len);
		return;
	}
	if (strlen(s) > 40)
		memcpy(s + 37, "...", 4);
	sim_strlcpy(buf, s, len);
}

/* base.key, with the key's control characters shown as '?' so a hostile key cannot break the
 * one-line message, and long keys cut. */
static void join(char *out, size_t len, const char *base, const char *key)
{
	char safe[64];
	size_t i;

	for (i = 0; key[i] && i + 1 < sizeof(safe); i++)
		safe[i] = (unsigned char)key[i] < 0x20 || key[i] == 0x7f ? '?' : key[i];
	safe[i] = '\0';
	if (base && *base)
		snprintf(out, len, "%s.%s", base, safe);
	else
		snprintf(out, len, "%s", safe);
}

static int check_keys(struct pctx *c, json_t *obj, const char *path, const char *const *allowed)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			if (strcmp(allowed[i], key) == 0)
				ok = true;
		if (!ok) {
			char p[256];
			join(p, sizeof(p), path, key);
			return fail(c, p, "unknown key");
		}
	}
	return 0;
}

static int want_object(struct pctx *c, json_t *v, const char *path)
{
	char d[64];

	if (json_is_object(v))
		return 0;
	describe(v, d, sizeof(d));
	return fail(c, path, "expected an object, got %s", d);
}

/* Integer member: absent leaves *out alone and *present false; wrong type or range fails. */
static int get_int(struct pctx *c, json_t *obj, const char *base, const char *key, long long min,
                   long long max, long long *out, bool *present)
{
	json_t *v = json_object_get(obj, key);
	char p[256], d[64];

	if (present)
		*present = false;
	if (!v)
		return 0;
	join(p, sizeof(p), base, key);
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
		describe(v, d, sizeof(d));
		return fail(c, p, "expected an integer %lld..%lld, got %s", min, max, d);
	}
	*out = json_integer_value(v);
	if (present)
		*present = true;
	return 0;
}

static int get_uint(struct pctx *c, json_t *obj, const char *base, const char *key, long long max,
                    unsigned int *out)
{
	long long v;
	bool present;
	int r = get_int(c, obj, base, key, 0, max, &v, &present);

	if (r < 0)
		return r;
	if (present)
		*out = (unsigned int)v;
	return 0;
}

static int get_ull(struct pctx *c, json_t *obj, const char *base, const char *key, long long max,
                   unsigned long long *out)
{
	long long v;
	bool present;
	int r = get_int(c, obj, base, key, 0, max, &v, &present);

	if (r < 0)
		return r;
	if (present)
		*out = (unsigned long long)v;
	return 0;
}

static int get_opt(struct pctx *c, json_t *obj, const char *base, const char *key, long long max,
                   struct sim_opt *out)
{
	long long v;
	bool present;
	int r = get_int(c, obj, base, key, 0, max, &v, &present);

	if (r < 0)
		return r;
	if (present) {
		out->valid = true;
		out->v = (unsigned long long)v;
	}
	return 0;
}

/* An array of NVLink numbers (0..SIM_MAX_LINKS-1) as a bitmask; absent: 0. */
static int get_link_set(struct pctx *c, json_t *obj, const char *base, const char *key,
                        uint64_t *out)
{
	json_t *v = json_object_get(obj, key), *el;
	char p[256], d[64];
	size_t i;

	if (!v)
		return 0;
	join(p, sizeof(p), base, key);
	if (!json_is_array(v)) {
		describe(v, d, sizeof(d));
		return fail(c, p, "expected an array of link numbers, got %s", d);
	}
	*out = 0;
	json_array_foreach(v, i, el)
	{
		if (!json_is_integer(el) || json_integer_value(el) < 0 ||
		    json_integer_value(el) >= SIM_MAX_LINKS) {
			describe(el, d, sizeof(d));
			return fail(c, p, "expected link numbers 0..%d, got %s", SIM_MAX_LINKS - 1,
			            d);
		}
		*out |= UINT64_C(1) << json_integer_value(el);
	}
	return 0;
}

static int get_bool(struct pctx *c, json_t *obj, const char *base, const char *key, bool *out)
{
	json_t *v = json_object_get(obj, key);
	char p[256], d[64];

	if (!v)
		return 0;
	if (!json_is_boolean(v)) {
		join(p, sizeof(p), base, key);
		describe(v, d, sizeof(d));
		return fail(c, p, "expected true or false, got %s", d);
	}
	*out = json_is_true(v);
	return 0;
}

/* String member of at most maxlen bytes, printable ASCII or UTF-8 (no control characters). */
static int get_str(struct pctx *c, json_t *obj, const char *base, const char *key, size_t maxlen,
                   const char **out)
{
	json_t *v = json_object_get(obj, key);
	char p[256], d[64];
	const char *s;

	if (!v)
		return 0;
	join(p, sizeof(p), base, key);
	if (!json_is_string(v)) {
		describe(v, d, sizeof(d));
		return fail(c, p, "expected a string, got %s", d);
	}
	s = json_string_value(v);
	if (json_string_length(v) != strlen(s))
		return fail(c, p, "string contains a NUL character");
	if (strlen(s) > maxlen)
		return fail(c, p, "string longer than %zu bytes", maxlen);
	for (const unsigned char *q = (const unsigned char *)s; *q; q++)
		if (*q < 0x20 || *q == 0x7f)
			return fail(c, p, "string contains a control character");
	*out = s;
	return 0;
}

static int require(struct pctx *c, json_t *obj, const char *base, const char *key)
{
	char p[256];

	if (json_object_get(obj, key))
		return 0;
	join(p, sizeof(p), base, key);
	return fail(c, p, "required key missing");
}

/* Index of name in a NULL-terminated table, or -1. */
static int lookup(const char *const *table, const char *name)
{
	for (int i = 0; table[i]; i++)
		if (strcmp(table[i], name) == 0)
			return i;
	return -1;
}

static const char *const brand_names[] = {"tesla", "quadro", "nvidia_rtx", "geforce",
                                          "titan", "nvidia", "unknown",    NULL};
static const unsigned int brand_values[] = {2, 1, 13, 5, 6, 14, 0};

int sim_brand_from_name(const char *name)
{
	int i = lookup(brand_names, name);
	return i < 0 ? -1 : (int)brand_values[i];
}

static const char *const arch_names[] = {"kepler", "maxwell", "pascal", "volta",     "turing",
                                         "ampere", "ada",     "hopper", "blackwell", NULL};

int sim_arch_from_name(const char *name)
{
	int i = lookup(arch_names, name);
	return i < 0 ? -1 : SIM_ARCH_KEPLER + i;
}

const char *sim_arch_name(unsigned int arch)
{
	if (arch < SIM_ARCH_KEPLER || arch > SIM_ARCH_BLACKWELL)
		return "unknown";
	return arch_names[arch - SIM_ARCH_KEPLER];
}

static const char *const p2p_names[] = {"ok",
                                        "chipset_not_supported",
                                        "gpu_not_supported",
                                        "topology_not_supported",
                                        "disabled_by_regkey",
                                        "not_supported",
                                        "unknown",
                                        NULL};
static const char *const level_names[] = {"INTERNAL", "PIX", "PXB", "PHB", "NODE", "SYS", NULL};
static const char *const compute_mode_names[] = {"default", "exclusive_process", "prohibited",
                                                 NULL};
static const unsigned int compute_mode_values[] = {0, 3, 2};

static int enum_member(struct pctx *c, json_t *obj, const char *base, const char *key,
                       const char *const *table, int *out)
{
	const char *s = NULL;
	char p[256];
	int r = get_str(c, obj, base, key, 64, &s);

	if (r < 0 || !s)
		return r;
	r = lookup(table, s);
	if (r < 0) {
		join(p, sizeof(p), base, key);
		return fail(c, p, "unknown value \"%s\"", s);
	}
	*out = r;
	return 0;
}

/* Linux cpulist "0-63,128-191" into a bitmask of unsigned longs. */
int sim_cpulist_parse(const char *s, unsigned long **ret, size_t *ret_words)
{
	const size_t bits = 8 * sizeof(unsigned long);
	size_t words = SIM_MAX_CPUS / bits;
	_cleanup_free_ unsigned long *mask = calloc(words, sizeof(unsigned long));
	const char *q = s;

	if (!mask)
		return -ENOMEM;
	if (!*s)
		return -EINVAL;
	for (;;) {
		char *end;
		unsigned long a, b;

		if (*q < '0' || *q > '9')
			return -EINVAL;
		errno = 0;
		a = strtoul(q, &end, 10);
		if (errno || a >= SIM_MAX_CPUS)
			return -EINVAL;
		b = a;
		q = end;
		if (*q == '-') {
			q++;
			if (*q < '0' || *q > '9')
				return -EINVAL;
			b = strtoul(q, &end, 10);
			if (errno || b >= SIM_MAX_CPUS || b < a)
				return -EINVAL;
			q = end;
		}
		for (unsigned long i = a; i <= b; i++)
			mask[i / bits] |= 1UL << (i % bits);
		if (*q == '\0')
			break;
		if (*q != ',')
			return -EINVAL;
		q++;
	}
	*ret = TAKE_PTR(mask);
	*ret_words = words;
	return 0;
}

static bool is_hex(char ch, bool upper_only)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'F') ||
	       (!upper_only && ch >= 'a' && ch <= 'f');
}

/* "GPU-" then 8-4-4-4-12 hex digits. */
static bool valid_gpu_uuid(const char *s)
{
	static const int groups[] = {8, 4, 4, 4, 12};

	if (strncmp(s, "GPU-", 4) != 0)
		return false;
	s += 4;
	for (size_t g = 0; g < SIM_ELEMENTSOF(groups); g++) {
		for (int i = 0; i < groups[g]; i++)
			if (!is_hex(*s++, false))
				return false;
		if (g + 1 < SIM_ELEMENTSOF(groups) && *s++ != '-')
			return false;
	}
	return *s == '\0';
}

/* "DDDDDDDD:BB:DD.F", uppercase hex, device <= 0x1f, function <= 7. */
static bool parse_bus_id(const char *s, unsigned int *dom, unsigned int *bus, unsigned int *dev,
                         unsigned int *fn)
{
	unsigned long v[3];
	const int widths[] = {8, 2, 2};
	const char seps[] = {':', ':', '.'};

	if (strlen(s) != 16)
		return false;
	for (int f = 0; f < 3; f++) {
		char tmp[9];
		for (int i = 0; i < widths[f]; i++) {
			if (!is_hex(s[i], true))
				return false;
			tmp[i] = s[i];
		}
		tmp[widths[f]] = '\0';
		v[f] = strtoul(tmp, NULL, 16);
		s += widths[f];
		if (*s++ != seps[f])
			return false;
	}
	if (s[0] < '0' || s[0] > '7' || s[1] != '\0' || v[2] > 0x1f)
		return false;
	*dom = (unsigned int)v[0];
	*bus = (unsigned int)v[1];
	*dev = (unsigned int)v[2];
	*fn = (unsigned int)(s[0] - '0');
	return true;
}

static int parse_clocks(struct pctx *c, json_t *gpu, const char *base, const char *key,
                        struct sim_opt *sm, struct sim_opt *mem)
{
	static const char *const keys[] = {"sm", "mem", NULL};
	json_t *o = json_object_get(gpu, key);
	char p[256];
	int r;

	if (!o)
		return 0;
	join(p, sizeof(p), base, key);
	if ((r = want_object(c, o, p)) < 0 || (r = check_keys(c, o, p, keys)) < 0)
		return r;
	if ((r = get_opt(c, o, p, "sm", 100000, sm)) < 0 ||
	    (r = get_opt(c, o, p, "mem", 100000, mem)) < 0)
		return r;
	return 0;
}

/* pcie_throughput_kbs {"rx", "tx"}: both required in a GPU (not in `defaults`). */
static int parse_pcie_throughput(struct pctx *c, json_t *gpu, const char *base, struct sim_gpu *g,
                                 bool partial)
{
	static const char *const keys[] = {"rx", "tx", NULL};
	json_t *o = json_object_get(gpu, "pcie_throughput_kbs");
	char p[256];
	int r;

	if (!o)
		return 0;
	join(p, sizeof(p), base, "pcie_throughput_kbs");
	if ((r = want_object(c, o, p)) < 0 || (r = check_keys(c, o, p, keys)) < 0)
		return r;
	if (!partial && ((r = require(c, o, p, "rx")) < 0 || (r = require(c, o, p, "tx")) < 0))
		return r;
	if ((r = get_opt(c, o, p, "rx", 0xffffffffLL, &g->pcie_rx_kbs)) < 0 ||
	    (r = get_opt(c, o, p, "tx", 0xffffffffLL, &g->pcie_tx_kbs)) < 0)
		return r;
	return 0;
}

static const char *const gpu_keys[] = {"uuid",
                                       "pci_bus_id",
                                       "pci_device_id",
                                       "name",
                                       "brand",
                                       "architecture",
                                       "compute_capability",
                                       "serial",
                                       "minor_number",
                                       "board",
                                       "memory_total_mib",
                                       "memory_reserved_mib",
                                       "memory_used_mib",
                                       "utilization_gpu",
                                       "utilization_memory",
                                       "temperature_c",
                                       "temperature_slowdown_c",
                                       "temperature_shutdown_c",
                                       "power_draw_mw",
                                       "power_limit_mw",
                                       "clocks_mhz",
                                       "max_clocks_mhz",
                                       "clocks_event_reasons",
                                       "pcie",
                                       "persistence_mode",
                                       "compute_mode",
                                       "ecc",
                                       "ecc_errors",
                                       "retired_pages",
                                       "remapped_rows",
                                       "recovery_action",
                                       "temperature_memory_c",
                                       "utilization_encoder",
                                       "utilization_decoder",
                                       "energy_mj",
                                       "violation_power_pct",
                                       "violation_thermal_pct",
                                       "bar1_total_mib",
                                       "bar1_used_mib",
                                       "pcie_throughput_kbs",
                                       "fan_speed_pct",
                                       "performance_state",
                                       "power_limit_min_mw",
                                       "power_limit_max_mw",
                                       "power_limit_default_mw",
                                       "nvlink_disabled",
                                       "numa_node",
                                       "gpu_numa_node",
                                       "cpu_affinity",
                                       "pcie_path",
                                       "mig",
                                       "p2p",
                                       NULL};

static int parse_identity(struct pctx *c, json_t *o, const char *b, struct sim_gpu *g)
{
	const char *s = NULL;
	char p[256], d[64];
	json_t *v;
	int r, e;

	if ((r = get_str(c, o, b, "uuid", 47, &s)) < 0)
		return r;
	if (s) {
		join(p, sizeof(p), b, "uuid");
		if (!valid_gpu_uuid(s))
			return fail(c, p, "expected \"GPU-\" and 8-4-4-4-12 hex digits, got \"%s\"",
			            s);
		sim_strlcpy(g->uuid, s, sizeof(g->uuid));
	}
	s = NULL;
	if ((r = get_str(c, o, b, "pci_bus_id", 31, &s)) < 0)
		return r;
	if (s) {
		join(p, sizeof(p), b, "pci_bus_id");
		if (!parse_bus_id(s, &g->domain, &g->bus, &g->device, &g->function))
			return fail(c, p,
			            "expected \"DDDDDDDD:BB:DD.F\" in uppercase hex, got \"%s\"",
			            s);
		sim_strlcpy(g->pci_bus_id, s, sizeof(g->pci_bus_id));
	}
	v = json_object_get(o, "pci_device_id");
	if (v) {
		uint64_t id = 0;
		join(p, sizeof(p), b, "pci_device_id");
		if (json_is_integer(v) && json_integer_value(v) >= 0 &&
		    json_integer_value(v) <= 0xffffffffLL)
			id = (uint64_t)json_integer_value(v);
		else if (!json_is_string(v) || strncmp(json_string_value(v), "0x", 2) != 0 ||
		         sim_parse_u64(json_string_value(v), 0xffffffffULL, &id) < 0) {
			describe(v, d, sizeof(d));
			return fail(c, p, "expected an integer or \"0xDDDDVVVV\", got %s", d);
		}
		if ((id & 0xffff) != 0x10de)
			return fail(c, p, "vendor (low 16 bits) must be 0x10DE, got 0x%04X",
			            (unsigned int)(id & 0xffff));
		g->pci_device_id = (unsigned int)id;
	}
	s = NULL;
	if ((r = get_str(c, o, b, "name", 95, &s)) < 0)
		return r;
	if (s)
		sim_strlcpy(g->name, s, sizeof(g->name));
	e = -1;
	if ((r = enum_member(c, o, b, "brand", brand_names, &e)) < 0)
		return r;
	if (e >= 0)
		g->brand = brand_values[e];
	e = -1;
	if ((r = enum_member(c, o, b, "architecture", arch_names, &e)) < 0)
		return r;
	if (e >= 0)
		g->arch = SIM_ARCH_KEPLER + (unsigned int)e;
	s = NULL;
	if ((r = get_str(c, o, b, "compute_capability", 8, &s)) < 0)
		return r;
	if (s) {
		unsigned int ma, mi;
		char tail;
		join(p, sizeof(p), b, "compute_capability");
		if (sscanf(s, "%2u.%2u%c", &ma, &mi, &tail) != 2 || s[0] < '0' || s[0] > '9')
			return fail(c, p, "expected \"MAJOR.MINOR\", got \"%s\"", s);
		g->cc_major = (int)ma;
		g->cc_minor = (int)mi;
	}
	s = NULL;
	if ((r = get_str(c, o, b, "serial", 29, &s)) < 0)
		return r;
	if (s) {
		sim_strlcpy(g->serial, s, sizeof(g->serial));
		g->has_serial = true;
	}
	if ((r = get_uint(c, o, b, "minor_number", 1 << 20, &g->minor_number)) < 0)
		return r;
	s = NULL;
	if ((r = get_str(c, o, b, "board", 63, &s)) < 0)
		return r;
	if (s)
		sim_strlcpy(g->board, s, sizeof(g->board));
	return 0;
}

static int parse_pcie(struct pctx *c, json_t *o, const char *b, struct sim_gpu *g, bool partial)
{
	static const char *const keys[] = {"gen",       "width",          "max_gen",
	                                   "max_width", "replay_counter", NULL};
	json_t *v = json_object_get(o, "pcie");
	char p[256];
	bool has_max_gen = false, has_max_width = false, present;
	long long tmp;
	int r;

	if (!v)
		return 0;
	join(p, sizeof(p), b, "pcie");
	if ((r = want_object(c, v, p)) < 0 || (r = check_keys(c, v, p, keys)) < 0)
		return r;
	if (!partial && ((r = require(c, v, p, "gen")) < 0 || (r = require(c, v, p, "width")) < 0))
		return r;
	if ((r = get_int(c, v, p, "gen", 1, 6, &tmp, &present)) < 0)
		return r;
	if (present)
		g->pcie_gen = (unsigned int)tmp;
	if ((r = get_int(c, v, p, "width", 1, 32, &tmp, &present)) < 0)
		return r;
	if (present)
		g->pcie_width = (unsigned int)tmp;
	if ((r = get_int(c, v, p, "max_gen", 1, 6, &tmp, &has_max_gen)) < 0)
		return r;
	if (has_max_gen)
		g->pcie_max_gen = (unsigned int)tmp;
	if ((r = get_int(c, v, p, "max_width", 1, 32, &tmp, &has_max_width)) < 0)
		return r;
	if (has_max_width)
		g->pcie_max_width = (unsigned int)tmp;
	if ((r = get_uint(c, v, p, "replay_counter", 0xffffffffLL, &g->pcie_replay)) < 0)
		return r;
	if (!partial) {
		if (!has_max_gen)
			g->pcie_max_gen = g->pcie_gen;
		if (!has_max_width)
			g->pcie_max_width = g->pcie_width;
	}
	return 0;
}

static int parse_ecc(struct pctx *c, json_t *o, const char *b, struct sim_gpu *g)
{
	static const char *const ecc_keys[] = {"enabled", "pending", NULL};
	static const char *const err_keys[] = {"volatile_corrected", "volatile_uncorrected",
	                                       "aggregate_corrected", "aggregate_uncorrected",
	                                       NULL};
	static const char *const ret_keys[] = {"single_bit", "double_bit", "pending", NULL};
	static const char *const rem_keys[] = {"corrected", "uncorrected", "pending", "failure",
	                                       NULL};
	json_t *v = json_object_get(o, "ecc");
	char p[256], d[64];
	int r;

	if (v) {
		join(p, sizeof(p), b, "ecc");
		if (json_is_false(v)) {
			g->has_ecc = false;
		} else if (json_is_object(v)) {
			bool pending_given = json_object_get(v, "pending") != NULL;
			if ((r = check_keys(c, v, p, ecc_keys)) < 0)
				return r;
			g->has_ecc = true;
			g->ecc_enabled = true;
			if ((r = get_bool(c, v, p, "enabled", &g->ecc_enabled)) < 0 ||
			    (r = get_bool(c, v, p, "pending", &g->ecc_pending)) < 0)
				return r;
			if (!pending_given)
				g->ecc_pending = g->ecc_enabled;
		} else {
			describe(v, d, sizeof(d));
			return fail(c, p, "expected false or an object, got %s", d);
		}
	}
	if ((v = json_object_get(o, "ecc_errors"))) {
		join(p, sizeof(p), b, "ecc_errors");
		if ((r = want_object(c, v, p)) < 0 || (r = check_keys(c, v, p, err_keys)) < 0)
			return r;
		if ((r = get_ull(c, v, p, "volatile_corrected", LLONG_MAX, &g->ecc_vol_corr)) < 0 ||
		    (r = get_ull(c, v, p, "volatile_uncorrected", LLONG_MAX, &g->ecc_vol_uncorr)) <
		            0 ||
		    (r = get_ull(c, v, p, "aggregate_corrected", LLONG_MAX, &g->ecc_agg_corr)) <
		            0 ||
		    (r = get_ull(c, v, p, "aggregate_uncorrected", LLONG_MAX, &g->ecc_agg_uncorr)) <
		            0)
			return r;
	}
	if ((v = json_object_get(o, "retired_pages"))) {
		join(p, sizeof(p), b, "retired_pages");
		if ((r = want_object(c, v, p)) < 0 || (r = check_keys(c, v, p, ret_keys)) < 0)
			return r;
		if ((r = get_uint(c, v, p, "single_bit", 4096, &g->retired_sbe)) < 0 ||
		    (r = get_uint(c, v, p, "double_bit", 4096, &g->retired_dbe)) < 0 ||
		    (r = get_bool(c, v, p, "pending", &g->retired_pending)) < 0)
			return r;
	}
	if ((v = json_object_get(o, "remapped_rows"))) {
		join(p, sizeof(p), b, "remapped_rows");
		if ((r = want_object(c, v, p)) < 0 || (r = check_keys(c, v, p, rem_keys)) < 0)
			return r;
		if ((r = get_uint(c, v, p, "corrected", 65535, &g->remap_corr)) < 0 ||
		    (r = get_uint(c, v, p, "uncorrected", 65535, &g->remap_uncorr)) < 0 ||
		    (r = get_bool(c, v, p, "pending", &g->remap_pending)) < 0 ||
		    (r = get_bool(c, v, p, "failure", &g->remap_failure)) < 0)
			return r;
	}
	return 0;
}

static int parse_mig(struct pctx *c, json_t *o, const char *b, struct sim_gpu *g)
{
	static const char *const keys[] = {"enabled", "pending", "instances", NULL};
	static const char *const ikeys[] = {"profile", "gi", "ci", "uuid", "memory_mib", NULL};
	json_t *v = json_object_get(o, "mig"), *arr, *inst;
	char p[256], ip[320];
	size_t i;
	int r;

	if (!v)
		return 0;
	join(p, sizeof(p), b, "mig");
	if ((r = want_object(c, v, p)) < 0 || (r = check_keys(c, v, p, keys)) < 0)
		return r;
	g->has_mig = true;
	g->mig_enabled = false;
	if ((r = get_bool(c, v, p, "enabled", &g->mig_enabled)) < 0)
		return r;
	g->mig_pending = g->mig_enabled;
	if ((r = get_bool(c, v, p, "pending", &g->mig_pending)) < 0)
		return r;
	arr = json_object_get(v, "instances");
	if (!arr)
		return 0;
	join(ip, sizeof(ip), p, "instances");
	sim_strlcpy(p, ip, sizeof(p));
	if (!json_is_array(arr))
		return fail(c, p, "expected an array");
	if (json_array_size(arr) > SIM_MAX_MIG)
		return fail(c, p, "at most %d MIG devices per GPU", SIM_MAX_MIG);
	json_array_foreach(arr, i, inst)
	{
		struct sim_mig_instance *m = &g->mig[i];
		const char *s = NULL;
		char q[400];

		snprintf(ip, sizeof(ip), "%s[%zu]", p, i);
		if ((r = want_object(c, inst, ip)) < 0 || (r = check_keys(c, inst, ip, ikeys)) < 0)
			return r;
		for (const char *const *k = ikeys; *k; k++)
			if ((r = require(c, inst, ip, *k)) < 0)
				return r;
		if ((r = get_str(c, inst, ip, "profile", 31, &s)) < 0)
			return r;
		sim_strlcpy(m->profile, s, sizeof(m->profile));
		if ((r = get_uint(c, inst, ip, "gi", 0xffff, &m->gi)) < 0 ||
		    (r = get_uint(c, inst, ip, "ci", 0xffff, &m->ci)) < 0 ||
		    (r = get_ull(c, inst, ip, "memory_mib", 1LL << 24, &m->memory_mib)) < 0 ||
		    (r = get_str(c, inst, ip, "uuid", 95, &s)) < 0)
			return r;
		snprintf(q, sizeof(q), "%s.uuid", ip);
		if (strncmp(s, "MIG-", 4) != 0 || strlen(s) < 8)
			return fail(c, q, "expected \"MIG-...\", got \"%s\"", s);
		sim_strlcpy(m->uuid, s, sizeof(m->uuid));
		for (size_t j = 0; j < i; j++) {
			if (strcmp(g->mig[j].uuid, m->uuid) == 0)
				return fail(c, q, "duplicate MIG uuid \"%s\"", s);
			if (g->mig[j].gi == m->gi && g->mig[j].ci == m->ci) {
				snprintf(q, sizeof(q), "%s.ci", ip);
				return fail(c, q, "gi %u ci %u used twice", m->gi, m->ci);
			}
		}
	}
	/* Instances exist only while MIG is on; pending-only GPUs keep them dormant. */
	g->mig_count = g->mig_enabled ? (unsigned int)json_array_size(arr) : 0;
	return 0;
}

/* One GPU object; partial = the `defaults` object, where required keys may be missing. */
static int parse_gpu(struct pctx *c, json_t *o, const char *b, struct sim_gpu *g, bool partial)
{
	static const char *const required[] = {"uuid",
	                                       "pci_bus_id",
	                                       "pci_device_id",
	                                       "name",
	                                       "brand",
	                                       "architecture",
	                                       "compute_capability",
	                                       "memory_total_mib",
	                                       "pcie",
	                                       "numa_node",
	                                       NULL};
	const char *s;
	json_t *v;
	char p[256], d[64];
	long long tmp;
	bool present;
	int r, e;

	if ((r = want_object(c, o, b)) < 0 || (r = check_keys(c, o, b, gpu_keys)) < 0)
		return r;
	if (!partial)
		for (size_t i = 0; required[i]; i++)
			if ((r = require(c, o, b, required[i])) < 0)
				return r;
	if ((r = parse_identity(c, o, b, g)) < 0)
		return r;
	if ((r = get_ull(c, o, b, "memory_total_mib", 1LL << 24, &g->memory_total_mib)) < 0 ||
	    (r = get_ull(c, o, b, "memory_reserved_mib", 1LL << 24, &g->memory_reserved_mib)) < 0 ||
	    (r = get_ull(c, o, b, "memory_used_mib", 1LL << 24, &g->memory_used_mib)) < 0 ||
	    (r = get_uint(c, o, b, "utilization_gpu", 100, &g->utilization_gpu)) < 0 ||
	    (r = get_uint(c, o, b, "utilization_memory", 100, &g->utilization_memory)) < 0 ||
	    (r = get_uint(c, o, b, "temperature_c", 200, &g->temperature_c)) < 0 ||
	    (r = get_opt(c, o, b, "temperature_slowdown_c", 200, &g->temperature_slowdown_c)) < 0 ||
	    (r = get_opt(c, o, b, "temperature_shutdown_c", 200, &g->temperature_shutdown_c)) < 0 ||
	    (r = get_opt(c, o, b, "recovery_action", SIM_RECOVERY_ACTION_MAX,
	                 &g->recovery_action)) < 0 ||
	    (r = get_opt(c, o, b, "temperature_memory_c", 200, &g->temperature_memory_c)) < 0 ||
	    (r = get_opt(c, o, b, "utilization_encoder", 100, &g->utilization_encoder)) < 0 ||
	    (r = get_opt(c, o, b, "utilization_decoder", 100, &g->utilization_decoder)) < 0 ||
	    (r = get_opt(c, o, b, "energy_mj", LLONG_MAX, &g->energy_mj)) < 0 ||
	    (r = get_opt(c, o, b, "violation_power_pct", 100, &g->violation_power_pct)) < 0 ||
	    (r = get_opt(c, o, b, "violation_thermal_pct", 100, &g->violation_thermal_pct)) < 0 ||
	    (r = get_opt(c, o, b, "bar1_total_mib", 1LL << 24, &g->bar1_total_mib)) < 0 ||
	    (r = get_opt(c, o, b, "bar1_used_mib", 1LL << 24, &g->bar1_used_mib)) < 0 ||
	    (r = parse_pcie_throughput(c, o, b, g, partial)) < 0 ||
	    (r = get_opt(c, o, b, "power_draw_mw", 10000000, &g->power_draw_mw)) < 0 ||
	    (r = get_opt(c, o, b, "power_limit_mw", 10000000, &g->power_limit_mw)) < 0 ||
	    (r = get_opt(c, o, b, "power_limit_min_mw", 10000000, &g->power_limit_min_mw)) < 0 ||
	    (r = get_opt(c, o, b, "power_limit_max_mw", 10000000, &g->power_limit_max_mw)) < 0 ||
	    (r = get_opt(c, o, b, "power_limit_default_mw", 10000000, &g->power_limit_default_mw)) <
	            0 ||
	    (r = get_opt(c, o, b, "fan_speed_pct", 200, &g->fan_speed_pct)) < 0 ||
	    (r = get_opt(c, o, b, "performance_state", 15, &g->performance_state)) < 0 ||
	    (r = get_link_set(c, o, b, "nvlink_disabled", &g->nvlink_disabled)) < 0 ||
	    (r = parse_clocks(c, o, b, "clocks_mhz", &g->clock_sm, &g->clock_mem)) < 0 ||
	    (r = parse_clocks(c, o, b, "max_clocks_mhz", &g->max_clock_sm, &g->max_clock_mem)) <
	            0 ||
	    (r = get_ull(c, o, b, "clocks_event_reasons", LLONG_MAX, &g->clocks_event_reasons)) <
	            0 ||
	    (r = parse_pcie(c, o, b, g, partial)) < 0 ||
	    (r = get_bool(c, o, b, "persistence_mode", &g->persistence_mode)) < 0)
		return r;
	e = -1;
	if ((r = enum_member(c, o, b, "compute_mode", compute_mode_names, &e)) < 0)
		return r;
	if (e >= 0)
		g->compute_mode = compute_mode_values[e];
	if ((r = parse_ecc(c, o, b, g)) < 0)
		return r;
	if ((r = get_int(c, o, b, "numa_node", 0, SIM_MAX_NODES - 1, &tmp, &present)) < 0)
		return r;
	if (present)
		g->numa_node = (int)tmp;
	if ((r = get_opt(c, o, b, "gpu_numa_node", SIM_MAX_NODES - 1, &g->gpu_numa_node)) < 0)
		return r;
	s = NULL;
	if ((r = get_str(c, o, b, "cpu_affinity", 4096, &s)) < 0)
		return r;
	if (s) {
		free(g->cpu_affinity);
		g->cpu_affinity = NULL;
		join(p, sizeof(p), b, "cpu_affinity");
		r = sim_cpulist_parse(s, &g->cpu_affinity, &g->cpu_words);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			return fail(c, p,
			            "expected a cpulist such as \"0-63,128-191\" (CPUs < %d), "
			            "got \"%s\"",
			            SIM_MAX_CPUS, s);
	}
	if ((v = json_object_get(o, "pcie_path"))) {
		size_t i;
		json_t *el;
		join(p, sizeof(p), b, "pcie_path");
		if (!json_is_array(v) || json_array_size(v) < 1 ||
		    json_array_size(v) > SIM_MAX_PATH) {
			describe(v, d, sizeof(d));
			return fail(c, p, "expected an array of 1..%d bridge ids, got %s",
			            SIM_MAX_PATH, d);
		}
		json_array_foreach(v, i, el)
		{
			char q[300];
			snprintf(q, sizeof(q), "%s[%zu]", p, i);
			if (!json_is_string(el) || json_string_length(el) == 0 ||
			    json_string_length(el) > 31 ||
			    strlen(json_string_value(el)) != json_string_length(el)) {
				describe(el, d, sizeof(d));
				return fail(c, q,
				            "expected a bridge id of 1..31 characters, got %s", d);
			}
			sim_strlcpy(g->path[i], json_string_value(el), sizeof(g->path[i]));
		}
		g->path_len = (unsigned int)json_array_size(v);
	}
	if ((r = parse_mig(c, o, b, g)) < 0)
		return r;
	e = -1;
	if ((r = enum_member(c, o, b, "p2p", p2p_names, &e)) < 0)
		return r;
	if (e >= 0)
		g->p2p = (unsigned int)e;
	if (!partial && g->bar1_used_mib.valid && !g->bar1_total_mib.valid) {
		join(p, sizeof(p), b, "bar1_used_mib");
		return fail(c, p, "given without bar1_total_mib");
	}
	if (!partial && g->bar1_used_mib.v > g->bar1_total_mib.v) {
		join(p, sizeof(p), b, "bar1_used_mib");
		return fail(c, p, "used %llu MiB exceeds bar1_total_mib %llu", g->bar1_used_mib.v,
		            g->bar1_total_mib.v);
	}
	if (!partial && g->memory_reserved_mib + g->memory_used_mib > g->memory_total_mib) {
		join(p, sizeof(p), b, "memory_used_mib");
		return fail(c, p, "used %llu + reserved %llu MiB exceed memory_total_mib %llu",
		            g->memory_used_mib, g->memory_reserved_mib, g->memory_total_mib);
	}
	return 0;
}

static void gpu_defaults(struct sim_gpu *g, unsigned int index)
{
	memset(g, 0, sizeof(*g));
	g->index = index;
	g->minor_number = index;
	g->temperature_c = 35;
	g->clocks_event_reasons = 1;
	g->persistence_mode = true;
	g->compute_mode = 0;
}

int sim_json_merge(json_t *dst, json_t *src)
{
	const char *key;
	json_t *v;

	json_object_foreach(src, key, v)
	{
		json_t *d = json_object_get(dst, key);
		if (json_is_object(d) && json_is_object(v)) {
			_cleanup_(json_decrefp) json_t *copy = json_deep_copy(d);
			if (!copy || sim_json_merge(copy, v) < 0 ||
			    json_object_set(dst, key, copy) < 0)
				return -ENOMEM;
		} else {
			_cleanup_(json_decrefp) json_t *copy = json_deep_copy(v);
			if (!copy || json_object_set(dst, key, copy) < 0)
				return -ENOMEM;
		}
	}
	return 0;
}

static int parse_pairs(struct pctx *c, json_t *root, const char *key, const char *const *names,
                       unsigned int n_gpus, struct sim_pair_override **ret, size_t *ret_n)
{
	static const unsigned int level_values[] = {0, 10, 20, 30, 40, 50};
	json_t *arr = json_object_get(root, key), *el;
	size_t i;
	char p[256], d[64];

	if (!arr)
		return 0;
	if (!json_is_array(arr))
		return fail(c, key, "expected an array of [a, b, \"VALUE\"]");
	if (json_array_size(arr) > (size_t)SIM_MAX_GPUS * SIM_MAX_GPUS)
		return fail(c, key, "too many entries");
	*ret = calloc(json_array_size(arr) + 1, sizeof(**ret));
	if (!*ret)
		return -ENOMEM;
	json_array_foreach(arr, i, el)
	{
		json_t *a = json_array_get(el, 0), *b = json_array_get(el, 1),
		       *v = json_array_get(el, 2);
		int idx;

		snprintf(p, sizeof(p), "%s[%zu]", key, i);
		if (!json_is_array(el) || json_array_size(el) != 3 || !json_is_integer(a) ||
		    !json_is_integer(b) || !json_is_string(v)) {
			describe(el, d, sizeof(d));
			return fail(c, p, "expected [a, b, \"VALUE\"], got %s", d);
		}
		if (json_integer_value(a) < 0 || json_integer_value(a) >= n_gpus ||
		    json_integer_value(b) < 0 || json_integer_value(b) >= n_gpus ||
		    json_integer_value(a) == json_integer_value(b))
			return fail(c, p, "expected two different GPU indices 0..%u", n_gpus - 1);
		idx = lookup(names, json_string_value(v));
		if (idx < 0) {
			describe(v, d, sizeof(d));
			return fail(c, p, "unknown value %s", d);
		}
		(*ret)[i].a = (unsigned int)json_integer_value(a);
		(*ret)[i].b = (unsigned int)json_integer_value(b);
		(*ret)[i].value = names == level_names ? level_values[idx] : (unsigned int)idx;
	}
	*ret_n = json_array_size(arr);
	return 0;
}

/* nvlink.down: [a, b, count] takes count of the links between a and b down (present, as
 * NVML's link walk answers for them, but inactive at both ends): a broken link as a fact of the
 * machine, where `nvsim set nvlink.N=down` is an event at run time. */
static int parse_nvlink_down(struct pctx *c, json_t *nv, struct sim_scenario *s)
{
	json_t *down = json_object_get(nv, "down"), *el;
	char p[256], d[64];
	size_t i;

	if (!down)
		return 0;
	if (!json_is_array(down) || !json_object_get(nv, "links"))
		return fail(c, "nvlink.down", "expected an array of [a, b, count] beside links");
	json_array_foreach(down, i, el)
	{
		json_t *a = json_array_get(el, 0), *b = json_array_get(el, 1),
		       *n = json_array_get(el, 2);
		unsigned int ia, ib, left;

		snprintf(p, sizeof(p), "nvlink.down[%zu]", i);
		if (!json_is_array(el) || json_array_size(el) != 3 || !json_is_integer(a) ||
		    !json_is_integer(b) || !json_is_integer(n) || json_integer_value(a) < 0 ||
		    json_integer_value(a) >= s->n_gpus || json_integer_value(b) < 0 ||
		    json_integer_value(b) >= s->n_gpus || json_integer_value(n) < 1 ||
		    json_integer_value(n) > SIM_MAX_LINKS) {
			describe(el, d, sizeof(d));
			return fail(c, p, "expected [a, b, count] of GPUs 0..%u, got %s",
			            s->n_gpus - 1, d);
		}
		ia = (unsigned int)json_integer_value(a);
		ib = (unsigned int)json_integer_value(b);
		left = (unsigned int)json_integer_value(n);
		for (unsigned int k = 0; left > 0 && k < s->gpus[ia].link_count; k++) {
			struct sim_link *l = &s->gpus[ia].links[k];

			if (l->to_switch || l->remote != ib || l->down)
				continue;
			l->down = true;
			s->gpus[ib].links[l->remote_link].down = true;
			left--;
		}
		if (left > 0)
			return fail(c, p, "GPUs %u and %u have fewer than %u links between them",
			            ia, ib, (unsigned int)json_integer_value(n));
	}
	return 0;
}

static int parse_nvlink(struct pctx *c, json_t *root, struct sim_scenario *s)
{
	static const char *const keys[] = {"links", "nvswitch", "down", NULL};
	static const char *const swkeys[] = {"links_per_gpu", "switches", NULL};
	json_t *nv = json_object_get(root, "nvlink"), *links, *sw, *el;
	char p[256], d[64];
	size_t i;
	int r;

	if (!nv)
		return 0;
	if ((r = want_object(c, nv, "nvlink")) < 0 || (r = check_keys(c, nv, "nvlink", keys)) < 0)
		return r;
	links = json_object_get(nv, "links");
	sw = json_object_get(nv, "nvswitch");
	if (links && sw)
		return fail(c, "nvlink", "give either links or nvswitch, not both");
	if (sw) {
		unsigned int per = 0, n = 0, bus = 0xff;
		if ((r = want_object(c, sw, "nvlink.nvswitch")) < 0 ||
		    (r = check_keys(c, sw, "nvlink.nvswitch", swkeys)) < 0 ||
		    (r = require(c, sw, "nvlink.nvswitch", "links_per_gpu")) < 0 ||
		    (r = require(c, sw, "nvlink.nvswitch", "switches")) < 0)
			return r;
		if ((r = get_int(c, sw, "nvlink.nvswitch", "links_per_gpu", 1, SIM_MAX_LINKS,
		                 &(long long){0}, NULL)) < 0 ||
		    (r = get_int(c, sw, "nvlink.nvswitch", "switches", 1, SIM_MAX_SWITCHES,
		                 &(long long){0}, NULL)) < 0)
			return r;
		per = (unsigned int)json_integer_value(json_object_get(sw, "links_per_gpu"));
		n = (unsigned int)json_integer_value(json_object_get(sw, "switches"));
		s->nvswitch = true;
		s->switches = n;
		/* Switch bus ids: domain 0, buses counted down from 0xFF, skipping GPUs' ones. */
		for (unsigned int k = 0; k < n; k++) {
			for (;; bus--) {
				bool used = false;
				for (unsigned int gi = 0; gi < s->n_gpus; gi++)
					if (s->gpus[gi].domain == 0 && s->gpus[gi].bus == bus)
						used = true;
				if (!used)
					break;
				if (bus == 0)
					return fail(c, "nvlink.nvswitch",
					            "no free PCI bus for switch");
			}
			snprintf(s->switch_bus_id[k], sizeof(s->switch_bus_id[k]),
			         "00000000:%02X:00.0", bus);
			if (bus > 0)
				bus--;
		}
		for (unsigned int gi = 0; gi < s->n_gpus; gi++) {
			for (unsigned int l = 0; l < per; l++)
				s->gpus[gi].links[l] = (struct sim_link){true, l % n, 0, false};
			s->gpus[gi].link_count = per;
		}
		return 0;
	}
	if (!links)
		return 0;
	if (!json_is_array(links))
		return fail(c, "nvlink.links", "expected an array of [a, b, count]");
	json_array_foreach(links, i, el)
	{
		json_t *a = json_array_get(el, 0), *b = json_array_get(el, 1),
		       *n = json_array_get(el, 2);
		unsigned int ia, ib, cnt;

		snprintf(p, sizeof(p), "nvlink.links[%zu]", i);
		if (!json_is_array(el) || json_array_size(el) != 3 || !json_is_integer(a) ||
		    !json_is_integer(b) || !json_is_integer(n)) {
			describe(el, d, sizeof(d));
			return fail(c, p, "expected [a, b, count], got %s", d);
		}
		if (json_integer_value(a) < 0 || json_integer_value(a) >= s->n_gpus ||
		    json_integer_value(b) < 0 || json_integer_value(b) >= s->n_gpus)
			return fail(c, p, "links a GPU that does not exist (GPUs 0..%u)",
			            s->n_gpus - 1);
		if (json_integer_value(a) == json_integer_value(b))
			return fail(c, p, "links a GPU to itself");
		if (json_integer_value(n) < 1 || json_integer_value(n) > SIM_MAX_LINKS)
			return fail(c, p, "count must be 1..%d", SIM_MAX_LINKS);
		ia = (unsigned int)json_integer_value(a);
		ib = (unsigned int)json_integer_value(b);
		cnt = (unsigned int)json_integer_value(n);
		if (s->gpus[ia].link_count + cnt > SIM_MAX_LINKS ||
		    s->gpus[ib].link_count + cnt > SIM_MAX_LINKS)
			return fail(c, p, "a GPU would have more than %d links", SIM_MAX_LINKS);
		for (unsigned int k = 0; k < cnt; k++) {
			unsigned int la = s->gpus[ia].link_count++, lb = s->gpus[ib].link_count++;
			s->gpus[ia].links[la] = (struct sim_link){false, ib, lb, false};
			s->gpus[ib].links[lb] = (struct sim_link){false, ia, la, false};
		}
	}
	return parse_nvlink_down(c, nv, s);
}

/* cpus.model: an x86 CPU (vendor_id, family, model) or an Arm one (implementer, part). */
static int parse_cpu_model(struct pctx *c, json_t *cpus, struct sim_cpu_model *m)
{
	static const char *const keys[] = {"vendor_id", "family", "model", "implementer",
	                                   "part",      "name",   NULL};
	static const char p[] = "cpus.model";
	json_t *o = json_object_get(cpus, "model");
	const char *vendor = NULL, *name = NULL;
	long long family = -1, model = -1, impl = -1, part = -1;
	int r;

	*m = (struct sim_cpu_model){.family = -1, .model = -1, .implementer = -1, .part = -1};
	if (!o)
		return 0;
	if ((r = want_object(c, o, p)) < 0 || (r = check_keys(c, o, p, keys)) < 0 ||
	    (r = get_str(c, o, p, "vendor_id", 12, &vendor)) < 0 ||
	    (r = get_int(c, o, p, "family", 0, 0xFFFF, &family, NULL)) < 0 ||
	    (r = get_int(c, o, p, "model", 0, 0xFFFF, &model, NULL)) < 0 ||
	    (r = get_int(c, o, p, "implementer", 0, 0xFF, &impl, NULL)) < 0 ||
	    (r = get_int(c, o, p, "part", 0, 0xFFF, &part, NULL)) < 0 ||
	    (r = get_str(c, o, p, "name", 95, &name)) < 0)
		return r;
	if (vendor && (family < 0 || model < 0 || impl >= 0 || part >= 0))
		return fail(c, p,
		            "an x86 CPU (vendor_id) needs family and model, and no "
		            "implementer or part");
	if (!vendor && (impl < 0 || part < 0 || family >= 0 || model >= 0))
		return fail(c, p,
		            "expected vendor_id, family and model (x86) or implementer and "
		            "part (Arm)");
	m->present = true;
	snprintf(m->vendor_id, sizeof(m->vendor_id), "%s", vendor ? vendor : "");
	snprintf(m->name, sizeof(m->name), "%s", name ? name : "");
	m->family = (int)family;
	m->model = (int)model;
	m->implementer = (int)impl;
	m->part = (int)part;
	return 0;
}

static int parse_cpus(struct pctx *c, json_t *root, struct sim_scenario *s)
{
	static const char *const keys[] = {"numa_nodes", "threads_per_core", "model", NULL};
	static const char *const nkeys[] = {"node", "socket", "cpus", NULL};
	json_t *cpus = json_object_get(root, "cpus"), *arr, *el;
	long long tpc = 1;
	char p[256];
	size_t i;
	int r;

	s->threads_per_core = 1;
	if (!cpus)
		return 0;
	if ((r = want_object(c, cpus, "cpus")) < 0 || (r = check_keys(c, cpus, "cpus", keys)) < 0 ||
	    (r = require(c, cpus, "cpus", "numa_nodes")) < 0 ||
	    (r = get_int(c, cpus, "cpus", "threads_per_core", 1, 8, &tpc, NULL)) < 0 ||
	    (r = parse_cpu_model(c, cpus, &s->cpu)) < 0)
		return r;
	s->threads_per_core = (unsigned int)tpc;
	arr = json_object_get(cpus, "numa_nodes");
	if (!json_is_array(arr) || json_array_size(arr) < 1 || json_array_size(arr) > 256)
		return fail(c, "cpus.numa_nodes", "expected an array of 1..256 nodes");
	s->nodes = calloc(json_array_size(arr), sizeof(*s->nodes));
	s->node_cpus = calloc(json_array_size(arr), sizeof(*s->node_cpus));
	if (!s->nodes || !s->node_cpus)
		return -ENOMEM;
	json_array_foreach(arr, i, el)
	{
		long long node = 0, sock = 0;
		const char *list = NULL;

		snprintf(p, sizeof(p), "cpus.numa_nodes[%zu]", i);
		if ((r = want_object(c, el, p)) < 0 || (r = check_keys(c, el, p, nkeys)) < 0 ||
		    (r = require(c, el, p, "node")) < 0 || (r = require(c, el, p, "cpus")) < 0 ||
		    (r = get_int(c, el, p, "node", 0, SIM_MAX_NODES - 1, &node, NULL)) < 0 ||
		    (r = get_int(c, el, p, "socket", 0, 1023, &sock, NULL)) < 0 ||
		    (r = get_str(c, el, p, "cpus", 4096, &list)) < 0)
			return r;
		for (size_t j = 0; j < i; j++)
			if (s->nodes[j].node == node) {
				char q[300];
				snprintf(q, sizeof(q), "%s.node", p);
				return fail(c, q, "node %lld listed twice", node);
			}
		s->nodes[i] = (struct sim_numa_node){(int)node, (int)sock};
		s->n_nodes = i + 1;
		r = sim_cpulist_parse(list, &s->node_cpus[i], &s->cpu_words);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			char q[300];
			snprintf(q, sizeof(q), "%s.cpus", p);
			return fail(c, q, "expected a cpulist such as \"0-63,128-191\", got \"%s\"",
			            list);
		}
	}
	/* every socket's CPUs split evenly into cores of threads_per_core threads */
	for (i = 0; i < s->n_nodes; i++) {
		size_t n = 0;

		for (size_t j = 0; j < s->n_nodes; j++) {
			if (s->nodes[j].socket != s->nodes[i].socket)
				continue;
			for (size_t w = 0; w < s->cpu_words && s->node_cpus[j]; w++)
				n += (size_t)__builtin_popcountl(s->node_cpus[j][w]);
		}
		if (n % s->threads_per_core)
			return fail(c, "cpus.threads_per_core",
			            "socket %d has %zu CPUs, not a multiple of %u threads per core",
			            s->nodes[i].socket, n, s->threads_per_core);
	}
	return 0;
}

static int parse_system(struct pctx *c, json_t *root, struct sim_scenario *s)
{
	static const char *const keys[] = {"driver_version", "nvml_version", "cuda_driver_version",
	                                   NULL};
	json_t *sys = json_object_get(root, "system");
	const char *v = NULL;
	long long cv;
	bool present;
	int r;

	sim_strlcpy(s->driver_version, "550.54.15", sizeof(s->driver_version));
	sim_strlcpy(s->nvml_version, "12.550.54.15", sizeof(s->nvml_version));
	s->cuda_driver_version = 12040;
	if (!sys)
		return 0;
	if ((r = want_object(c, sys, "system")) < 0 || (r = check_keys(c, sys, "system", keys)) < 0)
		return r;
	if ((r = get_str(c, sys, "system", "driver_version", 79, &v)) < 0)
		return r;
	if (v)
		sim_strlcpy(s->driver_version, v, sizeof(s->driver_version));
	v = NULL;
	if ((r = get_str(c, sys, "system", "nvml_version", 79, &v)) < 0)
		return r;
	if (v)
		sim_strlcpy(s->nvml_version, v, sizeof(s->nvml_version));
	if ((r = get_int(c, sys, "system", "cuda_driver_version", 1000, 99999, &cv, &present)) < 0)
		return r;
	if (present)
		s->cuda_driver_version = (int)cv;
	return 0;
}

static int cross_checks(struct pctx *c, struct sim_scenario *s)
{
	char p[256];

	for (unsigned int i = 0; i < s->n_gpus; i++) {
		struct sim_gpu *g = &s->gpus[i];
		bool found = s->n_nodes == 0;

		for (unsigned int j = 0; j < i; j++) {
			if (strcasecmp(s->gpus[j].uuid, g->uuid) == 0) {
				snprintf(p, sizeof(p), "gpus[%u].uuid", i);
				return fail(c, p, "duplicate uuid \"%s\" (also gpus[%u])", g->uuid,
				            j);
			}
			if (strcmp(s->gpus[j].pci_bus_id, g->pci_bus_id) == 0) {
				snprintf(p, sizeof(p), "gpus[%u].pci_bus_id", i);
				return fail(c, p, "duplicate pci_bus_id \"%s\" (also gpus[%u])",
				            g->pci_bus_id, j);
			}
			for (unsigned int m = 0; m < g->mig_count; m++)
				for (unsigned int n = 0; n < s->gpus[j].mig_count; n++)
					if (strcmp(g->mig[m].uuid, s->gpus[j].mig[n].uuid) == 0) {
						snprintf(p, sizeof(p),
						         "gpus[%u].mig.instances[%u].uuid", i, m);
						return fail(c, p, "duplicate MIG uuid \"%s\"",
						            g->mig[m].uuid);
					}
		}
		for (size_t n = 0; n < s->n_nodes; n++) {
			if (s->nodes[n].node != g->numa_node)
				continue;
			found = true;
			if (!g->cpu_affinity) {
				g->cpu_affinity = calloc(s->cpu_words, sizeof(unsigned long));
				if (!g->cpu_affinity)
					return -ENOMEM;
				memcpy(g->cpu_affinity, s->node_cpus[n],
				       s->cpu_words * sizeof(unsigned long));
				g->cpu_words = s->cpu_words;
			}
		}
		if (!found) {
			snprintf(p, sizeof(p), "gpus[%u].numa_node", i);
			return fail(c, p, "node %d is not in cpus.numa_nodes", g->numa_node);
		}
	}
	return 0;
}

int sim_json_load(const char *buf, size_t len, json_t **ret, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root;

	if (len > SIM_MAX_FILE) {
		snprintf(err, errlen, "(file): larger than %d bytes", SIM_MAX_FILE);
		return -EINVAL;
	}
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		snprintf(err, errlen, "line %d column %d: invalid JSON: %s", je.line, je.column,
		         je.text);
		/* jansson quotes the offending input ("near '...'"), which can hold a newline or
		 * any control character: the message stays one line */
		for (char *p = err; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
		return -EINVAL;
	}
	*ret = root;
	return 0;
}

static int parse_root(struct pctx *c, json_t *root, struct sim_scenario *s)
{
	static const char *const keys[] = {
	        "schema",        "name",     "description", "sources", "system",
	        "cpus",          "defaults", "gpus",        "nvlink",  "topology_overrides",
	        "p2p_overrides", NULL};
	json_t *defaults, *gpus, *v, *el;
	struct sim_gpu scratch;
	const char *str = NULL;
	long long schema;
	size_t i;
	int r;

	if ((r = want_object(c, root, "")) < 0 || (r = check_keys(c, root, "", keys)) < 0)
		return r;
	for (const char *const *k = (const char *const[]){"schema", "name", "description",
	                                                  "sources", "gpus", NULL};
	     *k; k++)
		if ((r = require(c, root, "", *k)) < 0)
			return r;
	if ((r = get_int(c, root, "", "schema", 1, 1, &schema, NULL)) < 0 ||
	    (r = get_str(c, root, "", "name", 63, &str)) < 0)
		return r;
	sim_strlcpy(s->name, str, sizeof(s->name));
	if ((r = get_str(c, root, "", "description", 4096, &str)) < 0)
		return r;
	s->description = strdup(str);
	if (!s->description)
		return -ENOMEM;
	v = json_object_get(root, "sources");
	if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > 1000)
		return fail(c, "sources", "expected a non-empty array of strings");
	json_array_foreach(v, i, el)
	{
		char p[64];
		snprintf(p, sizeof(p), "sources[%zu]", i);
		if (!json_is_string(el) || json_string_length(el) == 0 ||
		    json_string_length(el) > 4096)
			return fail(c, p, "expected a non-empty string");
	}
	if ((r = parse_system(c, root, s)) < 0 || (r = parse_cpus(c, root, s)) < 0)
		return r;

	defaults = json_object_get(root, "defaults");
	if (defaults) {
		gpu_defaults(&scratch, 0);
		r = parse_gpu(c, defaults, "defaults", &scratch, true);
		free(scratch.cpu_affinity);
		if (r < 0)
			return r;
	}
	gpus = json_object_get(root, "gpus");
	if (!json_is_array(gpus) || json_array_size(gpus) < 1 ||
	    json_array_size(gpus) > SIM_MAX_GPUS)
		return fail(c, "gpus", "expected an array of 1..%d GPU objects", SIM_MAX_GPUS);
	s->gpus = calloc(json_array_size(gpus), sizeof(*s->gpus));
	if (!s->gpus)
		return -ENOMEM;
	json_array_foreach(gpus, i, el)
	{
		_cleanup_(json_decrefp) json_t *merged = NULL;
		char p[64];

		snprintf(p, sizeof(p), "gpus[%zu]", i);
		if ((r = want_object(c, el, p)) < 0)
			return r;
		merged = defaults ? json_deep_copy(defaults) : json_object();
		if (!merged || sim_json_merge(merged, el) < 0)
			return -ENOMEM;
		gpu_defaults(&s->gpus[i], (unsigned int)i);
		s->n_gpus = (unsigned int)i + 1;
		if ((r = parse_gpu(c, merged, p, &s->gpus[i], false)) < 0)
			return r;
	}
	if ((r = cross_checks(c, s)) < 0 || (r = parse_nvlink(c, root, s)) < 0)
		return r;
	if ((r = parse_pairs(c, root, "topology_overrides", level_names, s->n_gpus,
	                     &s->topo_overrides, &s->n_topo_overrides)) < 0 ||
	    (r = parse_pairs(c, root, "p2p_overrides", p2p_names, s->n_gpus, &s->p2p_overrides,
	                     &s->n_p2p_overrides)) < 0)
		return r;
	return 0;
}

int sim_scenario_from_json(json_t *root, struct sim_scenario **ret, char *err, size_t errlen)
{
	struct pctx c = {err, errlen};
	struct sim_scenario *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	r = parse_root(&c, root, s);
	if (r < 0) {
		if (r == -ENOMEM && err && errlen)
			snprintf(err, errlen, "(top level): out of memory");
		sim_scenario_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

int sim_scenario_parse(const char *buf, size_t len, struct sim_scenario **ret, char *err,
                       size_t errlen)
{
	_cleanup_(json_decrefp) json_t *root = NULL;
	int r = sim_json_load(buf, len, &root, err, errlen);

	if (r < 0)
		return r;
	return sim_scenario_from_json(root, ret, err, errlen);
}

void sim_scenario_free(struct sim_scenario *s)
{
	if (!s)
		return;
	for (unsigned int i = 0; i < s->n_gpus; i++)
		free(s->gpus[i].cpu_affinity);
	for (size_t i = 0; s->node_cpus && i < s->n_nodes; i++)
		free(s->node_cpus[i]);
	free(s->node_cpus);
	free(s->nodes);
	free(s->gpus);
	free(s->topo_overrides);
	free(s->p2p_overrides);
	free(s->description);
	free(s);
}

static bool find_pair(const struct sim_pair_override *o, size_t n, unsigned int a, unsigned int b,
                      unsigned int *ret)
{
	for (size_t i = 0; i < n; i++)
		if ((o[i].a == a && o[i].b == b) || (o[i].a == b && o[i].b == a)) {
			*ret = o[i].value;
			return true;
		}
	return false;
}

unsigned int sim_common_ancestor(const struct sim_scenario *s, unsigned int a, unsigned int b)
{
	const struct sim_gpu *ga = &s->gpus[a], *gb = &s->gpus[b];
	unsigned int v;

	if (find_pair(s->topo_overrides, s->n_topo_overrides, a, b, &v))
		return v;
	if (ga->board[0] && strcmp(ga->board, gb->board) == 0)
		return SIM_LEVEL_INTERNAL;
	for (unsigned int i = 1; i < ga->path_len; i++)
		for (unsigned int j = 1; j < gb->path_len; j++)
			if (strcmp(ga->path[i], gb->path[j]) == 0)
				return strcmp(ga->path[ga->path_len - 1],
				              gb->path[gb->path_len - 1]) == 0
				               ? SIM_LEVEL_SINGLE
				               : SIM_LEVEL_MULTIPLE;
	if (ga->path_len && gb->path_len && strcmp(ga->path[0], gb->path[0]) == 0)
		return SIM_LEVEL_HOSTBRIDGE;
	if (ga->numa_node == gb->numa_node)
		return SIM_LEVEL_NODE;
	return SIM_LEVEL_SYSTEM;
}

unsigned int sim_p2p_status(const struct sim_scenario *s, unsigned int a, unsigned int b)
{
	unsigned int v;

	if (find_pair(s->p2p_overrides, s->n_p2p_overrides, a, b, &v))
		return v;
	if (s->gpus[a].p2p != 0)
		return s->gpus[a].p2p;
	return s->gpus[b].p2p;
}

bool sim_nvlink_connected(const struct sim_scenario *s, unsigned int a, unsigned int b)
{
	const struct sim_gpu *g = &s->gpus[a];

	if (s->nvswitch)
		return g->link_count > 0 && s->gpus[b].link_count > 0;
	for (unsigned int l = 0; l < g->link_count; l++)
		if (!g->links[l].to_switch && g->links[l].remote == b)
			return true;
	return false;
}
