/* test-sim-nvml.c: NVML semantics of the built simulator library, loaded with dlopen from
 * $GPUCTL_BUILD_DIR/sim like the product loads a driver: init rules, sizing calls,
 * NOT_SUPPORTED by generation, MIG, topology, lost GPUs, error injection, re-reading state
 * after a change, call counts, and the symbol sets of the old/minimal variants.
 * Fixture: tests/unit/fixtures/sim/mixed.json (A100, A100 in MIG mode, V100, GeForce); the
 * violation, BAR1 and PCIe throughput tests read sim/scenarios/dgx-a100.json, the one scenario
 * that gives those keys, and change them with the built nvsim. */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "nvml-sim-abi.h"
#include "state.h"

static void *lib;
static char state_dir[256];

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* A typed pointer to the library's NAME, checked against our ABI declaration. */
#define F(name) ((__typeof__(&name))sym(#name))

typedef void (*any_fn)(void);

/* dlsym's object pointer as a function pointer, the way POSIX allows (memcpy, not a cast). */
static any_fn sym(const char *name)
{
	void *p = dlsym(lib, name);
	any_fn f;

	if (!p)
		fail_msg("%s not exported", name);
	memcpy(&f, &p, sizeof(f));
	return f;
}

static void path_in(char *out, size_t len, const char *rel)
{
	const char *b = getenv("GPUCTL_BUILD_DIR");
	snprintf(out, len, "%s/%s", b ? b : "build", rel);
}

static void write_file(const char *name, const char *text)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", state_dir, name);
	assert_int_equal(sim_write_atomic(p, text, strlen(text)), 0);
	/* as nvsim and the simulated CUDA do after a write: running libraries re-read at once */
	assert_int_equal(sim_gen_bump(state_dir), 0);
}

static void copy_fixture(const char *fixture)
{
	const char *src = getenv("GPUCTL_SOURCE_DIR");
	char p[512], *buf = NULL;
	size_t len;

	snprintf(p, sizeof(p), "%s/tests/unit/fixtures/sim/%s", src ? src : ".", fixture);
	assert_int_equal(sim_read_file(p, 1 << 20, &buf, &len), 0);
	write_file("scenario.json", buf);
	free(buf);
}

/* A scenario of sim/scenarios/ as the state directory's scenario (read at nvmlInit). */
static void copy_scenario(const char *name)
{
	const char *src = getenv("GPUCTL_SOURCE_DIR");
	char p[512], *buf = NULL;
	size_t len;

	snprintf(p, sizeof(p), "%s/sim/scenarios/%s.json", src ? src : ".", name);
	assert_int_equal(sim_read_file(p, 1 << 20, &buf, &len), 0);
	write_file("scenario.json", buf);
	free(buf);
}

/* Runs the built nvsim with ARGS (NULL-terminated) on the test's state directory; its exit
 * status, or -1 when it could not run. */
static int nvsim(const char *arg, ...)
{
	const char *argv[16];
	char exe[512];
	size_t n = 0;
	va_list ap;
	pid_t pid;
	int status;

	path_in(exe, sizeof(exe), "bin/nvsim");
	argv[n++] = exe;
	va_start(ap, arg);
	for (const char *a = arg; a && n < ELEMENTSOF(argv) - 1; a = va_arg(ap, const char *))
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		execv(exe, (char *const *)argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static unsigned long long monotonic_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (unsigned long long)t.tv_sec * 1000000ULL + (unsigned long long)t.tv_nsec / 1000ULL;
}

/* The Unix-epoch clock the driver stamps process utilisation samples with. */
static unsigned long long epoch_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (unsigned long long)t.tv_sec * 1000000ULL + (unsigned long long)t.tv_nsec / 1000ULL;
}

