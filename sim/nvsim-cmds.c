/* nvsim commands that change or inspect a running simulated machine: set, fail, latency,
 * proc, calls, show, scenarios, check.
 *
 * Decisions:
 * - `set` keys map onto scenario keys (table below) stored under state.json
 *   gpus.N.set; each change is validated by merging it into the scenario and re-running the
 *   scenario parser, so a bad value is refused with the same rules as a bad scenario, and
 *   state.json is only written when every KEY=VALUE on the line is good.
 * - `lost`, `lost_after_calls` and `nvlink.N` are not scenario facts and live beside "set". */
#include "functions.h"
#include "nvsim.h"
#include "util.h"
#include "cuda/errors.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

enum vtype { V_INT, V_PCT, V_SIZE_MIB, V_WATTS, V_U64, V_BOOL, V_COMPUTE_MODE };

static const struct setkey {
	const char *key;  /* what the user types */
	const char *path; /* scenario key, '.' nests */
	enum vtype type;
} setkeys[] = {
        {"utilization.gpu", "utilization_gpu", V_PCT},
        {"utilization.memory", "utilization_memory", V_PCT},
        {"memory.used", "memory_used_mib", V_SIZE_MIB},
        {"temperature", "temperature_c", V_INT},
        {"power.draw", "power_draw_mw", V_WATTS},
        {"power.limit", "power_limit_mw", V_WATTS},
        {"clocks.sm", "clocks_mhz.sm", V_INT},
        {"clocks.mem", "clocks_mhz.mem", V_INT},
        {"clocks_event_reasons", "clocks_event_reasons", V_U64},
        {"pcie.gen", "pcie.gen", V_INT},
        {"pcie.width", "pcie.width", V_INT},
        {"pcie.replay", "pcie.replay_counter", V_INT},
        {"ecc.volatile.corrected", "ecc_errors.volatile_corrected", V_U64},
        {"ecc.volatile.uncorrected", "ecc_errors.volatile_uncorrected", V_U64},
        {"ecc.aggregate.corrected", "ecc_errors.aggregate_corrected", V_U64},
        {"ecc.aggregate.uncorrected", "ecc_errors.aggregate_uncorrected", V_U64},
        {"retired.sbe", "retired_pages.single_bit", V_INT},
        {"retired.dbe", "retired_pages.double_bit", V_INT},
        {"retired.pending", "retired_pages.pending", V_BOOL},
        {"remap.corrected", "remapped_rows.corrected", V_INT},
        {"remap.uncorrected", "remapped_rows.uncorrected", V_INT},
        {"remap.pending", "remapped_rows.pending", V_BOOL},
        {"remap.failure", "remapped_rows.failure", V_BOOL},
        {"recovery_action", "recovery_action", V_INT},
        {"temperature.memory", "temperature_memory_c", V_INT},
        {"utilization.encoder", "utilization_encoder", V_PCT},
        {"utilization.decoder", "utilization_decoder", V_PCT},
        {"energy", "energy_mj", V_U64},
        {"violation.power", "violation_power_pct", V_PCT},
        {"violation.thermal", "violation_thermal_pct", V_PCT},
        {"bar1.used", "bar1_used_mib", V_SIZE_MIB},
        {"pcie.rx", "pcie_throughput_kbs.rx", V_INT},
        {"pcie.tx", "pcie_throughput_kbs.tx", V_INT},
        {"persistence_mode", "persistence_mode", V_BOOL},
        {"compute_mode", "compute_mode", V_COMPUTE_MODE},
};

static int parse_bool(const char *s, bool *ret)
{
	static const char *const yes[] = {"1", "true", "on", "yes", "enabled"};
	static const char *const no[] = {"0", "false", "off", "no", "disabled"};

	for (size_t i = 0; i < SIM_ELEMENTSOF(yes); i++) {
		if (strcmp(s, yes[i]) == 0)
			return *ret = true, 0;
		if (strcmp(s, no[i]) == 0)
			return *ret = false, 0;
	}
	return -EINVAL;
}

