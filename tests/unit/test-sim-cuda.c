/* test-sim-cuda.c: the simulated CUDA driver (build/sim/libcuda.so.1), loaded with dlopen like
 * a program loads the real one: CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER against a table
 * derived by hand from the documented rules, device queries, contexts, allocation and
 * cuMemGetInfo, the procs/ registration NVML reads, a lost GPU, compute modes and
 * `cuda.alloc` fail/hang.
 *
 * cuInit reads the environment once per process, as the real driver does, so every case runs
 * in a fork()ed child that dlopens the library afresh (the parent never loads it).
 *
 * Fixture tests/unit/fixtures/sim/cuda-order.json, in PCI (= NVML) order:
 *   g0 01 cc 7.0 sm 1530 MHz  32768 MiB   GPU-aaaa0000-...
 *   g1 02 cc 8.0 sm 1410      40960       GPU-aaaa1111-...
 *   g2 03 cc 8.0 sm 1410      81920       GPU-bbbb2222-...   (512 MiB reserved, 1024 used)
 *   g3 04 cc 8.6 sm 1740      24576       GPU-cccc3333-...
 *   g4 05 cc 8.0 sm 1410      81920       GPU-dddd4444-...   (exclusive_process)
 *   g5 06 cc 8.0 sm 1600      16384       GPU-eeee5555-...
 *   g6 07 cc 8.0, MIG mode: m0 = MIG-6666aaaa (gi 1 ci 0, 2c.3g.20gb), m1 = MIG-6666bbbb
 *      (gi 2 ci 0, 1g.5gb), m2 = MIG-6666cccc (gi 1 ci 1, 1c.3g.20gb: a second CI of m0's GI)
 * Driver 570.172.08 (R570: several MIG devices per process, one compute instance per GPU
 * instance); test_visible_devices_r550 rewrites it to 550.54.15 (one MIG device per process).
 * FASTEST_FIRST (cc desc, max SM clock desc, memory desc, bus asc), MIG-mode GPU left out:
 *   g3 (8.6) | g5 (8.0, 1600 MHz) | g2, g4 (8.0, 1410, 81920: bus 03 before 05) | g1 | g0 (7.0)
 * PCI_BUS_ID: g0 g1 g2 g3 g4 g5. */
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

#include "cuda/cuda-sim-abi.h"
#include "nvml-sim-abi.h"
#include "state.h"

static char state_dir[256];
static void *lib; /* in children only */

static const char *const uuids[] = {
        "GPU-aaaa0000-0000-4000-8000-000000000000", "GPU-aaaa1111-0000-4000-8000-000000000001",
        "GPU-bbbb2222-0000-4000-8000-000000000002", "GPU-cccc3333-0000-4000-8000-000000000003",
        "GPU-dddd4444-0000-4000-8000-000000000004", "GPU-eeee5555-0000-4000-8000-000000000005",
        "GPU-ffff6666-0000-4000-8000-000000000006",
};
static const char *const migs[] = {"MIG-6666aaaa-0000-4000-8000-00000000000a",
                                   "MIG-6666bbbb-0000-4000-8000-00000000000b",
                                   "MIG-6666cccc-0000-4000-8000-00000000000c"};

/* ---- child-side helpers: no cmocka there, failures exit non-zero with a message ---- */

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)
#define CHECK_RC(call, want)                                                                       \
	do {                                                                                       \
		int got_ = (int)(call);                                                            \
		if (got_ != (int)(want)) {                                                         \
			fprintf(stderr, "%s:%d: %s = %d, want %d\n", __FILE__, __LINE__, #call,    \
			        got_, (int)(want));                                                \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)

typedef void (*any_fn)(void);

static any_fn sym_in(void *h, const char *name)
{
	void *p = dlsym(h, name);
	any_fn f;

	if (!p) {
		fprintf(stderr, "%s not exported\n", name);
		_exit(1);
	}
	memcpy(&f, &p, sizeof(f));
	return f;
}

/* A typed pointer to the library's NAME, checked against our ABI declaration. */
#define F(name) ((__typeof__(&name))sym_in(lib, #name))

static void build_path(char *out, size_t len, const char *rel)
{
	const char *b = getenv("GPUCTL_BUILD_DIR");
	snprintf(out, len, "%s/%s", b ? b : "build", rel);
}

static void load_cuda(void)
{
	char p[512];

	build_path(p, sizeof(p), "sim/libcuda.so.1");
	lib = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen %s: %s\n", p, dlerror());
		_exit(1);
	}
}