static void sleep_ms(long ms)
{
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

static int setup(void **state)
{
	char p[512];

	(void)state;
	snprintf(state_dir, sizeof(state_dir), "/tmp/test-sim-nvml.XXXXXX");
	if (!mkdtemp(state_dir))
		return -1;
	snprintf(p, sizeof(p), "%s/procs", state_dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/calls", state_dir);
	mkdir(p, 0755);
	copy_fixture("mixed.json");
	write_file("state.json", "{}");
	setenv("NVSIM_STATE_DIR", state_dir, 1);
	unsetenv("NVSIM_SCENARIO");
	unsetenv("NVSIM_LATENCY_US");
	path_in(p, sizeof(p), "sim/libnvidia-ml.so.1");
	lib = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		fprintf(stderr, "dlopen %s: %s\n", p, dlerror());
	return lib ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	sim_rm_rf(state_dir);
	return 0;
}

static nvmlDevice_t dev(unsigned int i)
{
	nvmlDevice_t d = NULL;
	assert_int_equal(F(nvmlDeviceGetHandleByIndex_v2)(i, &d), NVML_SUCCESS);
	return d;
}

static void test_init_rules(void **state)
{
	unsigned int n = 0;

	(void)state;
	assert_int_equal(F(nvmlDeviceGetCount_v2)(&n), NVML_ERROR_UNINITIALIZED);
	unsetenv("NVSIM_STATE_DIR");
	assert_int_equal(F(nvmlInit_v2)(), NVML_ERROR_DRIVER_NOT_LOADED);
	setenv("NVSIM_STATE_DIR", state_dir, 1);
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlInit)(), NVML_SUCCESS); /* reference counted */
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS);
	assert_int_equal(n, 4);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlShutdown)(), NVML_ERROR_UNINITIALIZED);
	assert_string_equal(F(nvmlErrorString)(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
}

static void test_identity(void **state)
{
	char buf[96];
	nvmlPciInfo_t pci;
	nvmlBrandType_t brand;
	nvmlDeviceArchitecture_t arch;
	int major, minor, cuda;
	nvmlDevice_t d = NULL, bogus = (nvmlDevice_t)&buf;

	(void)state;
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetHandleByIndex_v2)(4, &d), NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlDeviceGetHandleByIndex_v2)(0, NULL), NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlDeviceGetName)(bogus, buf, sizeof(buf)),
	                 NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlDeviceGetName)(dev(0), buf, sizeof(buf)), NVML_SUCCESS);
	assert_string_equal(buf, "NVIDIA A100-SXM4-80GB");
	assert_int_equal(F(nvmlDeviceGetUUID)(dev(0), buf, 10), NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(F(nvmlDeviceGetUUID)(dev(0), buf, sizeof(buf)), NVML_SUCCESS);
	assert_string_equal(buf, "GPU-00000000-0000-0000-0000-000000000000");
	assert_int_equal(F(nvmlDeviceGetPciInfo_v3)(dev(2), &pci), NVML_SUCCESS);
	assert_string_equal(pci.busId, "00000000:87:00.0");
	assert_string_equal(pci.busIdLegacy, "0000:87:00.0");
	assert_int_equal(pci.bus, 0x87);
	assert_int_equal(pci.pciDeviceId, 0x1DB110DE);
	assert_int_equal(F(nvmlDeviceGetBrand)(dev(3), &brand), NVML_SUCCESS);
	assert_int_equal(brand, NVML_BRAND_GEFORCE);
	assert_int_equal(F(nvmlDeviceGetArchitecture)(dev(2), &arch), NVML_SUCCESS);
	assert_int_equal(arch, NVML_DEVICE_ARCH_VOLTA);
	assert_int_equal(F(nvmlDeviceGetCudaComputeCapability)(dev(3), &major, &minor),
	                 NVML_SUCCESS);
	assert_int_equal(major * 10 + minor, 86);
	assert_int_equal(F(nvmlDeviceGetSerial)(dev(3), buf, sizeof(buf)),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetSerial)(dev(0), buf, sizeof(buf)), NVML_SUCCESS);
	assert_int_equal(F(nvmlSystemGetCudaDriverVersion_v2)(&cuda), NVML_SUCCESS);
	assert_int_equal(cuda, 12020);
	assert_int_equal(F(nvmlSystemGetDriverVersion)(buf, sizeof(buf)), NVML_SUCCESS);
	assert_string_equal(buf, "535.104.05");
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_memory_and_support(void **state)
{
	nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
	nvmlMemory_t m1;
	nvmlUtilization_t u;
	nvmlEnableState_t cur, pend;
	unsigned int count, a, b, c, d, t;
	unsigned long long addrs[8], ecc;

	(void)state;
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetMemoryInfo_v2)(dev(0), &m2), NVML_SUCCESS);
	assert_int_equal(m2.total, 81920ULL << 20);
	assert_int_equal(m2.reserved, 512ULL << 20);
	assert_int_equal(m2.used, 0);
	assert_int_equal(m2.free, (81920ULL - 512) << 20);
	m2.version = 1;
	assert_int_equal(F(nvmlDeviceGetMemoryInfo_v2)(dev(0), &m2),
	                 NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	assert_int_equal(F(nvmlDeviceGetMemoryInfo)(dev(0), &m1), NVML_SUCCESS);
	assert_int_equal(m1.used, 512ULL << 20);
	assert_int_equal(m1.total, m1.used + m1.free);
	/* ECC: GeForce has none. */
	assert_int_equal(F(nvmlDeviceGetEccMode)(dev(3), &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetTotalEccErrors)(dev(3), NVML_MEMORY_ERROR_TYPE_CORRECTED,
	                                                NVML_VOLATILE_ECC, &ecc),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetEccMode)(dev(0), &cur, &pend), NVML_SUCCESS);
	assert_int_equal(cur, NVML_FEATURE_ENABLED);
	/* Retired pages before Ampere, with the count-0 sizing call. */
	count = 0;
	assert_int_equal(F(nvmlDeviceGetRetiredPages)(
	                         dev(2), NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
	                         &count, NULL),
	                 NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(count, 2);
	count = 8;
	assert_int_equal(
	        F(nvmlDeviceGetRetiredPages)(
	                dev(2), NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &count, addrs),
	        NVML_SUCCESS);
	assert_int_equal(count, 1);
	assert_int_equal(F(nvmlDeviceGetRetiredPagesPendingStatus)(dev(2), &cur), NVML_SUCCESS);
	assert_int_equal(cur, NVML_FEATURE_ENABLED);
	assert_int_equal(
	        F(nvmlDeviceGetRetiredPages)(
	                dev(0), NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &count, addrs),
	        NVML_ERROR_NOT_SUPPORTED);
	/* Remapped rows from Ampere on, not on a MIG GPU with instances. */
	assert_int_equal(F(nvmlDeviceGetRemappedRows)(dev(2), &a, &b, &c, &d),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetRemappedRows)(dev(0), &a, &b, &c, &d), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetRemappedRows)(dev(1), &a, &b, &c, &d),
	                 NVML_ERROR_NOT_SUPPORTED);
	/* Utilisation: not in MIG mode. */
	assert_int_equal(F(nvmlDeviceGetUtilizationRates)(dev(1), &u), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetUtilizationRates)(dev(0), &u), NVML_SUCCESS);
	/* Optional telemetry. */
	assert_int_equal(F(nvmlDeviceGetPowerUsage)(dev(0), &t), NVML_SUCCESS);
	assert_int_equal(t, 60000);
	assert_int_equal(F(nvmlDeviceGetPowerUsage)(dev(2), &t), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetTemperatureThreshold)(dev(0), 1, &t), NVML_SUCCESS);
	assert_int_equal(t, 87);
	assert_int_equal(F(nvmlDeviceGetTemperatureThreshold)(dev(0), 3, &t),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetClockInfo)(dev(0), NVML_CLOCK_GRAPHICS, &t), NVML_SUCCESS);
	assert_int_equal(t, 210);
	assert_int_equal(F(nvmlDeviceGetMaxClockInfo)(dev(0), NVML_CLOCK_SM, &t), NVML_SUCCESS);
	assert_int_equal(t, 1410);
	assert_int_equal(F(nvmlDeviceGetNumaNodeId)(dev(0), &t), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_mig(void **state)
{
	nvmlDevice_t mig = NULL, parent = NULL;
	unsigned int cur, pend, n, is_mig, id;
	nvmlMemory_t m;
	char name[96];

	(void)state;
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetMigMode)(dev(0), &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetMigMode)(dev(1), &cur, &pend), NVML_SUCCESS);
	assert_int_equal(cur, NVML_DEVICE_MIG_ENABLE);
	assert_int_equal(F(nvmlDeviceGetMaxMigDeviceCount)(dev(1), &n), NVML_SUCCESS);
	assert_int_equal(n, 7);
	/* nvml.h: zero, and success, where MIG is not supported (or not enabled) */
	n = 99;
	assert_int_equal(F(nvmlDeviceGetMaxMigDeviceCount)(dev(0), &n), NVML_SUCCESS);
	assert_int_equal(n, 0);
	assert_int_equal(F(nvmlDeviceGetMigDeviceHandleByIndex)(dev(1), 2, &mig),
	                 NVML_ERROR_NOT_FOUND);
	assert_int_equal(F(nvmlDeviceGetMigDeviceHandleByIndex)(dev(1), 7, &mig),
	                 NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlDeviceGetMigDeviceHandleByIndex)(dev(1), 1, &mig), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceIsMigDeviceHandle)(mig, &is_mig), NVML_SUCCESS);
	assert_int_equal(is_mig, 1);
	assert_int_equal(F(nvmlDeviceGetName)(mig, name, sizeof(name)), NVML_SUCCESS);
	assert_string_equal(name, "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
	assert_int_equal(F(nvmlDeviceGetGpuInstanceId)(mig, &id), NVML_SUCCESS);
	assert_int_equal(id, 2);
	assert_int_equal(F(nvmlDeviceGetMemoryInfo)(mig, &m), NVML_SUCCESS);
	assert_int_equal(m.total, 40192ULL << 20);
	assert_int_equal(F(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(mig, &parent),
	                 NVML_SUCCESS);
	assert_ptr_equal(parent, dev(1));
	/* P2P of a MIG device; other queries on a MIG handle. */
	{
		nvmlGpuP2PStatus_t p2p;
		assert_int_equal(
		        F(nvmlDeviceGetP2PStatus)(mig, dev(0), NVML_P2P_CAPS_INDEX_READ, &p2p),
		        NVML_SUCCESS);
		assert_int_equal(p2p, NVML_P2P_STATUS_NOT_SUPPORTED);
	}
	assert_int_equal(F(nvmlDeviceGetTemperature)(mig, NVML_TEMPERATURE_GPU, &id),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_topology(void **state)
{
	nvmlGpuTopologyLevel_t level;
	nvmlGpuP2PStatus_t p2p;
	nvmlEnableState_t active;
	nvmlIntNvLinkDeviceType_t type;
	nvmlPciInfo_t pci;
	unsigned long cpus[2], nodes[1];

	(void)state;
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetTopologyCommonAncestor)(dev(0), dev(1), &level),
	                 NVML_SUCCESS);
	assert_int_equal(level, NVML_TOPOLOGY_MULTIPLE);
	assert_int_equal(F(nvmlDeviceGetTopologyCommonAncestor)(dev(0), dev(2), &level),
	                 NVML_SUCCESS);
	assert_int_equal(level, NVML_TOPOLOGY_SYSTEM);
	assert_int_equal(F(nvmlDeviceGetP2PStatus)(dev(0), dev(3), NVML_P2P_CAPS_INDEX_READ, &p2p),
	                 NVML_SUCCESS);
	assert_int_equal(p2p, NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED);
	assert_int_equal(
	        F(nvmlDeviceGetP2PStatus)(dev(0), dev(2), NVML_P2P_CAPS_INDEX_NVLINK, &p2p),
	        NVML_SUCCESS);
	assert_int_equal(p2p, NVML_P2P_STATUS_OK);
	assert_int_equal(F(nvmlDeviceGetP2PStatus)(dev(0), dev(1), NVML_P2P_CAPS_INDEX_READ, &p2p),
	                 NVML_SUCCESS);
	assert_int_equal(p2p, NVML_P2P_STATUS_OK); /* the GPU's status; its MIG devices have none */
	assert_int_equal(
	        F(nvmlDeviceGetP2PStatus)(dev(0), dev(1), NVML_P2P_CAPS_INDEX_NVLINK, &p2p),
	        NVML_SUCCESS);
	assert_int_equal(p2p, NVML_P2P_STATUS_NOT_SUPPORTED); /* GPU 1's NVLinks are down */
	/* NVLink: GPU 0 links 0-3 to GPU 1, 4-5 to GPU 2. */
	assert_int_equal(F(nvmlDeviceGetNvLinkRemotePciInfo_v2)(dev(0), 4, &pci), NVML_SUCCESS);
	assert_string_equal(pci.busId, "00000000:87:00.0");
	assert_int_equal(F(nvmlDeviceGetNvLinkRemoteDeviceType)(dev(0), 0, &type), NVML_SUCCESS);
	assert_int_equal(type, NVML_NVLINK_DEVICE_TYPE_GPU);
	assert_int_equal(F(nvmlDeviceGetNvLinkState)(dev(0), 5, &active), NVML_SUCCESS);
	assert_int_equal(active, NVML_FEATURE_ENABLED);
	assert_int_equal(F(nvmlDeviceGetNvLinkState)(dev(0), 6, &active), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetNvLinkState)(dev(0), 36, &active),
	                 NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlDeviceGetNvLinkState)(dev(1), 0, &active), NVML_SUCCESS);
	assert_int_equal(active, NVML_FEATURE_DISABLED); /* MIG mode */
	assert_int_equal(F(nvmlDeviceGetNvLinkState)(dev(0), 0, &active), NVML_SUCCESS);
	assert_int_equal(active, NVML_FEATURE_DISABLED); /* its peer, GPU 1, is in MIG mode */
	assert_int_equal(F(nvmlDeviceGetCpuAffinity)(dev(2), 2, cpus), NVML_SUCCESS);
	if (sizeof(long) == 8)
		assert_int_equal(cpus[0], 0xffff0000UL);
	assert_int_equal(F(nvmlDeviceGetMemoryAffinity)(dev(2), 1, nodes, 0), NVML_SUCCESS);
	assert_int_equal(nodes[0], 2);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
}