/* Converts VALUE for a key into the JSON the scenario expects, or NULL + message. */
static json_t *convert(const struct setkey *k, const char *value, const char **why)
{
	uint64_t u;
	unsigned long long bytes;
	bool b;

	switch (k->type) {
	case V_INT:
	case V_PCT:
	case V_U64:
		if (sim_parse_u64(value, k->type == V_U64 ? (uint64_t)LLONG_MAX : 0xffffffffULL,
		                  &u) < 0) {
			*why = k->type == V_U64 ? "expected a number (decimal or 0x hex)"
			                        : "expected a non-negative integer";
			return NULL;
		}
		return json_integer((json_int_t)u);
	case V_SIZE_MIB:
		if (nvsim_parse_size(value, &bytes) < 0) {
			*why = "expected a size such as 512MiB or 10GiB";
			return NULL;
		}
		return json_integer((json_int_t)((bytes + (1ULL << 20) - 1) >> 20));
	case V_WATTS: {
		char *end;
		double w;
		errno = 0;
		w = strtod(value, &end);
		if (errno || end == value || *end || !(w >= 0) || w > 10000) {
			*why = "expected watts 0..10000";
			return NULL;
		}
		return json_integer((json_int_t)(w * 1000.0 + 0.5));
	}
	case V_BOOL:
		if (parse_bool(value, &b) < 0) {
			*why = "expected 0 or 1";
			return NULL;
		}
		return json_boolean(b);
	case V_COMPUTE_MODE:
		if (strcmp(value, "default") && strcmp(value, "exclusive_process") &&
		    strcmp(value, "prohibited")) {
			*why = "expected default, exclusive_process or prohibited";
			return NULL;
		}
		return json_string(value);
	}
	*why = "unsupported";
	return NULL;
}

/* The state.json object of one GPU, created on demand. */
static json_t *gpu_state(json_t *state, unsigned int gpu)
{
	json_t *gpus = json_object_get(state, "gpus"), *g;
	char key[16];

	if (!json_is_object(gpus)) {
		gpus = json_object();
		if (!gpus || json_object_set_new(state, "gpus", gpus) < 0)
			return NULL;
	}
	snprintf(key, sizeof(key), "%u", gpu);
	g = json_object_get(gpus, key);
	if (!json_is_object(g)) {
		g = json_object();
		if (!g || json_object_set_new(gpus, key, g) < 0)
			return NULL;
	}
	return g;
}

static json_t *child_object(json_t *parent, const char *key)
{
	json_t *o = json_object_get(parent, key);

	if (!json_is_object(o)) {
		o = json_object();
		if (!o || json_object_set_new(parent, key, o) < 0)
			return NULL;
	}
	return o;
}

/* Stores v at "a.b" under obj (steals v). */
static int set_path(json_t *obj, const char *path, json_t *v)
{
	const char *dot = strchr(path, '.');
	char head[64];

	if (!dot)
		return json_object_set_new(obj, path, v) < 0 ? -ENOMEM : 0;
	if ((size_t)(dot - path) >= sizeof(head)) {
		json_decref(v);
		return -EINVAL;
	}
	memcpy(head, path, (size_t)(dot - path));
	head[dot - path] = '\0';
	obj = child_object(obj, head);
	if (!obj) {
		json_decref(v);
		return -ENOMEM;
	}
	return set_path(obj, dot + 1, v);
}

/* cuda.alloc=ok|hang|fail[:ERROR] → gpus.N.cuda {"alloc", "error"} (sim/README.md). */
static int set_cuda_alloc(json_t *g, const char *value, const char *arg)
{
	const char *colon = strchr(value, ':');
	size_t len = colon ? (size_t)(colon - value) : strlen(value);
	json_t *cuda;
	int err = 999; /* CUDA_ERROR_UNKNOWN */

	if (len == 4 && strncmp(value, "fail", 4) == 0) {
		if (colon && (err = sim_cuda_error_from_name(colon + 1)) <= 0)
			return nvsim_err(EXIT_USAGE,
			                 "%s: not a CUDA error name (e.g. OUT_OF_MEMORY)", arg);
	} else if (colon || (strcmp(value, "ok") != 0 && strcmp(value, "hang") != 0)) {
		return nvsim_err(EXIT_USAGE, "%s: expected ok, fail, fail:ERROR or hang", arg);
	}
	if (strcmp(value, "ok") == 0)
		return json_object_del(g, "cuda"), 0;
	cuda = json_pack("{s:s%}", "alloc", value, len);
	if (!cuda || (strncmp(value, "fail", 4) == 0 &&
	              json_object_set_new(cuda, "error", json_integer(err)) < 0))
		return -ENOMEM;
	return json_object_set_new(g, "cuda", cuda) < 0 ? -ENOMEM : 0;
}

