/* nvsim-load: a GPU workload for tests. Through the CUDA driver API (dlopen("libcuda.so.1"),
 * so under `nvsim exec` the simulated one) it finds the devices its environment shows, creates
 * a context on each, allocates --mem on each, reports --util, waits --seconds (default: until
 * SIGTERM/SIGINT), frees, and appends one JSON line saying where it ran to a ledger that tests
 * read (format: sim/README.md).
 *
 * Decisions:
 * - Only real CUDA calls are used, so the same binary runs on a real driver; the utilisation
 *   report is the simulator's extension nvsimCudaSetUtilization, used when present.
 * - A device's UUID prefix ("GPU-" or "MIG-") is not part of CUuuid: a device whose name
 *   contains " MIG " (how the driver names MIG devices) gets "MIG-".
 * - The ledger line is appended with O_APPEND and one write(2) under an flock, so concurrent
 *   runs never interleave; it is written also when no device was visible or a call failed
 *   (then with "error"), so a test sees every run.
 * - Exit: 0; 1 when a CUDA call failed, or with --fail-if-none when no device is visible;
 *   2 for bad usage. */
#include "args.h"
#include "cuda/cuda-sim-abi.h"
#include "util.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/file.h>
#include <time.h>

#define MAX_DEVS 1024

/* The driver entry points, typed from our declarations so a mismatch fails to compile. */
static struct {
	__typeof__(cuInit) *init;
	__typeof__(cuDeviceGetCount) *get_count;
	__typeof__(cuDeviceGet) *get;
	__typeof__(cuDeviceGetUuid_v2) *get_uuid;
	__typeof__(cuDeviceGetName) *get_name;
	__typeof__(cuDeviceGetPCIBusId) *get_bus_id;
	__typeof__(cuDevicePrimaryCtxRetain) *retain;
	__typeof__(cuDevicePrimaryCtxRelease_v2) *release;
	__typeof__(cuCtxSetCurrent) *set_current;
	__typeof__(cuMemAlloc_v2) *alloc;
	__typeof__(cuMemFree_v2) *free;
	__typeof__(cuGetErrorName) *error_name;
	__typeof__(nvsimCudaSetUtilization) *set_util; /* NULL on a real driver */
} cu;

struct device {
	int ordinal;
	char uuid[64];
	char bus_id[32];
	CUdeviceptr ptr; /* 0 = nothing allocated */
	bool retained;
};

struct options {
	unsigned long long mem;
	unsigned int util;
	double seconds; /* < 0: until a signal */
	const char *ledger;
	bool fail_if_none;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("nvsim-load: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nusage: nvsim-load [--mem SIZE] [--util PCT] [--seconds S] [--ledger FILE] "
	      "[--fail-if-none]\n",
	      stderr);
	return 2;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t u;

		if (strcmp(a, "--fail-if-none") == 0) {
			o->fail_if_none = true;
			continue;
		}
		if (strcmp(a, "--help") == 0) {
			puts("usage: nvsim-load [--mem SIZE] [--util PCT] [--seconds S] "
			     "[--ledger FILE] [--fail-if-none]");
			exit(0);
		}
		if (!v)
			return usage_error("%s: needs a value", a);
		i++;
		if (strcmp(a, "--mem") == 0) {
			if (nvsim_parse_size(v, &o->mem) < 0)
				return usage_error("--mem \"%s\": expected a size such as 512MiB",
				                   v);
		} else if (strcmp(a, "--util") == 0) {
			if (sim_parse_u64(v, 100, &u) < 0)
				return usage_error("--util \"%s\": expected a percentage 0..100",
				                   v);
			o->util = (unsigned int)u;
		} else if (strcmp(a, "--seconds") == 0) {
			char *end;
			errno = 0;
			o->seconds = strtod(v, &end);
			if (errno || end == v || *end || !(o->seconds >= 0) || o->seconds > 1e7)
				return usage_error("--seconds \"%s\": expected seconds >= 0", v);
		} else if (strcmp(a, "--ledger") == 0) {
			o->ledger = v;
		} else {
			return usage_error("unknown option \"%s\"", a);
		}
	}
	return 0;
}

static const char *cu_name(CUresult r)
{
	const char *s = NULL;

	if (cu.error_name && cu.error_name(r, &s) == CUDA_SUCCESS && s)
		return s;
	return "CUDA_ERROR_?";
}