/* state.json edited without nvsim (no generation bump): the library's periodic stat() finds the
 * change all the same, within its 100 ms (allowing 2 s here for a loaded machine). */
static void test_state_edited_by_hand(void **state)
{
	nvmlUtilization_t u = {0};
	char p[512];
	struct timespec t0 = {0}, t = {0}, ten_ms = {0, 10 * 1000 * 1000};

	(void)state;
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	snprintf(p, sizeof(p), "%s/state.json", state_dir);
	assert_int_equal(
	        sim_write_atomic(
	                p, "{\"gpus\": {\"0\": {\"set\": {\"utilization_gpu\": 42}}}}",
	                strlen("{\"gpus\": {\"0\": {\"set\": {\"utilization_gpu\": 42}}}}")),
	        0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		assert_int_equal(F(nvmlDeviceGetUtilizationRates)(dev(0), &u), NVML_SUCCESS);
		if (u.gpu == 42)
			break;
		nanosleep(&ten_ms, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 2);
	assert_int_equal(u.gpu, 42);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_state_changes(void **state)
{
	nvmlUtilization_t u;
	nvmlMemory_t m;
	nvmlProcessInfo_t procs[4];
	nvmlProcessInfo_v1_t procs1[4];
	nvmlEnableState_t active;
	unsigned int n;
	char buf[96], text[512];
	pid_t dead;

	(void)state;
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	nvmlDevice_t d0 = dev(0);
	/* A change made while the process runs is seen by the next call. */
	write_file("state.json", "{\"gpus\": {\"0\": {\"set\": {\"utilization_gpu\": 77}, "
	                         "\"nvlink_down\": [5]}}}");
	assert_int_equal(F(nvmlDeviceGetUtilizationRates)(d0, &u), NVML_SUCCESS);
	assert_int_equal(u.gpu, 77);
	assert_int_equal(F(nvmlDeviceGetNvLinkState)(d0, 5, &active), NVML_SUCCESS);
	assert_int_equal(active, NVML_FEATURE_DISABLED);
	assert_int_equal(F(nvmlDeviceGetNvLinkState)(dev(2), 1, &active), NVML_SUCCESS);
	assert_int_equal(active, NVML_FEATURE_DISABLED); /* the same link seen from GPU 2 */
	assert_int_equal(F(nvmlDeviceGetNvLinkState)(dev(2), 0, &active), NVML_SUCCESS);
	assert_int_equal(active, NVML_FEATURE_ENABLED);
	/* Registered processes: a live one counts, a dead one is gone. */
	dead = fork();
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	snprintf(text, sizeof(text),
	         "{\"pid\": %ld, \"gpu\": \"GPU-00000000-0000-0000-0000-000000000000\", "
	         "\"used_memory_bytes\": 1073741824}",
	         (long)getpid());
	write_file("procs/live.json", text);
	snprintf(text, sizeof(text),
	         "{\"pid\": %ld, \"gpu\": \"GPU-00000000-0000-0000-0000-000000000000\", "
	         "\"used_memory_bytes\": 1073741824}",
	         (long)dead);
	write_file("procs/dead.json", text);
	n = 0;
	assert_int_equal(F(nvmlDeviceGetComputeRunningProcesses_v3)(d0, &n, NULL),
	                 NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(n, 1);
	n = 4;
	assert_int_equal(F(nvmlDeviceGetComputeRunningProcesses_v3)(d0, &n, procs), NVML_SUCCESS);
	assert_int_equal(n, 1);
	assert_int_equal(procs[0].pid, (unsigned int)getpid());
	assert_int_equal(procs[0].usedGpuMemory, 1ULL << 30);
	assert_int_equal(procs[0].gpuInstanceId, 0xFFFFFFFFU);
	n = 4;
	assert_int_equal(F(nvmlDeviceGetComputeRunningProcesses)(d0, &n, procs1), NVML_SUCCESS);
	assert_int_equal(procs1[0].usedGpuMemory, 1ULL << 30);
	assert_int_equal(F(nvmlDeviceGetMemoryInfo)(d0, &m), NVML_SUCCESS);
	assert_int_equal(m.used, (512ULL << 20) + (1ULL << 30));
	/* Lost GPU, injected errors, lost after N calls. */
	write_file("state.json",
	           "{\"gpus\": {\"2\": {\"lost\": true}, \"0\": {\"lost_after_calls\": "
	           "{\"calls\": 2, \"gen\": 1}}}, \"fail\": [{\"function\": \"nvmlDeviceGetName\", "
	           "\"error\": \"NO_PERMISSION\", \"gpu\": 3}, {\"function\": \"*\", \"error\": "
	           "\"TIMEOUT\", \"gpu\": 1}]}");
	assert_int_equal(F(nvmlDeviceGetName)(d0, buf, sizeof(buf)), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetName)(d0, buf, sizeof(buf)), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetName)(d0, buf, sizeof(buf)), NVML_ERROR_GPU_IS_LOST);
	assert_int_equal(F(nvmlDeviceGetUtilizationRates)(d0, &u), NVML_ERROR_GPU_IS_LOST);
	assert_int_equal(F(nvmlDeviceGetHandleByIndex_v2)(2, &d0), NVML_ERROR_GPU_IS_LOST);
	assert_int_equal(F(nvmlDeviceGetName)(dev(3), buf, sizeof(buf)), NVML_ERROR_NO_PERMISSION);
	assert_int_equal(F(nvmlDeviceGetUUID)(dev(3), buf, sizeof(buf)), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetUUID)(dev(1), buf, sizeof(buf)), NVML_ERROR_TIMEOUT);
	assert_int_equal(F(nvmlDeviceGetCount_v2)(&n), NVML_SUCCESS); /* "*" spares counts */
	assert_int_equal(n, 4);
	write_file("state.json", "{}");
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_call_counts_and_latency(void **state)
{
	json_t *calls = NULL;
	char buf[96], p[512];
	struct timespec a, b;
	long long us;

	(void)state;
	snprintf(p, sizeof(p), "%s/calls", state_dir);
	sim_rm_rf(p);
	mkdir(p, 0755);
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	for (int i = 0; i < 3; i++)
		assert_int_equal(F(nvmlDeviceGetName)(dev(0), buf, sizeof(buf)), NVML_SUCCESS);
	write_file("state.json", "{\"latency_us\": 2000}");
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(F(nvmlDeviceGetName)(dev(0), buf, sizeof(buf)), NVML_SUCCESS);
	clock_gettime(CLOCK_MONOTONIC, &b);
	us = (b.tv_sec - a.tv_sec) * 1000000LL + (b.tv_nsec - a.tv_nsec) / 1000;
	assert_true(us >= 4000); /* two calls: handle + name */
	write_file("state.json", "{}");
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
	assert_int_equal(sim_calls_aggregate(state_dir, &calls), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(calls, "functions"),
	                                                    "nvmlDeviceGetName")),
	                 4);
	assert_int_equal(json_integer_value(json_object_get(calls, "total")), 4 + 4 + 2);
	json_decref(calls);
}

