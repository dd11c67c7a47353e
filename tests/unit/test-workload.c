// SPDX-License-Identifier: MIT
/*
 * test-workload.c: src/lib/workload/ (docs/workloads.md). The cgroup lines are written from each
 * layout's documented source (the comments of workload-cgroup.c and docs/workloads.md name
 * them: Slurm's cgroup.conf(5) and cgroup v2 plugin pages, Kubernetes' cgroup driver and QoS
 * pages, docker's runtime metrics page, podman-run(1), lxc.container.conf(5), systemd.special(7)),
 * the state files from the runtimes' documented formats, /proc text from proc(5); never from
 * this code's output. The real-kernel test makes each layout's cgroup folders in this
 * machine's v2 hierarchy (/sys/fs/cgroup/unified) and v1 hierarchies (freezer, name=systemd),
 * moves a real child process into them and asks the library; it needs root and says why it is
 * skipped otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <unistd.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "utf8.h"
#include "util.h"
#include "workload-internal.h"

/* Container ids: 64 lower-case hex characters, as docker, podman, containerd and CRI-O write
 * them (docker's "Runtime metrics": the long id). */
#define ID_A "3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e"
#define ID_B "aaaabbbbccccddddeeeeffff0000111122223333444455556666777788889999"
#define ID_C "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
/* A pod uid as the API server writes it, and in the systemd driver's slice names ('_'). */
#define UID_DASH  "1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809"
#define UID_UNDER "1a2b3c4d_5e6f_7081_92a3_b4c5d6e7f809"

static struct wl_class cls(const char *text)
{
	struct wl_class c;

	assert_int_equal(wl_parse_cgroup(text, strlen(text), &c), 0);
	return c;
}

/* ---- parsers: every layout ---- */