/* nvlink.N.COUNTER=COUNT: one of the link's error counters (state gpus.G.nvlink_errors). */
static int set_nvlink_counter(struct nvstate *st, json_t *g, unsigned int gpu, const char *key,
                              const char *value, const char *arg)
{
	const char *dot = strchr(key + 7, '.');
	char link[8];
	json_t *all, *per;
	uint64_t u, n;
	int k;

	if ((size_t)(dot - (key + 7)) >= sizeof(link))
		return nvsim_err(EXIT_USAGE, "%s: GPU %u has no such NVLink", arg, gpu);
	memcpy(link, key + 7, (size_t)(dot - (key + 7)));
	link[dot - (key + 7)] = '\0';
	if (sim_parse_u64(link, SIM_MAX_LINKS - 1, &u) < 0 || u >= st->sc->gpus[gpu].link_count)
		return nvsim_err(EXIT_USAGE, "%s: GPU %u has no NVLink %s", arg, gpu, link);
	for (k = 0; k < 4; k++)
		if (strcmp(dot + 1, sim_nvlink_counter_names[k]) == 0)
			break;
	if (k == 4)
		return nvsim_err(
		        EXIT_USAGE,
		        "%s: unknown NVLink counter (replay, recovery, crc_flit, crc_data)", arg);
	if (sim_parse_u64(value, 1ULL << 62, &n) < 0)
		return nvsim_err(EXIT_USAGE, "%s: expected a count", arg);
	all = json_object_get(g, "nvlink_errors");
	if (!all) {
		all = json_object();
		if (!all || json_object_set_new(g, "nvlink_errors", all) < 0)
			return -ENOMEM;
	}
	snprintf(link, sizeof(link), "%u", (unsigned)u);
	per = json_object_get(all, link);
	if (!per) {
		per = json_object();
		if (!per || json_object_set_new(all, link, per) < 0)
			return -ENOMEM;
	}
	return json_object_set_new(per, sim_nvlink_counter_names[k], json_integer((json_int_t)n)) <
	                       0
	               ? -ENOMEM
	               : 0;
}

static int apply_special(struct nvstate *st, json_t *g, unsigned int gpu, const char *key,
                         const char *value, const char *arg)
{
	uint64_t u;
	bool b;

	if (strcmp(key, "lost") == 0) {
		if (parse_bool(value, &b) < 0)
			return nvsim_err(EXIT_USAGE, "%s: expected 0 or 1", arg);
		return json_object_set_new(g, "lost", json_boolean(b)) < 0 ? -ENOMEM : 0;
	}
	if (strcmp(key, "lost_after_calls") == 0) {
		json_t *prev = json_object_get(g, "lost_after_calls");
		long long gen = json_integer_value(json_object_get(prev, "gen")) + 1;
		if (sim_parse_u64(value, 1000000000ULL, &u) < 0)
			return nvsim_err(EXIT_USAGE, "%s: expected a non-negative integer", arg);
		return json_object_set_new(g, "lost_after_calls",
		                           json_pack("{sIsI}", "calls", (json_int_t)u, "gen",
		                                     (json_int_t)gen)) < 0
		               ? -ENOMEM
		               : 0;
	}
	if (strcmp(key, "cuda.alloc") == 0)
		return set_cuda_alloc(g, value, arg);
	if (strncmp(key, "nvlink.", 7) == 0 && strchr(key + 7, '.'))
		return set_nvlink_counter(st, g, gpu, key, value, arg);
	if (strncmp(key, "nvlink.", 7) == 0) {
		json_t *down = json_object_get(g, "nvlink_down"), *nd, *el;
		size_t i;
		bool up;
		if (sim_parse_u64(key + 7, SIM_MAX_LINKS - 1, &u) < 0 ||
		    u >= st->sc->gpus[gpu].link_count)
			return nvsim_err(EXIT_USAGE, "%s: GPU %u has no NVLink %s", arg, gpu,
			                 key + 7);
		if (strcmp(value, "up") == 0)
			up = true;
		else if (strcmp(value, "down") == 0)
			up = false;
		else
			return nvsim_err(EXIT_USAGE, "%s: expected up or down", arg);
		nd = json_array();
		if (!nd)
			return -ENOMEM;
		json_array_foreach(down, i, el) if (json_integer_value(el) != (json_int_t)u)
		        json_array_append(nd, el);
		if (!up)
			json_array_append_new(nd, json_integer((json_int_t)u));
		return json_object_set_new(g, "nvlink_down", nd) < 0 ? -ENOMEM : 0;
	}
	return 1; /* not special */
}

/* A degraded link keeps its maximum: the scenario derives max_gen/max_width from gen/width
 * when absent, so setting the current value pins the scenario's maximum explicitly. */
static int pin_pcie_max(json_t *gs, const char *path, const struct sim_gpu *g)
{
	json_t *pcie = json_object_get(json_object_get(gs, "set"), "pcie");

	if (strcmp(path, "pcie.gen") == 0 && !json_object_get(pcie, "max_gen"))
		return json_object_set_new(pcie, "max_gen", json_integer(g->pcie_max_gen)) < 0
		               ? -ENOMEM
		               : 0;
	if (strcmp(path, "pcie.width") == 0 && !json_object_get(pcie, "max_width"))
		return json_object_set_new(pcie, "max_width", json_integer(g->pcie_max_width)) < 0
		               ? -ENOMEM
		               : 0;
	return 0;
}

/* pcie_throughput_kbs needs both directions: on a GPU whose scenario has no such object, the
 * first `pcie.rx` or `pcie.tx` set starts the other direction at 0 rather than being refused
 * (as `power.draw` on a GPU without it makes the value appear). */