static void test_nvswitch(void **state)
{
	nvmlIntNvLinkDeviceType_t type;
	nvmlPciInfo_t pci;

	(void)state;
	copy_fixture("nvswitch.json");
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetNvLinkRemoteDeviceType)(dev(1), 17, &type), NVML_SUCCESS);
	assert_int_equal(type, NVML_NVLINK_DEVICE_TYPE_SWITCH);
	assert_int_equal(F(nvmlDeviceGetNvLinkRemotePciInfo_v2)(dev(1), 17, &pci), NVML_SUCCESS);
	assert_string_not_equal(pci.busId, "00000000:18:00.0");
	assert_string_not_equal(pci.busId, "00000000:2A:00.0");
	assert_int_equal(F(nvmlDeviceGetNvLinkRemoteDeviceType)(dev(1), 18, &type),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
	copy_fixture("mixed.json");
}

/* The layouts NVML callers compile against (LP64). */
static void test_new_struct_sizes(void **state)
{
	(void)state;
	assert_int_equal(sizeof(nvmlViolationTime_t), 16);
	assert_int_equal(sizeof(nvmlBAR1Memory_t), 24);
	if (sizeof(long) == 8) {
		assert_int_equal(sizeof(nvmlProcessUtilizationSample_t), 32);
		assert_int_equal(offsetof(nvmlProcessUtilizationSample_t, timeStamp), 8);
		assert_int_equal(offsetof(nvmlProcessUtilizationSample_t, decUtil), 28);
	}
}

/* Two readings about 1 ms apart; asserts the share between them is exactly pct percent:
 * dViol_ns / (dRef_us * 1000) * 100 == pct, in integers so there is no rounding to forgive. */
static void expect_violation_pct(nvmlDevice_t d, nvmlPerfPolicyType_t policy,
                                 unsigned long long pct)
{
	nvmlViolationTime_t a, b;
	unsigned long long before, after, d_viol, d_ref;

	before = monotonic_us();
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(d, policy, &a), NVML_SUCCESS);
	after = monotonic_us();
	/* referenceTime is CLOCK_MONOTONIC in us, the clock the test reads too */
	assert_true(a.referenceTime >= before && a.referenceTime <= after);
	sleep_ms(1);
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(d, policy, &b), NVML_SUCCESS);
	d_ref = b.referenceTime - a.referenceTime;
	d_viol = b.violationTime - a.violationTime;
	assert_true(d_ref >= 1000);
	assert_true(b.violationTime >= a.violationTime);
	assert_int_equal(d_viol * 100 % (d_ref * 1000), 0);
	assert_int_equal(d_viol * 100 / (d_ref * 1000), pct);
	if (pct == 0)
		assert_int_equal(b.violationTime, 0);
}

