/* test-sim-nvml.c: NVML semantics of the built simulator library, loaded with dlopen from
 * $GPUCTL_BUILD_DIR/sim like the product loads a driver: init rules, sizing calls,
 * NOT_SUPPORTED by generation, MIG, topology, lost GPUs, error injection, re-reading state
 * after a change, call counts, and the symbol sets of the old/minimal variants.
 * Fixture: tests/unit/fixtures/sim/mixed.json (A100, A100 in MIG mode, V100, GeForce). */
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

static void test_variants(void **state)
{
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
	assert_non_null(dlsym(min, "nvmlDeviceGetPciInfo_v2"));
	assert_null(dlsym(lib, "sim_scenario_parse"));
	dlclose(old);
	dlclose(min);
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
	        cmocka_unit_test(test_call_counts_and_latency),
	        cmocka_unit_test(test_nvswitch),
	        cmocka_unit_test(test_variants),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