static int complete_pcie_throughput(json_t *gs, const char *path, const struct sim_gpu *g)
{
	json_t *tp = json_object_get(json_object_get(gs, "set"), "pcie_throughput_kbs");
	const char *other;

	if (strcmp(path, "pcie_throughput_kbs.rx") == 0)
		other = "tx";
	else if (strcmp(path, "pcie_throughput_kbs.tx") == 0)
		other = "rx";
	else
		return 0;
	if (g->pcie_rx_kbs.valid || json_object_get(tp, other))
		return 0;
	return json_object_set_new(tp, other, json_integer(0)) < 0 ? -ENOMEM : 0;
}

int cmd_set(int argc, char **argv)
{
	struct nvstate st;
	bool sel[SIM_MAX_GPUS];
	const char *list = NULL;
	int i = 1, r;

	if (i + 1 < argc && strcmp(argv[i], "-i") == 0) {
		list = argv[i + 1];
		i += 2;
	}
	if (i >= argc)
		return nvsim_err(EXIT_USAGE, "set: usage: nvsim set [-i GPU[,GPU]] KEY=VALUE...");
	if ((r = nvstate_open(&st)) != 0)
		goto out;
	if (list) {
		if ((r = nvsim_parse_gpus(st.sc, list, sel)) < 0) {
			r = nvsim_err(EXIT_USAGE, "-i %s: no such GPU", list);
			goto out;
		}
	} else {
		for (unsigned int g = 0; g < SIM_MAX_GPUS; g++)
			sel[g] = g < st.sc->n_gpus;
	}
	for (; i < argc; i++) {
		const char *eq = strchr(argv[i], '='), *value, *why = NULL;
		const struct setkey *k = NULL;
		char key[64];

		if (!eq || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof(key)) {
			r = nvsim_err(EXIT_USAGE, "%s: expected KEY=VALUE", argv[i]);
			goto out;
		}
		memcpy(key, argv[i], (size_t)(eq - argv[i]));
		key[eq - argv[i]] = '\0';
		value = eq + 1;
		for (size_t j = 0; j < SIM_ELEMENTSOF(setkeys); j++)
			if (strcmp(setkeys[j].key, key) == 0)
				k = &setkeys[j];
		for (unsigned int g = 0; g < st.sc->n_gpus; g++) {
			json_t *gs, *v;
			if (!sel[g])
				continue;
			gs = gpu_state(st.state, g);
			if (!gs) {
				r = nvsim_err(EXIT_FAILURE, "out of memory");
				goto out;
			}
			if (!k) {
				r = apply_special(&st, gs, g, key, value, argv[i]);
				if (r == 1) {
					r = nvsim_err(EXIT_USAGE, "%s: unknown key \"%s\"", argv[i],
					              key);
					goto out;
				}
				if (r != 0)
					goto out;
				continue;
			}
			v = convert(k, value, &why);
			if (!v) {
				r = nvsim_err(EXIT_USAGE, "%s: %s", argv[i], why);
				goto out;
			}
			if ((r = set_path(child_object(gs, "set"), k->path, v)) < 0 ||
			    (r = pin_pcie_max(gs, k->path, &st.sc->gpus[g])) < 0 ||
			    (r = complete_pcie_throughput(gs, k->path, &st.sc->gpus[g])) < 0) {
				r = nvsim_err(EXIT_FAILURE, "out of memory");
				goto out;
			}
		}
		if ((r = nvstate_validate(&st, argv[i])) != 0)
			goto out;
	}
	r = nvstate_save(&st);
out:
	nvstate_close(&st);
	return r;
}

static bool known_function(const char *name)
{
	static const char *const names[] = {
#define SIM_FN_STR(n, star) #n,
	        SIM_FUNCTIONS(SIM_FN_STR)
#undef SIM_FN_STR
	};

	if (strcmp(name, "*") == 0)
		return true;
	for (size_t i = 0; i < SIM_ELEMENTSOF(names); i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* Appends one rule per selected GPU (or one for any GPU without -i) to state.json's array
 * KEY ("fail" or "hang"): {"function": FN[, "error": NAME][, "gpu": N]}; validates and saves. */
static int add_rules(struct nvstate *st, const char *key, const char *fn, const char *error,
                     const char *list)
{
	bool sel[SIM_MAX_GPUS];
	json_t *rules = json_object_get(st->state, key);
	int r;

	if (!json_is_array(rules)) {
		rules = json_array();
		json_object_set_new(st->state, key, rules);
	}
	if (list && nvsim_parse_gpus(st->sc, list, sel) < 0)
		return nvsim_err(EXIT_USAGE, "-i %s: no such GPU", list);
	for (unsigned int g = 0; g < (list ? st->sc->n_gpus : 1); g++) {
		json_t *rule;
		if (list && !sel[g])
			continue;
		rule = json_pack("{ss}", "function", fn);
		if (!rule)
			return nvsim_err(EXIT_FAILURE, "out of memory");
		if (error)
			json_object_set_new(rule, "error", json_string(error));
		if (list)
			json_object_set_new(rule, "gpu", json_integer(g));
		json_array_append_new(rules, rule);
	}
	r = nvstate_validate(st, fn);
	return r ? r : nvstate_save(st);
}

/* Splits `CMD POS... [-i LIST] [--clear]` into at most max positionals. */
static int rule_args(int argc, char **argv, const char **pos, int max, int *ret_n,
                     const char **ret_list, bool *ret_clear)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--clear") == 0)
			*ret_clear = true;
		else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc)
			*ret_list = argv[++i];
		else if (*ret_n < max)
			pos[(*ret_n)++] = argv[i];
		else
			return nvsim_err(EXIT_USAGE, "%s: too many arguments", argv[0]);
	}
	return 0;
}