static void test_violation_status(void **state)
{
	static const nvmlPerfPolicyType_t unmodelled[] = {
	        NVML_PERF_POLICY_SYNC_BOOST,       NVML_PERF_POLICY_BOARD_LIMIT,
	        NVML_PERF_POLICY_LOW_UTILIZATION,  NVML_PERF_POLICY_RELIABILITY,
	        NVML_PERF_POLICY_TOTAL_APP_CLOCKS, NVML_PERF_POLICY_TOTAL_BASE_CLOCKS,
	};
	static const unsigned int outside[] = {6, 7, 9, 12, 1000};
	nvmlViolationTime_t v;

	(void)state;
	copy_scenario("dgx-a100");
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	/* dgx-a100: GPU 3 held back by power 12% of the time, the others never. */
	expect_violation_pct(dev(3), NVML_PERF_POLICY_POWER, 12);
	expect_violation_pct(dev(3), NVML_PERF_POLICY_THERMAL, 0);
	expect_violation_pct(dev(0), NVML_PERF_POLICY_POWER, 0);
	expect_violation_pct(dev(7), NVML_PERF_POLICY_THERMAL, 0);
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(dev(3), NVML_PERF_POLICY_POWER, NULL),
	                 NVML_ERROR_INVALID_ARGUMENT);
	for (size_t i = 0; i < ELEMENTSOF(unmodelled); i++)
		assert_int_equal(F(nvmlDeviceGetViolationStatus)(dev(3), unmodelled[i], &v),
		                 NVML_ERROR_NOT_SUPPORTED);
	for (size_t i = 0; i < ELEMENTSOF(outside); i++)
		assert_int_equal(F(nvmlDeviceGetViolationStatus)(
		                         dev(3), (nvmlPerfPolicyType_t)outside[i], &v),
		                 NVML_ERROR_INVALID_ARGUMENT);
	/* nvsim set: the intervals after the change measure the new percentage exactly. */
	assert_int_equal(nvsim("set", "-i", "3", "violation.power=37", "violation.thermal=5", NULL),
	                 0);
	expect_violation_pct(dev(3), NVML_PERF_POLICY_POWER, 37);
	expect_violation_pct(dev(3), NVML_PERF_POLICY_THERMAL, 5);
	expect_violation_pct(dev(2), NVML_PERF_POLICY_POWER, 0);
	assert_int_equal(nvsim("set", "violation.power=100", NULL), 0); /* every GPU */
	expect_violation_pct(dev(6), NVML_PERF_POLICY_POWER, 100);
	assert_int_equal(nvsim("set", "-i", "3", "violation.power=101", NULL), 2);
	assert_int_equal(nvsim("set", "-i", "3", "violation.thermal=x", NULL), 2);
	expect_violation_pct(dev(3), NVML_PERF_POLICY_POWER, 100); /* refused: unchanged */
	/* -i takes decimal indices (sim/README.md): "03" is GPU 3, "0x3" names no GPU. */
	assert_int_equal(nvsim("set", "-i", "0x3", "violation.power=20", NULL), 2);
	expect_violation_pct(dev(3), NVML_PERF_POLICY_POWER, 100);
	assert_int_equal(nvsim("set", "-i", "03", "violation.power=20", NULL), 0);
	expect_violation_pct(dev(3), NVML_PERF_POLICY_POWER, 20);
	expect_violation_pct(dev(2), NVML_PERF_POLICY_POWER, 100);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
	/* A scenario without the keys: NOT_SUPPORTED; the argument checks still come first. */
	copy_fixture("mixed.json");
	write_file("state.json", "{}");
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(dev(0), NVML_PERF_POLICY_POWER, &v),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(dev(0), NVML_PERF_POLICY_THERMAL, &v),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(dev(0), NVML_PERF_POLICY_POWER, NULL),
	                 NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(dev(0), (nvmlPerfPolicyType_t)8, &v),
	                 NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_bar1_and_pcie_throughput(void **state)
{
	static const unsigned int used_mib[8] = {4, 3, 5, 6, 4, 3, 5, 4};
	static const unsigned int rx[8] = {1612, 1198, 2304, 3867, 1455, 987, 1740, 1321};
	static const unsigned int tx[8] = {1043, 876, 1517, 2951, 982, 721, 1126, 905};
	nvmlBAR1Memory_t b;
	unsigned int v;

	(void)state;
	copy_scenario("dgx-a100");
	write_file("state.json", "{}");
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	for (unsigned int i = 0; i < 8; i++) {
		assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(dev(i), &b), NVML_SUCCESS);
		assert_int_equal(b.bar1Total, 131072ULL << 20);
		assert_int_equal(b.bar1Used, (unsigned long long)used_mib[i] << 20);
		assert_int_equal(b.bar1Free, b.bar1Total - b.bar1Used);
		assert_int_equal(
		        F(nvmlDeviceGetPcieThroughput)(dev(i), NVML_PCIE_UTIL_RX_BYTES, &v),
		        NVML_SUCCESS);
		assert_int_equal(v, rx[i]);
		assert_int_equal(
		        F(nvmlDeviceGetPcieThroughput)(dev(i), NVML_PCIE_UTIL_TX_BYTES, &v),
		        NVML_SUCCESS);
		assert_int_equal(v, tx[i]);
	}
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(dev(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), NVML_PCIE_UTIL_RX_BYTES, NULL),
	                 NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), (nvmlPcieUtilCounter_t)2, &v),
	                 NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), (nvmlPcieUtilCounter_t)-1, &v),
	                 NVML_ERROR_INVALID_ARGUMENT);
	/* nvsim set: sizes as memory.used (MiB, rounded up), KB/s as plain integers. */
	assert_int_equal(nvsim("set", "-i", "1", "bar1.used=1GiB", "pcie.rx=250000",
	                       "pcie.tx=4294967295", NULL),
	                 0);
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(dev(1), &b), NVML_SUCCESS);
	assert_int_equal(b.bar1Used, 1ULL << 30);
	assert_int_equal(b.bar1Free, (131072ULL << 20) - (1ULL << 30));
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(1), NVML_PCIE_UTIL_RX_BYTES, &v),
	                 NVML_SUCCESS);
	assert_int_equal(v, 250000);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(1), NVML_PCIE_UTIL_TX_BYTES, &v),
	                 NVML_SUCCESS);
	assert_int_equal(v, 4294967295U);
	assert_int_equal(nvsim("set", "-i", "2", "bar1.used=1B", NULL), 0);
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(dev(2), &b), NVML_SUCCESS);
	assert_int_equal(b.bar1Used, 1ULL << 20);
	assert_int_equal(nvsim("set", "-i", "2", "bar1.used=128GiB", NULL), 0); /* all of it */
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(dev(2), &b), NVML_SUCCESS);
	assert_int_equal(b.bar1Free, 0);
	/* Refused, and nothing on the line applied: more than the aperture, bad numbers. */
	assert_int_equal(nvsim("set", "-i", "1", "pcie.rx=7", "bar1.used=131073", NULL), 2);
	assert_int_equal(nvsim("set", "-i", "1", "pcie.tx=4294967296", NULL), 2);
	assert_int_equal(nvsim("set", "-i", "1", "pcie.rx=-1", NULL), 2);
	assert_int_equal(nvsim("set", "-i", "1", "bar1.used=lots", NULL), 2);
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(dev(1), &b), NVML_SUCCESS);
	assert_int_equal(b.bar1Used, 1ULL << 30);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(1), NVML_PCIE_UTIL_RX_BYTES, &v),
	                 NVML_SUCCESS);
	assert_int_equal(v, 250000);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
	/* Without the scenario keys: NOT_SUPPORTED, and nvsim cannot half-create them. */
	copy_fixture("mixed.json");
	write_file("state.json", "{}");
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(dev(0), &b), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), NVML_PCIE_UTIL_TX_BYTES, &v),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), (nvmlPcieUtilCounter_t)2, &v),
	                 NVML_ERROR_INVALID_ARGUMENT);
	assert_int_equal(nvsim("set", "-i", "0", "bar1.used=4", NULL), 2); /* no bar1_total_mib */
	/* A first pcie.rx or pcie.tx starts the other direction at 0. */
	assert_int_equal(nvsim("set", "-i", "0", "pcie.rx=5", NULL), 0);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), NVML_PCIE_UTIL_RX_BYTES, &v),
	                 NVML_SUCCESS);
	assert_int_equal(v, 5);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), NVML_PCIE_UTIL_TX_BYTES, &v),
	                 NVML_SUCCESS);
	assert_int_equal(v, 0);
	assert_int_equal(nvsim("set", "-i", "0", "pcie.tx=6", NULL), 0);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), NVML_PCIE_UTIL_TX_BYTES, &v),
	                 NVML_SUCCESS);
	assert_int_equal(v, 6);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), NVML_PCIE_UTIL_RX_BYTES, &v),
	                 NVML_SUCCESS);
	assert_int_equal(v, 5); /* kept */
	assert_int_equal(nvsim("set", "-i", "3", "pcie.tx=7", "pcie.rx=8", NULL), 0);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(3), NVML_PCIE_UTIL_RX_BYTES, &v),
	                 NVML_SUCCESS);
	assert_int_equal(v, 8);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(2), NVML_PCIE_UTIL_RX_BYTES, &v),
	                 NVML_ERROR_NOT_SUPPORTED); /* -i left GPU 2 alone */
	write_file("state.json", "{}");
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
}

