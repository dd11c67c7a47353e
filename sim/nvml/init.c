/* Simulated NVML: init/shutdown, system queries, enumeration, error strings, and the
 * machinery every call shares (counting, latency, state re-reading, error injection).
 *
 * Decisions:
 * - Counters are per process and atomic (they are bumped before the lock so even a call that
 *   fails UNINITIALIZED counts). Each dump (nvmlShutdown reaching zero, and process exit)
 *   writes the counts since the previous dump and resets them, so summing calls/ never
 *   counts a call twice.
 * - Latency is a busy-wait on CLOCK_MONOTONIC: nanosleep overshoots by ~50-100 us, which
 *   would swamp the 10-100 us figures the benchmarks want.
 * - state.json and procs/ are re-read when stat() says inode, size or mtime changed; nvsim
 *   replaces them by rename, so the inode changes on every write. stat() is not called on
 *   every call: every writer (nvsim, the simulated CUDA) bumps STATE_DIR/generation after its
 *   write, and a call compares that mapped counter with the one last seen (a memory read), so
 *   a change is seen at the next call as before; without a bump (a file edited by hand) the
 *   stat() check still runs every SIM_RESTAT_US. Two stat() calls per NVML call cost more than
 *   much of what gpuctl does (1,700 system calls for a `gpuctl run` on 8 GPUs).
 * - A broken scenario makes nvmlInit fail with UNKNOWN and print one "nvsim: " line on
 *   stderr (the simulator may print; the product must not). A missing one is
 *   DRIVER_NOT_LOADED, silently, like a machine without the driver. */
#include "internal.h"
#include "../util.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct sim_lib sim_lib = {.lock = PTHREAD_MUTEX_INITIALIZER, .env_latency_us = -1};

static unsigned long long counts[SIM_FN__COUNT];
static unsigned int dump_seq;

static const char *const fn_names[SIM_FN__COUNT] = {
#define SIM_FN_NAME(name, star) [SIM_FN_##name] = #name,
        SIM_FUNCTIONS(SIM_FN_NAME)
#undef SIM_FN_NAME
};
static const bool fn_star[SIM_FN__COUNT] = {
#define SIM_FN_STAR(name, star) [SIM_FN_##name] = star,
        SIM_FUNCTIONS(SIM_FN_STAR)
#undef SIM_FN_STAR
};

/* The one line the library may print: "nvsim: WHERE: WHAT", once per process. */
static void say_once(const char *where, const char *what)
{
	static bool said;

	if (said)
		return;
	said = true;
	fprintf(stderr, "nvsim: %s: %s\n", where, what);
}

static void busy_wait_us(long long us)
{
	struct timespec start, now;
	long long elapsed;

	if (us <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		clock_gettime(CLOCK_MONOTONIC, &now);
		elapsed = (now.tv_sec - start.tv_sec) * 1000000LL +
		          (now.tv_nsec - start.tv_nsec) / 1000;
	} while (elapsed < us);
}

unsigned long long sim_now_us(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (unsigned long long)now.tv_sec * 1000000ULL +
	       (unsigned long long)now.tv_nsec / 1000ULL;
}

bool sim_exported(enum sim_fn fn)
{
	static signed char known[SIM_FN__COUNT]; /* 0 unknown, 1 exported, -1 not */
	Dl_info info;

	if (!known[fn]) {
		void *self = NULL;

		known[fn] = -1;
		if (dladdr((void *)&known, &info) && info.dli_fname)
			self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
		if (self) {
			if (dlsym(self, fn_names[fn]))
				known[fn] = 1;
			dlclose(self);
		}
	}
	return known[fn] > 0;
}

