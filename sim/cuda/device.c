/* Simulated CUDA driver: initialisation, version, device enumeration and queries, error
 * strings.
 *
 * Decisions:
 * - cuInit's result is final: the real driver initialises once per process and reads
 *   CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER then (setting them later has no effect). With no
 *   device visible it returns CUDA_ERROR_NO_DEVICE (what nvitop's cuInit oracle relies on);
 *   every other call then answers NOT_INITIALIZED.
 * - Without NVSIM_STATE_DIR or NVSIM_SCENARIO the machine has no GPU: NO_DEVICE, silently. A
 *   missing or invalid scenario also gives NO_DEVICE, with one "nvsim: " line on stderr.
 * - A lost GPU (`nvsim set lost=1`) is still enumerated and answers identity queries (the
 *   driver learnt them at init); contexts and allocations on it fail (context.c).
 * - Memory: cuDeviceTotalMem is the scenario's total less its reserved memory (what CUDA can
 *   use; NVML's total includes the reservation); a MIG device has its instance's memory.
 * - The multiprocessor count is not a scenario key: it comes from the product name (public
 *   data sheets), else a plausible figure for the architecture; a MIG device gets its share
 *   (slices of 7, from the profile's "<n>g"). Clock rates are the scenario's maximum clocks. */
#include "internal.h"
#include "errors.h"
#include "../util.h"

#include <ctype.h>
#include <limits.h>

struct sim_cu sim_cu = {.lock = PTHREAD_MUTEX_INITIALIZER};

void sim_cu_begin(void)
{
	pthread_mutex_lock(&sim_cu.lock);
}

CUresult sim_cu_end(CUresult r)
{
	pthread_mutex_unlock(&sim_cu.lock);
	return r;
}

