/* select-device: how a program uses libgpuctl to pick a GPU for itself and open it with CUDA.
 *
 *   select-device [--min-free-mem SIZE_MIB] [--mem SIZE_MIB] [--hold SECONDS]
 *
 * 1. leases one GPU with at least --min-free-mem MiB free through gpuctl_alloc, the call
 *    `gpuctl run` makes: within the allocation the program runs in (CUDA_VISIBLE_DEVICES &
 *    co.), never a GPU gpuctl health calls FAIL, one leased by someone else or running
 *    processes of no lease, from the pool the configuration gives the user; the lease is held
 *    until the program ends (a plain gpuctl_select would skip all of that: docs/library.md);
 * 2. maps the choice to the CUDA ordinal this process must use, with
 *    gpuctl_devset_cuda_ordinals and this process's own CUDA_VISIBLE_DEVICES/CUDA_DEVICE_ORDER
 *    (NVML indices and CUDA ordinals differ: FASTEST_FIRST, remapped visible lists);
 * 3. opens libcuda.so.1, checks that cuDeviceGet(ordinal) has the chosen UUID, creates a
 *    context, allocates --mem MiB (default 64), prints "chosen <UUID> ordinal <N>" and holds
 *    the memory --hold seconds (default 0) so that others can see it.
 * Exit: 0 ok, 1 a failure (one line on stderr), 2 bad usage.
 *
 * A real program includes <cuda.h>; gpuctl does not ship it, so the few CUDA driver
 * declarations used are repeated below (types and values from the CUDA Driver API reference)
 * and the library is opened with dlopen, which also lets the example run without a GPU. */
#include <gpuctl/gpuctl.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the CUDA driver API subset this program uses (a real program: #include <cuda.h>) ---- */
typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct {
	unsigned char bytes[16];
} CUuuid;

static struct {
	CUresult (*init)(unsigned int flags);
	CUresult (*device_get)(CUdevice *dev, int ordinal);
	CUresult (*device_get_uuid)(CUuuid *uuid, CUdevice dev);
	CUresult (*ctx_create)(CUcontext *ctx, unsigned int flags, CUdevice dev);
	CUresult (*mem_alloc)(CUdeviceptr *ptr, size_t bytes);
	CUresult (*mem_free)(CUdeviceptr ptr);
	CUresult (*ctx_destroy)(CUcontext ctx);
} cu;

static int fail(const char *what, const char *why)
{
	fprintf(stderr, "select-device: %s: %s\n", what, why);
	return 1;
}

static int cuda_fail(const char *call, CUresult r)
{
	fprintf(stderr, "select-device: %s: CUDA error %d\n", call, r);
	return 1;
}

static int load_cuda(void)
{
	static const char *const names[] = {"cuInit",         "cuDeviceGet",   "cuDeviceGetUuid_v2",
	                                    "cuCtxCreate_v2", "cuMemAlloc_v2", "cuMemFree_v2",
	                                    "cuCtxDestroy_v2"};
	void **slots[] = {
	        (void **)&cu.init,       (void **)&cu.device_get, (void **)&cu.device_get_uuid,
	        (void **)&cu.ctx_create, (void **)&cu.mem_alloc,  (void **)&cu.mem_free,
	        (void **)&cu.ctx_destroy};
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!h)
		return fail("libcuda.so.1", dlerror());
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		*slots[i] = dlsym(h, names[i]);
		if (!*slots[i])
			return fail("libcuda.so.1", names[i]);
	}
	return 0;
}

/* Checked whole-string decimal. */
static int parse_ull(const char *s, unsigned long long *ret)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*ret = strtoull(s, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

/* "GPU-xxxxxxxx-xxxx-..." (or MIG-) and the 16 CUuuid bytes name the same device? */
static int same_uuid(const char *uuid, const CUuuid *u)
{
	char hex[33];

	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", u->bytes[i]);
	for (const char *p = uuid + 4, *q = hex; *p; p++) {
		if (*p == '-')
			continue;
		if (!*q || (*p | 0x20) != *q++)
			return 0;
	}
	return strlen(uuid) == 4 + 32 + 4;
}

struct opts {
	unsigned long long min_free_mib, mem_mib, hold_s;
};

static int parse(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		unsigned long long *dst = NULL;
		if (strcmp(argv[i], "--min-free-mem") == 0)
			dst = &o->min_free_mib;
		else if (strcmp(argv[i], "--mem") == 0)
			dst = &o->mem_mib;
		else if (strcmp(argv[i], "--hold") == 0)
			dst = &o->hold_s;
		if (!dst || i + 1 >= argc || parse_ull(argv[i + 1], dst) < 0) {
			fprintf(stderr, "usage: select-device [--min-free-mem MIB] [--mem MIB] "
			                "[--hold SECONDS]\n");
			return 2;
		}
		i++;
	}
	return 0;
}