unsigned long long sim_epoch_us(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (unsigned long long)now.tv_sec * 1000000ULL +
	       (unsigned long long)now.tv_nsec / 1000ULL;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static void arm_lost_counters(void)
{
	for (unsigned int i = 0; i < sim_lib.n_gpus; i++) {
		const struct sim_gpu_dyn *d = &sim_lib.dyn.gpus[i];
		if (d->lost_after_calls >= 0 && d->lost_after_gen != sim_lib.lost_gen_seen[i]) {
			sim_lib.lost_left[i] = d->lost_after_calls;
			sim_lib.lost_gen_seen[i] = d->lost_after_gen;
		}
		if (d->lost_after_calls < 0)
			sim_lib.lost_left[i] = -1;
	}
}

/* Re-reads state.json into sc/dyn. Keeps the old state when the new one is unusable. */
static void reload_state(const char *path)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_(json_decrefp) json_t *state = NULL, *merged = NULL;
	struct sim_scenario *sc = NULL;
	struct sim_dyn *dyn = NULL;
	char err[512] = "";
	size_t len;
	int r;

	r = sim_read_file(path, SIM_MAX_FILE, &buf, &len);
	if (r == -ENOENT) {
		state = json_object();
	} else if (r < 0) {
		return;
	} else if (sim_json_load(buf, len, &state, err, sizeof(err)) < 0) {
		say_once(path, err);
		return;
	}
	if (!state || sim_state_merge(sim_lib.scenario_root, state, &merged) < 0)
		return;
	dyn = malloc(sizeof(*dyn));
	if (!dyn)
		return;
	if (sim_scenario_from_json(merged, &sc, err, sizeof(err)) < 0 ||
	    sim_dyn_from_json(state, sim_lib.n_gpus, dyn, err, sizeof(err)) < 0) {
		say_once(path, err);
		sim_scenario_free(sc);
		free(dyn);
		return;
	}
	sim_scenario_free(sim_lib.sc);
	sim_lib.sc = sc;
	sim_lib.dyn = *dyn;
	free(dyn);
	arm_lost_counters();
}

static void refresh(void)
{
	char path[4200];
	struct stat st;

	if (!sim_lib.state_dir[0])
		return;
	snprintf(path, sizeof(path), "%s/state.json", sim_lib.state_dir);
	if (stat(path, &st) < 0)
		memset(&st, 0, sizeof(st));
	if (!same_file(&st, &sim_lib.state_st)) {
		sim_lib.state_st = st;
		reload_state(path);
	}
	snprintf(path, sizeof(path), "%s/procs", sim_lib.state_dir);
	if (stat(path, &st) < 0)
		memset(&st, 0, sizeof(st));
	if (!same_file(&st, &sim_lib.procs_st)) {
		struct sim_proc *procs = NULL;
		size_t n = 0;
		sim_lib.procs_st = st;
		if (sim_procs_load(sim_lib.state_dir, &procs, &n) == 0) {
			free(sim_lib.procs);
			sim_lib.procs = procs;
			sim_lib.n_procs = n;
		}
	}
}

/* How often stat() checks state.json and procs/ when the generation counter says nothing
 * changed: a file edited without nvsim is seen within this long. */
#define SIM_RESTAT_US 100000ULL

static unsigned long long coarse_us(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &now); /* the vDSO: no system call */
	return (unsigned long long)now.tv_sec * 1000000ULL +
	       (unsigned long long)now.tv_nsec / 1000ULL;
}

/* refresh() when a writer bumped the generation since the last one, when SIM_RESTAT_US passed,
 * or on every call when the counter could not be mapped. */
static void maybe_refresh(void)
{
	unsigned long long now;
	uint64_t g;

	if (!sim_lib.gen) {
		refresh();
		return;
	}
	g = __atomic_load_n(sim_lib.gen, __ATOMIC_ACQUIRE);
	now = coarse_us();
	if (g == sim_lib.gen_seen && now - sim_lib.restat_us < SIM_RESTAT_US)
		return;
	sim_lib.gen_seen = g;
	sim_lib.restat_us = now;
	refresh();
}

static long long latency_us(void)
{
	if (sim_lib.init_count && sim_lib.dyn.latency_us >= 0)
		return sim_lib.dyn.latency_us;
	return sim_lib.env_latency_us;
}

nvmlReturn_t sim_injected(enum sim_fn fn, int gpu)
{
	for (size_t i = 0; i < sim_lib.dyn.n_fails; i++) {
		const struct sim_fail *f = &sim_lib.dyn.fails[i];
		bool name = strcmp(f->function, fn_names[fn]) == 0 ||
		            (fn_star[fn] && strcmp(f->function, "*") == 0);
		if (name && (f->gpu < 0 || f->gpu == gpu))
			return (nvmlReturn_t)f->error;
	}
	return NVML_SUCCESS;
}