CUresult sim_cu_ready(void)
{
	return sim_cu.init_tried && sim_cu.init_result == CUDA_SUCCESS ? CUDA_SUCCESS
	                                                               : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult sim_cu_device(CUdevice dev, const struct sim_gpu **ret_g,
                       const struct sim_mig_instance **ret_m)
{
	const struct sim_gpu *g;

	if (dev < 0 || (unsigned int)dev >= sim_cu.n_devs)
		return CUDA_ERROR_INVALID_DEVICE;
	g = &sim_cu.sc->gpus[sim_cu.devs[dev].gpu];
	*ret_g = g;
	*ret_m = sim_cu.devs[dev].mig >= 0 && sim_cu.devs[dev].mig < (int)g->mig_count
	                 ? &g->mig[sim_cu.devs[dev].mig]
	                 : NULL;
	return CUDA_SUCCESS;
}

const char *sim_cu_uuid(CUdevice dev)
{
	const struct sim_gpu *g;
	const struct sim_mig_instance *m;

	if (sim_cu_device(dev, &g, &m) != CUDA_SUCCESS)
		return NULL;
	return m ? m->uuid : g->uuid;
}

static void say_once(const char *where, const char *what)
{
	static bool said;

	if (said)
		return;
	said = true;
	fprintf(stderr, "nvsim: %s: %s\n", where, what);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Merges state.json (if any) into the scenario; keeps the previous state when it is unusable. */
static void reload(const char *path)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_(json_decrefp) json_t *state = NULL, *merged = NULL;
	_cleanup_free_ struct sim_dyn *dyn = calloc(1, sizeof(*dyn));
	struct sim_scenario *sc = NULL;
	char err[512] = "";
	size_t len;
	int r;

	if (!dyn)
		return;
	r = path ? sim_read_file(path, SIM_MAX_FILE, &buf, &len) : -ENOENT;
	if (r == -ENOENT)
		state = json_object();
	else if (r < 0 || sim_json_load(buf, len, &state, err, sizeof(err)) < 0)
		return;
	if (!state || sim_state_merge(sim_cu.scenario_root, state, &merged) < 0 ||
	    sim_scenario_from_json(merged, &sc, err, sizeof(err)) < 0 ||
	    sim_dyn_from_json(state, sc->n_gpus, dyn, err, sizeof(err)) < 0) {
		sim_scenario_free(sc);
		return;
	}
	if (sim_cu.sc && sc->n_gpus != sim_cu.sc->n_gpus) {
		sim_scenario_free(sc); /* the machine cannot change shape under a running process */
		return;
	}
	sim_scenario_free(sim_cu.sc);
	free(sim_cu.dyn);
	sim_cu.sc = sc;
	sim_cu.dyn = TAKE_PTR(dyn);
}

void sim_cu_refresh(void)
{
	char path[4200];
	struct stat st;

	if (!sim_cu.state_dir[0]) {
		if (!sim_cu.sc)
			reload(NULL);
		return;
	}
	snprintf(path, sizeof(path), "%s/state.json", sim_cu.state_dir);
	if (stat(path, &st) < 0)
		memset(&st, 0, sizeof(st));
	if (sim_cu.sc && same_file(&st, &sim_cu.state_st))
		return;
	sim_cu.state_st = st;
	reload(path);
}

/* Loads the scenario document once: NO_DEVICE when there is none, UNKNOWN when invalid. */
static CUresult load(void)
{
	const char *dir = getenv("NVSIM_STATE_DIR"), *file = getenv("NVSIM_SCENARIO");
	_cleanup_free_ char *buf = NULL;
	char path[4200], err[512];
	size_t len;
	int r;

	if (sim_cu.scenario_root)
		return CUDA_SUCCESS;
	if (dir && *dir) {
		if (sim_strlcpy(sim_cu.state_dir, dir, sizeof(sim_cu.state_dir)) < 0)
			return CUDA_ERROR_NO_DEVICE;
		snprintf(path, sizeof(path), "%s/scenario.json", dir);
	} else if (file && *file) {
		if (sim_strlcpy(path, file, sizeof(path)) < 0)
			return CUDA_ERROR_NO_DEVICE;
	} else {
		return CUDA_ERROR_NO_DEVICE;
	}
	r = sim_read_file(path, SIM_MAX_FILE, &buf, &len);
	if (r < 0) {
		say_once(path, strerror(-r));
		return CUDA_ERROR_NO_DEVICE;
	}
	if (sim_json_load(buf, len, &sim_cu.scenario_root, err, sizeof(err)) < 0) {
		say_once(path, err);
		return CUDA_ERROR_UNKNOWN;
	}
	sim_cu_refresh();
	if (!sim_cu.sc) {
		struct sim_scenario *sc = NULL;
		if (sim_scenario_from_json(sim_cu.scenario_root, &sc, err, sizeof(err)) < 0)
			say_once(path, err);
		sim_scenario_free(sc);
		json_decref(sim_cu.scenario_root);
		sim_cu.scenario_root = NULL;
		return CUDA_ERROR_UNKNOWN;
	}
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuInit(unsigned int Flags)
{
	sim_cu_begin();
	if (Flags != 0)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	if (sim_cu.init_tried)
		return sim_cu_end(sim_cu.init_result);
	sim_cu.init_tried = true;
	sim_cu.init_result = load();
	if (sim_cu.init_result == CUDA_SUCCESS) {
		sim_cu.n_devs = (unsigned int)sim_cuda_visible(
		        sim_cu.sc, getenv("CUDA_VISIBLE_DEVICES"), getenv("CUDA_DEVICE_ORDER"),
		        sim_cu.devs, SIM_ELEMENTSOF(sim_cu.devs));
		if (sim_cu.n_devs == 0)
			sim_cu.init_result = CUDA_ERROR_NO_DEVICE;
	}
	return sim_cu_end(sim_cu.init_result);
}

SIM_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
	sim_cu_begin();
	if (!driverVersion)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	/* Answered without cuInit, like the real call; 12.4 when there is no machine. */
	*driverVersion = load() == CUDA_SUCCESS ? sim_cu.sc->cuda_driver_version : 12040;
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDeviceGetCount(int *count)
{
	SIM_CU_READY_OR_RETURN();
	if (!count)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	*count = (int)sim_cu.n_devs;
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	SIM_CU_READY_OR_RETURN();
	if (!device)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	if (ordinal < 0 || (unsigned int)ordinal >= sim_cu.n_devs)
		return sim_cu_end(CUDA_ERROR_INVALID_DEVICE);
	*device = ordinal;
	return sim_cu_end(CUDA_SUCCESS);
}

/* Opens a device query: lock, init check, ordinal check; declares g and m. */
#define DEVICE_QUERY(dev)                                                                          \
	const struct sim_gpu *g;                                                                   \
	const struct sim_mig_instance *m;                                                          \
	do {                                                                                       \
		CUresult r_;                                                                       \
		sim_cu_begin();                                                                    \
		if ((r_ = sim_cu_ready()) != CUDA_SUCCESS ||                                       \
		    (r_ = sim_cu_device(dev, &g, &m)) != CUDA_SUCCESS)                             \
			return sim_cu_end(r_);                                                     \
	} while (0)

/* Copies at most len-1 bytes, always terminated (the driver truncates names). */
static CUresult copy_out(char *buf, int len, const char *s)
{
	if (!buf || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	sim_strlcpy(buf, s, (size_t)len);
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	char full[160];

	DEVICE_QUERY(dev);
	if (m)
		snprintf(full, sizeof(full), "%s MIG %s", g->name, m->profile);
	else
		snprintf(full, sizeof(full), "%s", g->name);
	return sim_cu_end(copy_out(name, len, full));
}

/* The 16 bytes of "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (or MIG-). */
static CUresult uuid_bytes(CUuuid *uuid, const char *s)
{
	unsigned int n = 0;
	unsigned char out[16];

	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	for (s += 4; *s && n < 32; s++) {
		int v;
		if (*s == '-')
			continue;
		if (!isxdigit((unsigned char)*s))
			return CUDA_ERROR_UNKNOWN; /* the scenario parser validated it */
		v = isdigit((unsigned char)*s) ? *s - '0' : tolower((unsigned char)*s) - 'a' + 10;
		if (n % 2 == 0)
			out[n / 2] = (unsigned char)(v << 4);
		else
			out[n / 2] |= (unsigned char)v;
		n++;
	}
	if (n != 32)
		return CUDA_ERROR_UNKNOWN;
	memcpy(uuid->bytes, out, sizeof(out));
	return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	DEVICE_QUERY(dev);
	return sim_cu_end(uuid_bytes(uuid, m ? m->uuid : g->uuid));
}

/* The old symbol answers the same: MIG devices are only visible by MIG UUID here, and a
 * program that named a MIG device wants to find it again by that UUID. */
SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	DEVICE_QUERY(dev);
	return sim_cu_end(uuid_bytes(uuid, m ? m->uuid : g->uuid));
}

SIM_EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	char id[32];

	DEVICE_QUERY(dev);
	(void)m; /* a MIG device reports its parent's bus id */
	/* "[domain]:[bus]:[device].[function]" in hex (Driver API reference); the driver writes
	 * a 4-digit domain, like NVML's legacy busIdLegacy. */
	snprintf(id, sizeof(id), "%04X:%02X:%02X.%X", g->domain & 0xffff, g->bus, g->device,
	         g->function);
	return sim_cu_end(copy_out(pciBusId, len, id));
}

static unsigned long long total_bytes(const struct sim_gpu *g, const struct sim_mig_instance *m)
{
	if (m)
		return m->memory_mib << 20;
	return (g->memory_total_mib - g->memory_reserved_mib) << 20;
}

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	DEVICE_QUERY(dev);
	if (!bytes)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	*bytes = (size_t)total_bytes(g, m);
	return sim_cu_end(CUDA_SUCCESS);
}