/* Steps 1 and 2: the leased device's UUID (copied to uuid) and its CUDA ordinal here. On
 * success *ret_alloc holds the lease (gpuctl_alloc_free ends it). */
static int choose(const struct opts *o, char *uuid, size_t len, int *ret_ordinal,
                  struct gpuctl_alloc **ret_alloc)
{
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_alloc *alloc = NULL;
	const struct gpuctl_snapshot *snap;
	const struct gpuctl_devset *set;
	const char *u;
	int ordinal = -1, r, rc = 1;

	if ((r = gpuctl_ctx_new(&ctx)) < 0)
		return fail("gpuctl", strerror(-r));
	req.mode = GPUCTL_ALLOC_LEASE;
	req.count = 1;
	req.min_free_mem = o->min_free_mib << 20;
	req.label = "select-device";
	if ((r = gpuctl_alloc(ctx, &req, &alloc)) < 0) {
		fail("allocation", gpuctl_errmsg(ctx)); /* the reason, naming every filter */
		goto out;
	}
	snap = gpuctl_alloc_snapshot(alloc);
	set = gpuctl_alloc_devices(alloc);
	u = gpuctl_devset_uuid(set, snap, 0);
	if (!u || snprintf(uuid, len, "%s", u) >= (int)len) {
		fail("allocation", "no UUID for the chosen device");
		goto out;
	}
	if ((r = gpuctl_devset_cuda_ordinals(ctx, snap, set, getenv("CUDA_VISIBLE_DEVICES"),
	                                     getenv("CUDA_DEVICE_ORDER"), &ordinal)) < 0) {
		fail("ordinal", gpuctl_errmsg(ctx));
		goto out;
	}
	if (ordinal < 0) {
		fail(uuid, "not visible to this process (CUDA_VISIBLE_DEVICES)");
		goto out;
	}
	*ret_ordinal = ordinal;
	*ret_alloc = alloc; /* the allocation outlives the context */
	alloc = NULL;
	rc = 0;
out:
	gpuctl_alloc_free(alloc);
	gpuctl_ctx_free(ctx);
	return rc;
}

/* Step 3: opens the ordinal, makes sure it is the GPU gpuctl chose, uses it. */
static int use_gpu(const struct opts *o, const char *uuid, int ordinal)
{
	CUdevice dev;
	CUuuid u;
	CUcontext cctx;
	CUdeviceptr ptr = 0;
	struct timespec hold;
	int r;

	if ((r = load_cuda()) != 0)
		return r;
	if ((r = cu.init(0)) != 0)
		return cuda_fail("cuInit", r);
	if ((r = cu.device_get(&dev, ordinal)) != 0)
		return cuda_fail("cuDeviceGet", r);
	if ((r = cu.device_get_uuid(&u, dev)) != 0)
		return cuda_fail("cuDeviceGetUuid", r);
	if (!same_uuid(uuid, &u))
		return fail(uuid, "CUDA ordinal names a different device");
	if ((r = cu.ctx_create(&cctx, 0, dev)) != 0)
		return cuda_fail("cuCtxCreate", r);
	if (o->mem_mib && (r = cu.mem_alloc(&ptr, (size_t)(o->mem_mib << 20))) != 0) {
		(void)cu.ctx_destroy(cctx);
		return cuda_fail("cuMemAlloc", r);
	}
	printf("chosen %s ordinal %d\n", uuid, ordinal);
	fflush(stdout);
	hold = (struct timespec){(time_t)o->hold_s, 0};
	while (nanosleep(&hold, &hold) < 0 && errno == EINTR)
		;
	if (ptr)
		(void)cu.mem_free(ptr);
	(void)cu.ctx_destroy(cctx);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.mem_mib = 64};
	struct gpuctl_alloc *lease = NULL;
	char uuid[96];
	int ordinal = -1, r;

	if ((r = parse(argc, argv, &o)) != 0)
		return r;
	if ((r = choose(&o, uuid, sizeof(uuid), &ordinal, &lease)) != 0)
		return r;
	/* the GPU is ours until the lease is freed (or the process ends, even by kill -9) */
	r = use_gpu(&o, uuid, ordinal);
	gpuctl_alloc_free(lease);
	return r;
}