static bool hang_ruled(enum sim_fn fn, int gpu)
{
	for (size_t i = 0; i < sim_lib.dyn.n_hangs; i++) {
		const struct sim_hang *h = &sim_lib.dyn.hangs[i];
		bool name = strcmp(h->function, fn_names[fn]) == 0 ||
		            (fn_star[fn] && strcmp(h->function, "*") == 0);
		if (name && (h->gpu < 0 || h->gpu == gpu))
			return true;
	}
	return false;
}

/* STATE_DIR/hung/PID-TID.json names a call blocked by a hang rule, so a test waits for the
 * hang itself rather than for a guessed time; removed when the call goes on. A process killed
 * while hung leaves its file: readers check that the PID lives (`nvsim hung` does). */
static void hung_mark(enum sim_fn fn, int gpu, bool on)
{
	char dir[4200], path[4300];
	long tid = (long)syscall(SYS_gettid);
	json_t *v;

	snprintf(dir, sizeof(dir), "%s/hung", sim_lib.state_dir);
	snprintf(path, sizeof(path), "%s/%ld-%ld.json", dir, (long)getpid(), tid);
	if (!on) {
		unlink(path);
		return;
	}
	v = json_pack("{sIsIsssi}", "pid", (json_int_t)getpid(), "tid", (json_int_t)tid, "function",
	              fn_names[fn], "gpu", gpu);
	if (v && sim_mkdir_p(dir) == 0)
		(void)sim_write_json_atomic(path, v);
	json_decref(v);
}

/* Blocks while a hang rule matches fn on gpu (-1: a call without a device), as a driver that
 * stopped answering would. Called with the lock held; it is released while waiting, so other
 * threads' calls (to other GPUs, or unhung functions) still answer, and state.json is re-read
 * every 10 ms, so `nvsim unhang` ends the wait. The caller must not keep pointers into
 * sim_lib.sc across it: a re-read replaces the scenario. */
void sim_hang_point(enum sim_fn fn, int gpu)
{
	const struct timespec tick = {0, 10 * 1000 * 1000};

	if (!sim_lib.state_dir[0] || !hang_ruled(fn, gpu))
		return;
	hung_mark(fn, gpu, true);
	do {
		pthread_mutex_unlock(&sim_lib.lock);
		nanosleep(&tick, NULL);
		pthread_mutex_lock(&sim_lib.lock);
		refresh();
	} while (sim_lib.init_count && hang_ruled(fn, gpu));
	hung_mark(fn, gpu, false);
}

/* What every simulated call does first: count it, take the lock (sim_end releases it), pick
 * up nvsim's changes, and spend the configured latency. */
static void enter(enum sim_fn fn)
{
	__atomic_fetch_add(&counts[fn], 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&sim_lib.lock);
	if (sim_lib.init_count)
		maybe_refresh();
	busy_wait_us(latency_us());
}

nvmlReturn_t sim_begin(enum sim_fn fn, bool need_init)
{
	enter(fn);
	if (need_init && !sim_lib.init_count)
		return NVML_ERROR_UNINITIALIZED;
	if (sim_lib.init_count) {
		sim_hang_point(fn, -1);
		return sim_injected(fn, -1);
	}
	return NVML_SUCCESS;
}

bool sim_gpu_lost(unsigned int gpu)
{
	return sim_lib.dyn.gpus[gpu].lost || sim_lib.lost_local[gpu];
}