static void test_process_utilization(void **state)
{
	nvmlProcessUtilizationSample_t s[4];
	unsigned long long before, after, stamp;
	unsigned int n;
	char text[512], pid_s[32];
	pid_t parent, child, dead;
	nvmlDevice_t mig = NULL;

	(void)state;
	write_file("state.json", "{}");
	snprintf(text, sizeof(text), "%s/procs", state_dir);
	sim_rm_rf(text); /* earlier tests' registrations */
	mkdir(text, 0755);
	parent = getpid();
	child = fork(); /* a second live process, registered through nvsim */
	assert_true(child >= 0);
	if (child == 0) {
		/* lives until killed, or until this test program is gone (should an assert end
		 * the test before the kill, it must not hold ctest's output pipe open) */
		for (int i = 0; i < 1200 && getppid() == parent; i++)
			sleep_ms(50);
		_exit(0);
	}
	dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	snprintf(text, sizeof(text),
	         "{\"pid\": %ld, \"gpu\": \"GPU-00000000-0000-0000-0000-000000000000\", "
	         "\"used_memory_bytes\": 1048576, \"util\": 30}",
	         (long)getpid());
	write_file("procs/self.json", text);
	snprintf(text, sizeof(text),
	         "{\"pid\": %ld, \"gpu\": \"GPU-00000000-0000-0000-0000-000000000000\", "
	         "\"used_memory_bytes\": 1048576, \"util\": 90}",
	         (long)dead);
	write_file("procs/dead.json", text);
	snprintf(pid_s, sizeof(pid_s), "%ld", (long)child);
	assert_int_equal(nvsim("proc", "add", "--pid", pid_s, "-i", "0", "--util", "45", NULL), 0);
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	/* Sizing: a NULL buffer or a short count gives the number needed. */
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), s, NULL, 0),
	                 NVML_ERROR_INVALID_ARGUMENT);
	n = 0;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), NULL, &n, 0),
	                 NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(n, 2);
	n = 4;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), NULL, &n, 0),
	                 NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(n, 2);
	n = 1;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), s, &n, 0),
	                 NVML_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(n, 2);
	/* One sample per live process: smUtil from the registration, the rest 0. */
	memset(s, 0xff, sizeof(s));
	n = 4;
	before = epoch_us();
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), s, &n, 0), NVML_SUCCESS);
	after = epoch_us();
	assert_int_equal(n, 2);
	for (unsigned int i = 0; i < n; i++) {
		if (s[i].pid == (unsigned int)getpid())
			assert_int_equal(s[i].smUtil, 30);
		else if (s[i].pid == (unsigned int)child)
			assert_int_equal(s[i].smUtil, 45);
		else
			fail_msg("unexpected pid %u", s[i].pid);
		assert_true(s[i].timeStamp >= before && s[i].timeStamp <= after);
		assert_int_equal(s[i].memUtil, 0);
		assert_int_equal(s[i].encUtil, 0);
		assert_int_equal(s[i].decUtil, 0);
	}
	assert_int_not_equal(s[0].pid, s[1].pid);
	stamp = s[0].timeStamp;
	/* Only samples newer than lastSeenTimeStamp. */
	n = 4;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), s, &n, after + 10000000ULL),
	                 NVML_ERROR_NOT_FOUND);
	n = 4;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), s, &n, ~0ULL),
	                 NVML_ERROR_NOT_FOUND);
	n = 0;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), NULL, &n, ~0ULL),
	                 NVML_ERROR_NOT_FOUND);
	sleep_ms(1);
	n = 4;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), s, &n, stamp), NVML_SUCCESS);
	assert_int_equal(n, 2);
	assert_true(s[0].timeStamp > stamp);
	/* A process gone is no sample; a GPU without processes has none. */
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	n = 4;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(0), s, &n, 0), NVML_SUCCESS);
	assert_int_equal(n, 1);
	assert_int_equal(s[0].pid, (unsigned int)getpid());
	n = 4;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(2), s, &n, 0),
	                 NVML_ERROR_NOT_FOUND);
	/* MIG: neither the GPU in MIG mode nor its MIG devices. */
	n = 4;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(1), s, &n, 0),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetMigDeviceHandleByIndex)(dev(1), 0, &mig), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(mig, s, &n, 0),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
	snprintf(text, sizeof(text), "%s/procs", state_dir);
	sim_rm_rf(text);
	mkdir(text, 0755);
}

