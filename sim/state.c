/* State directory I/O shared by nvsim and the simulated NVML: atomic writes, state.json
 * merging and validation, registered processes, and call-count aggregation.
 *
 * Decisions:
 * - state.json's "set" objects use scenario keys, so a dynamic change is validated by the same
 *   parser as the scenario itself (sim_state_merge + sim_scenario_from_json): nvsim and the
 *   library can never disagree on what a key means.
 * - A process registration whose PID is gone is ignored, as the driver forgets dead
 *   processes; the file is left for nvsim to clean up (readers never write). */
#include "state.h"
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

int sim_read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n;
		if (len + 1 >= cap) {
			char *nb;
			if (cap > max)
				return -EFBIG;
			cap = cap ? cap * 2 : 4096;
			nb = realloc(buf, cap + 1);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > max)
		return -EFBIG;
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

int sim_write_atomic(const char *path, const char *data, size_t len)
{
	char tmp[4096], dir[4096];
	_cleanup_close_ int fd = -1;
	_cleanup_close_ int dfd = -1;
	const char *slash;
	size_t off = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int r = -errno;
			unlink(tmp);
			return r;
		}
		off += (size_t)n;
	}
	if (fchmod(fd, 0644) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
		int r = -errno;
		unlink(tmp);
		return r;
	}
	slash = strrchr(path, '/');
	if (slash && (size_t)(slash - path) < sizeof(dir)) {
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
		dfd = open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0)
			(void)fsync(dfd);
	}
	return 0;
}

int sim_write_json_atomic(const char *path, json_t *v)
{
	_cleanup_free_ char *s = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
	size_t n;
	char *nl;

	if (!s)
		return -ENOMEM;
	n = strlen(s);
	nl = realloc(s, n + 2);
	if (!nl)
		return -ENOMEM;
	s = nl;
	s[n] = '\n';
	s[n + 1] = '\0';
	return sim_write_atomic(path, s, n + 1);
}

#define SIM_GEN_FILE "generation"

/* Opens STATE_DIR/generation, at least 8 bytes long, read-write when possible. */
static int gen_open(const char *state_dir, bool *ret_rw)
{
	char path[4200];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/" SIM_GEN_FILE, state_dir);
	*ret_rw = true;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
	if (fd >= 0) {
		/* created by someone under a umask: readable and bumpable by every test user */
		(void)fchmod(fd, 0666);
		if (fstat(fd, &st) < 0 || (st.st_size < 8 && ftruncate(fd, 8) < 0)) {
			close(fd);
			return -errno;
		}
		return fd;
	}
	*ret_rw = false;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_size < 8) { /* mapping past the end would fault */
		close(fd);
		return -EIO;
	}
	return fd;
}

int sim_gen_bump(const char *state_dir)
{
	bool rw;
	int fd = gen_open(state_dir, &rw);
	uint64_t *gen;

	if (fd < 0)
		return fd;
	if (!rw) {
		close(fd);
		return -EACCES;
	}
	gen = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (gen == MAP_FAILED)
		return -errno;
	__atomic_fetch_add(gen, 1, __ATOMIC_RELEASE);
	munmap(gen, 8);
	return 0;
}