nvmlReturn_t sim_resolve(nvmlDevice_t dev, struct sim_call *c)
{
	uintptr_t base = (uintptr_t)sim_lib.handles, p = (uintptr_t)dev;
	size_t n = (size_t)sim_lib.n_gpus * (1 + SIM_MAX_MIG), idx;
	const struct sim_gpu *g;

	if (!dev || !sim_lib.handles || p < base || p >= base + n * sizeof(*dev) ||
	    (p - base) % sizeof(*dev) != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	idx = (p - base) / sizeof(*dev);
	g = &sim_lib.sc->gpus[sim_lib.handles[idx].gpu];
	if (sim_lib.handles[idx].mig >= (int)g->mig_count)
		return NVML_ERROR_INVALID_ARGUMENT; /* MIG device destroyed since */
	c->gpu = sim_lib.handles[idx].gpu;
	c->g = g;
	c->m = sim_lib.handles[idx].mig >= 0 ? &g->mig[sim_lib.handles[idx].mig] : NULL;
	if (sim_gpu_lost(c->gpu))
		return NVML_ERROR_GPU_IS_LOST;
	return NVML_SUCCESS;
}

nvmlReturn_t sim_begin_dev(enum sim_fn fn, nvmlDevice_t dev, unsigned int flags, struct sim_call *c)
{
	nvmlReturn_t r;

	enter(fn);
	if (!sim_lib.init_count)
		return NVML_ERROR_UNINITIALIZED;
	r = sim_resolve(dev, c);
	if (r != NVML_SUCCESS)
		return r;
	if (hang_ruled(fn, (int)c->gpu)) {
		sim_hang_point(fn, (int)c->gpu);
		if (!sim_lib.init_count)
			return NVML_ERROR_UNINITIALIZED;
		r = sim_resolve(dev, c); /* the scenario may have been re-read meanwhile */
		if (r != NVML_SUCCESS)
			return r;
	}
	if (sim_lib.lost_left[c->gpu] >= 0) {
		if (sim_lib.lost_left[c->gpu] == 0) {
			sim_lib.lost_local[c->gpu] = true;
			sim_lib.lost_left[c->gpu] = -1;
			return NVML_ERROR_GPU_IS_LOST;
		}
		sim_lib.lost_left[c->gpu]--;
	}
	if (c->m && !(flags & SIM_MIG_OK))
		return NVML_ERROR_NOT_SUPPORTED;
	return sim_injected(fn, (int)c->gpu);
}

nvmlReturn_t sim_end(nvmlReturn_t r)
{
	pthread_mutex_unlock(&sim_lib.lock);
	return r;
}

nvmlReturn_t sim_copy_string(char *buf, unsigned int len, const char *s)
{
	if (!buf)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(s) + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, strlen(s) + 1);
	return NVML_SUCCESS;
}

void sim_dump_calls(void)
{
	const char *dir = getenv("NVSIM_STATE_DIR");
	_cleanup_(json_decrefp) json_t *out = NULL, *fns = NULL;
	unsigned long long total = 0;
	char path[4200];

	if (!dir || !*dir)
		return;
	out = json_object();
	fns = json_object();
	if (!out || !fns)
		return;
	for (int i = 0; i < SIM_FN__COUNT; i++) {
		unsigned long long n = __atomic_exchange_n(&counts[i], 0, __ATOMIC_RELAXED);
		if (!n)
			continue;
		total += n;
		json_object_set_new(fns, fn_names[i], json_integer((json_int_t)n));
	}
	if (!total)
		return;
	json_object_set_new(out, "total", json_integer((json_int_t)total));
	json_object_set(out, "functions", fns);
	snprintf(path, sizeof(path), "%s/calls/%ld-%u.json", dir, (long)getpid(), dump_seq++);
	(void)sim_write_json_atomic(path, out);
}

__attribute__((destructor)) static void sim_at_exit(void)
{
	sim_dump_calls();
}

static void unload(void)
{
	sim_scenario_free(sim_lib.sc);
	sim_lib.sc = NULL;
	json_decref(sim_lib.scenario_root);
	sim_lib.scenario_root = NULL;
	free(sim_lib.handles);
	sim_lib.handles = NULL;
	free(sim_lib.procs);
	sim_lib.procs = NULL;
	sim_lib.n_procs = 0;
	sim_lib.n_gpus = 0;
	if (sim_lib.gen)
		munmap((void *)sim_lib.gen, 8);
	sim_lib.gen = NULL;
	memset(&sim_lib.state_st, 0, sizeof(sim_lib.state_st));
	memset(&sim_lib.procs_st, 0, sizeof(sim_lib.procs_st));
	memset(&sim_lib.dyn, 0, sizeof(sim_lib.dyn));
}