/* The new calls go through the shared prologue: lost GPUs, injected errors, lost after N
 * calls, and call counting. */
static void test_new_calls_machinery(void **state)
{
	nvmlViolationTime_t v;
	nvmlBAR1Memory_t b;
	nvmlProcessUtilizationSample_t s[2];
	json_t *calls = NULL, *fns;
	unsigned int u, n;
	char p[512];

	(void)state;
	snprintf(p, sizeof(p), "%s/calls", state_dir);
	sim_rm_rf(p);
	mkdir(p, 0755);
	copy_scenario("dgx-a100");
	write_file("state.json", "{}");
	assert_int_equal(F(nvmlInit_v2)(), NVML_SUCCESS);
	nvmlDevice_t d2 = dev(2), d5 = dev(5); /* taken before the GPUs go */
	write_file("state.json", "{\"gpus\": {\"2\": {\"lost\": true}, \"5\": "
	                         "{\"lost_after_calls\": {\"calls\": 1, \"gen\": 1}}}, "
	                         "\"fail\": [{\"function\": \"nvmlDeviceGetPcieThroughput\", "
	                         "\"error\": \"NO_PERMISSION\", \"gpu\": 0}, "
	                         "{\"function\": \"*\", \"error\": \"TIMEOUT\", \"gpu\": 1}]}");
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(d2, NVML_PERF_POLICY_POWER, &v),
	                 NVML_ERROR_GPU_IS_LOST);
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(d2, &b), NVML_ERROR_GPU_IS_LOST);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(d2, NVML_PCIE_UTIL_RX_BYTES, &u),
	                 NVML_ERROR_GPU_IS_LOST);
	n = 2;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(d2, s, &n, 0), NVML_ERROR_GPU_IS_LOST);
	/* Injection: by name on GPU 0 only, "*" on GPU 1. */
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(0), NVML_PCIE_UTIL_RX_BYTES, &u),
	                 NVML_ERROR_NO_PERMISSION);
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(dev(0), &b), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetPcieThroughput)(dev(3), NVML_PCIE_UTIL_RX_BYTES, &u),
	                 NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(dev(1), NVML_PERF_POLICY_POWER, &v),
	                 NVML_ERROR_TIMEOUT);
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(dev(1), &b), NVML_ERROR_TIMEOUT);
	n = 2;
	assert_int_equal(F(nvmlDeviceGetProcessUtilization)(dev(1), s, &n, 0), NVML_ERROR_TIMEOUT);
	/* GPU 5 is lost after one more call with its handle. */
	assert_int_equal(F(nvmlDeviceGetBAR1MemoryInfo)(d5, &b), NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetViolationStatus)(d5, NVML_PERF_POLICY_THERMAL, &v),
	                 NVML_ERROR_GPU_IS_LOST);
	write_file("state.json", "{}");
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
	/* Every call counted, whatever it returned. */
	assert_int_equal(sim_calls_aggregate(state_dir, &calls), 0);
	fns = json_object_get(calls, "functions");
	assert_int_equal(json_integer_value(json_object_get(fns, "nvmlDeviceGetViolationStatus")),
	                 3);
	assert_int_equal(json_integer_value(json_object_get(fns, "nvmlDeviceGetBAR1MemoryInfo")),
	                 4);
	assert_int_equal(json_integer_value(json_object_get(fns, "nvmlDeviceGetPcieThroughput")),
	                 3);
	assert_int_equal(
	        json_integer_value(json_object_get(fns, "nvmlDeviceGetProcessUtilization")), 2);
	json_decref(calls);
	copy_fixture("mixed.json");
}

static void test_variants(void **state)
{
	static const char *const newer[] = {
	        "nvmlDeviceGetViolationStatus", "nvmlDeviceGetBAR1MemoryInfo",
	        "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetProcessUtilization"};
	char p[512];
	void *old, *min;

	(void)state;
	path_in(p, sizeof(p), "sim/old/libnvidia-ml.so.1");
	old = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(old);
	assert_null(dlsym(old, "nvmlDeviceGetRemappedRows"));
	assert_null(dlsym(old, "nvmlDeviceGetComputeRunningProcesses_v3"));
	assert_null(dlsym(old, "nvmlDeviceGetCurrentClocksEventReasons"));
	assert_non_null(dlsym(old, "nvmlDeviceGetCurrentClocksThrottleReasons"));
	assert_non_null(dlsym(old, "nvmlDeviceGetComputeRunningProcesses"));
	assert_null(dlsym(old, "sim_scenario_parse"));
	path_in(p, sizeof(p), "sim/minimal/libnvidia-ml.so.1");
	min = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(min);
	assert_null(dlsym(min, "nvmlDeviceGetBrand"));
	for (size_t i = 0; i < ELEMENTSOF(newer); i++) {
		assert_non_null(dlsym(lib, newer[i]));
		assert_null(dlsym(old, newer[i]));
		assert_null(dlsym(min, newer[i]));
	}
	assert_non_null(dlsym(min, "nvmlDeviceGetPciInfo_v2"));
	assert_null(dlsym(lib, "sim_scenario_parse"));
	dlclose(old);
	dlclose(min);
}

/* What NVML clients other than gpuctl call (nvtop, gpustat, pynvml, nvitop), against the fixture's
 * values: lookups by UUID and bus id, indices, the first PCI layout, graphics and MPS lists,
 * fans, P-state, power management, display, driver model, NVLink version. */