static void set_env(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

/* Runs fn(arg) in a child; the test passes when the child exits 0. */
static void in_child(void (*fn)(const void *), const void *arg)
{
	int status = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		fn(arg);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void write_state(const char *text)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/state.json", state_dir);
	assert_int_equal(sim_write_atomic(p, text, strlen(text)), 0);
	/* as nvsim and the simulated CUDA do after a write: running libraries re-read at once */
	assert_int_equal(sim_gen_bump(state_dir), 0);
}

/* "GPU-aaaa0000-0000-..." → 32 hex digits, no prefix or dashes (what CUuuid holds). */
static void uuid_hex(const char *uuid, char *out)
{
	size_t n = 0;

	for (const char *p = uuid + 4; *p; p++)
		if (*p != '-')
			out[n++] = *p;
	out[n] = '\0';
}

static void bytes_hex(const CUuuid *u, char *out)
{
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", (unsigned char)u->bytes[i]);
}

/* ---- the table ---- */

struct vis_case {
	const char *cvd;      /* CUDA_VISIBLE_DEVICES, NULL = unset */
	const char *order;    /* CUDA_DEVICE_ORDER, NULL = unset */
	const char *expected; /* labels in ordinal order: "g3 g5 m0"; "" = none (NO_DEVICE) */
	const char *rule;     /* which rule the case checks */
};

static const struct vis_case cases[] = {
        {NULL, NULL, "g3 g5 g2 g4 g1 g0", "unset: all, FASTEST_FIRST; MIG-mode GPU skipped"},
        {NULL, "FASTEST_FIRST", "g3 g5 g2 g4 g1 g0", "explicit default order"},
        {NULL, "PCI_BUS_ID", "g0 g1 g2 g3 g4 g5", "PCI bus order"},
        {NULL, "bogus", "g3 g5 g2 g4 g1 g0", "unknown order = FASTEST_FIRST"},
        {"", NULL, "", "empty: no device"},
        {"0", NULL, "g3", "index 0 is the fastest"},
        {"0", "PCI_BUS_ID", "g0", "index 0 is the lowest bus with PCI_BUS_ID"},
        {"2,1", NULL, "g2 g5", "list order kept (FASTEST_FIRST indices)"},
        {"2,1", "PCI_BUS_ID", "g2 g1", "list order kept (PCI indices)"},
        {"0,2,-1,1", NULL, "g3 g2", "documented: stops at the first invalid entry"},
        {"-1", NULL, "", "-1 first: no device"},
        {"0,0", NULL, "", "duplicate: no device at all"},
        {"1,0,1", "PCI_BUS_ID", "", "later duplicate: no device at all"},
        {"6", NULL, "", "index >= count (6 usable GPUs) is invalid"},
        {"0,6,1", NULL, "g3", "out of range stops the list"},
        {"1gpu2,2ampere", NULL, "g5 g2", "strtoul-like leading digits"},
        {" 1, 2", NULL, "g5 g2", "blanks around entries"},
        {"0-2", NULL, "g3", "no ranges: \"0-2\" reads as 0"},
        {"0,,1", NULL, "g3", "an empty entry stops the list"},
        {"GPU-aaaa0000-0000-4000-8000-000000000000", NULL, "g0", "full GPU UUID"},
        {"GPU-cccc3333-0000-4000-8000-000000000003,GPU-aaaa0000-0000-4000-8000-000000000000",
         "PCI_BUS_ID", "g3 g0", "UUIDs in list order, whatever the order variable"},
        {"GPU-bbbb", NULL, "g2", "unique UUID prefix"},
        {"gpu-bbbb", NULL, "", "the prefix must be \"GPU-\" (else an index entry, invalid)"},
        {"GPU-BBBB2222", NULL, "g2", "hex digits are case-insensitive"},
        {"GPU-aaaa", NULL, "", "ambiguous prefix is invalid"},
        {"GPU-bbbb,GPU-aaaa,GPU-cccc", NULL, "g2", "ambiguous prefix stops the list"},
        {"GPU-", NULL, "", "\"GPU-\" alone matches every GPU: ambiguous"},
        {"GPU-9999", NULL, "", "unknown UUID"},
        {"GPU-bbbb,GPU-bbbb2222-0000-4000-8000-000000000002", NULL, "",
         "the same GPU twice (prefix and full): no device"},
        {"0,GPU-aaaa0000-0000-4000-8000-000000000000", NULL, "g3",
         "index mode: a UUID entry is invalid"},
        {"GPU-cccc,0", NULL, "g3", "UUID mode: an index entry is invalid"},
        {"GPU-ffff6666-0000-4000-8000-000000000006", NULL, "",
         "a GPU in MIG mode is not a CUDA device"},
        {"MIG-6666aaaa-0000-4000-8000-00000000000a", NULL, "m0", "MIG UUID"},
        {"MIG-6666bbbb-0000-4000-8000-00000000000b,GPU-aaaa0000-0000-4000-8000-000000000000", NULL,
         "m1 g0", "MIG and GPU UUIDs together, in list order"},
        {"MIG-GPU-ffff6666-0000-4000-8000-000000000006/2/0", NULL, "m1",
         "legacy MIG-GPU-<uuid>/<gi>/<ci>"},
        {"MIG-GPU-ffff6666-0000-4000-8000-000000000006/9/0", NULL, "", "no such GPU instance"},
        {"MIG-6666", NULL, "", "MIG UUIDs are not matched by prefix"},
        /* MIG user guide, "CUDA device enumeration", R570 and later: one compute instance per
         * GPU instance, several GPU instances, whole GPUs alongside */
        {"MIG-6666aaaa-0000-4000-8000-00000000000a,MIG-6666bbbb-0000-4000-8000-00000000000b", NULL,
         "m0 m1", "R570: MIG devices of two GPU instances"},
        {"MIG-6666aaaa-0000-4000-8000-00000000000a,MIG-6666cccc-0000-4000-8000-00000000000c", NULL,
         "m0", "R570: a second compute instance of the same GPU instance is not enumerated"},
        {"MIG-6666cccc-0000-4000-8000-00000000000c,MIG-6666aaaa-0000-4000-8000-00000000000a,"
         "MIG-6666bbbb-0000-4000-8000-00000000000b",
         NULL, "m2 m1", "R570: the first listed compute instance of a GPU instance"},
};

static void label_hex(const char *label, char *out)
{
	if (label[0] == 'g')
		uuid_hex(uuids[label[1] - '0'], out);
	else
		uuid_hex(migs[label[1] - '0'], out);
}

struct enum_arg {
	const struct vis_case *c;
	int fd;
};

/* Child: cuInit under the case's environment, then the visible UUIDs, one per line. */
static void enumerate(const void *p)
{
	const struct enum_arg *a = p;
	FILE *f = fdopen(a->fd, "w");
	CUresult r;
	int n = 0;

	set_env("CUDA_VISIBLE_DEVICES", a->c->cvd);
	set_env("CUDA_DEVICE_ORDER", a->c->order);
	load_cuda();
	CHECK(f);
	r = F(cuInit)(0);
	if (r == CUDA_SUCCESS)
		CHECK_RC(F(cuDeviceGetCount)(&n), CUDA_SUCCESS);
	fprintf(f, "%d", (int)r);
	for (int i = 0; i < n; i++) {
		CUdevice d;
		CUuuid u;
		char hex[40];
		CHECK_RC(F(cuDeviceGet)(&d, i), CUDA_SUCCESS);
		CHECK_RC(F(cuDeviceGetUuid_v2)(&u, d), CUDA_SUCCESS);
		bytes_hex(&u, hex);
		fprintf(f, " %s", hex);
	}
	fclose(f);
}

static void run_table(const struct vis_case *table, size_t n_cases)
{
	for (size_t i = 0; i < n_cases; i++) {
		const struct vis_case *c = &table[i];
		char got[2048] = "", want[2048], label[8];
		struct enum_arg a = {c, -1};
		int fds[2];
		ssize_t n;
		size_t off = 0;

		/* want: init result, then the expected UUIDs' hex */
		snprintf(want, sizeof(want), "%d",
		         c->expected[0] ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE);
		for (const char *p = c->expected; *p;) {
			char hex[40];
			size_t l = strcspn(p, " ");
			snprintf(label, sizeof(label), "%.*s", (int)l, p);
			label_hex(label, hex);
			strncat(want, " ", sizeof(want) - strlen(want) - 1);
			strncat(want, hex, sizeof(want) - strlen(want) - 1);
			p += l;
			while (*p == ' ')
				p++;
		}
		assert_int_equal(pipe(fds), 0);
		a.fd = fds[1];
		in_child(enumerate, &a);
		close(fds[1]);
		while ((n = read(fds[0], got + off, sizeof(got) - 1 - off)) > 0)
			off += (size_t)n;
		got[off] = '\0';
		close(fds[0]);
		if (strcmp(got, want) != 0)
			fail_msg("CUDA_VISIBLE_DEVICES=%s%s CUDA_DEVICE_ORDER=%s (%s):\n got  %s\n "
			         "want %s",
			         c->cvd ? "\"" : "", c->cvd ? c->cvd : "(unset)",
			         c->order ? c->order : "(unset)", c->rule, got, want);
	}
}

static void test_visible_devices_table(void **state)
{
	(void)state;
	run_table(cases, sizeof(cases) / sizeof(cases[0]));
}

/* Before R570 (MIG user guide, "CUDA device enumeration": CUDA 11/R450 to CUDA 12/R5xx) a
 * process enumerates one MIG device, the first listed, and no whole GPU beside it. */
static const struct vis_case cases_r550[] = {
        {"MIG-6666aaaa-0000-4000-8000-00000000000a,MIG-6666bbbb-0000-4000-8000-00000000000b", NULL,
         "m0", "R550: only the first MIG device listed"},
        {"MIG-6666bbbb-0000-4000-8000-00000000000b,GPU-aaaa0000-0000-4000-8000-000000000000", NULL,
         "m1", "R550: no whole GPU beside a MIG device"},
        {"GPU-aaaa0000-0000-4000-8000-000000000000,MIG-6666bbbb-0000-4000-8000-00000000000b", NULL,
         "m1", "R550: a MIG device listed after a GPU still hides the GPU"},
        {"MIG-GPU-ffff6666-0000-4000-8000-000000000006/2/"
         "0,MIG-6666aaaa-0000-4000-8000-00000000000a",
         NULL, "m1", "R550: legacy name first"},
        {"GPU-aaaa0000-0000-4000-8000-000000000000,GPU-aaaa1111-0000-4000-8000-000000000001", NULL,
         "g0 g1", "R550: without a MIG device nothing changes"},
        {NULL, NULL, "g3 g5 g2 g4 g1 g0", "R550: unset: all whole GPUs"},
};

/* The fixture's scenario with its driver version replaced. */
static void set_driver(const char *from, const char *to)
{
	char p[512], *buf = NULL, *at;
	size_t len = 0;

	snprintf(p, sizeof(p), "%s/scenario.json", state_dir);
	assert_int_equal(sim_read_file(p, 1 << 20, &buf, &len), 0);
	at = strstr(buf, from);
	assert_non_null(at);
	assert_int_equal(strlen(from), strlen(to));
	memcpy(at, to, strlen(to));
	assert_int_equal(sim_write_atomic(p, buf, len), 0);
	free(buf);
}

static void test_visible_devices_r550(void **state)
{
	(void)state;
	set_driver("\"570.172.08\"", "\"550.54.15\" ");
	run_table(cases_r550, sizeof(cases_r550) / sizeof(cases_r550[0]));
	set_driver("\"550.54.15\" ", "\"570.172.08\"");
}

/* ---- device queries ---- */

static void queries(const void *p)
{
	char buf[128];
	int v, drv = 0;
	size_t total;
	unsigned int total32;
	CUdevice d;
	const char *s;

	(void)p;
	set_env("CUDA_VISIBLE_DEVICES",
	        "GPU-bbbb,MIG-6666bbbb-0000-4000-8000-00000000000b,GPU-aaaa0");
	load_cuda();
	/* before cuInit: only the version and error strings answer */
	CHECK_RC(F(cuDeviceGetCount)(&v), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_RC(F(cuDriverGetVersion)(&drv), CUDA_SUCCESS);
	CHECK(drv == 12080); /* the fixture's cuda_driver_version (R570, CUDA 12.8) */
	CHECK_RC(F(cuGetErrorName)(CUDA_ERROR_NO_DEVICE, &s), CUDA_SUCCESS);
	CHECK(strcmp(s, "CUDA_ERROR_NO_DEVICE") == 0);
	CHECK_RC(F(cuGetErrorString)((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
	CHECK(s == NULL);
	CHECK_RC(F(cuInit)(1), CUDA_ERROR_INVALID_VALUE); /* flags must be 0 */
	CHECK_RC(F(cuInit)(0), CUDA_SUCCESS);
	CHECK_RC(F(cuDeviceGetCount)(&v), CUDA_SUCCESS);
	CHECK(v == 3);
	CHECK_RC(F(cuDeviceGet)(&d, 3), CUDA_ERROR_INVALID_DEVICE);
	CHECK_RC(F(cuDeviceGet)(&d, -1), CUDA_ERROR_INVALID_DEVICE);
	CHECK_RC(F(cuDeviceGetName)(buf, sizeof(buf), 7), CUDA_ERROR_INVALID_DEVICE);

	/* ordinal 0 = g2: A100 name from defaults, bus 03, cc 8.0, 81920 - 512 reserved MiB */
	CHECK_RC(F(cuDeviceGetName)(buf, sizeof(buf), 0), CUDA_SUCCESS);
	CHECK(strcmp(buf, "NVIDIA A100-SXM4-80GB") == 0);
	CHECK_RC(F(cuDeviceGetName)(buf, 7, 0), CUDA_SUCCESS); /* truncated, terminated */
	CHECK(strcmp(buf, "NVIDIA") == 0);
	CHECK_RC(F(cuDeviceGetPCIBusId)(buf, sizeof(buf), 0), CUDA_SUCCESS);
	CHECK(strcmp(buf, "0000:03:00.0") == 0);
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0), CUDA_SUCCESS);
	CHECK(v == 3);
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0), CUDA_SUCCESS);
	CHECK(v == 0);
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0), CUDA_SUCCESS);
	CHECK(v == 0);
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
	         CUDA_SUCCESS);
	CHECK(v == 8);
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0),
	         CUDA_SUCCESS);
	CHECK(v == 0);
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0),
	         CUDA_SUCCESS);
	CHECK(v == 108); /* A100 data sheet */
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0), CUDA_SUCCESS);
	CHECK(v == 1410000); /* kHz */
	CHECK_RC(F(cuDeviceGetAttribute)(&v, (CUdevice_attribute)9999, 0),
	         CUDA_ERROR_INVALID_VALUE);
	CHECK_RC(F(cuDeviceTotalMem_v2)(&total, 0), CUDA_SUCCESS);
	CHECK(total == (81920ULL - 512) << 20);
	CHECK_RC(F(cuDeviceTotalMem)(&total32, 0), CUDA_SUCCESS);
	CHECK(total32 == 0xffffffffU); /* the 32-bit ABI saturates */

	/* ordinal 1 = m1: "<parent> MIG <profile>", parent's bus, its own memory and UUID */
	CHECK_RC(F(cuDeviceGetName)(buf, sizeof(buf), 1), CUDA_SUCCESS);
	CHECK(strcmp(buf, "NVIDIA A100-SXM4-80GB MIG 1g.5gb") == 0);
	CHECK_RC(F(cuDeviceGetPCIBusId)(buf, sizeof(buf), 1), CUDA_SUCCESS);
	CHECK(strcmp(buf, "0000:07:00.0") == 0);
	CHECK_RC(F(cuDeviceTotalMem_v2)(&total, 1), CUDA_SUCCESS);
	CHECK(total == 4864ULL << 20);
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 1),
	         CUDA_SUCCESS);
	CHECK(v == 108 / 7); /* one slice of seven */
	{
		CUuuid u1, u2;
		char hex[40], want[40];
		CHECK_RC(F(cuDeviceGetUuid)(&u1, 1), CUDA_SUCCESS);
		CHECK_RC(F(cuDeviceGetUuid_v2)(&u2, 1), CUDA_SUCCESS);
		bytes_hex(&u2, hex);
		uuid_hex(migs[1], want);
		CHECK(strcmp(hex, want) == 0);
		CHECK(memcmp(&u1, &u2, sizeof(u1)) == 0);
	}
	/* ordinal 2 = g0: V100, compute capability 7.0, 80 SMs */
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 2),
	         CUDA_SUCCESS);
	CHECK(v == 7);
	CHECK_RC(F(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 2),
	         CUDA_SUCCESS);
	CHECK(v == 80);
}