static int load_driver(char *err, size_t errlen)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	struct {
		const char *name;
		void **slot;
	} syms[] = {
	        {"cuInit", (void **)&cu.init},
	        {"cuDeviceGetCount", (void **)&cu.get_count},
	        {"cuDeviceGet", (void **)&cu.get},
	        {"cuDeviceGetUuid_v2", (void **)&cu.get_uuid},
	        {"cuDeviceGetName", (void **)&cu.get_name},
	        {"cuDeviceGetPCIBusId", (void **)&cu.get_bus_id},
	        {"cuDevicePrimaryCtxRetain", (void **)&cu.retain},
	        {"cuDevicePrimaryCtxRelease_v2", (void **)&cu.release},
	        {"cuCtxSetCurrent", (void **)&cu.set_current},
	        {"cuMemAlloc_v2", (void **)&cu.alloc},
	        {"cuMemFree_v2", (void **)&cu.free},
	        {"cuGetErrorName", (void **)&cu.error_name},
	};

	if (!h) {
		snprintf(err, errlen, "libcuda.so.1: %s", dlerror());
		return -ENOENT;
	}
	for (size_t i = 0; i < SIM_ELEMENTSOF(syms); i++) {
		*syms[i].slot = dlsym(h, syms[i].name);
		if (!*syms[i].slot) {
			snprintf(err, errlen, "libcuda.so.1: no %s", syms[i].name);
			return -ENOEXEC;
		}
	}
	*(void **)&cu.set_util = dlsym(h, "nvsimCudaSetUtilization");
	return 0; /* the handle stays open for the life of the process */
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void format_uuid(const CUuuid *u, bool mig, char *out, size_t len)
{
	const unsigned char *b = (const unsigned char *)u->bytes;

	snprintf(out, len,
	         "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	         mig ? "MIG" : "GPU", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
	         b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* Sets up ordinal i: identity, primary context, allocation, utilisation. */
static CUresult use_device(int i, const struct options *o, struct device *d, char *err,
                           size_t errlen)
{
	CUdevice dev;
	CUcontext ctx;
	CUuuid u;
	char name[256];
	CUresult r;

	d->ordinal = i;
	if ((r = cu.get(&dev, i)) != CUDA_SUCCESS || (r = cu.get_uuid(&u, dev)) != CUDA_SUCCESS ||
	    (r = cu.get_name(name, sizeof(name), dev)) != CUDA_SUCCESS ||
	    (r = cu.get_bus_id(d->bus_id, sizeof(d->bus_id), dev)) != CUDA_SUCCESS) {
		snprintf(err, errlen, "device %d: %s", i, cu_name(r));
		return r;
	}
	format_uuid(&u, strstr(name, " MIG ") != NULL, d->uuid, sizeof(d->uuid));
	if ((r = cu.retain(&ctx, dev)) != CUDA_SUCCESS) {
		snprintf(err, errlen, "%s: cuDevicePrimaryCtxRetain: %s", d->uuid, cu_name(r));
		return r;
	}
	d->retained = true;
	if ((r = cu.set_current(ctx)) != CUDA_SUCCESS ||
	    (o->mem && (r = cu.alloc(&d->ptr, (size_t)o->mem)) != CUDA_SUCCESS)) {
		d->ptr = 0;
		snprintf(err, errlen, "%s: cuMemAlloc %llu bytes: %s", d->uuid, o->mem, cu_name(r));
		return r;
	}
	if (cu.set_util)
		(void)cu.set_util(dev, o->util);
	return CUDA_SUCCESS;
}

static void release_device(struct device *d)
{
	CUdevice dev;

	if (cu.get(&dev, d->ordinal) != CUDA_SUCCESS)
		return;
	if (d->ptr)
		(void)cu.free(d->ptr);
	if (d->retained)
		(void)cu.release(dev);
}

static void wait_for(double seconds)
{
	struct timespec start, now, tick = {0, 20 * 1000 * 1000};

	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!stop) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (seconds >= 0 && (double)(now.tv_sec - start.tv_sec) +
		                                    (double)(now.tv_nsec - start.tv_nsec) / 1e9 >=
		                            seconds)
			break;
		nanosleep(&tick, NULL);
	}
}