int cmd_fail(int argc, char **argv)
{
	const char *pos[2] = {NULL, NULL}, *list = NULL;
	bool clear = false;
	struct nvstate st;
	int n = 0, err, r;

	if ((r = rule_args(argc, argv, pos, 2, &n, &list, &clear)) != 0)
		return r;
	if (!clear && n != 2)
		return nvsim_err(EXIT_USAGE, "fail: usage: nvsim fail FUNCTION ERROR [-i GPU] | "
		                             "nvsim fail --clear");
	if (!clear && !known_function(pos[0]))
		return nvsim_err(EXIT_USAGE, "%s: not an NVML function the simulator knows",
		                 pos[0]);
	err = clear ? 0 : sim_error_from_name(pos[1]);
	if (err < 0)
		return nvsim_err(EXIT_USAGE, "%s: not an NVML error name (e.g. GPU_IS_LOST)",
		                 pos[1]);
	if ((r = nvstate_open(&st)) != 0)
		goto out;
	if (clear) {
		json_object_del(st.state, "fail");
		r = nvstate_save(&st);
	} else {
		r = add_rules(&st, "fail", pos[0], sim_error_name(err), list);
	}
out:
	nvstate_close(&st);
	return r;
}

int cmd_hang(int argc, char **argv)
{
	const char *pos[1] = {NULL}, *list = NULL;
	bool clear = false;
	struct nvstate st;
	int n = 0, r;

	if ((r = rule_args(argc, argv, pos, 1, &n, &list, &clear)) != 0)
		return r;
	if (clear || n != 1)
		return nvsim_err(EXIT_USAGE, "hang: usage: nvsim hang FUNCTION [-i GPU[,GPU...]]");
	if (!known_function(pos[0]))
		return nvsim_err(EXIT_USAGE, "%s: not an NVML function the simulator knows",
		                 pos[0]);
	if ((r = nvstate_open(&st)) == 0)
		r = add_rules(&st, "hang", pos[0], NULL, list);
	nvstate_close(&st);
	return r;
}

int cmd_unhang(int argc, char **argv)
{
	struct nvstate st;
	json_t *rules, *keep;
	size_t i;
	json_t *el;
	int r;

	if (argc > 2)
		return nvsim_err(EXIT_USAGE, "unhang: usage: nvsim unhang [FUNCTION]");
	if ((r = nvstate_open(&st)) != 0)
		goto out;
	rules = json_object_get(st.state, "hang");
	keep = json_array();
	if (!keep) {
		r = nvsim_err(EXIT_FAILURE, "out of memory");
		goto out;
	}
	json_array_foreach(rules, i, el)
	{
		const char *fn = json_string_value(json_object_get(el, "function"));
		if (argc == 2 && fn && strcmp(fn, argv[1]) != 0)
			json_array_append(keep, el);
	}
	if (json_array_size(keep))
		json_object_set_new(st.state, "hang", keep);
	else {
		json_decref(keep);
		json_object_del(st.state, "hang");
	}
	r = nvstate_save(&st);
out:
	nvstate_close(&st);
	return r;
}

/* The calls blocked by hang rules now: STATE_DIR/hung/ (sim/nvml/init.c), live PIDs only. */
int cmd_hung(int argc, char **argv)
{
	_cleanup_(json_decrefp) json_t *out = json_array();
	struct nvstate st;
	struct dirent *de;
	char dir[4200];
	bool as_json = argc == 2 && strcmp(argv[1], "--json") == 0;
	DIR *d;
	int r;

	if (argc > 2 || (argc == 2 && !as_json))
		return nvsim_err(EXIT_USAGE, "hung: usage: nvsim hung [--json]");
	if (!out)
		return nvsim_err(EXIT_FAILURE, "out of memory");
	if ((r = nvstate_open(&st)) != 0)
		goto out;
	snprintf(dir, sizeof(dir), "%s/hung", st.dir);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		char path[4500], *buf = NULL;
		size_t len;
		json_t *v;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (sim_read_file(path, 4096, &buf, &len) < 0)
			continue;
		v = json_loadb(buf, len, 0, NULL);
		free(buf);
		if (json_is_object(v) &&
		    sim_pid_alive((pid_t)json_integer_value(json_object_get(v, "pid"))))
			json_array_append(out, v);
		json_decref(v);
	}
	if (d)
		closedir(d);
	if (as_json) {
		json_dumpf(out, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	} else {
		size_t i;
		json_t *el;
		json_array_foreach(out, i, el)
		        printf("%lld %lld %s %lld\n",
		               (long long)json_integer_value(json_object_get(el, "pid")),
		               (long long)json_integer_value(json_object_get(el, "tid")),
		               json_string_value(json_object_get(el, "function")),
		               (long long)json_integer_value(json_object_get(el, "gpu")));
	}
out:
	nvstate_close(&st);
	return r;
}