static void test_device_queries(void **state)
{
	(void)state;
	in_child(queries, NULL);
}

/* ---- contexts, memory, registration ---- */

static int registered(pid_t pid, const char *uuid, unsigned long long *ret_bytes,
                      unsigned int *ret_util)
{
	struct sim_proc *p = NULL;
	size_t n = 0;
	int found = 0;

	CHECK(sim_procs_load(state_dir, &p, &n) == 0);
	for (size_t i = 0; i < n; i++)
		if (p[i].pid == pid && strcmp(p[i].uuid, uuid) == 0) {
			*ret_bytes = p[i].used_bytes;
			*ret_util = p[i].util;
			found++;
		}
	free(p);
	return found;
}

/* NVML's view of GPU index gpu: used memory (v1) and utilization.gpu. */
static void nvml_view(unsigned int gpu, unsigned long long *used, unsigned int *util)
{
	char p[512];
	void *nv;
	nvmlDevice_t h;
	nvmlMemory_t m;
	nvmlUtilization_t u;

	build_path(p, sizeof(p), "sim/libnvidia-ml.so.1");
	nv = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	CHECK(nv);
	CHECK_RC(((__typeof__(&nvmlInit_v2))sym_in(nv, "nvmlInit_v2"))(), NVML_SUCCESS);
	CHECK_RC(((__typeof__(&nvmlDeviceGetHandleByIndex_v2))sym_in(
	                 nv, "nvmlDeviceGetHandleByIndex_v2"))(gpu, &h),
	         NVML_SUCCESS);
	CHECK_RC(((__typeof__(&nvmlDeviceGetMemoryInfo))sym_in(nv, "nvmlDeviceGetMemoryInfo"))(h,
	                                                                                       &m),
	         NVML_SUCCESS);
	CHECK_RC(((__typeof__(&nvmlDeviceGetUtilizationRates))sym_in(
	                 nv, "nvmlDeviceGetUtilizationRates"))(h, &u),
	         NVML_SUCCESS);
	CHECK_RC(((__typeof__(&nvmlShutdown))sym_in(nv, "nvmlShutdown"))(), NVML_SUCCESS);
	*used = m.used;
	*util = u.gpu;
}

