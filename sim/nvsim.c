/* nvsim: runs commands on a simulated NVIDIA machine and changes it while they run.
 * `nvsim exec` makes a private state directory, points the product at the simulated
 * libnvidia-ml.so.1 (GPUCTL_NVML_LIBRARY), puts the simulated libraries' directory first on
 * LD_LIBRARY_PATH (so libcuda.so.1 is the simulated CUDA driver) and runs the command; the other
 * commands change or show the state of the machine named by NVSIM_STATE_DIR (see sim/README.md).
 *
 * Decisions:
 * - Errors are one line "nvsim: <what>: <why>"; exit codes 0 ok, 1 failure, 2 usage or bad
 *   input, 126 command not executable, 127 command not found, 128+N killed by signal N.
 * - The library is found next to the binary (<bindir>/../sim/libnvidia-ml.so.1), so a build
 *   tree works without installing; scenarios come from the source tree (compiled-in path,
 *   NVSIM_SCENARIO_PATH overrides).
 * - Read-modify-write of state.json holds an flock on the state directory's .lock file so
 *   two concurrent nvsim commands cannot lose each other's change. */
#include "nvsim.h"
#include "util.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>

int nvsim_err(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("nvsim: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

const char *nvsim_scenario_dir(void)
{
	const char *e = getenv("NVSIM_SCENARIO_PATH");
	return e && *e ? e : NVSIM_SCENARIO_DIR;
}

int nvsim_load_scenario(const char *arg, char **ret_buf, size_t *ret_len, struct sim_scenario **ret)
{
	_cleanup_free_ char *buf = NULL;
	char path[4096], err[512];
	size_t len;
	int r;

	if (strchr(arg, '/') || (strlen(arg) > 5 && strcmp(arg + strlen(arg) - 5, ".json") == 0))
		r = snprintf(path, sizeof(path), "%s", arg);
	else
		r = snprintf(path, sizeof(path), "%s/%s.json", nvsim_scenario_dir(), arg);
	if (r < 0 || (size_t)r >= sizeof(path))
		return nvsim_err(EXIT_USAGE, "%s: name too long", arg);
	r = sim_read_file(path, SIM_MAX_FILE, &buf, &len);
	if (r == -ENOENT && !strchr(arg, '/'))
		return nvsim_err(EXIT_USAGE, "%s: no such scenario (looked in %s)", arg,
		                 nvsim_scenario_dir());
	if (r < 0)
		return nvsim_err(EXIT_USAGE, "%s: %s", path, strerror(-r));
	r = sim_scenario_parse(buf, len, ret, err, sizeof(err));
	if (r == -ENOMEM)
		return nvsim_err(EXIT_FAILURE, "%s: out of memory", arg);
	if (r < 0)
		return nvsim_err(EXIT_USAGE, "%s: %s",
		                 strchr(arg, '/') ? arg : strrchr(path, '/') + 1, err);
	if (ret_buf) {
		*ret_buf = TAKE_PTR(buf);
		*ret_len = len;
	}
	return 0;
}

int nvstate_open(struct nvstate *st)
{
	const char *dir = getenv("NVSIM_STATE_DIR");
	_cleanup_free_ char *buf = NULL;
	char path[4200], err[512];
	size_t len;
	int r;

	memset(st, 0, sizeof(*st));
	st->lock_fd = -1;
	if (!dir || !*dir)
		return nvsim_err(EXIT_USAGE,
		                 "NVSIM_STATE_DIR is not set: run under `nvsim exec` or "
		                 "export it");
	if (sim_strlcpy(st->dir, dir, sizeof(st->dir)) < 0)
		return nvsim_err(EXIT_USAGE, "NVSIM_STATE_DIR: path too long");
	snprintf(path, sizeof(path), "%s/.lock", dir);
	st->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (st->lock_fd < 0 || flock(st->lock_fd, LOCK_EX) < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/scenario.json", dir);
	r = sim_read_file(path, SIM_MAX_FILE, &buf, &len);
	if (r < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
	if (sim_json_load(buf, len, &st->scenario, err, sizeof(err)) < 0 ||
	    sim_scenario_from_json(st->scenario, &st->sc, err, sizeof(err)) < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, err);
	free(buf);
	buf = NULL;
	snprintf(path, sizeof(path), "%s/state.json", dir);
	r = sim_read_file(path, SIM_MAX_FILE, &buf, &len);
	if (r == -ENOENT) {
		st->state = json_object();
		return st->state ? 0 : nvsim_err(EXIT_FAILURE, "out of memory");
	}
	if (r < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
	if (sim_json_load(buf, len, &st->state, err, sizeof(err)) < 0 || !json_is_object(st->state))
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, err);
	return 0;
}

int nvstate_validate(struct nvstate *st, const char *what)
{
	_cleanup_(json_decrefp) json_t *merged = NULL;
	_cleanup_free_ struct sim_dyn *dyn = malloc(sizeof(*dyn));
	struct sim_scenario *sc = NULL;
	char err[512];

	if (!dyn || sim_state_merge(st->scenario, st->state, &merged) < 0)
		return nvsim_err(EXIT_FAILURE, "out of memory");
	if (sim_scenario_from_json(merged, &sc, err, sizeof(err)) < 0 ||
	    sim_dyn_from_json(st->state, st->sc->n_gpus, dyn, err, sizeof(err)) < 0)
		return nvsim_err(EXIT_USAGE, "%s: %s", what, err);
	sim_scenario_free(sc);
	return 0;
}

int nvstate_save(struct nvstate *st)
{
	char path[4200];
	int r;

	snprintf(path, sizeof(path), "%s/state.json", st->dir);
	r = sim_write_json_atomic(path, st->state);
	if (r < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
	(void)sim_gen_bump(st->dir); /* running simulated NVMLs re-read it at their next call */
	return 0;
}

void nvstate_close(struct nvstate *st)
{
	json_decref(st->scenario);
	json_decref(st->state);
	sim_scenario_free(st->sc);
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	memset(st, 0, sizeof(*st));
	st->lock_fd = -1;
}

/* ---- exec ---- */

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
}

static int find_library(char *out, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n < 0)
		return -errno;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	if ((size_t)snprintf(out, len, "%s/../sim/libnvidia-ml.so.1", exe) >= len)
		return -ENAMETOOLONG;
	if (!realpath(out, exe))
		return -errno;
	return sim_strlcpy(out, exe, len);
}

/* Puts the directory of the simulated libraries (that of lib) first on LD_LIBRARY_PATH, so a
 * program that dlopens or links libcuda.so.1 (or libnvidia-ml.so.1) by soname gets the
 * simulated machine. */
static int prepend_library_path(const char *lib)
{
	const char *old = getenv("LD_LIBRARY_PATH"), *slash = strrchr(lib, '/');
	_cleanup_free_ char *v = NULL;
	int n;

	if (!slash)
		return -EINVAL;
	if (old && *old)
		n = asprintf(&v, "%.*s:%s", (int)(slash - lib), lib, old);
	else
		n = asprintf(&v, "%.*s", (int)(slash - lib), lib);
	if (n < 0) {
		v = NULL;
		return -ENOMEM;
	}
	return setenv("LD_LIBRARY_PATH", v, 1) < 0 ? -errno : 0;
}

static int make_state_dir(char *dir, const char *scenario, size_t len, long long latency)
{
	static const char *const subdirs[] = {"procs", "calls", "cuda"};
	char path[4200];
	int r;

	for (size_t i = 0; i < SIM_ELEMENTSOF(subdirs); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, subdirs[i]);
		if ((r = sim_mkdir_p(path)) < 0)
			return nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
	}
	snprintf(path, sizeof(path), "%s/kmsg", dir);
	if ((r = sim_write_atomic(path, "", 0)) < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
	snprintf(path, sizeof(path), "%s/scenario.json", dir);
	if ((r = sim_write_atomic(path, scenario, len)) < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
	snprintf(path, sizeof(path), "%s/state.json", dir);
	if (latency >= 0) {
		_cleanup_(json_decrefp) json_t *st =
		        json_pack("{sI}", "latency_us", (json_int_t)latency);
		r = st ? sim_write_json_atomic(path, st) : -ENOMEM;
	} else {
		r = sim_write_atomic(path, "{}\n", 3);
	}
	if (r < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
	if ((r = sim_gen_bump(dir)) < 0)
		return nvsim_err(EXIT_FAILURE, "%s/generation: %s", dir, strerror(-r));
	return 0;
}

/* One /proc/cpuinfo entry in the kernel's layout (x86 or arm64), only the lines gpuctl and
 * people read. */
static void cpuinfo_entry(FILE *f, const struct sim_cpu_model *m, size_t cpu, int socket)
{
	fprintf(f, "processor\t: %zu\n", cpu);
	if (m->vendor_id[0]) {
		fprintf(f, "vendor_id\t: %s\ncpu family\t: %d\nmodel\t\t: %d\n", m->vendor_id,
		        m->family, m->model);
		if (m->name[0])
			fprintf(f, "model name\t: %s\n", m->name);
		fprintf(f, "physical id\t: %d\n\n", socket);
	} else {
		fprintf(f,
		        "BogoMIPS\t: 2000.00\nCPU implementer\t: 0x%02x\nCPU architecture: 8\n"
		        "CPU variant\t: 0x0\nCPU part\t: 0x%03x\nCPU revision\t: 0\n\n",
		        (unsigned)m->implementer, (unsigned)m->part);
	}
}

/* $dir/cpuinfo: the scenario's CPU (cpus.model) once per CPU of its NUMA nodes, in CPU order;
 * empty when the scenario declares no CPU model (gpuctl then takes its default CPU). */
static int write_cpuinfo(const char *dir, const struct sim_scenario *sc)
{
	_cleanup_free_ char *text = NULL;
	char path[4200];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return -ENOMEM;
	if (sc->cpu.present) {
		size_t ncpu = sc->cpu_words * sizeof(unsigned long) * CHAR_BIT, written = 0;

		for (size_t cpu = 0; cpu < ncpu; cpu++)
			for (size_t n = 0; n < sc->n_nodes; n++) {
				unsigned long w = sc->node_cpus[n][cpu / (sizeof(w) * CHAR_BIT)];

				if (w & (1UL << (cpu % (sizeof(w) * CHAR_BIT)))) {
					cpuinfo_entry(f, &sc->cpu, cpu, sc->nodes[n].socket);
					written++;
					break;
				}
			}
		if (!written)
			cpuinfo_entry(f, &sc->cpu, 0, 0);
	}
	if (fclose(f) != 0)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/cpuinfo", dir);
	return sim_write_atomic(path, text ? text : "", len);
}

/* The machine's files beside its state: $dir/cpuinfo, and $dir/root/proc/driver/nvidia, the
 * driver's per-GPU /proc files (a lost GPU's bus id is read there; one small file a GPU), with
 * GPUCTL_NVIDIA_PROC naming them; $dir/root/proc/driver/nvidia-caps/mig-minors and
 * $dir/root/proc/devices (the device-node map reads them), with GPUCTL_NVIDIA_CAPS_PROC and
 * GPUCTL_PROC_DEVICES naming them. 0 or the exit status. */
static int write_machine_files(const char *dir, const struct sim_scenario *sc)
{
	char path[4200];
	int r;

	if ((r = write_cpuinfo(dir, sc)) < 0)
		return nvsim_err(EXIT_FAILURE, "%s/cpuinfo: %s", dir, strerror(-r));
	snprintf(path, sizeof(path), "%s/root/proc/driver/nvidia", dir);
	if ((r = sim_procfs_write(sc, path)) < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
	setenv("GPUCTL_NVIDIA_PROC", path, 1);
	snprintf(path, sizeof(path), "%s/root/proc", dir);
	if ((r = sim_procfs_write_caps(sc, path)) < 0)
		return nvsim_err(EXIT_FAILURE, "%s: %s", path, strerror(-r));
	(void)snprintf(path, sizeof(path), "%s/root/proc/driver/nvidia-caps", dir);
	setenv("GPUCTL_NVIDIA_CAPS_PROC", path, 1);
	(void)snprintf(path, sizeof(path), "%s/root/proc/devices", dir);
	setenv("GPUCTL_PROC_DEVICES", path, 1);
	return 0;
}

static int run_child(char **cmd)
{
	struct sigaction sa = {.sa_handler = forward};
	int status;
	pid_t pid, w;

	/* Handlers go in before fork so no signal slips between fork and installation; until
	 * child_pid is set they forward nothing. The child gets the defaults back. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	pid = fork();
	if (pid < 0)
		return nvsim_err(EXIT_FAILURE, "fork: %s", strerror(errno));
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		execvp(cmd[0], cmd);
		if (errno == ENOENT)
			_exit(nvsim_err(EXIT_NOTFOUND, "%s: command not found", cmd[0]));
		_exit(nvsim_err(126, "%s: %s", cmd[0], strerror(errno)));
	}
	child_pid = pid;
	do
		w = waitpid(pid, &status, 0);
	while (w < 0 && errno == EINTR);
	child_pid = 0;
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (w < 0)
		return nvsim_err(EXIT_FAILURE, "waitpid: %s", strerror(errno));
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static int cmd_exec(int argc, char **argv)
{
	const char *state_dir = NULL, *calls_out = NULL, *scenario_arg;
	_cleanup_free_ char *buf = NULL;
	struct sim_scenario *sc = NULL;
	char dir[4096], lib[4096], kmsg[4200], sysfs[4200];
	bool keep = false, sysfs_too = false;
	long long latency = -1;
	size_t len;
	int i, r, rc;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--keep") == 0) {
			keep = true;
		} else if (strcmp(argv[i], "--sysfs") == 0) {
			sysfs_too = true;
		} else if (strcmp(argv[i], "--state-dir") == 0 && i + 1 < argc) {
			state_dir = argv[++i];
		} else if (strcmp(argv[i], "--calls-out") == 0 && i + 1 < argc) {
			calls_out = argv[++i];
		} else if (strcmp(argv[i], "--latency-us") == 0 && i + 1 < argc) {
			uint64_t v;
			if (sim_parse_u64(argv[++i], 10000000, &v) < 0)
				return nvsim_err(EXIT_USAGE,
				                 "--latency-us: expected 0..10000000, "
				                 "got \"%s\"",
				                 argv[i]);
			latency = (long long)v;
		} else if (strcmp(argv[i], "--help") == 0) {
			puts("usage: nvsim exec [--keep] [--state-dir DIR] [--latency-us N] "
			     "[--calls-out FILE] [--sysfs] SCENARIO -- CMD ARGS...");
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			return nvsim_err(EXIT_USAGE, "exec: unknown option \"%s\"", argv[i]);
		} else {
			break;
		}
	}
	if (i + 2 >= argc || strcmp(argv[i + 1], "--") != 0)
		return nvsim_err(EXIT_USAGE, "exec: usage: nvsim exec [options] SCENARIO -- CMD "
		                             "ARGS...");
	scenario_arg = argv[i];
	if ((r = nvsim_load_scenario(scenario_arg, &buf, &len, &sc)) != 0)
		return r;
	if ((r = find_library(lib, sizeof(lib))) < 0) {
		sim_scenario_free(sc);
		return nvsim_err(EXIT_FAILURE, "libnvidia-ml.so.1 next to nvsim: %s", strerror(-r));
	}
	if (state_dir) {
		if (sim_strlcpy(dir, state_dir, sizeof(dir)) < 0 || (r = sim_mkdir_p(dir)) < 0) {
			sim_scenario_free(sc);
			return nvsim_err(EXIT_FAILURE, "%s: cannot create", state_dir);
		}
	} else {
		const char *tmp = getenv("TMPDIR");
		snprintf(dir, sizeof(dir), "%s/nvsim.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir)) {
			sim_scenario_free(sc);
			return nvsim_err(EXIT_FAILURE, "%s: %s", dir, strerror(errno));
		}
	}
	rc = make_state_dir(dir, buf, len, latency);
	if (rc == 0)
		rc = write_machine_files(dir, sc);
	if (rc != 0)
		goto out;
	/* --sysfs: the scenario's CPU topology, as sysfs shows it (gpuctl slurm gres; hwloc with
	 * HWLOC_FSROOT=DIR/root). Thousands of small files: only when asked. */
	if (sysfs_too) {
		snprintf(sysfs, sizeof(sysfs), "%s/root/sys", dir);
		if ((r = sim_sysfs_write(sc, sysfs)) < 0) {
			rc = nvsim_err(EXIT_FAILURE, "%s: %s", sysfs, strerror(-r));
			goto out;
		}
		setenv("GPUCTL_SYSFS", sysfs, 1);
	}
	setenv("NVSIM_STATE_DIR", dir, 1);
	setenv("GPUCTL_NVML_LIBRARY", lib, 1);
	/* gpuctl health reads the simulated kernel log instead of /dev/kmsg */
	snprintf(kmsg, sizeof(kmsg), "%s/kmsg", dir);
	setenv("GPUCTL_KMSG", kmsg, 1);
	/* ...and the scenario's CPU instead of the host's /proc/cpuinfo */
	snprintf(kmsg, sizeof(kmsg), "%s/cpuinfo", dir);
	setenv("GPUCTL_CPUINFO", kmsg, 1);
	if ((r = prepend_library_path(lib)) < 0) {
		rc = nvsim_err(EXIT_FAILURE, "LD_LIBRARY_PATH: %s", strerror(-r));
		goto out;
	}
	rc = run_child(argv + i + 2);
	if (calls_out) {
		_cleanup_(json_decrefp) json_t *calls = NULL;
		r = sim_calls_aggregate(dir, &calls);
		if (r >= 0)
			r = sim_write_json_atomic(calls_out, calls);
		if (r < 0 && rc == 0)
			rc = nvsim_err(EXIT_FAILURE, "%s: cannot write call counts", calls_out);
	}
out:
	sim_scenario_free(sc);
	if (!keep && !state_dir)
		(void)sim_rm_rf(dir);
	else if (keep && !state_dir)
		nvsim_err(0, "state kept in %s", dir);
	return rc;
}

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
        {"calls", cmd_calls, "calls [--reset] [--json]    NVML call counts so far"},
        {"check", cmd_check, "check FILE|NAME             validate a scenario"},
        {"exec", cmd_exec, "exec [opts] SCENARIO -- CMD  run CMD on a fresh simulated machine"},
        {"fail", cmd_fail, "fail FUNCTION ERROR [-i GPU] | fail --clear   inject NVML errors"},
        {"hang", cmd_hang, "hang FUNCTION [-i GPU]      block matching NVML calls until unhang"},
        {"hung", cmd_hung,
         "hung [--json]               the calls blocked now (pid tid function gpu)"},
        {"latency", cmd_latency, "latency US                  add US microseconds to every call"},
        {"proc", cmd_proc, "proc add --pid PID -i GPU [--mem SIZE] [--util PCT] | proc rm PID"},
        {"scenarios", cmd_scenarios, "scenarios                   list scenario names"},
        {"set", cmd_set, "set [-i GPU[,GPU]] KEY=VALUE...   change GPU state"},
        {"show", cmd_show, "show                        print the state as JSON"},
        {"unhang", cmd_unhang,
         "unhang [FUNCTION]           let hung calls return (all, or FUNCTION's)"},
        {"xid", cmd_xid, "xid -i GPU[,GPU] CODE [TEXT] log an XID (kernel log + NVML event)"},
};

static void usage(FILE *f)
{
	fputs("usage: nvsim COMMAND [ARGS...]   (nvsim COMMAND --help)\n", f);
	for (size_t i = 0; i < SIM_ELEMENTSOF(commands); i++)
		fprintf(f, "  nvsim %s\n", commands[i].help);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage(stderr), EXIT_USAGE;
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < SIM_ELEMENTSOF(commands); i++)
		if (strcmp(argv[1], commands[i].name) == 0) {
			if (commands[i].fn != cmd_exec && argc > 2 &&
			    strcmp(argv[2], "--help") == 0) {
				printf("usage: nvsim %s\n", commands[i].help);
				return 0;
			}
			return commands[i].fn(argc - 1, argv + 1);
		}
	return nvsim_err(EXIT_USAGE, "%s: unknown command (see nvsim --help)", argv[1]);
}