int cmd_latency(int argc, char **argv)
{
	struct nvstate st;
	uint64_t us;
	int r;

	if (argc != 2)
		return nvsim_err(EXIT_USAGE, "latency: usage: nvsim latency US");
	if (sim_parse_u64(argv[1], 10000000, &us) < 0)
		return nvsim_err(EXIT_USAGE, "%s: expected microseconds 0..10000000", argv[1]);
	if ((r = nvstate_open(&st)) == 0) {
		json_object_set_new(st.state, "latency_us", json_integer((json_int_t)us));
		r = nvstate_save(&st);
	}
	nvstate_close(&st);
	return r;
}

/* -i GPU index, GPU UUID or MIG UUID into the UUID a registration names. */
static int resolve_device(const struct sim_scenario *sc, const char *arg, const char **ret)
{
	uint64_t idx;

	if (sim_parse_u64(arg, SIM_MAX_GPUS, &idx) == 0) {
		if (idx >= sc->n_gpus)
			return -ENOENT;
		*ret = sc->gpus[idx].uuid;
		return 0;
	}
	for (unsigned int i = 0; i < sc->n_gpus; i++) {
		if (strcasecmp(sc->gpus[i].uuid, arg) == 0) {
			*ret = sc->gpus[i].uuid;
			return 0;
		}
		for (unsigned int m = 0; m < sc->gpus[i].mig_count; m++)
			if (strcmp(sc->gpus[i].mig[m].uuid, arg) == 0) {
				*ret = sc->gpus[i].mig[m].uuid;
				return 0;
			}
	}
	return -ENOENT;
}

int cmd_proc(int argc, char **argv)
{
	const char *pid_s = NULL, *dev = NULL, *mem = NULL, *util_s = NULL, *uuid;
	unsigned long long bytes = 0;
	uint64_t util = 0;
	struct nvstate st;
	char path[4200];
	uint64_t pid;
	int r;

	if (argc < 3 || (strcmp(argv[1], "add") && strcmp(argv[1], "rm")))
		return nvsim_err(EXIT_USAGE,
		                 "proc: usage: nvsim proc add --pid PID -i GPU|MIG-UUID "
		                 "[--mem SIZE] [--util PCT] | nvsim proc rm PID");
	if (strcmp(argv[1], "rm") == 0) {
		if (argc != 3 || sim_parse_u64(argv[2], INT_MAX, &pid) < 0)
			return nvsim_err(EXIT_USAGE, "proc rm: expected a PID, got \"%s\"",
			                 argv[2]);
		if ((r = nvstate_open(&st)) == 0) {
			snprintf(path, sizeof(path), "%s/procs/%llu.json", st.dir,
			         (unsigned long long)pid);
			if (unlink(path) < 0)
				r = nvsim_err(EXIT_FAILURE, "proc rm %s: %s", argv[2],
				              errno == ENOENT ? "not registered" : strerror(errno));
			else
				(void)sim_gen_bump(st.dir);
		}
		nvstate_close(&st);
		return r;
	}
	for (int i = 2; i < argc; i++) {
		if (i + 1 >= argc)
			return nvsim_err(EXIT_USAGE, "proc add: %s needs a value", argv[i]);
		if (strcmp(argv[i], "--pid") == 0)
			pid_s = argv[++i];
		else if (strcmp(argv[i], "-i") == 0)
			dev = argv[++i];
		else if (strcmp(argv[i], "--mem") == 0)
			mem = argv[++i];
		else if (strcmp(argv[i], "--util") == 0)
			util_s = argv[++i];
		else
			return nvsim_err(EXIT_USAGE, "proc add: unknown option \"%s\"", argv[i]);
	}
	if (!pid_s || !dev)
		return nvsim_err(EXIT_USAGE, "proc add: --pid and -i are required");
	if (sim_parse_u64(pid_s, INT_MAX, &pid) < 0 || pid == 0)
		return nvsim_err(EXIT_USAGE, "--pid %s: expected a process id", pid_s);
	if (mem && nvsim_parse_size(mem, &bytes) < 0)
		return nvsim_err(EXIT_USAGE, "--mem %s: expected a size such as 512MiB or 10GiB",
		                 mem);
	if (util_s && sim_parse_u64(util_s, 100, &util) < 0)
		return nvsim_err(EXIT_USAGE, "--util %s: expected a percentage 0..100", util_s);
	if ((r = nvstate_open(&st)) != 0)
		goto out;
	if (resolve_device(st.sc, dev, &uuid) < 0) {
		r = nvsim_err(EXIT_USAGE, "-i %s: no such GPU or MIG device", dev);
		goto out;
	} else {
		_cleanup_(json_decrefp) json_t *j =
		        json_pack("{sIsssIsI}", "pid", (json_int_t)pid, "gpu", uuid,
		                  "used_memory_bytes", (json_int_t)bytes, "util", (json_int_t)util);
		snprintf(path, sizeof(path), "%s/procs", st.dir);
		(void)sim_mkdir_p(path);
		snprintf(path, sizeof(path), "%s/procs/%llu.json", st.dir, (unsigned long long)pid);
		r = j ? sim_write_json_atomic(path, j) : -ENOMEM;
		if (r < 0)
			r = nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
		else
			(void)sim_gen_bump(st.dir);
	}
out:
	nvstate_close(&st);
	return r;
}