/* The pre-3.2 ABI writes 32 bits; more than 4 GiB is reported as UINT_MAX. */
SIM_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	unsigned long long t;

	DEVICE_QUERY(dev);
	if (!bytes)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	t = total_bytes(g, m);
	*bytes = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
	return sim_cu_end(CUDA_SUCCESS);
}

/* SMs by product name (NVIDIA data sheets / whitepapers): first match wins. */
static int sm_count(const struct sim_gpu *g)
{
	static const struct {
		const char *needle;
		int sms;
	} names[] = {
	        {"A100", 108},  {"H100 PCIe", 114}, {"H100", 132},       {"H200", 132},
	        {"GB200", 148}, {"B200", 148},      {"V100", 80},        {"P100", 56},
	        {"A6000", 84},  {"RTX 4090", 128},  {"Quadro P1000", 5}, {"A40", 84},
	        {"L40S", 142},  {"A10", 72},        {"T4", 40},
	};
	static const int by_arch[] = {
	        [SIM_ARCH_KEPLER] = 15, [SIM_ARCH_MAXWELL] = 24, [SIM_ARCH_PASCAL] = 56,
	        [SIM_ARCH_VOLTA] = 80,  [SIM_ARCH_TURING] = 72,  [SIM_ARCH_AMPERE] = 108,
	        [SIM_ARCH_ADA] = 128,   [SIM_ARCH_HOPPER] = 132, [SIM_ARCH_BLACKWELL] = 148};

	for (size_t i = 0; i < SIM_ELEMENTSOF(names); i++)
		if (strstr(g->name, names[i].needle))
			return names[i].sms;
	if (g->arch < SIM_ELEMENTSOF(by_arch) && by_arch[g->arch])
		return by_arch[g->arch];
	return 80;
}

static int mig_sm_count(const struct sim_gpu *g, const struct sim_mig_instance *m)
{
	/* "3g.40gb" → 3 slices of 7 */
	int slices = isdigit((unsigned char)m->profile[0]) ? m->profile[0] - '0' : 1;

	if (slices < 1 || slices > 7)
		slices = 1;
	return sm_count(g) / 7 * slices;
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	int v;

	DEVICE_QUERY(dev);
	if (!pi)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
		v = 1024;
		break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
		v = 32;
		break;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
		v = g->max_clock_sm.valid ? (int)(g->max_clock_sm.v * 1000) : 1000000;
		break;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
		v = g->max_clock_mem.valid ? (int)(g->max_clock_mem.v * 1000) : 1000000;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		v = m ? mig_sm_count(g, m) : sm_count(g);
		break;
	case CU_DEVICE_ATTRIBUTE_INTEGRATED:
		v = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
		v = (int)g->compute_mode;
		break;
	case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
		v = g->has_ecc && g->ecc_enabled;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		v = (int)g->bus;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
		v = (int)g->device;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
		v = (int)g->domain;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		v = g->cc_major;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		v = g->cc_minor;
		break;
	default:
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	}
	*pi = v;
	return sim_cu_end(CUDA_SUCCESS);
}

/* Error strings need no cuInit (Driver API reference, cuGetErrorString/cuGetErrorName); an
 * unknown code is INVALID_VALUE with *pStr set to NULL. */
SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = sim_cuda_error_string((int)error);
	return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = sim_cuda_error_name((int)error);
	return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