static void contexts(const void *p)
{
	const unsigned long long mib = 1ULL << 20;
	unsigned long long bytes = 0, used;
	unsigned int util = 0, nv_util;
	CUcontext c = NULL, c2 = NULL, cur = NULL;
	CUdeviceptr a = 0, b = 0;
	size_t fr = 0, total = 0;
	CUdevice d = -1;

	(void)p;
	set_env("CUDA_VISIBLE_DEVICES", "2"); /* FASTEST_FIRST index 2 = g2 */
	load_cuda();
	CHECK_RC(F(cuCtxGetCurrent)(&cur), CUDA_ERROR_NOT_INITIALIZED);
	CHECK_RC(F(cuInit)(0), CUDA_SUCCESS);
	CHECK_RC(F(cuCtxGetCurrent)(&cur), CUDA_SUCCESS);
	CHECK(cur == NULL);
	CHECK_RC(F(cuMemAlloc_v2)(&a, 1), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_RC(F(cuCtxGetDevice)(&d), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_RC(F(cuCtxCreate_v2)(&c, 0, 1), CUDA_ERROR_INVALID_DEVICE);

	/* a context makes the process appear on g2 with no memory yet */
	CHECK_RC(F(cuCtxCreate_v2)(&c, 0, 0), CUDA_SUCCESS);
	CHECK_RC(F(cuCtxGetCurrent)(&cur), CUDA_SUCCESS);
	CHECK(cur == c);
	CHECK_RC(F(cuCtxGetDevice)(&d), CUDA_SUCCESS);
	CHECK(d == 0);
	CHECK(registered(getpid(), uuids[2], &bytes, &util) == 1 && bytes == 0);

	/* free = (81920 - 512 reserved) - 1024 used by the scenario, in MiB */
	CHECK_RC(F(cuMemGetInfo_v2)(&fr, &total), CUDA_SUCCESS);
	CHECK(total == (81920 - 512) * mib);
	CHECK(fr == (81920 - 512 - 1024) * mib);
	CHECK_RC(F(cuMemAlloc_v2)(&a, 0), CUDA_ERROR_INVALID_VALUE);
	CHECK_RC(F(cuMemAlloc_v2)(&a, 3000 * mib), CUDA_SUCCESS);
	CHECK_RC(F(cuMemAlloc_v2)(&b, 1000 * mib), CUDA_SUCCESS);
	CHECK(a != 0 && b != 0 && a != b);
	CHECK_RC(F(cuMemGetInfo_v2)(&fr, &total), CUDA_SUCCESS);
	CHECK(fr == (81920 - 512 - 1024 - 4000) * mib);
	CHECK(registered(getpid(), uuids[2], &bytes, &util) == 1 && bytes == 4000 * mib);
	CHECK_RC(F(nvsimCudaSetUtilization)(0, 35), CUDA_SUCCESS);
	CHECK(registered(getpid(), uuids[2], &bytes, &util) == 1 && util == 35);

	/* NVML sees the registration: used = scenario 1024 MiB + reserved 512 (v1) + 4000 */
	nvml_view(2, &used, &nv_util);
	CHECK(used == (1024 + 512 + 4000) * mib);
	CHECK(nv_util == 35);

	/* more than is free: OUT_OF_MEMORY, nothing changes */
	CHECK_RC(F(cuMemAlloc_v2)(&b, 80000 * mib), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_RC(F(cuMemFree_v2)(a), CUDA_SUCCESS);
	CHECK_RC(F(cuMemFree_v2)(a), CUDA_ERROR_INVALID_VALUE); /* double free */
	CHECK(registered(getpid(), uuids[2], &bytes, &util) == 1 && bytes == 1000 * mib);

	/* primary context: shared, reference counted */
	CHECK_RC(F(cuDevicePrimaryCtxRetain)(&c2, 0), CUDA_SUCCESS);
	CHECK_RC(F(cuDevicePrimaryCtxRetain)(&cur, 0), CUDA_SUCCESS);
	CHECK(cur == c2 && c2 != c);
	CHECK_RC(F(cuCtxDestroy_v2)(c2), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_RC(F(cuCtxSetCurrent)(c2), CUDA_SUCCESS);
	CHECK_RC(F(cuMemAlloc_v2)(&a, 10 * mib), CUDA_SUCCESS);
	CHECK(registered(getpid(), uuids[2], &bytes, &util) == 1 && bytes == 1010 * mib);
	CHECK_RC(F(cuDevicePrimaryCtxRelease)(0), CUDA_SUCCESS);
	CHECK_RC(F(cuDevicePrimaryCtxRelease_v2)(0), CUDA_SUCCESS); /* count 0: destroyed */
	CHECK_RC(F(cuDevicePrimaryCtxRelease_v2)(0), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_RC(F(cuCtxGetCurrent)(&cur), CUDA_SUCCESS);
	CHECK(cur == NULL);
	CHECK(registered(getpid(), uuids[2], &bytes, &util) == 1 && bytes == 1000 * mib);

	/* destroying the last context frees its memory and removes the registration */
	CHECK_RC(F(cuCtxSetCurrent)((CUcontext)&bytes), CUDA_ERROR_INVALID_CONTEXT);
	CHECK_RC(F(cuCtxDestroy_v2)(c), CUDA_SUCCESS);
	CHECK_RC(F(cuCtxDestroy_v2)(c), CUDA_ERROR_INVALID_CONTEXT);
	CHECK(registered(getpid(), uuids[2], &bytes, &util) == 0);
	nvml_view(2, &used, &nv_util);
	CHECK(used == (1024 + 512) * mib && nv_util == 0);

	/* a context left alive at exit: the parent checks the exit removed the registration */
	CHECK_RC(F(cuCtxCreate)(&c, 0, 0), CUDA_SUCCESS);
	CHECK_RC(F(cuMemAlloc_v2)(&a, 64 * mib), CUDA_SUCCESS);
	CHECK(registered(getpid(), uuids[2], &bytes, &util) == 1);
}

static void test_contexts_memory_registration(void **state)
{
	char p[512];
	struct stat st;
	struct sim_proc *procs = NULL;
	size_t n = 1;

	(void)state;
	in_child(contexts, NULL);
	/* the child exited with a context: its destructor removed procs/<pid>.json */
	assert_int_equal(sim_procs_load(state_dir, &procs, &n), 0);
	assert_int_equal(n, 0);
	free(procs);
	snprintf(p, sizeof(p), "%s/procs", state_dir);
	assert_int_equal(stat(p, &st), 0);
}

/* Other processes' memory counts against free memory; a killed process's stale file doesn't. */
static void other_process(const void *arg)
{
	const unsigned long long mib = 1ULL << 20;
	CUcontext c;
	size_t fr, total;
	char path[512], text[256];
	pid_t other = fork();

	(void)arg;
	CHECK(other >= 0);
	if (other == 0) {
		pause();
		_exit(0);
	}
	snprintf(path, sizeof(path), "%s/procs/%ld.json", state_dir, (long)other);
	snprintf(text, sizeof(text),
	         "{\"pid\": %ld, \"gpu\": \"%s\", \"used_memory_bytes\": %llu, \"util\": 20}",
	         (long)other, uuids[5], 2048 * mib);
	CHECK(sim_write_atomic(path, text, strlen(text)) == 0);
	set_env("CUDA_VISIBLE_DEVICES", "1"); /* FASTEST_FIRST index 1 = g5 */
	load_cuda();
	CHECK_RC(F(cuInit)(0), CUDA_SUCCESS);
	CHECK_RC(F(cuCtxCreate_v2)(&c, 0, 0), CUDA_SUCCESS);
	CHECK_RC(F(cuMemGetInfo_v2)(&fr, &total), CUDA_SUCCESS);
	CHECK(total == 16384 * mib && fr == (16384 - 2048) * mib);
	CHECK_RC(F(cuMemAlloc_v2)(&(CUdeviceptr){0}, (16384 - 2048) * mib + 1),
	         CUDA_ERROR_OUT_OF_MEMORY);
	kill(other, SIGKILL);
	CHECK(waitpid(other, NULL, 0) == other);
	CHECK_RC(F(cuMemGetInfo_v2)(&fr, &total), CUDA_SUCCESS);
	CHECK(fr == 16384 * mib);
	unlink(path);
}

static void test_other_processes(void **state)
{
	(void)state;
	in_child(other_process, NULL);
}

/* Lost GPU, compute modes and cuda.alloc=fail, in one process (state.json is re-read). */
static void failures(const void *arg)
{
	const unsigned long long mib = 1ULL << 20;
	CUcontext c[4];
	CUdeviceptr a;
	size_t fr, total;
	char path[512], text[256];
	pid_t other;

	(void)arg;
	/* PCI order: ordinal N = gN */
	set_env("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
	load_cuda();
	CHECK_RC(F(cuInit)(0), CUDA_SUCCESS);
	CHECK_RC(F(cuCtxCreate_v2)(&c[0], 0, 0), CUDA_SUCCESS);

	/* g0 falls off the bus: identity still answers, the rest is DEVICE_UNAVAILABLE */
	write_state("{\"gpus\": {\"0\": {\"lost\": true}}}");
	CHECK_RC(F(cuMemAlloc_v2)(&a, mib), CUDA_ERROR_DEVICE_UNAVAILABLE);
	CHECK_RC(F(cuMemGetInfo_v2)(&fr, &total), CUDA_ERROR_DEVICE_UNAVAILABLE);
	CHECK_RC(F(cuDeviceTotalMem_v2)(&total, 0), CUDA_SUCCESS);
	CHECK_RC(F(cuCtxCreate_v2)(&c[1], 0, 0), CUDA_ERROR_DEVICE_UNAVAILABLE);
	CHECK_RC(F(cuDevicePrimaryCtxRetain)(&c[1], 0), CUDA_ERROR_DEVICE_UNAVAILABLE);

	/* cuda.alloc=fail on g1 (default error UNKNOWN), g2 with OUT_OF_MEMORY (2) */
	write_state("{\"gpus\": {\"1\": {\"cuda\": {\"alloc\": \"fail\"}},"
	            " \"2\": {\"cuda\": {\"alloc\": \"fail\", \"error\": 2}}}}");
	CHECK_RC(F(cuMemAlloc_v2)(&a, mib), CUDA_SUCCESS); /* g0 is back */
	CHECK_RC(F(cuCtxCreate_v2)(&c[1], 0, 1), CUDA_SUCCESS);
	CHECK_RC(F(cuMemAlloc_v2)(&a, mib), CUDA_ERROR_UNKNOWN);
	CHECK_RC(F(cuCtxCreate_v2)(&c[2], 0, 2), CUDA_SUCCESS);
	CHECK_RC(F(cuMemAlloc_v2)(&a, mib), CUDA_ERROR_OUT_OF_MEMORY);
	write_state("{}");
	CHECK_RC(F(cuMemAlloc_v2)(&a, mib), CUDA_SUCCESS);

	/* compute mode prohibited (g3, set at run time) */
	write_state("{\"gpus\": {\"3\": {\"set\": {\"compute_mode\": \"prohibited\"}}}}");
	CHECK_RC(F(cuCtxCreate_v2)(&c[3], 0, 3), CUDA_ERROR_DEVICE_UNAVAILABLE);
	write_state("{}");

	/* exclusive_process (g4): refused while another live process is registered there */
	other = fork();
	CHECK(other >= 0);
	if (other == 0) {
		pause();
		_exit(0);
	}
	snprintf(path, sizeof(path), "%s/procs/%ld.json", state_dir, (long)other);
	snprintf(text, sizeof(text), "{\"pid\": %ld, \"gpu\": \"%s\", \"used_memory_bytes\": 0}",
	         (long)other, uuids[4]);
	CHECK(sim_write_atomic(path, text, strlen(text)) == 0);
	CHECK_RC(F(cuCtxCreate_v2)(&c[3], 0, 4), CUDA_ERROR_DEVICE_UNAVAILABLE);
	kill(other, SIGKILL);
	CHECK(waitpid(other, NULL, 0) == other);
	unlink(path);
	CHECK_RC(F(cuCtxCreate_v2)(&c[3], 0, 4), CUDA_SUCCESS);
}

static void test_failures(void **state)
{
	(void)state;
	in_child(failures, NULL);
	write_state("{}");
}

/* cuda.alloc=hang: cuMemAlloc does not return; the process ends only when killed. */
static void hanging(const void *arg)
{
	CUcontext c;
	CUdeviceptr a;

	(void)arg;
	set_env("CUDA_VISIBLE_DEVICES", "GPU-cccc");
	load_cuda();
	CHECK_RC(F(cuInit)(0), CUDA_SUCCESS);
	CHECK_RC(F(cuCtxCreate_v2)(&c, 0, 0), CUDA_SUCCESS);
	(void)F(cuMemAlloc_v2)(&a, 1);
	_exit(3); /* never reached while hanging */
}

static void test_alloc_hang(void **state)
{
	struct timespec t = {0, 300 * 1000 * 1000};
	int status = 0;
	pid_t pid;

	(void)state;
	write_state("{\"gpus\": {\"3\": {\"cuda\": {\"alloc\": \"hang\"}}}}");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		hanging(NULL);
		_exit(0);
	}
	nanosleep(&t, NULL);
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0); /* still hanging */
	kill(pid, SIGTERM);
	/* SIGTERM's default kills it: gone within 10 s however loaded the machine (a child that
	 * caught SIGTERM would hang on and fail here) */
	pid_t got = 0;
	for (int i = 0; i < 200 && got == 0; i++) {
		struct timespec step = {0, 50 * 1000 * 1000};
		got = waitpid(pid, &status, WNOHANG);
		if (got == 0)
			nanosleep(&step, NULL);
	}
	if (got == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	assert_int_equal(got, pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	write_state("{}");
}

int main(void)
{
	char p[512], *buf = NULL;
	const char *src = getenv("GPUCTL_SOURCE_DIR");
	size_t len;
	int r;
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_visible_devices_table),
	        cmocka_unit_test(test_visible_devices_r550),
	        cmocka_unit_test(test_device_queries),
	        cmocka_unit_test(test_contexts_memory_registration),
	        cmocka_unit_test(test_other_processes),
	        cmocka_unit_test(test_failures),
	        cmocka_unit_test(test_alloc_hang),
	};

	snprintf(state_dir, sizeof(state_dir), "/tmp/test-sim-cuda.XXXXXX");
	if (!mkdtemp(state_dir))
		return 1;
	snprintf(p, sizeof(p), "%s/procs", state_dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/tests/unit/fixtures/sim/cuda-order.json", src ? src : ".");
	if (sim_read_file(p, 1 << 20, &buf, &len) < 0)
		return 1;
	snprintf(p, sizeof(p), "%s/scenario.json", state_dir);
	if (sim_write_atomic(p, buf, len) < 0)
		return 1;
	free(buf);
	snprintf(p, sizeof(p), "%s/state.json", state_dir);
	sim_write_atomic(p, "{}", 2);
	setenv("NVSIM_STATE_DIR", state_dir, 1);
	unsetenv("NVSIM_SCENARIO");
	unsetenv("CUDA_VISIBLE_DEVICES");
	unsetenv("CUDA_DEVICE_ORDER");
	r = cmocka_run_group_tests(tests, NULL, NULL);
	sim_rm_rf(state_dir);
	return r;
}