int cmd_calls(int argc, char **argv)
{
	_cleanup_(json_decrefp) json_t *calls = NULL;
	bool reset = false, as_json = false;
	const char *dir = getenv("NVSIM_STATE_DIR"), *k;
	json_t *v;
	int r;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--reset") == 0)
			reset = true;
		else if (strcmp(argv[i], "--json") == 0)
			as_json = true;
		else
			return nvsim_err(EXIT_USAGE, "calls: unknown option \"%s\"", argv[i]);
	}
	if (!dir || !*dir)
		return nvsim_err(EXIT_USAGE,
		                 "NVSIM_STATE_DIR is not set: run under `nvsim exec` or "
		                 "export it");
	if ((r = sim_calls_aggregate(dir, &calls)) < 0)
		return nvsim_err(EXIT_FAILURE, "%s/calls: %s", dir, strerror(-r));
	if (as_json) {
		json_dumpf(calls, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	} else if (!reset) {
		printf("total %lld\n",
		       (long long)json_integer_value(json_object_get(calls, "total")));
		json_object_foreach(json_object_get(calls, "functions"), k, v)
		        printf("%s %lld\n", k, (long long)json_integer_value(v));
	}
	if (reset) {
		char path[4200];
		DIR *d;
		struct dirent *de;
		snprintf(path, sizeof(path), "%s/calls", dir);
		d = opendir(path);
		while (d && (de = readdir(d))) {
			char file[4500];
			if (de->d_name[0] == '.')
				continue;
			snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
			(void)unlink(file);
		}
		if (d)
			closedir(d);
	}
	return 0;
}

int cmd_show(int argc, char **argv)
{
	_cleanup_(json_decrefp) json_t *out = NULL, *procs = NULL;
	struct sim_proc *p = NULL;
	struct nvstate st;
	size_t n = 0;
	int r;

	(void)argv;
	if (argc != 1)
		return nvsim_err(EXIT_USAGE, "show: takes no arguments");
	if ((r = nvstate_open(&st)) != 0)
		goto out;
	procs = json_array();
	(void)sim_procs_load(st.dir, &p, &n);
	for (size_t i = 0; procs && i < n; i++)
		json_array_append_new(procs, json_pack("{sIsssIsI}", "pid", (json_int_t)p[i].pid,
		                                       "gpu", p[i].uuid, "used_memory_bytes",
		                                       (json_int_t)p[i].used_bytes, "util",
		                                       (json_int_t)p[i].util));
	free(p);
	out = json_pack("{sssOsO}", "scenario", st.sc->name, "state", st.state, "procs", procs);
	if (!out) {
		r = nvsim_err(EXIT_FAILURE, "out of memory");
		goto out;
	}
	json_dumpf(out, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
	putchar('\n');
out:
	nvstate_close(&st);
	return r;
}

static int compare_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int cmd_scenarios(int argc, char **argv)
{
	const char *dir = nvsim_scenario_dir();
	char *names[1024];
	size_t n = 0;
	struct dirent *de;
	DIR *d;

	(void)argv;
	if (argc != 1)
		return nvsim_err(EXIT_USAGE, "scenarios: takes no arguments");
	d = opendir(dir);
	if (!d)
		return nvsim_err(EXIT_FAILURE, "%s: %s", dir, strerror(errno));
	while ((de = readdir(d)) && n < SIM_ELEMENTSOF(names)) {
		size_t l = strlen(de->d_name);
		if (l > 5 && strcmp(de->d_name + l - 5, ".json") == 0 && de->d_name[0] != '.')
			if ((names[n] = strndup(de->d_name, l - 5)))
				n++;
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), compare_str);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *buf = NULL;
		char path[4200], err[512], line[121];
		struct sim_scenario *sc = NULL;
		size_t len;

		snprintf(path, sizeof(path), "%s/%s.json", dir, names[i]);
		if (sim_read_file(path, SIM_MAX_FILE, &buf, &len) < 0 ||
		    sim_scenario_parse(buf, len, &sc, err, sizeof(err)) < 0) {
			printf("%-24s (invalid: run nvsim check %s)\n", names[i], names[i]);
		} else {
			size_t j;
			for (j = 0; sc->description[j] && j + 1 < sizeof(line); j++)
				line[j] = sc->description[j] == '\n' ? ' ' : sc->description[j];
			line[j] = '\0';
			printf("%-24s %s%s\n", names[i], line, sc->description[j] ? "..." : "");
		}
		sim_scenario_free(sc);
		free(names[i]);
	}
	return 0;
}