static nvmlReturn_t load(void)
{
	const char *dir = getenv("NVSIM_STATE_DIR"), *file = getenv("NVSIM_SCENARIO"),
	           *lat = getenv("NVSIM_LATENCY_US");
	_cleanup_free_ char *buf = NULL;
	char path[4200], err[512];
	size_t len;
	uint64_t v;
	int r;

	sim_lib.env_latency_us = lat && sim_parse_u64(lat, 10000000, &v) == 0 ? (long long)v : -1;
	if (dir && *dir) {
		if (sim_strlcpy(sim_lib.state_dir, dir, sizeof(sim_lib.state_dir)) < 0)
			return NVML_ERROR_DRIVER_NOT_LOADED;
		snprintf(path, sizeof(path), "%s/scenario.json", dir);
		sim_lib.gen = sim_gen_map(dir); /* unmapped by unload() */
	} else if (file && *file) {
		sim_lib.state_dir[0] = '\0';
		if (sim_strlcpy(path, file, sizeof(path)) < 0)
			return NVML_ERROR_DRIVER_NOT_LOADED;
	} else {
		return NVML_ERROR_DRIVER_NOT_LOADED;
	}
	r = sim_read_file(path, SIM_MAX_FILE, &buf, &len);
	if (r < 0) {
		say_once(path, strerror(-r));
		return NVML_ERROR_DRIVER_NOT_LOADED;
	}
	if (sim_json_load(buf, len, &sim_lib.scenario_root, err, sizeof(err)) < 0 ||
	    sim_scenario_from_json(sim_lib.scenario_root, &sim_lib.sc, err, sizeof(err)) < 0) {
		say_once(path, err);
		unload();
		return NVML_ERROR_UNKNOWN;
	}
	sim_lib.n_gpus = sim_lib.sc->n_gpus;
	sim_lib.handles =
	        calloc((size_t)sim_lib.n_gpus * (1 + SIM_MAX_MIG), sizeof(*sim_lib.handles));
	if (!sim_lib.handles) {
		unload();
		return NVML_ERROR_MEMORY;
	}
	for (unsigned int i = 0; i < sim_lib.n_gpus; i++) {
		for (int m = -1; m < SIM_MAX_MIG; m++) {
			struct nvmlDevice_st *h = &sim_lib.handles[i * (1 + SIM_MAX_MIG) + 1 + m];
			h->gpu = i;
			h->mig = m;
		}
		sim_lib.lost_left[i] = -1;
		sim_lib.lost_gen_seen[i] = 0;
		sim_lib.lost_local[i] = false;
	}
	sim_lib.dyn.latency_us = -1;
	for (unsigned int i = 0; i < SIM_MAX_GPUS; i++)
		sim_lib.dyn.gpus[i].lost_after_calls = -1;
	return NVML_SUCCESS;
}

static nvmlReturn_t do_init(enum sim_fn fn)
{
	nvmlReturn_t r;

	__atomic_fetch_add(&counts[fn], 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&sim_lib.lock);
	if (sim_lib.init_count) {
		sim_lib.init_count++;
		return sim_end(NVML_SUCCESS);
	}
	r = load();
	if (r != NVML_SUCCESS)
		return sim_end(r);
	sim_lib.init_count = 1;
	if (sim_lib.gen)
		sim_lib.gen_seen = __atomic_load_n(sim_lib.gen, __ATOMIC_ACQUIRE);
	sim_lib.restat_us = coarse_us();
	refresh();
	busy_wait_us(latency_us());
	sim_hang_point(fn, -1);
	r = sim_injected(fn, -1);
	if (r != NVML_SUCCESS) {
		sim_lib.init_count = 0;
		unload();
	}
	return sim_end(r);
}

SIM_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
	return do_init(SIM_FN_nvmlInit_v2);
}

SIM_EXPORT nvmlReturn_t nvmlInit(void)
{
	return do_init(SIM_FN_nvmlInit);
}

/* The flags change nothing here: the simulator has GPUs unless its scenario has none, and
 * attaching costs nothing. */
SIM_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	(void)flags;
	return do_init(SIM_FN_nvmlInitWithFlags);
}