static json_t *env_or_null(const char *name)
{
	const char *v = getenv(name);
	return v ? json_string(v) : json_null();
}

/* Appends one line to the ledger: O_APPEND + one write under flock. */
static int append_ledger(const char *path, json_t *line)
{
	_cleanup_free_ char *s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = -1;
	size_t n;
	ssize_t w;

	if (!s)
		return -ENOMEM;
	n = strlen(s);
	buf = malloc(n + 2);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, s, n);
	buf[n++] = '\n';
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	(void)flock(fd, LOCK_EX);
	do
		w = write(fd, buf, n);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		return -errno;
	return (size_t)w == n ? 0 : -EIO;
}

static json_t *ledger_line(double start, double end, const struct device *devs, int n,
                           const char *error)
{
	json_t *list = json_array(), *line;

	for (int i = 0; list && i < n; i++)
		json_array_append_new(list,
		                      json_pack("{sissss}", "ordinal", devs[i].ordinal, "uuid",
		                                devs[i].uuid, "pci_bus_id", devs[i].bus_id));
	line = json_pack("{sIsfsfsososos{sosososo}}", "pid", (json_int_t)getpid(), "start", start,
	                 "end", end, "cuda_visible_devices", env_or_null("CUDA_VISIBLE_DEVICES"),
	                 "cuda_device_order", env_or_null("CUDA_DEVICE_ORDER"), "devices", list,
	                 "env", "LOCAL_RANK", env_or_null("LOCAL_RANK"), "RANK",
	                 env_or_null("RANK"), "WORLD_SIZE", env_or_null("WORLD_SIZE"),
	                 "GPUCTL_SHARE_MEM", env_or_null("GPUCTL_SHARE_MEM"));
	if (line && error)
		json_object_set_new(line, "error", json_string(error));
	return line;
}

int main(int argc, char **argv)
{
	struct options o = {.mem = 256ULL << 20, .util = 100, .seconds = -1};
	static struct device devs[MAX_DEVS];
	struct sigaction sa = {.sa_handler = on_signal};
	char ledger[4200] = "", err[512] = "";
	const char *dir = getenv("NVSIM_STATE_DIR");
	json_t *line;
	double start = now_s();
	int n = 0, rc = 0, r;
	CUresult cr;

	if ((r = parse_args(argc, argv, &o)) != 0)
		return r;
	if (o.ledger)
		sim_strlcpy(ledger, o.ledger, sizeof(ledger));
	else if (dir && *dir)
		snprintf(ledger, sizeof(ledger), "%s/ledger.jsonl", dir);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	if (load_driver(err, sizeof(err)) < 0) {
		rc = 1;
	} else if ((cr = cu.init(0)) != CUDA_SUCCESS && cr != CUDA_ERROR_NO_DEVICE) {
		snprintf(err, sizeof(err), "cuInit: %s", cu_name(cr));
		rc = 1;
	} else if (cr == CUDA_SUCCESS && (cr = cu.get_count(&n)) != CUDA_SUCCESS) {
		snprintf(err, sizeof(err), "cuDeviceGetCount: %s", cu_name(cr));
		n = 0;
		rc = 1;
	}
	if (n > MAX_DEVS)
		n = MAX_DEVS;
	for (int i = 0; rc == 0 && i < n; i++)
		if (use_device(i, &o, &devs[i], err, sizeof(err)) != CUDA_SUCCESS) {
			n = i + 1;
			rc = 1;
		}
	if (rc == 0) {
		printf("ready pid=%ld devices=%d\n", (long)getpid(), n);
		fflush(stdout);
		wait_for(o.seconds);
	}
	for (int i = 0; i < n; i++)
		release_device(&devs[i]);
	if (rc)
		fprintf(stderr, "nvsim-load: %s\n", err);
	if (rc == 0 && n == 0 && o.fail_if_none) {
		snprintf(err, sizeof(err), "no CUDA device visible");
		fprintf(stderr, "nvsim-load: %s\n", err);
		rc = 1;
	}
	if (ledger[0]) {
		line = ledger_line(start, now_s(), devs, n, err[0] ? err : NULL);
		r = line ? append_ledger(ledger, line) : -ENOMEM;
		json_decref(line);
		if (r < 0) {
			fprintf(stderr, "nvsim-load: %s: %s\n", ledger, strerror(-r));
			rc = 1;
		}
	}
	return rc;
}