static void test_client_calls(void **state)
{
	nvmlDevice_t d = NULL, mig = NULL;
	nvmlPciInfo_v1_t pci;
	nvmlEnableState_t on;
	unsigned int v, lo, hi;

	(void)state;
	copy_fixture("mixed.json");
	write_file("state.json", "{}");
	assert_int_equal(
	        F(nvmlDeviceGetHandleByUUID)("GPU-22222222-2222-2222-2222-222222222222", &d),
	        NVML_ERROR_UNINITIALIZED);
	assert_int_equal(F(nvmlInitWithFlags)(0), NVML_SUCCESS);
	assert_int_equal(
	        F(nvmlDeviceGetHandleByUUID)("GPU-22222222-2222-2222-2222-222222222222", &d),
	        NVML_SUCCESS);
	assert_ptr_equal(d, dev(2));
	assert_int_equal(
	        F(nvmlDeviceGetHandleByUUID)("MIG-bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb", &d),
	        NVML_SUCCESS);
	assert_int_equal(F(nvmlDeviceGetMigDeviceHandleByIndex)(dev(1), 1, &mig), NVML_SUCCESS);
	assert_ptr_equal(d, mig);
	assert_int_equal(F(nvmlDeviceGetIndex)(mig, &v), NVML_SUCCESS);
	assert_int_equal(v, 1);
	assert_int_equal(F(nvmlDeviceGetHandleByUUID)("GPU-2222", &d), NVML_ERROR_NOT_FOUND);
	assert_int_equal(F(nvmlDeviceGetHandleByUUID)(NULL, &d), NVML_ERROR_INVALID_ARGUMENT);
	/* the three bus id forms of nvml.h, any case, any digit count */
	const char *forms[] = {"00000000:87:00.0", "0000:87:00.0", "87:00.0", "0:87:0"};
	for (size_t i = 0; i < ELEMENTSOF(forms); i++) {
		d = NULL;
		assert_int_equal(F(nvmlDeviceGetHandleByPciBusId_v2)(forms[i], &d), NVML_SUCCESS);
		assert_ptr_equal(d, dev(2));
	}
	assert_int_equal(F(nvmlDeviceGetHandleByPciBusId)("0000:c1:00.0", &d), NVML_SUCCESS);
	assert_ptr_equal(d, dev(3));
	assert_int_equal(F(nvmlDeviceGetHandleByPciBusId_v2)("00000000:88:00.0", &d),
	                 NVML_ERROR_NOT_FOUND);
	for (unsigned int i = 0; i < 4; i++) {
		assert_int_equal(F(nvmlDeviceGetIndex)(dev(i), &v), NVML_SUCCESS);
		assert_int_equal(v, i);
	}
	/* the first PCI layout: 52 bytes, 16-byte bus id with a 4-digit domain */
	assert_int_equal(sizeof(nvmlPciInfo_v1_t), 52);
	assert_int_equal(F(nvmlDeviceGetPciInfo)(dev(2), &pci), NVML_SUCCESS);
	assert_string_equal(pci.busId, "0000:87:00.0");
	assert_int_equal(pci.bus, 0x87);
	assert_int_equal(pci.pciDeviceId, 0x1DB110DE);
	/* no graphics or MPS clients: an empty list, SUCCESS even for the count-0 sizing call */
	v = 0;
	assert_int_equal(F(nvmlDeviceGetGraphicsRunningProcesses_v3)(dev(0), &v, NULL),
	                 NVML_SUCCESS);
	assert_int_equal(v, 0);
	v = 0;
	assert_int_equal(F(nvmlDeviceGetMPSComputeRunningProcesses_v3)(mig, &v, NULL),
	                 NVML_SUCCESS);
	assert_int_equal(v, 0);
	/* fans: none on the A100, one at 30 % on the GeForce */
	assert_int_equal(F(nvmlDeviceGetFanSpeed)(dev(0), &v), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetNumFans)(dev(0), &v), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetFanSpeed)(dev(3), &v), NVML_SUCCESS);
	assert_int_equal(v, 30);
	assert_int_equal(F(nvmlDeviceGetNumFans)(dev(3), &v), NVML_SUCCESS);
	assert_int_equal(v, 1);
	assert_int_equal(F(nvmlDeviceGetFanSpeed_v2)(dev(3), 0, &v), NVML_SUCCESS);
	assert_int_equal(v, 30);
	assert_int_equal(F(nvmlDeviceGetFanSpeed_v2)(dev(3), 1, &v), NVML_ERROR_INVALID_ARGUMENT);
	/* P-state: P0 by default, P8 where the fixture says */
	assert_int_equal(F(nvmlDeviceGetPerformanceState)(dev(0), &v), NVML_SUCCESS);
	assert_int_equal(v, 0);
	assert_int_equal(F(nvmlDeviceGetPerformanceState)(dev(3), &v), NVML_SUCCESS);
	assert_int_equal(v, 8);
	/* power management */
	assert_int_equal(F(nvmlDeviceGetPowerManagementLimit)(dev(0), &v), NVML_SUCCESS);
	assert_int_equal(v, 400000);
	assert_int_equal(F(nvmlDeviceGetPowerManagementDefaultLimit)(dev(0), &v), NVML_SUCCESS);
	assert_int_equal(v, 400000);
	assert_int_equal(F(nvmlDeviceGetPowerManagementLimitConstraints)(dev(0), &lo, &hi),
	                 NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlDeviceGetPowerManagementLimit)(dev(3), &v), NVML_SUCCESS);
	assert_int_equal(v, 350000);
	assert_int_equal(F(nvmlDeviceGetPowerManagementDefaultLimit)(dev(3), &v), NVML_SUCCESS);
	assert_int_equal(v, 320000);
	assert_int_equal(F(nvmlDeviceGetPowerManagementLimitConstraints)(dev(3), &lo, &hi),
	                 NVML_SUCCESS);
	assert_int_equal(lo, 100000);
	assert_int_equal(hi, 400000);
	assert_int_equal(F(nvmlDeviceGetPowerManagementMode)(dev(3), &on), NVML_SUCCESS);
	assert_int_equal(on, NVML_FEATURE_ENABLED);
	/* no displays; the driver model is Windows-only */
	assert_int_equal(F(nvmlDeviceGetDisplayMode)(dev(3), &on), NVML_SUCCESS);
	assert_int_equal(on, NVML_FEATURE_DISABLED);
	assert_int_equal(F(nvmlDeviceGetDisplayActive)(dev(3), &on), NVML_SUCCESS);
	assert_int_equal(on, NVML_FEATURE_DISABLED);
	assert_int_equal(F(nvmlDeviceGetDriverModel)(dev(0), &lo, &hi), NVML_ERROR_NOT_SUPPORTED);
	/* NVLink generations: 3.0 on Ampere, 2.0 on Volta; no link 20 on either */
	assert_int_equal(F(nvmlDeviceGetNvLinkVersion)(dev(0), 0, &v), NVML_SUCCESS);
	assert_int_equal(v, NVML_NVLINK_VERSION_3_0);
	assert_int_equal(F(nvmlDeviceGetNvLinkVersion)(dev(2), 0, &v), NVML_SUCCESS);
	assert_int_equal(v, NVML_NVLINK_VERSION_2_0);
	assert_int_equal(F(nvmlDeviceGetNvLinkVersion)(dev(0), 20, &v), NVML_ERROR_NOT_SUPPORTED);
	assert_int_equal(F(nvmlShutdown)(), NVML_SUCCESS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_init_rules),
	        cmocka_unit_test(test_identity),
	        cmocka_unit_test(test_memory_and_support),
	        cmocka_unit_test(test_mig),
	        cmocka_unit_test(test_topology),
	        cmocka_unit_test(test_state_changes),
	        cmocka_unit_test(test_state_edited_by_hand),
	        cmocka_unit_test(test_call_counts_and_latency),
	        cmocka_unit_test(test_nvswitch),
	        cmocka_unit_test(test_new_struct_sizes),
	        cmocka_unit_test(test_violation_status),
	        cmocka_unit_test(test_bar1_and_pcie_throughput),
	        cmocka_unit_test(test_process_utilization),
	        cmocka_unit_test(test_client_calls),
	        cmocka_unit_test(test_new_calls_machinery),
	        cmocka_unit_test(test_variants),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