int cmd_check(int argc, char **argv)
{
	struct sim_scenario *sc = NULL;
	int r;

	if (argc != 2)
		return nvsim_err(EXIT_USAGE, "check: usage: nvsim check FILE|NAME");
	r = nvsim_load_scenario(argv[1], NULL, NULL, &sc);
	if (r == 0)
		printf("%s: ok (%u GPUs)\n", argv[1], sc->n_gpus);
	sim_scenario_free(sc);
	return r;
}

/* `nvsim xid -i GPU[,GPU] CODE [TEXT]`: appends one kernel-log line per GPU to
 * $NVSIM_STATE_DIR/kmsg in /dev/kmsg's record format ("3,SEQ,USEC,-;MESSAGE"), with the message
 * the NVIDIA driver prints: "NVRM: Xid (PCI:0000:07:00): 79, pid=..., name=..., TEXT". The NVML
 * event sets of the simulated library (nvml/events.c) deliver the same lines as XID events. The
 * log is append-only: one write(2) per line with O_APPEND under the state lock, so a reader
 * sees whole lines (rename would make a tail reader lose its place). */
int cmd_xid(int argc, char **argv)
{
	const char *list = NULL, *code_s = NULL, *text = NULL;
	bool sel[SIM_MAX_GPUS];
	struct nvstate st;
	uint64_t code;
	int r, fd = -1;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-i") == 0 && i + 1 < argc)
			list = argv[++i];
		else if (!code_s)
			code_s = argv[i];
		else if (!text)
			text = argv[i];
		else
			return nvsim_err(EXIT_USAGE, "xid: too many arguments");
	}
	if (!list || !code_s)
		return nvsim_err(EXIT_USAGE, "xid: usage: nvsim xid -i GPU[,GPU...] CODE [TEXT]");
	if (sim_parse_u64(code_s, 99999, &code) < 0 || code == 0)
		return nvsim_err(EXIT_USAGE, "%s: expected an XID code 1..99999", code_s);
	if (text && strchr(text, '\n'))
		return nvsim_err(EXIT_USAGE, "xid: TEXT must be one line");
	if ((r = nvstate_open(&st)) != 0)
		goto out;
	if (nvsim_parse_gpus(st.sc, list, sel) < 0) {
		r = nvsim_err(EXIT_USAGE, "-i %s: no such GPU", list);
		goto out;
	}
	char path[4200];
	snprintf(path, sizeof(path), "%s/kmsg", st.dir);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		r = nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(errno));
		goto out;
	}
	for (unsigned int g = 0; g < st.sc->n_gpus; g++) {
		const char *bus = st.sc->gpus[g].pci_bus_id;
		struct timespec ts;
		char line[1024];
		int n;

		struct stat sb;

		if (!sel[g])
			continue;
		/* SEQ only has to grow: the log's size before the line does */
		if (fstat(fd, &sb) < 0)
			sb.st_size = 0;
		/* the driver prints a 4-digit domain and no function: 0000:07:00 */
		const char *colon = strchr(bus, ':');
		size_t dlen = colon ? (size_t)(colon - bus) : 0;
		const char *dom = dlen > 4 ? bus + dlen - 4 : bus;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		n = snprintf(
		        line, sizeof(line),
		        "3,%u,%llu,-;NVRM: Xid (PCI:%.*s:%.5s): %llu, pid=%ld, name=nvsim, %s\n", g,
		        (unsigned long long)ts.tv_sec * 1000000ull +
		                (unsigned long long)ts.tv_nsec / 1000,
		        4, dom, colon ? colon + 1 : bus, (unsigned long long)code, (long)getpid(),
		        text ? text : "injected by nvsim");
		if (n < 0 || (size_t)n >= sizeof(line)) {
			r = nvsim_err(EXIT_USAGE, "xid: TEXT too long");
			goto out;
		}
		if (write(fd, line, (size_t)n) != n) {
			r = nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(errno));
			goto out;
		}
	}
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	nvstate_close(&st);
	return r;
}