static void test_slurm(void **state)
{
	struct wl_class c;

	(void)state;
	/* v1: /slurm/uid_<uid>/job_<job>/step_<step>/task_<task> in each controller */
	c = cls("6:freezer:/slurm/uid_1000/job_4242/step_0/task_0\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_SLURM);
	assert_int_equal(c.slurm_job, 4242);
	assert_string_equal(c.slurm_step, "0");
	assert_string_equal(c.cgroup, "/slurm/uid_1000/job_4242/step_0/task_0");
	/* v1 with several slurmd on one host: slurm_<nodename> */
	c = cls("4:memory:/slurm_node07/uid_0/job_7/step_batch\n");
	assert_int_equal(c.slurm_job, 7);
	assert_string_equal(c.slurm_step, "batch");
	/* v2: slurmstepd.scope/job_<job>/step_<step>/user/task_<task> */
	c = cls("0::/system.slice/slurmstepd.scope/job_4242/step_12/user/task_3\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_SLURM);
	assert_int_equal(c.slurm_job, 4242);
	assert_string_equal(c.slurm_step, "12");
	c = cls("0::/system.slice/node07_slurmstepd.scope/job_5/step_extern\n");
	assert_string_equal(c.slurm_step, "extern");
	c = cls("0::/system.slice/slurmstepd.scope/job_5/step_interactive/slurm\n");
	assert_string_equal(c.slurm_step, "interactive");
	/* in the job, in no step */
	c = cls("0::/system.slice/slurmstepd.scope/job_9\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_SLURM);
	assert_int_equal(c.slurm_job, 9);
	assert_string_equal(c.slurm_step, "");
	/* slurmstepd's own cgroup is no job */
	c = cls("0::/system.slice/slurmstepd.scope/system\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_BARE);
	/* job_ without slurm above it, a job id that is not decimal */
	assert_int_equal(cls("0::/job_5/step_0\n").kind, GPUCTL_WORKLOAD_BARE);
	assert_int_equal(cls("0::/system.slice/slurmstepd.scope/job_0x5/step_0\n").kind,
	                 GPUCTL_WORKLOAD_BARE);
	assert_int_equal(cls("6:freezer:/slurm/uid_1000/job_99999999999/step_0\n").kind,
	                 GPUCTL_WORKLOAD_BARE);
}

static void test_pod_systemd(void **state)
{
	struct wl_class c;

	(void)state;
	c = cls("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_UNDER
	        ".slice/cri-containerd-" ID_A ".scope\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_POD);
	assert_string_equal(c.pod_uid, UID_DASH);
	assert_string_equal(c.runtime, "containerd");
	assert_string_equal(c.id, ID_A);
	c = cls("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_UNDER
	        ".slice/crio-" ID_B ".scope\n");
	assert_string_equal(c.runtime, "cri-o");
	assert_string_equal(c.id, ID_B);
	/* Guaranteed: the pod's slice right under kubepods.slice */
	c = cls("0::/kubepods.slice/kubepods-pod" UID_UNDER ".slice/cri-o-" ID_C ".scope\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_POD);
	assert_string_equal(c.runtime, "cri-o");
	c = cls("1:name=systemd:/kubepods.slice/kubepods-pod" UID_UNDER ".slice/docker-" ID_C
	        ".scope\n");
	assert_string_equal(c.runtime, "docker");
	assert_string_equal(c.pod_uid, UID_DASH);
	/* a pod's slice but no container's scope (CRI-O's conmon) */
	c = cls("0::/kubepods.slice/kubepods-pod" UID_UNDER ".slice/crio-conmon-" ID_C ".scope\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_POD);
	assert_string_equal(c.id, "");
	assert_null(c.runtime);
}

static void test_pod_cgroupfs(void **state)
{
	struct wl_class c;

	(void)state;
	c = cls("4:memory:/kubepods/burstable/pod" UID_DASH "/" ID_A "\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_POD);
	assert_string_equal(c.pod_uid, UID_DASH);
	assert_string_equal(c.id, ID_A);
	assert_null(c.runtime); /* the path does not say: the state files do */
	c = cls("0::/kubepods/pod" UID_DASH "/" ID_B "\n");
	assert_string_equal(c.id, ID_B);
	/* a static pod's uid is a 32-character hash */
	c = cls("0::/kubepods/besteffort/pod0123456789abcdef0123456789abcdef/" ID_B "\n");
	assert_string_equal(c.pod_uid, "0123456789abcdef0123456789abcdef");
	/* not a uid */
	assert_int_equal(cls("0::/kubepods/podNOTAUID/" ID_B "\n").kind, GPUCTL_WORKLOAD_BARE);
}

static void test_containers(void **state)
{
	struct wl_class c;

	(void)state;
	c = cls("0::/system.slice/docker-" ID_A ".scope\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_CONTAINER);
	assert_string_equal(c.runtime, "docker");
	assert_string_equal(c.id, ID_A);
	c = cls("4:memory:/docker/" ID_B "\n");
	assert_string_equal(c.runtime, "docker");
	assert_string_equal(c.id, ID_B);
	/* podman: systemd (with --cgroups=split's "container" child), cgroupfs, rootless */
	c = cls("0::/machine.slice/libpod-" ID_C ".scope/container\n");
	assert_string_equal(c.runtime, "podman");
	assert_string_equal(c.id, ID_C);
	c = cls("0::/libpod_parent/libpod-" ID_C "\n");
	assert_string_equal(c.runtime, "podman");
	c = cls("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID_A
	        ".scope\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_CONTAINER);
	assert_string_equal(c.runtime, "podman");
	assert_int_equal(c.user_uid, 1000);
	/* conmon's scope is not the container */
	c = cls("0::/machine.slice/libpod-conmon-" ID_C ".scope\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_BARE);
	/* containerd: nerdctl, and the CRI's scope outside a pod */
	c = cls("0::/system.slice/nerdctl-" ID_A ".scope\n");
	assert_string_equal(c.runtime, "containerd");
	c = cls("0::/system.slice/cri-containerd-" ID_A ".scope\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_CONTAINER);
	assert_string_equal(c.runtime, "containerd");
	/* LXC */
	c = cls("0::/lxc.payload.web/init.scope\n");
	assert_string_equal(c.runtime, "lxc");
	assert_string_equal(c.id, "web");
	c = cls("4:memory:/lxc/db\n");
	assert_string_equal(c.runtime, "lxc");
	assert_string_equal(c.id, "db");
	/* a prefix (a cgroup namespace, a nesting) before the layout */
	c = cls("0::/gpuctl-test-1/system.slice/docker-" ID_A ".scope\n");
	assert_string_equal(c.id, ID_A);
	/* docker in docker: the outer container, the one the host's runtime knows */
	c = cls("0::/docker/" ID_A "/docker/" ID_B "\n");
	assert_string_equal(c.id, ID_A);
}

static void test_units_sessions(void **state)
{
	struct wl_class c;

	(void)state;
	c = cls("0::/system.slice/jupyter.service\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_UNIT);
	assert_string_equal(c.name, "jupyter.service");
	assert_int_equal(c.unit_uid, UINT32_MAX);
	c = cls("0::/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service\n");
	assert_string_equal(c.name, "jupyter.service");
	assert_int_equal(c.unit_uid, 1000);
	/* the user's manager itself: a system unit */
	c = cls("0::/user.slice/user-1000.slice/user@1000.service/init.scope\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_UNIT);
	assert_string_equal(c.name, "user@1000.service");
	assert_int_equal(c.unit_uid, UINT32_MAX);
	c = cls("1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_SESSION);
	assert_string_equal(c.name, "session-3.scope");
	assert_int_equal(c.unit_uid, 1000);
	c = cls("0::/\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_BARE);
	assert_string_equal(c.cgroup, "/");
	assert_int_equal(cls("0::/init.scope\n").kind, GPUCTL_WORKLOAD_BARE);
	assert_int_equal(cls("0::/system.slice/.service\n").kind, GPUCTL_WORKLOAD_BARE);
}

static void test_precedence(void **state)
{
	struct wl_class c;

	(void)state;
	/* hybrid: the most specific kind wins, whatever line has it */
	c = cls("9:name=systemd:/system.slice/slurmd.service\n6:freezer:/slurm/uid_0/job_1/"
	        "step_0\n0::/system.slice/slurmd.service\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_SLURM);
	assert_string_equal(c.cgroup, "/slurm/uid_0/job_1/step_0");
	/* equal kinds: 0:: first, then name=systemd, then file order */
	c = cls("4:memory:/docker/" ID_A "\n1:name=systemd:/system.slice/docker-" ID_B
	        ".scope\n0::/system.slice/docker-" ID_C ".scope\n");
	assert_string_equal(c.id, ID_C);
	c = cls("4:memory:/docker/" ID_A "\n1:name=systemd:/system.slice/docker-" ID_B ".scope\n");
	assert_string_equal(c.id, ID_B);
	c = cls("4:memory:/docker/" ID_A "\n5:devices:/docker/" ID_B "\n");
	assert_string_equal(c.id, ID_A);
	/* unit against session: equal; the v2 line decides */
	c = cls("1:name=systemd:/user.slice/user-1000.slice/session-3.scope\n0::/system.slice/"
	        "sshd.service\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_UNIT);
	/* bare everywhere: the v2 path is the one kept */
	c = cls("4:memory:/process_api/abc\n0::/\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_BARE);
	assert_string_equal(c.cgroup, "/");
}

static void test_hostile_cgroup(void **state)
{
	struct wl_class c;
	char big[12000], line[12100];

	(void)state;
	/* ids that are not lower-case hex of 12..64 */
	assert_int_equal(cls("0::/docker/NOTHEX\n").kind, GPUCTL_WORKLOAD_BARE);
	assert_int_equal(cls("0::/docker/3F4E5D6C7B8A\n").kind, GPUCTL_WORKLOAD_BARE);
	assert_int_equal(cls("0::/docker/3f4e5d6c7b8\n").kind, GPUCTL_WORKLOAD_BARE);
	assert_int_equal(cls("0::/system.slice/docker-" ID_A "0.scope\n").kind,
	                 GPUCTL_WORKLOAD_BARE);
	assert_int_equal(cls("0::/system.slice/libpod-" ID_A "\x1b.scope\n").kind,
	                 GPUCTL_WORKLOAD_BARE);
	/* a cgroup name with a newline forges a line: the text is trusted for nothing */
	c = cls("0::/user.slice/user-1000.slice/user@1000.service/app.slice/evil\n0::/kubepods/"
	        "pod" UID_DASH "/" ID_A "\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_BARE);
	assert_string_equal(c.cgroup, "");
	c = cls("0::/system.slice/a.service\ngarbage\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_BARE);
	assert_int_equal(cls("0:\n").kind, GPUCTL_WORKLOAD_BARE);
	assert_int_equal(cls("x::/docker/" ID_A "\n").kind, GPUCTL_WORKLOAD_BARE);
	assert_int_equal(wl_parse_cgroup("", 0, &c), -ENODATA);
	/* escapes, quotes and bytes that are not UTF-8 are kept as they are (consumers escape) */
	c = cls("0::/system.slice/\x1b[31m\"x'\xff\xfe.service\n");
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_UNIT);
	assert_string_equal(c.name, "\x1b[31m\"x'\xff\xfe.service");
	assert_false(c.truncated);
	/* a 10 kB name: cut, and so is the path */
	memset(big, 'a', sizeof(big));
	memcpy(big + sizeof(big) - 9, ".service", 9);
	snprintf(line, sizeof(line), "0::/system.slice/%s\n", big);
	c = cls(line);
	assert_int_equal(c.kind, GPUCTL_WORKLOAD_UNIT);
	assert_true(c.truncated);
	assert_int_equal(strlen(c.name), GPUCTL_WORKLOAD_NAME_MAX);
	assert_int_equal(strlen(c.cgroup), GPUCTL_WORKLOAD_NAME_MAX);
	/* cut at a UTF-8 boundary: 200 two-byte characters are 400 bytes, 126 of them kept */
	{
		char u[512] = "0::/system.slice/";
		size_t at = strlen(u);

		for (int i = 0; i < 200; i++, at += 2)
			memcpy(u + at, "\xc3\xa9", 2);
		strcpy(u + at, ".service\n");
		c = cls(u);
		assert_int_equal(strlen(c.name), 252);
		assert_true(c.truncated);
	}
	/* deeper than the components kept: the last ones decide */
	{
		char *deep = malloc(200 * 2 + 200);
		size_t at = 0;

		at += (size_t)sprintf(deep, "0::");
		for (int i = 0; i < 200; i++)
			at += (size_t)sprintf(deep + at, "/a");
		sprintf(deep + at, "/system.slice/docker-%s.scope\n", ID_A);
		c = cls(deep);
		assert_string_equal(c.id, ID_A);
		free(deep);
	}
}

/* ---- /proc/PID/status, environ, stat (proc(5)) ---- */

static void test_status(void **state)
{
	static const char st[] = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
	                         "Uid:\t1000\t1001\t1002\t1003\nGid:\t100\t100\t100\t100\n"
	                         "NSpid:\t4242\t17\t1\n";
	uint32_t ns = 0, uid = UINT32_MAX;

	(void)state;
	wl_parse_status(st, strlen(st), &ns, &uid);
	assert_int_equal(ns, 1);
	assert_int_equal(uid, 1000);
	ns = 5, uid = 7;
	wl_parse_status("Name:\tx\nNSpid:\t\nUid:\tabc\n", 25, &ns, &uid);
	assert_int_equal(ns, 5);
	assert_int_equal(uid, 7);
	wl_parse_status("NSpid:\t99999999999\n", 19, &ns, &uid);
	assert_int_equal(ns, 5);
	wl_parse_status("Uid:\t0\t0\t0\t0", 12, &ns, &uid); /* no final newline */
	assert_int_equal(uid, 0);
}

static void test_environ(void **state)
{
	static const char env[] = "HOME=/root\0SLURM_JOB_ID=4250\0SLURM_ARRAY_JOB_ID=4242\0"
	                          "SLURM_ARRAY_TASK_ID=7\0";
	static const char hex[] =
	        "SLURM_JOB_ID=4250\0SLURM_ARRAY_JOB_ID=0x10\0SLURM_ARRAY_TASK_ID=7";
	static const char dup[] = "SLURM_JOB_ID=4250\0SLURM_JOB_ID=1\0SLURM_ARRAY_JOB_ID=4242\0"
	                          "SLURM_ARRAY_TASK_ID=8";
	uint32_t aj = 0, at = 0;

	(void)state;
	assert_true(wl_parse_environ(env, sizeof(env) - 1, 4250, &aj, &at));
	assert_int_equal(aj, 4242);
	assert_int_equal(at, 7);
	/* another job's environment (a user's own SLURM_JOB_ID) is not believed */
	aj = at = 0;
	assert_false(wl_parse_environ(env, sizeof(env) - 1, 4251, &aj, &at));
	assert_int_equal(aj, 0);
	assert_false(wl_parse_environ(hex, sizeof(hex) - 1, 4250, &aj, &at));
	assert_false(wl_parse_environ("", 0, 4250, &aj, &at));
	/* the first of a name counts, as getenv finds it */
	assert_true(wl_parse_environ(dup, sizeof(dup) - 1, 4250, &aj, &at));
	assert_int_equal(at, 8);
}

static void test_stat(void **state)
{
	/* proc(5): (1) pid (2) comm (3) state (4) ppid ... (22) starttime */
	static const char st[] = "4242 (a b) c)) S 1 4242 4242 0 -1 4194304 100 0 0 0 5 6 0 0 20 0 "
	                         "1 0 987654 1000000 100\n";
	uint64_t s = 0;

	(void)state;
	assert_int_equal(wl_parse_stat_start(st, strlen(st), &s), 0);
	assert_int_equal(s, 987654);
	assert_int_equal(wl_parse_stat_start("4242 (x) S 1 2\n", 15, &s), -EINVAL);
	assert_int_equal(wl_parse_stat_start("4242 x S", 8, &s), -EINVAL);
}

/* ---- labels ---- */

static void test_labels(void **state)
{
	struct gpuctl_workload wl;
	char buf[WL_LABEL_MAX + 1], big[400];

	(void)state;
	memset(&wl, 0, sizeof(wl));
	wl.unit_uid = UINT32_MAX;
	wl.kind = GPUCTL_WORKLOAD_SLURM;
	wl.slurm_job = 4242;
	wl.slurm_step = "0";
	wl_label(&wl, buf);
	assert_string_equal(buf, "slurm 4242.0");
	wl.slurm_step = "batch";
	wl_label(&wl, buf);
	assert_string_equal(buf, "slurm 4242.batch");
	wl.slurm_step = NULL;
	wl_label(&wl, buf);
	assert_string_equal(buf, "slurm 4242");
	/* an array task: Slurm's own ARRAYJOB_TASK notation (squeue, sacct) */
	wl.slurm_job = 4250, wl.slurm_array_job = 4242, wl.slurm_array_task = 7,
	wl.slurm_step = "0";
	wl_label(&wl, buf);
	assert_string_equal(buf, "slurm 4242_7.0");

	memset(&wl, 0, sizeof(wl));
	wl.kind = GPUCTL_WORKLOAD_POD;
	wl.pod_namespace = "ml", wl.name = "trainer-7", wl.container = "main", wl.id = ID_A;
	wl_label(&wl, buf);
	assert_string_equal(buf, "pod ml/trainer-7/main");
	wl.pod_namespace = wl.name = wl.container = NULL;
	wl.pod_uid = UID_DASH;
	wl_label(&wl, buf);
	assert_string_equal(buf, "pod 1a2b3c4d/3f4e5d6c7b8a");

	memset(&wl, 0, sizeof(wl));
	wl.kind = GPUCTL_WORKLOAD_CONTAINER;
	wl.runtime = "podman", wl.name = "web-1", wl.id = ID_A;
	wl_label(&wl, buf);
	assert_string_equal(buf, "podman web-1");
	wl.runtime = "docker", wl.name = NULL;
	wl_label(&wl, buf);
	assert_string_equal(buf, "docker 3f4e5d6c7b8a");
	wl.runtime = "containerd";
	wl_label(&wl, buf);
	assert_string_equal(buf, "containerd 3f4e5d6c7b8a");
	wl.runtime = "lxc", wl.id = "web-server-01", wl.name = "web-server-01";
	wl_label(&wl, buf);
	assert_string_equal(buf, "lxc web-server-01");

	memset(&wl, 0, sizeof(wl));
	wl.kind = GPUCTL_WORKLOAD_UNIT;
	wl.name = "jupyter.service", wl.unit_uid = UINT32_MAX;
	wl_label(&wl, buf);
	assert_string_equal(buf, "unit jupyter.service");
	wl.unit_uid = 1000;
	wl_label(&wl, buf);
	assert_string_equal(buf, "unit jupyter.service@1000");
	wl.kind = GPUCTL_WORKLOAD_SESSION, wl.name = "session-3.scope";
	wl_label(&wl, buf);
	assert_string_equal(buf, "session 3");
	wl.kind = GPUCTL_WORKLOAD_BARE;
	wl_label(&wl, buf);
	assert_string_equal(buf, "bare");
	wl.kind = GPUCTL_WORKLOAD_UNKNOWN;
	wl_label(&wl, buf);
	assert_string_equal(buf, "?");

	/* three long names: bounded, cut at a UTF-8 boundary */
	for (size_t i = 0; i + 2 < sizeof(big); i += 2)
		memcpy(big + i, "\xc3\xa9", 2);
	big[sizeof(big) - 2] = 'x', big[sizeof(big) - 1] = '\0';
	memset(&wl, 0, sizeof(wl));
	wl.kind = GPUCTL_WORKLOAD_POD;
	wl.pod_namespace = wl.name = wl.container = big;
	wl_label(&wl, buf);
	assert_true(strlen(buf) <= WL_LABEL_MAX);
	assert_true(strlen(buf) >= WL_LABEL_MAX - 3);
	for (size_t i = 0, n = strlen(buf); i < n;) { /* no sequence cut */
		size_t k = utf8_seq_len((const unsigned char *)buf + i, n - i);

		assert_true(k > 0);
		i += k;
	}
	assert_string_equal(gpuctl_workload_kind_name(GPUCTL_WORKLOAD_POD), "pod");
	assert_string_equal(gpuctl_workload_kind_name(GPUCTL_WORKLOAD_UNKNOWN), "unknown");
	assert_null(gpuctl_workload_kind_name((enum gpuctl_workload_kind)7));
}

/* ---- state files under a scratch root ---- */

static char root[64];

static void put_file(const char *rel, const char *text)
{
	char path[512], cmd[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	assert_int_equal(system(cmd), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int root_setup(void **state)
{
	(void)state;
	strcpy(root, "/tmp/gpuctl-wl-XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int root_teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd);
}

static struct wl_names names_of(const char *cgroup_text, const char **runtime, uint64_t *files)
{
	struct wl_class c = cls(cgroup_text);
	struct wl_names n;

	memset(&n, 0, sizeof(n));
	*runtime = c.runtime;
	wl_state_names(root, &c, &n, runtime, files);
	return n;
}

static void test_state_names(void **state)
{
	const char *rt;
	uint64_t files = 0;
	struct wl_names n;

	(void)state;
	/* containerd's CRI: the bundle's annotations */
	put_file("run/containerd/io.containerd.runtime.v2.task/k8s.io/" ID_A "/config.json",
	         "{\"ociVersion\":\"1.1.0\",\"annotations\":{\"io.kubernetes.cri.container-type\":"
	         "\"container\",\"io.kubernetes.cri.sandbox-name\":\"trainer-7\","
	         "\"io.kubernetes.cri.sandbox-namespace\":\"ml\","
	         "\"io.kubernetes.cri.container-name\":\"main\"}}");
	n = names_of("0::/kubepods.slice/kubepods-pod" UID_UNDER ".slice/cri-containerd-" ID_A
	             ".scope\n",
	             &rt, &files);
	assert_string_equal(n.name, "trainer-7");
	assert_string_equal(n.pod_namespace, "ml");
	assert_string_equal(n.container, "main");
	assert_int_equal(files, 1);
	/* the cgroupfs driver does not say the runtime: the state that names it does */
	n = names_of("0::/kubepods/pod" UID_DASH "/" ID_A "\n", &rt, &files);
	assert_string_equal(rt, "containerd");
	assert_string_equal(n.container, "main");
	/* CRI-O */
	put_file("run/containers/storage/overlay-containers/" ID_B "/userdata/config.json",
	         "{\"annotations\":{\"io.kubernetes.pod.name\":\"web-0\","
	         "\"io.kubernetes.pod.namespace\":\"prod\","
	         "\"io.kubernetes.container.name\":\"nginx\"}}");
	n = names_of("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_UNDER
	             ".slice/crio-" ID_B ".scope\n",
	             &rt, &files);
	assert_string_equal(n.name, "web-0");
	assert_string_equal(n.pod_namespace, "prod");
	assert_string_equal(n.container, "nginx");
	/* docker: "Name" with its '/' */
	put_file("var/lib/docker/containers/" ID_C "/config.v2.json",
	         "{\"ID\":\"" ID_C "\",\"Name\":\"/web-1\",\"Config\":{\"Labels\":{}}}");
	n = names_of("0::/system.slice/docker-" ID_C ".scope\n", &rt, &files);
	assert_string_equal(n.name, "web-1");
	/* podman rootful: containers/storage's containers.json (overlay, then vfs) */
	put_file("var/lib/containers/storage/overlay-containers/containers.json",
	         "[{\"id\":\"" ID_B "\",\"names\":[\"other\"]},{\"id\":\"" ID_A
	         "\",\"names\":[\"web-2\",\"alias\"],\"image\":\"x\"}]");
	n = names_of("0::/machine.slice/libpod-" ID_A ".scope/container\n", &rt, &files);
	assert_string_equal(n.name, "web-2");
	put_file("var/lib/containers/storage/vfs-containers/containers.json",
	         "[{\"id\":\"" ID_C "\",\"names\":[\"vfs-one\"]}]");
	n = names_of("0::/libpod_parent/libpod-" ID_C "\n", &rt, &files);
	assert_string_equal(n.name, "vfs-one");
	/* LXC: the name is the id */
	n = names_of("0::/lxc.payload.web\n", &rt, &files);
	assert_string_equal(n.name, "web");
}

static void test_state_rootless(void **state)
{
	/* nobody (uid 65534, home /nonexistent: Debian's base-passwd) as the rootless user */
	static const char rel[] =
	        "nonexistent/.local/share/containers/storage/overlay-containers/containers.json";
	static const char cg[] = "0::/user.slice/user-65534.slice/user@65534.service/user.slice/"
	                         "libpod-" ID_A ".scope\n";
	char path[512];
	const char *rt;
	uint64_t files = 0;
	struct wl_names n;

	(void)state;
	if (geteuid() != 0) {
		print_message("rootless podman names: skipped, chown needs root\n");
		return;
	}
	put_file(rel, "[{\"id\":\"" ID_A "\",\"names\":[\"rootless-1\"]}]");
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	assert_int_equal(chown(path, 65534, 65534), 0);
	n = names_of(cg, &rt, &files);
	assert_string_equal(n.name, "rootless-1");
	/* owned by another user: not believed */
	assert_int_equal(chown(path, 1234, 1234), 0);
	n = names_of(cg, &rt, &files);
	assert_string_equal(n.name, "");
}

static void test_state_hostile(void **state)
{
	const char *rt;
	uint64_t files = 0;
	struct wl_names n;
	char path[512], target[512];
	char *huge;

	(void)state;
	/* a symlinked config.json is refused, even to a good file */
	put_file("elsewhere/config.v2.json", "{\"Name\":\"/linked\"}");
	put_file("var/lib/docker/containers/" ID_A "/placeholder", "");
	snprintf(path, sizeof(path), "%s/var/lib/docker/containers/" ID_A "/config.v2.json", root);
	snprintf(target, sizeof(target), "%s/elsewhere/config.v2.json", root);
	assert_int_equal(symlink(target, path), 0);
	n = names_of("0::/system.slice/docker-" ID_A ".scope\n", &rt, &files);
	assert_string_equal(n.name, "");
	{
		int rootfd = open(root, O_PATH | O_DIRECTORY);
		char *text = NULL;
		size_t len;

		assert_int_equal(wl_state_read(rootfd,
		                               "var/lib/docker/containers/" ID_A "/config.v2.json",
		                               UINT32_MAX, &text, &len),
		                 -ELOOP);
		/* a symlink on the way that points out of the root stays inside it */
		snprintf(path, sizeof(path), "%s/etc-link", root);
		assert_int_equal(symlink("/etc", path), 0);
		assert_int_equal(wl_state_read(rootfd, "etc-link/passwd", UINT32_MAX, &text, &len),
		                 -ENOENT);
		close(rootfd);
	}
	/* a file over 1 MiB is skipped */
	huge = malloc(WL_FILE_MAX + 2);
	memset(huge, ' ', WL_FILE_MAX + 1);
	huge[WL_FILE_MAX + 1] = '\0';
	memcpy(huge, "{\"Name\":\"/big\"}", 15);
	put_file("var/lib/docker/containers/" ID_B "/config.v2.json", huge);
	free(huge);
	n = names_of("0::/system.slice/docker-" ID_B ".scope\n", &rt, &files);
	assert_string_equal(n.name, "");
	/* malformed JSON, wrong types, a NUL in the name */
	put_file("var/lib/docker/containers/" ID_C "/config.v2.json", "{\"Name\":\"/x\"");
	n = names_of("0::/system.slice/docker-" ID_C ".scope\n", &rt, &files);
	assert_string_equal(n.name, "");
	assert_false(wl_names_docker("{\"Name\":7}", 10, &n));
	assert_false(wl_names_docker("{\"Name\":\"/a\\u0000b\"}", 20, &n));
	assert_false(wl_names_docker("{\"Name\":\"/\",\"Name\":\"/b\"}", 24, &n));
	assert_false(wl_names_storage("{\"id\":\"x\"}", 10, "x", &n));
	assert_false(wl_names_storage("[{\"id\":\"x\",\"names\":\"web\"}]", 27, "x", &n));
	assert_false(wl_names_oci("{\"annotations\":[]}", 18, &n));
	/* a FIFO does not block the reader */
	snprintf(path, sizeof(path), "%s/var/lib/docker/containers/" ID_C "/config.v2.json", root);
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	n = names_of("0::/system.slice/docker-" ID_C ".scope\n", &rt, &files);
	assert_string_equal(n.name, "");
	/* escapes and a long name in a runtime's state: kept raw, bounded */
	{
		char json[2100] = "{\"Name\":\"/\\u001b[2J";

		for (int i = 0; i < 300; i++)
			strcat(json, "\\u00e9");
		strcat(json, "\"}");
		memset(&n, 0, sizeof(n));
		assert_true(wl_names_docker(json, strlen(json), &n));
		assert_true(n.truncated);
		assert_true(strlen(n.name) <= GPUCTL_WORKLOAD_NAME_MAX);
		assert_memory_equal(n.name, "\x1b[2J\xc3\xa9", 6);
		assert_int_equal(strlen(n.name) % 2, 0); /* 4 + whole é */
	}
}

/* ---- the cache ---- */

static uint64_t my_start(pid_t pid)
{
	char path[64], buf[1024];
	uint64_t s = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf));
	close(fd);
	assert_true(n > 0);
	assert_int_equal(wl_parse_stat_start(buf, (size_t)n, &s), 0);
	return s;
}

static void test_cache(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_workloads *wls = NULL;
	const struct gpuctl_workload *a, *b, *c;
	uint32_t me = (uint32_t)getpid();
	uint64_t files;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_workloads_new(ctx, &wls), 0);
	assert_int_equal(gpuctl_workloads_get(ctx, wls, 0, 0, &a), -EINVAL);
	assert_int_equal(gpuctl_workloads_get(ctx, wls, me, 0, &a), 0);
	assert_int_equal(a->pid, me);
	assert_true(a->kind != GPUCTL_WORKLOAD_UNKNOWN);
	assert_int_equal(a->uid, getuid());
	assert_non_null(a->label);
	files = gpuctl_workloads_files_read(wls);
	assert_true(files >= 3); /* stat, cgroup, status */
	/* known: no file read, with start 0 or the right start */
	assert_int_equal(gpuctl_workloads_get(ctx, wls, me, 0, &b), 0);
	assert_ptr_equal(a, b);
	assert_int_equal(gpuctl_workloads_get(ctx, wls, me, my_start(getpid()), &b), 0);
	assert_ptr_equal(a, b);
	assert_int_equal(gpuctl_workloads_files_read(wls), files);
	/* another start time: the PID was reused, read again (and this process is not that one) */
	assert_int_equal(gpuctl_workloads_get(ctx, wls, me, my_start(getpid()) + 1, &c), 0);
	assert_true(gpuctl_workloads_files_read(wls) > files);
	assert_int_equal(c->kind, GPUCTL_WORKLOAD_UNKNOWN);
	assert_string_equal(c->label, "?");
	assert_int_equal(a->pid, me); /* the old entry lives until the next sweep */
	/* a PID no process has: unknown, and cached as such */
	assert_int_equal(gpuctl_workloads_get(ctx, wls, 4194304 + 7, 0, &b), 0);
	assert_int_equal(b->kind, GPUCTL_WORKLOAD_UNKNOWN);
	/* sweep: both were asked for, nothing forgotten; then neither was */
	assert_int_equal(gpuctl_workloads_sweep(wls), 0);
	assert_int_equal(gpuctl_workloads_sweep(wls), 2);
	files = gpuctl_workloads_files_read(wls);
	assert_int_equal(gpuctl_workloads_get(ctx, wls, me, 0, &a), 0);
	assert_true(gpuctl_workloads_files_read(wls) > files); /* forgotten: read again */
	gpuctl_workloads_free(wls);
	gpuctl_ctx_free(ctx);
}

static void test_cache_scale(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_workloads *wls = NULL;
	static const struct gpuctl_workload *got[3000];
	const struct gpuctl_workload *w;
	uint64_t files;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_workloads_new(ctx, &wls), 0);
	/* PIDs above pid_max's ceiling: no process, no file; the table grows, pointers stay */
	for (uint32_t i = 0; i < 3000; i++)
		assert_int_equal(gpuctl_workloads_get(ctx, wls, 5000000 + i * 7, 0, &got[i]), 0);
	files = gpuctl_workloads_files_read(wls);
	for (uint32_t i = 0; i < 3000; i++) {
		assert_int_equal(gpuctl_workloads_get(ctx, wls, 5000000 + i * 7, 0, &w), 0);
		assert_ptr_equal(w, got[i]);
		assert_int_equal(w->pid, 5000000 + i * 7);
	}
	assert_int_equal(gpuctl_workloads_files_read(wls), files);
	assert_int_equal(gpuctl_workloads_sweep(wls), 0);
	for (uint32_t i = 0; i < 3000; i += 2)
		assert_int_equal(gpuctl_workloads_get(ctx, wls, 5000000 + i * 7, 0, &w), 0);
	assert_int_equal(gpuctl_workloads_sweep(wls), 1500);
	gpuctl_workloads_free(wls);
	gpuctl_ctx_free(ctx);
}

/* ---- the real kernel: folders in this machine's cgroup hierarchies, a real process in them ----
 */

#define CG "/sys/fs/cgroup"

struct layout {
	const char *hier; /* folder under /sys/fs/cgroup: "unified" (v2), "freezer", "systemd" */
	const char *path; /* below the test's own folder */
	enum gpuctl_workload_kind kind;
	const char *label;
	const char *runtime, *id; /* NULL: not checked */
};

/* Each layout from its source (see the top of this file); the labels as docs/workloads.md
 * writes them. The docker container's name comes from a config.v2.json in a scratch state
 * root. */
static const struct layout layouts[] = {
        {"unified", "system.slice/slurmstepd.scope/job_4242/step_0/user/task_0",
         GPUCTL_WORKLOAD_SLURM, "slurm 4242.0", NULL, NULL},
        {"unified",
         "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_UNDER
         ".slice/cri-containerd-" ID_A ".scope",
         GPUCTL_WORKLOAD_POD, "pod 1a2b3c4d/3f4e5d6c7b8a", "containerd", ID_A},
        {"unified", "kubepods/besteffort/pod" UID_DASH "/" ID_B, GPUCTL_WORKLOAD_POD,
         "pod 1a2b3c4d/aaaabbbbcccc", NULL, ID_B},
        {"unified", "system.slice/docker-" ID_C ".scope", GPUCTL_WORKLOAD_CONTAINER, "docker web-1",
         "docker", ID_C},
        {"unified", "machine.slice/libpod-" ID_A ".scope/container", GPUCTL_WORKLOAD_CONTAINER,
         "podman 3f4e5d6c7b8a", "podman", ID_A},
        {"unified",
         "user.slice/user-65534.slice/user@65534.service/user.slice/libpod-" ID_B ".scope",
         GPUCTL_WORKLOAD_CONTAINER, "podman aaaabbbbcccc", "podman", ID_B},
        {"unified", "system.slice/jupyter.service", GPUCTL_WORKLOAD_UNIT, "unit jupyter.service",
         NULL, NULL},
        {"unified", "user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service",
         GPUCTL_WORKLOAD_UNIT, "unit jupyter.service@1000", NULL, NULL},
        {"unified", "user.slice/user-1000.slice/session-3.scope", GPUCTL_WORKLOAD_SESSION,
         "session 3", NULL, NULL},
        {"freezer", "slurm/uid_0/job_77/step_batch", GPUCTL_WORKLOAD_SLURM, "slurm 77.batch", NULL,
         NULL},
        {"freezer", "slurm_node1/uid_0/job_78", GPUCTL_WORKLOAD_SLURM, "slurm 78", NULL, NULL},
        {"systemd", "docker/" ID_C, GPUCTL_WORKLOAD_CONTAINER, "docker web-1", "docker", ID_C},
};

static pid_t child = -1;
static char made[64][600]; /* folders made, in order */
static size_t n_made;
static char test_top[64];

/* The cgroup of this process in hierarchy hier (its /proc/self/cgroup line). */
static void own_cgroup(const char *hier, char *buf, size_t size)
{
	const char *key = streq(hier, "unified")   ? "0::"
	                  : streq(hier, "systemd") ? ":name=systemd:"
	                                           : ":freezer:";
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[4096];

	snprintf(buf, size, "/");
	while (f && fgets(line, sizeof(line), f)) {
		char *k = strstr(line, key);

		if (k && (k == line || key[0] == ':')) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(buf, size, "%s", k + strlen(key));
		}
	}
	if (f)
		fclose(f);
}

static int move_to(const char *dir, pid_t pid)
{
	char path[600];
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	r = fprintf(f, "%d\n", (int)pid) > 0 ? 0 : -EIO;
	if (fclose(f) != 0)
		r = -errno;
	return r;
}

static void move_back(pid_t pid)
{
	static const char *const hiers[] = {"unified", "freezer", "systemd"};

	for (size_t i = 0; i < 3; i++) {
		char own[1024], dir[1100];

		own_cgroup(hiers[i], own, sizeof(own));
		snprintf(dir, sizeof(dir), CG "/%s%s", hiers[i], own);
		move_to(dir, pid);
	}
}

static int kernel_setup(void **state)
{
	int p[2];

	(void)state;
	if (root_setup(state) < 0 || pipe(p) < 0)
		return -1;
	child = fork();
	if (child == 0) {
		char c;

		close(p[1]);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	/* the child lives until the test kills it */
	snprintf(test_top, sizeof(test_top), "gpuctl-test-%d", (int)getpid());
	n_made = 0;
	return child > 0 ? 0 : -1;
}

static int kernel_teardown(void **state)
{
	if (child > 0) {
		move_back(child);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		child = -1;
	}
	/* deepest first: the reverse of the order made */
	while (n_made > 0)
		if (rmdir(made[--n_made]) < 0 && errno != ENOENT)
			fprintf(stderr, "test-workload: rmdir %s: %s\n", made[n_made],
			        strerror(errno));
	unsetenv("GPUCTL_WORKLOAD_ROOT");
	return root_teardown(state);
}

/* mkdir -p of hier's top/path, each folder made recorded for the teardown. */
static void make_path(const char *hier, const char *path, char *leaf, size_t size)
{
	char rel[512];
	char *slash;

	snprintf(rel, sizeof(rel), "%s/%s", test_top, path);
	for (slash = rel;; slash++) {
		slash = strchr(slash, '/');
		if (slash)
			*slash = '\0';
		snprintf(leaf, size, CG "/%s/%s", hier, rel);
		if (mkdir(leaf, 0755) == 0) {
			assert_true(n_made < 64);
			snprintf(made[n_made++], sizeof(made[0]), "%s", leaf);
		} else {
			assert_int_equal(errno, EEXIST);
		}
		if (!slash)
			break;
		*slash = '/';
	}
}

static void test_real_cgroups(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	char dir[600];

	(void)state;
	if (geteuid() != 0 || access(CG "/unified/cgroup.procs", W_OK) != 0 ||
	    access(CG "/freezer/cgroup.procs", W_OK) != 0) {
		print_message(
		        "real cgroups: skipped, needs root and the hybrid hierarchies under " CG
		        " (unified, freezer, systemd)\n");
		return;
	}
	put_file("var/lib/docker/containers/" ID_C "/config.v2.json", "{\"Name\":\"/web-1\"}");
	setenv("GPUCTL_WORKLOAD_ROOT", root, 1);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		const struct layout *l = &layouts[i];
		struct gpuctl_workloads *wls = NULL;
		const struct gpuctl_workload *wl;
		char want_cg[600];

		if (streq(l->hier, "systemd") && access(CG "/systemd/cgroup.procs", W_OK) != 0)
			continue;
		make_path(l->hier, l->path, dir, sizeof(dir));
		assert_int_equal(move_to(dir, child), 0);
		assert_int_equal(gpuctl_workloads_new(ctx, &wls), 0);
		assert_int_equal(gpuctl_workloads_get(ctx, wls, (uint32_t)child, 0, &wl), 0);
		print_message("%s %s: %s\n", l->hier, l->path, wl->label);
		assert_int_equal(wl->kind, l->kind);
		assert_string_equal(wl->label, l->label);
		snprintf(want_cg, sizeof(want_cg), "/%s/%s", test_top, l->path);
		assert_string_equal(wl->cgroup, want_cg);
		assert_int_equal(wl->pid, child);
		assert_int_equal(wl->ns_pid, child);
		assert_int_equal(wl->uid, 0);
		if (l->runtime)
			assert_string_equal(wl->runtime, l->runtime);
		if (l->id)
			assert_string_equal(wl->id, l->id);
		gpuctl_workloads_free(wls);
		move_back(child);
	}
	gpuctl_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_slurm),
	        cmocka_unit_test(test_pod_systemd),
	        cmocka_unit_test(test_pod_cgroupfs),
	        cmocka_unit_test(test_containers),
	        cmocka_unit_test(test_units_sessions),
	        cmocka_unit_test(test_precedence),
	        cmocka_unit_test(test_hostile_cgroup),
	        cmocka_unit_test(test_status),
	        cmocka_unit_test(test_environ),
	        cmocka_unit_test(test_stat),
	        cmocka_unit_test(test_labels),
	        cmocka_unit_test_setup_teardown(test_state_names, root_setup, root_teardown),
	        cmocka_unit_test_setup_teardown(test_state_rootless, root_setup, root_teardown),
	        cmocka_unit_test_setup_teardown(test_state_hostile, root_setup, root_teardown),
	        cmocka_unit_test(test_cache),
	        cmocka_unit_test(test_cache_scale),
	        cmocka_unit_test_setup_teardown(test_real_cgroups, kernel_setup, kernel_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