const uint64_t *sim_gen_map(const char *state_dir)
{
	bool rw;
	int fd = gen_open(state_dir, &rw);
	void *gen;

	if (fd < 0)
		return NULL;
	gen = mmap(NULL, 8, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return gen == MAP_FAILED ? NULL : gen;
}

int sim_mkdir_p(const char *path)
{
	char buf[4096];

	if (sim_strlcpy(buf, path, sizeof(buf)) < 0)
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int sim_rm_rf(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int r = 0;

	if (!d)
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	while ((de = readdir(d))) {
		char sub[4096];
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= sizeof(sub))
			continue;
		if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
			r = sim_rm_rf(sub) < 0 ? -EIO : r;
		else if (unlink(sub) < 0)
			r = -errno;
	}
	closedir(d);
	if (rmdir(path) < 0)
		r = -errno;
	return r;
}

int sim_state_merge(json_t *scenario, json_t *state, json_t **ret)
{
	_cleanup_(json_decrefp) json_t *copy = json_deep_copy(scenario);
	json_t *gpus, *dst, *per;
	const char *key;

	if (!copy)
		return -ENOMEM;
	gpus = json_object_get(state, "gpus");
	dst = json_object_get(copy, "gpus");
	if (json_is_object(gpus) && json_is_array(dst)) {
		json_object_foreach(gpus, key, per)
		{
			uint64_t idx;
			json_t *set = json_object_get(per, "set"), *g;
			if (sim_parse_u64(key, SIM_MAX_GPUS, &idx) < 0 || !json_is_object(set))
				continue;
			g = json_array_get(dst, idx);
			if (!json_is_object(g))
				continue;
			if (sim_json_merge(g, set) < 0)
				return -ENOMEM;
		}
	}
	*ret = TAKE_PTR(copy);
	return 0;
}

/* gpus.N.cuda: {"alloc": "ok" | "fail" | "hang", "error": CUresult} */
static int parse_cuda(json_t *v, struct sim_gpu_dyn *d, const char *key, char *err, size_t errlen)
{
	static const char *const modes[] = {[SIM_CUDA_ALLOC_OK] = "ok",
	                                    [SIM_CUDA_ALLOC_FAIL] = "fail",
	                                    [SIM_CUDA_ALLOC_HANG] = "hang"};
	json_t *alloc = json_object_get(v, "alloc"), *e = json_object_get(v, "error");
	const char *a = json_string_value(alloc);

	d->cuda_alloc = -1;
	for (size_t m = 0; a && m < SIM_ELEMENTSOF(modes); m++)
		if (strcmp(a, modes[m]) == 0)
			d->cuda_alloc = (int)m;
	if (!json_is_object(v) || d->cuda_alloc < 0 ||
	    (e && (!json_is_integer(e) || json_integer_value(e) <= 0 ||
	           json_integer_value(e) > 100000))) {
		snprintf(err, errlen,
		         "gpus.%s.cuda: expected {\"alloc\": \"ok|fail|hang\", "
		         "\"error\": CUresult}",
		         key);
		return -EINVAL;
	}
	d->cuda_alloc_error = e ? (int)json_integer_value(e) : 999; /* CUDA_ERROR_UNKNOWN */
	return 0;
}

const char *const sim_nvlink_counter_names[4] = {"replay", "recovery", "crc_flit", "crc_data"};

/* gpus.G.nvlink_errors: {"LINK": {"replay": N, "recovery": N, "crc_flit": N, "crc_data": N}} */
static int parse_nvlink_errors(json_t *v, struct sim_gpu_dyn *d, const char *gpu, char *err,
                               size_t errlen)
{
	const char *link;
	json_t *per;

	if (!v)
		return 0;
	json_object_foreach(v, link, per)
	{
		uint64_t l;
		if (sim_parse_u64(link, SIM_MAX_LINKS - 1, &l) < 0 || !json_is_object(per)) {
			snprintf(err, errlen, "gpus.%s.nvlink_errors.%s: no such link", gpu, link);
			return -EINVAL;
		}
		for (int k = 0; k < 4; k++) {
			json_t *n = json_object_get(per, sim_nvlink_counter_names[k]);
			if (n && (!json_is_integer(n) || json_integer_value(n) < 0)) {
				snprintf(err, errlen,
				         "gpus.%s.nvlink_errors.%s.%s: expected a count", gpu, link,
				         sim_nvlink_counter_names[k]);
				return -EINVAL;
			}
			d->nvlink_err[l][k] = n ? (unsigned long long)json_integer_value(n) : 0;
		}
	}
	return 0;
}

int sim_dyn_from_json(json_t *state, unsigned int n_gpus, struct sim_dyn *ret, char *err,
                      size_t errlen)
{
	json_t *v, *per, *el;
	const char *key;
	size_t i;

	memset(ret, 0, sizeof(*ret));
	ret->latency_us = -1;
	for (unsigned int g = 0; g < SIM_MAX_GPUS; g++)
		ret->gpus[g].lost_after_calls = -1;
	if (!state)
		return 0;
	v = json_object_get(state, "latency_us");
	if (v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 10000000) {
			snprintf(err, errlen, "latency_us: expected an integer 0..10000000");
			return -EINVAL;
		}
		ret->latency_us = json_integer_value(v);
	}
	json_object_foreach(json_object_get(state, "gpus"), key, per)
	{
		uint64_t idx;
		struct sim_gpu_dyn *d;
		if (sim_parse_u64(key, n_gpus ? n_gpus - 1 : 0, &idx) < 0) {
			snprintf(err, errlen, "gpus.%s: no such GPU", key);
			return -EINVAL;
		}
		d = &ret->gpus[idx];
		d->lost = json_is_true(json_object_get(per, "lost"));
		v = json_object_get(per, "lost_after_calls");
		if (json_is_object(v)) {
			d->lost_after_calls = json_integer_value(json_object_get(v, "calls"));
			d->lost_after_gen = json_integer_value(json_object_get(v, "gen"));
		}
		v = json_object_get(per, "cuda");
		if (v && parse_cuda(v, d, key, err, errlen) < 0)
			return -EINVAL;
		if (parse_nvlink_errors(json_object_get(per, "nvlink_errors"), d, key, err,
		                        errlen) < 0)
			return -EINVAL;
		json_array_foreach(json_object_get(per, "nvlink_down"), i,
		                   el) if (json_is_integer(el) && json_integer_value(el) >= 0 &&
		                           json_integer_value(el) < 64) d->nvlink_down |=
		        1ULL << json_integer_value(el);
	}
	json_array_foreach(json_object_get(state, "fail"), i, el)
	{
		struct sim_fail *f;
		json_t *fn = json_object_get(el, "function"), *e = json_object_get(el, "error"),
		       *g = json_object_get(el, "gpu");
		if (ret->n_fails >= SIM_MAX_FAILS)
			break;
		f = &ret->fails[ret->n_fails];
		if (!json_is_string(fn) || !json_is_string(e) ||
		    (f->error = sim_error_from_name(json_string_value(e))) < 0) {
			snprintf(err, errlen, "fail[%zu]: expected function, error and gpu", i);
			return -EINVAL;
		}
		sim_strlcpy(f->function, json_string_value(fn), sizeof(f->function));
		f->gpu = json_is_integer(g) ? (int)json_integer_value(g) : -1;
		ret->n_fails++;
	}
	json_array_foreach(json_object_get(state, "hang"), i, el)
	{
		struct sim_hang *h;
		json_t *fn = json_object_get(el, "function"), *g = json_object_get(el, "gpu");
		if (ret->n_hangs >= SIM_MAX_FAILS)
			break;
		h = &ret->hangs[ret->n_hangs];
		if (!json_is_string(fn) || (g && !json_is_integer(g))) {
			snprintf(err, errlen, "hang[%zu]: expected function and gpu", i);
			return -EINVAL;
		}
		sim_strlcpy(h->function, json_string_value(fn), sizeof(h->function));
		h->gpu = g ? (int)json_integer_value(g) : -1;
		ret->n_hangs++;
	}
	return 0;
}