SIM_EXPORT nvmlReturn_t nvmlShutdown(void)
{
	nvmlReturn_t r = sim_begin(SIM_FN_nvmlShutdown, true);

	if (r != NVML_SUCCESS && r != NVML_ERROR_UNINITIALIZED)
		return sim_end(r);
	if (r == NVML_ERROR_UNINITIALIZED)
		return sim_end(r);
	if (--sim_lib.init_count == 0) {
		unload();
		sim_dump_calls();
	}
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
	static const struct {
		nvmlReturn_t code;
		const char *text;
	} texts[] = {
	        {NVML_SUCCESS, "Success"},
	        {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
	        {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
	        {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
	        {NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
	        {NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
	        {NVML_ERROR_NOT_FOUND, "Not Found"},
	        {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
	        {NVML_ERROR_INSUFFICIENT_POWER, "Insufficient External Power"},
	        {NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
	        {NVML_ERROR_TIMEOUT, "Timeout"},
	        {NVML_ERROR_IRQ_ISSUE, "Interrupt request issue"},
	        {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
	        {NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
	        {NVML_ERROR_CORRUPTED_INFOROM, "Corrupted infoROM"},
	        {NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
	        {NVML_ERROR_RESET_REQUIRED, "GPU requires restart"},
	        {NVML_ERROR_OPERATING_SYSTEM, "The operating system has blocked the request"},
	        {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "RM has detected an NVML/RM version mismatch"},
	        {NVML_ERROR_IN_USE, "In use by another client"},
	        {NVML_ERROR_MEMORY, "Insufficient Memory"},
	        {NVML_ERROR_NO_DATA, "No data"},
	        {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument version mismatch"},
	        {NVML_ERROR_DEPRECATED, "Deprecated"},
	        {NVML_ERROR_NOT_READY, "Not ready"},
	};

	__atomic_fetch_add(&counts[SIM_FN_nvmlErrorString], 1, __ATOMIC_RELAXED);
	for (size_t i = 0; i < SIM_ELEMENTSOF(texts); i++)
		if (texts[i].code == result)
			return texts[i].text;
	return "Unknown Error";
}

static nvmlReturn_t system_string(enum sim_fn fn, char *buf, unsigned int len, bool nvml)
{
	nvmlReturn_t r = sim_begin(fn, true);

	if (r != NVML_SUCCESS)
		return sim_end(r);
	return sim_end(sim_copy_string(
	        buf, len, nvml ? sim_lib.sc->nvml_version : sim_lib.sc->driver_version));
}

SIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	return system_string(SIM_FN_nvmlSystemGetDriverVersion, version, length, false);
}

SIM_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	return system_string(SIM_FN_nvmlSystemGetNVMLVersion, version, length, true);
}

/* The CUDA version does not need nvmlInit on a real driver (it asks libcuda); the simulator
 * answers from the scenario, so without init it has nothing and says UNINITIALIZED. */
static nvmlReturn_t cuda_version(enum sim_fn fn, int *v)
{
	nvmlReturn_t r = sim_begin(fn, true);

	if (r != NVML_SUCCESS)
		return sim_end(r);
	if (!v)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*v = sim_lib.sc->cuda_driver_version;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
	return cuda_version(SIM_FN_nvmlSystemGetCudaDriverVersion_v2, cudaDriverVersion);
}

SIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
	return cuda_version(SIM_FN_nvmlSystemGetCudaDriverVersion, cudaDriverVersion);
}

static nvmlReturn_t count(enum sim_fn fn, unsigned int *n)
{
	nvmlReturn_t r = sim_begin(fn, true);

	if (r != NVML_SUCCESS)
		return sim_end(r);
	if (!n)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*n = sim_lib.n_gpus;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	return count(SIM_FN_nvmlDeviceGetCount_v2, deviceCount);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
	return count(SIM_FN_nvmlDeviceGetCount, deviceCount);
}

static nvmlReturn_t by_index(enum sim_fn fn, unsigned int index, nvmlDevice_t *device)
{
	nvmlReturn_t r;

	enter(fn);
	if (!sim_lib.init_count)
		return sim_end(NVML_ERROR_UNINITIALIZED);
	if (!device || index >= sim_lib.n_gpus)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	sim_hang_point(fn, (int)index);
	if (sim_gpu_lost(index))
		return sim_end(NVML_ERROR_GPU_IS_LOST);
	r = sim_injected(fn, (int)index);
	if (r != NVML_SUCCESS)
		return sim_end(r);
	*device = &sim_lib.handles[index * (1 + SIM_MAX_MIG)];
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	return by_index(SIM_FN_nvmlDeviceGetHandleByIndex_v2, index, device);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return by_index(SIM_FN_nvmlDeviceGetHandleByIndex, index, device);
}

/* The lookups by UUID and PCI bus id: the handle of GPU `gpu` (or its MIG device `mig`, -1 for
 * the GPU itself), with the checks by_index makes. */
static nvmlReturn_t found(enum sim_fn fn, unsigned int gpu, int mig, nvmlDevice_t *device)
{
	nvmlReturn_t r;

	sim_hang_point(fn, (int)gpu);
	if (sim_gpu_lost(gpu))
		return sim_end(NVML_ERROR_GPU_IS_LOST);
	r = sim_injected(fn, (int)gpu);
	if (r != NVML_SUCCESS)
		return sim_end(r);
	*device = &sim_lib.handles[gpu * (1 + SIM_MAX_MIG) + (unsigned int)(mig + 1)];
	return sim_end(NVML_SUCCESS);
}

/* A GPU's UUID, or a MIG device's (NVML accepts both; the match is exact, as the driver's). */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	enter(SIM_FN_nvmlDeviceGetHandleByUUID);
	if (!sim_lib.init_count)
		return sim_end(NVML_ERROR_UNINITIALIZED);
	if (!uuid || !device)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	for (unsigned int i = 0; i < sim_lib.n_gpus; i++) {
		const struct sim_gpu *g = &sim_lib.sc->gpus[i];
		if (strcmp(g->uuid, uuid) == 0)
			return found(SIM_FN_nvmlDeviceGetHandleByUUID, i, -1, device);
		for (unsigned int k = 0; k < g->mig_count; k++)
			if (strcmp(g->mig[k].uuid, uuid) == 0)
				return found(SIM_FN_nvmlDeviceGetHandleByUUID, i, (int)k, device);
	}
	return sim_end(NVML_ERROR_NOT_FOUND);
}

/* Parses the forms nvml.h lists for a PCI bus id, all hex: domain:bus:device.function,
 * domain:bus:device and bus:device.function (domain 0). The whole string must be used. */
static bool parse_bus_id(const char *s, unsigned int *dom, unsigned int *bus, unsigned int *dev)
{
	unsigned int a, b, c, d;
	int n = 0;

	if (sscanf(s, "%x:%x:%x.%x%n", &a, &b, &c, &d, &n) == 4 && s[n] == '\0') {
		*dom = a, *bus = b, *dev = c;
		return d == 0;
	}
	n = 0;
	if (sscanf(s, "%x:%x:%x%n", &a, &b, &c, &n) == 3 && s[n] == '\0') {
		*dom = a, *bus = b, *dev = c;
		return true;
	}
	n = 0;
	if (sscanf(s, "%x:%x.%x%n", &b, &c, &d, &n) == 3 && s[n] == '\0') {
		*dom = 0, *bus = b, *dev = c;
		return d == 0;
	}
	return false;
}

static nvmlReturn_t by_bus_id(enum sim_fn fn, const char *bus_id, nvmlDevice_t *device)
{
	unsigned int dom, bus, dev;

	enter(fn);
	if (!sim_lib.init_count)
		return sim_end(NVML_ERROR_UNINITIALIZED);
	if (!bus_id || !device)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!parse_bus_id(bus_id, &dom, &bus, &dev))
		return sim_end(NVML_ERROR_NOT_FOUND); /* function != 0: no GPU there */
	for (unsigned int i = 0; i < sim_lib.n_gpus; i++) {
		const struct sim_gpu *g = &sim_lib.sc->gpus[i];
		if (g->domain == dom && g->bus == bus && g->device == dev)
			return found(fn, i, -1, device);
	}
	return sim_end(NVML_ERROR_NOT_FOUND);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
	return by_bus_id(SIM_FN_nvmlDeviceGetHandleByPciBusId_v2, pciBusId, device);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
	return by_bus_id(SIM_FN_nvmlDeviceGetHandleByPciBusId, pciBusId, device);
}

/* A GPU's NVML index; a MIG device's index under its parent (what
 * nvmlDeviceGetMigDeviceHandleByIndex takes back). */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	SIM_DEVICE_CALL(nvmlDeviceGetIndex, device, SIM_MIG_OK);
	if (!index)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*index = c.m ? (unsigned int)(c.m - c.g->mig) : c.gpu;
	return sim_end(NVML_SUCCESS);
}