bool sim_pid_alive(pid_t pid)
{
	if (pid <= 0)
		return false;
	return kill(pid, 0) == 0 || errno == EPERM;
}

/* One {"gpu", "used_memory_bytes", "util"} object (util optional, 0..100). */
static int proc_entry(json_t *o, pid_t pid, struct sim_proc *ret)
{
	json_t *uuid = json_object_get(o, "gpu"), *mem = json_object_get(o, "used_memory_bytes"),
	       *util = json_object_get(o, "util");

	if (!json_is_string(uuid) || !json_is_integer(mem) || json_integer_value(mem) < 0 ||
	    (util && (!json_is_integer(util) || json_integer_value(util) < 0 ||
	              json_integer_value(util) > 100)))
		return -EINVAL;
	ret->pid = pid;
	sim_strlcpy(ret->uuid, json_string_value(uuid), sizeof(ret->uuid));
	ret->used_bytes = (unsigned long long)json_integer_value(mem);
	ret->util = util ? (unsigned int)json_integer_value(util) : 0;
	return 0;
}

int sim_procs_load(const char *dir, struct sim_proc **ret, size_t *ret_n)
{
	char path[4096];
	_cleanup_free_ struct sim_proc *procs = NULL;
	size_t n = 0;
	struct dirent *de;
	DIR *d;

	if ((size_t)snprintf(path, sizeof(path), "%s/procs", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	d = opendir(path);
	if (!d) {
		*ret = NULL;
		*ret_n = 0;
		return errno == ENOENT ? 0 : -errno;
	}
	procs = calloc(SIM_MAX_PROCS, sizeof(*procs));
	if (!procs) {
		closedir(d);
		return -ENOMEM;
	}
	while ((de = readdir(d)) && n < SIM_MAX_PROCS) {
		_cleanup_free_ char *buf = NULL;
		_cleanup_(json_decrefp) json_t *j = NULL;
		json_t *pid, *devices, *el;
		size_t len, nl = strlen(de->d_name), i;
		char file[4400];

		if (nl < 6 || strcmp(de->d_name + nl - 5, ".json") != 0)
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
		if (sim_read_file(file, 1 << 20, &buf, &len) < 0)
			continue;
		j = json_loadb(buf, len, 0, NULL);
		pid = json_object_get(j, "pid");
		if (!json_is_integer(pid) || json_integer_value(pid) <= 0 ||
		    json_integer_value(pid) > INT_MAX ||
		    !sim_pid_alive((pid_t)json_integer_value(pid)))
			continue;
		devices = json_object_get(j, "devices");
		if (!json_is_array(devices)) {
			if (proc_entry(j, (pid_t)json_integer_value(pid), &procs[n]) == 0)
				n++;
			continue;
		}
		json_array_foreach(devices, i, el)
		{
			if (n < SIM_MAX_PROCS &&
			    proc_entry(el, (pid_t)json_integer_value(pid), &procs[n]) == 0)
				n++;
		}
	}
	closedir(d);
	*ret = TAKE_PTR(procs);
	*ret_n = n;
	return 0;
}

int sim_calls_aggregate(const char *dir, json_t **ret)
{
	_cleanup_(json_decrefp) json_t *out = json_object(), *fns = json_object();
	char path[4096];
	long long total = 0;
	struct dirent *de;
	DIR *d;

	if (!out || !fns)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/calls", dir);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		_cleanup_free_ char *buf = NULL;
		_cleanup_(json_decrefp) json_t *j = NULL;
		char file[4400];
		const char *k;
		json_t *v;
		size_t len, nl = strlen(de->d_name);

		if (nl < 6 || strcmp(de->d_name + nl - 5, ".json") != 0)
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
		if (sim_read_file(file, 1 << 20, &buf, &len) < 0)
			continue;
		j = json_loadb(buf, len, 0, NULL);
		json_object_foreach(json_object_get(j, "functions"), k, v)
		{
			long long prev = json_integer_value(json_object_get(fns, k));
			if (!json_is_integer(v))
				continue;
			total += json_integer_value(v);
			json_object_set_new(fns, k, json_integer(prev + json_integer_value(v)));
		}
	}
	if (d)
		closedir(d);
	if (json_object_set_new(out, "total", json_integer(total)) < 0 ||
	    json_object_set(out, "functions", fns) < 0)
		return -ENOMEM;
	*ret = TAKE_PTR(out);
	return 0;
}

static const struct {
	int code;
	const char *name;
} errors[] = {
        {0, "SUCCESS"},
        {1, "UNINITIALIZED"},
        {2, "INVALID_ARGUMENT"},
        {3, "NOT_SUPPORTED"},
        {4, "NO_PERMISSION"},
        {5, "ALREADY_INITIALIZED"},
        {6, "NOT_FOUND"},
        {7, "INSUFFICIENT_SIZE"},
        {8, "INSUFFICIENT_POWER"},
        {9, "DRIVER_NOT_LOADED"},
        {10, "TIMEOUT"},
        {11, "IRQ_ISSUE"},
        {12, "LIBRARY_NOT_FOUND"},
        {13, "FUNCTION_NOT_FOUND"},
        {14, "CORRUPTED_INFOROM"},
        {15, "GPU_IS_LOST"},
        {16, "RESET_REQUIRED"},
        {17, "OPERATING_SYSTEM"},
        {18, "LIB_RM_VERSION_MISMATCH"},
        {19, "IN_USE"},
        {20, "MEMORY"},
        {21, "NO_DATA"},
        {22, "VGPU_ECC_NOT_SUPPORTED"},
        {23, "INSUFFICIENT_RESOURCES"},
        {24, "FREQ_NOT_SUPPORTED"},
        {25, "ARGUMENT_VERSION_MISMATCH"},
        {26, "DEPRECATED"},
        {27, "NOT_READY"},
        {999, "UNKNOWN"},
};

int sim_error_from_name(const char *name)
{
	uint64_t v;

	if (strncmp(name, "NVML_ERROR_", 11) == 0)
		name += 11;
	else if (strncmp(name, "NVML_", 5) == 0)
		name += 5;
	for (size_t i = 0; i < SIM_ELEMENTSOF(errors); i++)
		if (strcasecmp(errors[i].name, name) == 0)
			return errors[i].code;
	if (sim_parse_u64(name, 999, &v) == 0)
		for (size_t i = 0; i < SIM_ELEMENTSOF(errors); i++)
			if (errors[i].code == (int)v)
				return (int)v;
	return -1;
}

const char *sim_error_name(int code)
{
	for (size_t i = 0; i < SIM_ELEMENTSOF(errors); i++)
		if (errors[i].code == code)
			return errors[i].name;
	return "UNKNOWN";
}
