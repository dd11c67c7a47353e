// SPDX-License-Identifier: MIT
/*
 * test-exporter.c: the pure parts of `gpuctl exporter` (src/cli/listen.c, src/cli/metrics.c,
 * src/cli/http-check.c): the --listen parser, label and HELP escaping, the metric table, the
 * rendering of the exporter's own metrics, workload labels and the per-process cap, the check of
 * request heads (RFC 9112).
 *
 * Expected values come from the Prometheus text exposition format 0.0.4 (label values escape
 * backslash, double quote and newline; HELP escapes backslash and newline), from dcgm-exporter's
 * default counters (/work/shared/reference/health-monitoring.md section 5.1) and from the
 * --listen forms documented in docs/gpuctl.1. The workload label names are dcgm-exporter's
 * (internal/pkg/transformation/const.go: pod, namespace, container, hpc_job; docs/metrics.md).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http-check.h"
#include "listen.h"
#include "metrics.h"
#include "snapshot-internal.h"

static void listen_ok(const char *text, enum listen_kind kind, const char *host, unsigned port)
{
	struct listen_spec s;
	const char *why = NULL;
	int r = listen_parse(text, &s, &why);
	if (r != 0)
		fail_msg("'%s' refused: %s", text, why);
	assert_int_equal(s.kind, kind);
	assert_string_equal(s.host, host);
	assert_int_equal(s.port, port);
}

static void listen_bad(const char *text)
{
	struct listen_spec s, before;
	memset(&s, 0x5a, sizeof(s));
	memcpy(&before, &s, sizeof(s));
	const char *why = NULL;
	if (listen_parse(text, &s, &why) != -EINVAL)
		fail_msg("'%s' accepted", text);
	assert_non_null(why);
	assert_memory_equal(&s, &before, sizeof(s)); /* written only on success */
}

static void test_listen_forms(void **state)
{
	(void)state;
	listen_ok(":9409", LISTEN_ANY, "", 9409);
	listen_ok(LISTEN_DEFAULT, LISTEN_ANY, "", LISTEN_DEFAULT_PORT);
	listen_ok("127.0.0.1:1", LISTEN_IPV4, "127.0.0.1", 1);
	listen_ok("0.0.0.0:65535", LISTEN_IPV4, "0.0.0.0", 65535);
	listen_ok("[::1]:9409", LISTEN_IPV6, "::1", 9409);
	listen_ok("[::]:80", LISTEN_IPV6, "::", 80);
	listen_ok("[fe80::1:2:3:4]:80", LISTEN_IPV6, "fe80::1:2:3:4", 80);
	listen_ok("[::ffff:10.0.0.1]:80", LISTEN_IPV6, "::ffff:10.0.0.1", 80);
	listen_ok("localhost:9409", LISTEN_NAME, "localhost", 9409);
	listen_ok("gpu-node-01.example.org:8080", LISTEN_NAME, "gpu-node-01.example.org", 8080);
	listen_ok("example.org.:80", LISTEN_NAME, "example.org.", 80);
	listen_ok("x:00080", LISTEN_NAME, "x", 80);
}

static void test_listen_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {"",
	                                  "9409",
	                                  "localhost",
	                                  ":",
	                                  ":0",
	                                  ":00000",
	                                  ":65536",
	                                  ":999999",
	                                  ":-1",
	                                  ":+80",
	                                  ": 80",
	                                  ":80 ",
	                                  " :80",
	                                  ":8 0",
	                                  ":0x50",
	                                  "1.2.3:80",
	                                  "1.2.3.4.5:80",
	                                  "256.1.1.1:80",
	                                  "01.2.3.4.5:80",
	                                  "::1:80",
	                                  "::1",
	                                  "[::1]80",
	                                  "[::1]",
	                                  "[::1",
	                                  "[]:80",
	                                  "[zz::1]:80",
	                                  "[1.2.3.4]:80",
	                                  "[::1%lo]:80",
	                                  "[::1]:",
	                                  "-host:80",
	                                  "host-:80",
	                                  "ho_st:80",
	                                  "a..b:80",
	                                  ".a:80",
	                                  "a.b.123:80",
	                                  "0x7f.1:80",
	                                  "h\xc3\xa9:80",
	                                  "host:80:80",
	                                  "*:80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		listen_bad(bad[i]);
	char longname[LISTEN_MAX_HOST + 16];
	memset(longname, 'a', sizeof(longname));
	/* 63-character labels separated by dots: 254 characters of name is one too many */
	for (size_t i = 63; i < LISTEN_MAX_HOST + 1; i += 64)
		longname[i] = '.';
	memcpy(longname + LISTEN_MAX_HOST + 1, ":80", 4);
	listen_bad(longname);
	memset(longname, 'a', 64);
	memcpy(longname + 64, ":80", 4);
	listen_bad(longname); /* a 64-character label */
}

static char *label_text(const char *s)
{
	struct textbuf b = {0};
	textbuf_label_value(&b, s);
	assert_false(b.failed);
	char *out = strdup(b.data ? b.data : "");
	textbuf_free(&b);
	return out;
}

static void label_is(const char *in, const char *want)
{
	char *got = label_text(in);
	assert_string_equal(got, want);
	free(got);
}

static void test_label_escaping(void **state)
{
	(void)state;
	label_is("plain", "plain");
	label_is("", "");
	label_is(NULL, "");
	label_is("a\"b", "a\\\"b");
	label_is("a\\b", "a\\\\b");
	label_is("a\nb", "a\\nb");
	label_is("\\\"\n", "\\\\\\\"\\n");
	label_is("tab\there\r", "tab?here?");
	label_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	         "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	label_is("bad\xff", "bad?");
	label_is("\xc3", "?");                /* truncated sequence */
	label_is("\xc0\xaf", "??");           /* overlong '/' */
	label_is("\xed\xa0\x80", "???");      /* a surrogate */
	label_is("\xf4\x90\x80\x80", "????"); /* above U+10FFFF */
}

static void test_help_escaping(void **state)
{
	(void)state;
	struct textbuf b = {0};
	textbuf_help(&b, "a \"q\" \\ and\nnewline");
	assert_string_equal(b.data, "a \"q\" \\\\ and\\nnewline");
	textbuf_free(&b);
}

static void test_textbuf_grows(void **state)
{
	(void)state;
	struct textbuf b = {0};
	for (int i = 0; i < 10000; i++)
		textbuf_printf(&b, "%d,", i % 10);
	assert_false(b.failed);
	assert_int_equal(b.len, 20000);
	assert_int_equal(strlen(b.data), 20000);
	char big[1000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	textbuf_printf(&b, "%s", big);
	assert_int_equal(b.len, 20999);
	textbuf_free(&b);
	assert_null(b.data);
}

/* dcgm-exporter's default counters (health-monitoring.md 5.1) and their types. */
static const struct {
	const char *name, *type;
} dcgm_defaults[] = {
        {"DCGM_FI_DEV_SM_CLOCK", "gauge"},
        {"DCGM_FI_DEV_MEM_CLOCK", "gauge"},
        {"DCGM_FI_DEV_MEMORY_TEMP", "gauge"},
        {"DCGM_FI_DEV_GPU_TEMP", "gauge"},
        {"DCGM_FI_DEV_POWER_USAGE", "gauge"},
        {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"},
        {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"},
        {"DCGM_FI_DEV_GPU_UTIL", "gauge"},
        {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"},
        {"DCGM_FI_DEV_ENC_UTIL", "gauge"},
        {"DCGM_FI_DEV_DEC_UTIL", "gauge"},
        {"DCGM_FI_DEV_XID_ERRORS", "gauge"},
        {"DCGM_FI_DEV_FB_FREE", "gauge"},
        {"DCGM_FI_DEV_FB_USED", "gauge"},
        {"DCGM_FI_DEV_FB_RESERVED", "gauge"},
        {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"},
        {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge"},
        {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"},
        {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"},
        {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"},
        {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"},
        {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"},
        {"DCGM_FI_PROF_DRAM_ACTIVE", "gauge"},
        {"DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"},
        {"DCGM_FI_PROF_PCIE_RX_BYTES", "gauge"},
};

static void test_dcgm_table(void **state)
{
	(void)state;
	size_t n = sizeof(dcgm_defaults) / sizeof(dcgm_defaults[0]);
	assert_int_equal(metrics_dcgm_count, n);
	for (size_t i = 0; i < metrics_dcgm_count; i++) {
		const struct dcgm_metric *m = &metrics_dcgm[i];
		bool found = false;
		for (size_t k = 0; k < n; k++) {
			if (strcmp(m->name, dcgm_defaults[k].name) != 0)
				continue;
			assert_string_equal(m->type, dcgm_defaults[k].type);
			found = true;
		}
		if (!found)
			fail_msg("%s is no dcgm-exporter default", m->name);
		for (size_t k = 0; k < i; k++)
			assert_string_not_equal(m->name, metrics_dcgm[k].name);
		assert_true(m->help[0] && !strchr(m->help, '\n'));
		if (m->field != METRIC_NOT_READ)
			assert_non_null(gpuctl_field_info((enum gpuctl_field)m->field));
	}
	/* the fields read: every readable metric's, no duplicate, within bounds */
	enum gpuctl_field fields[64];
	size_t nf = metrics_fields(fields, 64);
	assert_true(nf > 0 && nf <= 64);
	for (size_t i = 0; i < nf; i++)
		for (size_t k = 0; k < i; k++)
			assert_int_not_equal(fields[i], fields[k]);
	assert_int_equal(metrics_fields(NULL, 0), nf);
}

static void test_render_without_snapshot(void **state)
{
	(void)state;
	struct metrics_stats st = {.samples = 7,
	                           .nvml_errors = 2,
	                           .lease_errors = 1,
	                           .last_ok = false,
	                           .last_duration_s = 0.0015,
	                           .last_time_s = 1700000000.25};
	struct metrics_input in = {.hostname = "h\"ost", .stats = &st};
	struct textbuf b = {0};
	assert_int_equal(metrics_render(&in, &b), 0);
	assert_non_null(strstr(b.data, "\n# TYPE gpuctl_exporter_samples_total counter\n"
	                               "gpuctl_exporter_samples_total 7\n"));
	assert_non_null(strstr(b.data, "gpuctl_exporter_nvml_errors_total 2\n"));
	assert_non_null(strstr(b.data, "gpuctl_exporter_lease_errors_total 1\n"));
	assert_non_null(strstr(b.data, "gpuctl_exporter_last_sample_success 0\n"));
	/* lease_ok false: this sample's lease facts are missing (docs/metrics.md) */
	assert_non_null(strstr(b.data, "# TYPE gpuctl_exporter_last_lease_success gauge\n"
	                               "gpuctl_exporter_last_lease_success 0\n"));
	assert_non_null(strstr(b.data, "gpuctl_exporter_sample_duration_seconds 0.001500\n"));
	assert_non_null(
	        strstr(b.data, "gpuctl_exporter_last_sample_timestamp_seconds 1700000000.250\n"));
	assert_non_null(strstr(b.data, "gpuctl_exporter_build_info{version=\"" GPUCTL_VERSION_STRING
	                               "\"} 1\n"));
	assert_null(strstr(b.data, "DCGM_"));
	assert_null(strstr(b.data, "gpuctl_gpu_"));
	assert_int_equal(b.data[b.len - 1], '\n');
	textbuf_free(&b);
}

/* ---- workloads and per-process series ---- */

/* A made-up table of workloads by pid, standing in for the library's cache. */
struct fake_workload {
	uint32_t pid;
	struct gpuctl_workload wl;
};

static const struct fake_workload *fake_table;
static size_t fake_count;

static const struct gpuctl_workload *fake_workload_of(void *userdata, uint32_t pid)
{
	size_t *asked = userdata;
	(*asked)++;
	for (size_t i = 0; i < fake_count; i++)
		if (fake_table[i].pid == pid)
			return &fake_table[i].wl;
	return NULL;
}

#define POD(n, ns, c, uid)                                                                         \
	{                                                                                          \
		.kind = GPUCTL_WORKLOAD_POD, .name = n, .pod_namespace = ns, .container = c,       \
		.pod_uid = uid, .runtime = "containerd", .label = "pod " ns "/" n "/" c            \
	}

/* GPU 0: two processes of one pod's container; GPU 1: steps 0 and 1 of Slurm job 4242; GPU 2: a
 * pod's process and a bare one; GPU 3: a podman container's; GPU 4: a process the table does not
 * know. Each GPU has DCGM_FI_DEV_GPU_UTIL 10+i; each process 1 MiB * pid. */
static struct gpuctl_snapshot *workload_snap(const struct fake_workload *t, size_t nt)
{
	static const uint32_t pids[5][2] = {{100, 101}, {200, 201}, {300, 301}, {400, 0}, {500, 0}};
	struct gpuctl_snapshot *s = snapshot_new_empty(5, GPUCTL_SNAP_PROCESSES);

	assert_non_null(s);
	fake_table = t;
	fake_count = nt;
	for (size_t i = 0; i < 5; i++) {
		char uuid[64];
		snprintf(uuid, sizeof(uuid), "GPU-00000000-0000-0000-0000-%012zx", i);
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_UUID, uuid), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_UTIL_GPU, (int64_t)(10 + i)), 0);
		for (size_t k = 0; k < 2 && pids[i][k]; k++) {
			struct gpuctl_proc *p = snapshot_add_proc(s, i, pids[i][k]);
			assert_non_null(p);
			p->used_memory = (int64_t)pids[i][k] << 20;
			p->has_memory = true;
			p->util[GPUCTL_PROC_SM] = (int)(pids[i][k] % 100);
			p->has_util = true;
			assert_int_equal(proc_set_strs(p, "alice", "train"), 0);
		}
	}
	return s;
}

static char *render_with(const struct gpuctl_snapshot *snap, size_t max_processes, size_t *asked)
{
	struct metrics_stats st = {0};
	struct metrics_input in = {.snap = snap,
	                           .hostname = "h",
	                           .stats = &st,
	                           .workload_of = fake_workload_of,
	                           .workload_userdata = asked,
	                           .max_processes = max_processes};
	struct textbuf b = {0};
	assert_int_equal(metrics_render(&in, &b), 0);
	return b.data;
}

static void has_line(const char *page, const char *line)
{
	size_t n = strlen(line) + 3;
	char *want = malloc(n);
	assert_non_null(want);
	snprintf(want, n, "\n%s\n", line);
	if (!strstr(page, want)) {
		fprintf(stderr, "page:\n%s\n", page);
		fail_msg("missing line: %s", line);
	}
	free(want);
}

/* dcgm-exporter's driver label and XID labels (docs/metrics.md, "XIDs"), escaped as the text
 * format says (a backslash, a double quote and a line feed in a label value are written \\, \"
 * and \n: prometheus.io/docs/instrumenting/exposition_formats). GPU 0 had XIDs 13 then 79 (the
 * last one is the value), GPU 1 an XID of a code gpuctl's catalog does not list, GPU 2 none. */
static void test_driver_and_xid_labels(void **state)
{
	static const struct metrics_xid xids[] = {
	        {.gpu = 0, .code = 13, .count = 1, .seq = 1},
	        {.gpu = 0, .code = 79, .count = 2, .seq = 3},
	        {.gpu = 1, .code = 4000, .count = 1, .seq = 2},
	};
	struct gpuctl_snapshot *s = snapshot_new_empty(3, GPUCTL_SNAP_PROCESSES);
	struct metrics_stats st = {0};
	struct metrics_input in = {.snap = s, .hostname = "h", .stats = &st};
	struct textbuf b = {0};

	(void)state;
	assert_non_null(s);
	for (size_t i = 0; i < 3; i++) {
		char uuid[64];
		snprintf(uuid, sizeof(uuid), "GPU-00000000-0000-0000-0000-%012zx", i);
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_UUID, uuid), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_UTIL_GPU, 7), 0);
	}
	assert_int_equal(snapshot_set_system(s, "550.\"x\\\n", "12.550"), 0);
	in.xids = xids;
	in.n_xids = sizeof(xids) / sizeof(xids[0]);
	assert_int_equal(metrics_render(&in, &b), 0);
	has_line(b.data, "DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",UUID=\"GPU-00000000-0000-0000-0000-"
	                 "000000000002\",pci_bus_id=\"\",device=\"nvidia2\",modelName=\"\","
	                 "Hostname=\"h\",DCGM_FI_DRIVER_VERSION=\"550.\\\"x\\\\\\n\"} 7");
	has_line(b.data, "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"GPU-00000000-0000-0000-0000-"
	                 "000000000000\",pci_bus_id=\"\",device=\"nvidia0\",modelName=\"\","
	                 "Hostname=\"h\",DCGM_FI_DRIVER_VERSION=\"550.\\\"x\\\\\\n\","
	                 "err_code=\"79\",err_msg=\"GPU has fallen off the bus\"} 79");
	has_line(b.data, "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\",UUID=\"GPU-00000000-0000-0000-0000-"
	                 "000000000001\",pci_bus_id=\"\",device=\"nvidia1\",modelName=\"\","
	                 "Hostname=\"h\",DCGM_FI_DRIVER_VERSION=\"550.\\\"x\\\\\\n\","
	                 "err_code=\"4000\",err_msg=\"XID not in gpuctl's catalog\"} 4000");
	assert_null(strstr(b.data, "DCGM_FI_DEV_XID_ERRORS{gpu=\"2\""));
	textbuf_free(&b);
	gpuctl_snapshot_free(s);
}

static void test_workload_labels(void **state)
{
	(void)state;
	static const struct fake_workload t[] = {
	        {100, POD("trainer-7", "ml", "main", "0f1e2d3c-aaaa-bbbb-cccc-000000000001")},
	        {101, POD("trainer-7", "ml", "main", "0f1e2d3c-aaaa-bbbb-cccc-000000000001")},
	        {200,
	         {.kind = GPUCTL_WORKLOAD_SLURM,
	          .slurm_job = 4242,
	          .slurm_step = "0",
	          .label = "slurm 4242.0"}},
	        {201,
	         {.kind = GPUCTL_WORKLOAD_SLURM,
	          .slurm_job = 4242,
	          .slurm_step = "1",
	          .label = "slurm 4242.1"}},
	        {300, POD("web", "prod", "nginx", "11111111-2222-3333-4444-555555555555")},
	        {301, {.kind = GPUCTL_WORKLOAD_BARE, .label = "bare"}},
	        {400,
	         {.kind = GPUCTL_WORKLOAD_CONTAINER,
	          .runtime = "podman",
	          .id = "ab12",
	          .name = "web-1",
	          .label = "podman web-1"}},
	};
	struct gpuctl_snapshot *s = workload_snap(t, sizeof(t) / sizeof(t[0]));
	size_t asked = 0;
	char *page = render_with(s, 100, &asked);

	/* dcgm-exporter's labels where one pod or one Slurm job holds the GPU, none elsewhere */
	has_line(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-00000000-0000-0000-0000-"
	               "000000000000\",pci_bus_id=\"\",device=\"nvidia0\",modelName=\"\","
	               "Hostname=\"h\",pod=\"trainer-7\",namespace=\"ml\",container=\"main\"} 10");
	has_line(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-00000000-0000-0000-0000-"
	               "000000000001\",pci_bus_id=\"\",device=\"nvidia1\",modelName=\"\","
	               "Hostname=\"h\",hpc_job=\"4242\"} 11");
	has_line(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",UUID=\"GPU-00000000-0000-0000-0000-"
	               "000000000002\",pci_bus_id=\"\",device=\"nvidia2\",modelName=\"\","
	               "Hostname=\"h\"} 12");
	has_line(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"3\",UUID=\"GPU-00000000-0000-0000-0000-"
	               "000000000003\",pci_bus_id=\"\",device=\"nvidia3\",modelName=\"\","
	               "Hostname=\"h\"} 13");
	has_line(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"4\",UUID=\"GPU-00000000-0000-0000-0000-"
	               "000000000004\",pci_bus_id=\"\",device=\"nvidia4\",modelName=\"\","
	               "Hostname=\"h\"} 14");
	/* the holder of every kind on gpuctl_gpu_workload_info */
	has_line(page,
	         "gpuctl_gpu_workload_info{gpu=\"0\",UUID=\"GPU-00000000-0000-0000-0000-"
	         "000000000000\",kind=\"pod\",workload=\"pod ml/trainer-7/main\",pod=\"trainer-"
	         "7\",namespace=\"ml\",container=\"main\"} 1");
	has_line(page,
	         "gpuctl_gpu_workload_info{gpu=\"1\",UUID=\"GPU-00000000-0000-0000-0000-"
	         "000000000001\",kind=\"slurm\",workload=\"slurm 4242.0\",hpc_job=\"4242\"} 1");
	has_line(page, "gpuctl_gpu_workload_info{gpu=\"3\",UUID=\"GPU-00000000-0000-0000-0000-"
	               "000000000003\",kind=\"container\",workload=\"podman web-1\"} 1");
	assert_null(strstr(page, "gpuctl_gpu_workload_info{gpu=\"2\""));
	assert_null(strstr(page, "gpuctl_gpu_workload_info{gpu=\"4\""));
	/* per process: its own workload, whatever the GPU's */
	has_line(page, "gpuctl_process_memory_used_bytes{gpu=\"2\",UUID=\"GPU-00000000-0000-0000-"
	               "0000-000000000002\",pid=\"300\",user=\"alice\",command=\"train\","
	               "gpu_instance=\"\",compute_instance=\"\",workload_kind=\"pod\","
	               "workload=\"pod prod/web/nginx\",pod=\"web\",namespace=\"prod\","
	               "container=\"nginx\"} 314572800");
	has_line(page, "gpuctl_process_memory_used_bytes{gpu=\"2\",UUID=\"GPU-00000000-0000-0000-"
	               "0000-000000000002\",pid=\"301\",user=\"alice\",command=\"train\","
	               "gpu_instance=\"\",compute_instance=\"\",workload_kind=\"bare\","
	               "workload=\"bare\"} 315621376");
	has_line(page, "gpuctl_process_memory_used_bytes{gpu=\"4\",UUID=\"GPU-00000000-0000-0000-"
	               "0000-000000000004\",pid=\"500\",user=\"alice\",command=\"train\","
	               "gpu_instance=\"\",compute_instance=\"\",workload_kind=\"unknown\","
	               "workload=\"?\"} 524288000");
	has_line(page, "gpuctl_process_sm_utilization_ratio{gpu=\"1\",UUID=\"GPU-00000000-0000-"
	               "0000-0000-000000000001\",pid=\"201\",user=\"alice\",command=\"train\","
	               "gpu_instance=\"\",compute_instance=\"\",workload_kind=\"slurm\","
	               "workload=\"slurm 4242.1\",hpc_job=\"4242\"} 0.01");
	has_line(page, "gpuctl_exporter_processes_dropped 0");
	assert_true(asked > 0);
	free(page);
	gpuctl_snapshot_free(s);
}

/* A pod whose runtime's state gave no names (its pod uid and container id only, as
 * docs/workloads.md says for a missing config.json): its GPU's series carry no empty pod,
 * namespace or container label, which Prometheus would read as absent anyway. */
static void test_workload_pod_without_names(void **state)
{
	(void)state;
	static const struct fake_workload t[] = {
	        {100,
	         {.kind = GPUCTL_WORKLOAD_POD,
	          .pod_uid = "0f1e2d3c-aaaa-bbbb-cccc-000000000001",
	          .id = "1b88900fd17f",
	          .label = "pod 0f1e2d3c/1b88900fd17f"}},
	        {101,
	         {.kind = GPUCTL_WORKLOAD_POD,
	          .pod_uid = "0f1e2d3c-aaaa-bbbb-cccc-000000000001",
	          .id = "1b88900fd17f",
	          .label = "pod 0f1e2d3c/1b88900fd17f"}},
	};
	struct gpuctl_snapshot *s = workload_snap(t, sizeof(t) / sizeof(t[0]));
	size_t asked = 0;
	char *page = render_with(s, 100, &asked);

	has_line(page, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-00000000-0000-0000-0000-"
	               "000000000000\",pci_bus_id=\"\",device=\"nvidia0\",modelName=\"\","
	               "Hostname=\"h\"} 10");
	assert_null(strstr(page, "pod=\""));
	assert_null(strstr(page, "namespace=\""));
	assert_null(strstr(page, "container=\""));
	free(page);
	gpuctl_snapshot_free(s);
}

/* What the format makes of hostile bytes, worked out by hand from its rules: backslash, quote
 * and newline escaped; ESC (a control character) and bytes that are not UTF-8 become '?'; the
 * length is kept (label values have no limit in the format). */
static void test_workload_hostile_names(void **state)
{
	(void)state;
	char name[301], want[600];
	size_t w = 0;

	/* "\x1b[31m" "a\nb" "\"q\"" "\\" "\xff\xfe" then 'x' up to 300 bytes */
	memcpy(name, "\x1b[31ma\nb\"q\"\\\xff\xfe", 14);
	memset(name + 14, 'x', 286);
	name[300] = '\0';
	w += (size_t)snprintf(want, sizeof(want), "?[31ma\\nb\\\"q\\\"\\\\??");
	memset(want + w, 'x', 286);
	want[w + 286] = '\0';
	struct fake_workload t[] = {
	        {100,
	         {.kind = GPUCTL_WORKLOAD_POD,
	          .name = name,
	          .pod_namespace = "ns",
	          .container = "c",
	          .pod_uid = "u",
	          .label = name}},
	        {101,
	         {.kind = GPUCTL_WORKLOAD_POD,
	          .name = name,
	          .pod_namespace = "ns",
	          .container = "c",
	          .pod_uid = "u",
	          .label = name}},
	};
	struct gpuctl_snapshot *s = workload_snap(t, 2);
	size_t asked = 0;
	char *page = render_with(s, 100, &asked);
	char *line = malloc(2048);

	assert_non_null(line);
	snprintf(line, 2048,
	         "gpuctl_gpu_workload_info{gpu=\"0\",UUID=\"GPU-00000000-0000-0000-0000-"
	         "000000000000\",kind=\"pod\",workload=\"%s\",pod=\"%s\",namespace=\"ns\","
	         "container=\"c\"} 1",
	         want, want);
	has_line(page, line);
	/* no raw ESC, no raw invalid byte anywhere on the page */
	assert_null(strchr(page, '\x1b'));
	assert_null(strchr(page, '\xff'));
	free(line);
	free(page);
	gpuctl_snapshot_free(s);
}

/* The cap counts processes in GPU order, the rest are counted as dropped; 0 leaves none. */
static void test_process_cap(void **state)
{
	(void)state;
	struct gpuctl_snapshot *s = workload_snap(NULL, 0);
	size_t asked = 0;
	char *page = render_with(s, 3, &asked);

	/* 8 processes: 100, 101, 200 kept */
	assert_non_null(strstr(page, "pid=\"200\""));
	assert_null(strstr(page, "pid=\"201\""));
	assert_null(strstr(page, "pid=\"500\""));
	has_line(page, "gpuctl_exporter_processes_dropped 5");
	/* both families keep the same three */
	assert_non_null(strstr(page, "gpuctl_process_sm_utilization_ratio{gpu=\"1\",UUID=\"GPU-"
	                             "00000000-0000-0000-0000-000000000001\",pid=\"200\""));
	free(page);
	page = render_with(s, 0, &asked);
	assert_null(strstr(page, "gpuctl_process_memory_used_bytes"));
	assert_null(strstr(page, "gpuctl_process_sm_utilization_ratio"));
	has_line(page, "gpuctl_exporter_processes_dropped 8");
	has_line(page, "gpuctl_gpu_processes{gpu=\"1\",UUID=\"GPU-00000000-0000-0000-0000-"
	               "000000000001\"} 2");
	free(page);
	gpuctl_snapshot_free(s);
}

/* A request head fed line by line (split at LF, as the gate does): the index of the first
 * refused line, or -1. */
static int first_refused(const char *head, size_t len, const char **why)
{
	struct http_check c;
	size_t start = 0;
	int line = 0;

	http_check_init(&c);
	for (size_t i = 0; i < len; i++) {
		if (head[i] != '\n')
			continue;
		if (http_check_line(&c, head + start, i - start) < 0) {
			*why = c.why;
			return line;
		}
		line++;
		start = i + 1;
	}
	return -1;
}

#define HEAD(s) s, sizeof(s) - 1

/* RFC 9112: what a server must answer 400 (§2.2 bare CR, whitespace before the first header;
 * §5.1 whitespace before the colon; §5.2 obs-fold; §6.3 conflicting Content-Length), and a NUL
 * or "%00" that would change what is read; every line before the fault passes. */
static void test_http_check_refused(void **state)
{
	static const struct {
		const char *head;
		size_t len;
		int line;        /* the refused line */
		const char *why; /* in its reason */
	} bad[] = {
	        {HEAD("GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: "
	              "5\r\n"
	              "\r\n"),
	         3, "Content-Length"},
	        {HEAD("GET / HTTP/1.1\r\ncontent-length: 1\r\nCONTENT-LENGTH:  2 \r\n\r\n"), 2,
	         "Content-Length"},
	        {HEAD("GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n"), 3, "folding"},
	        {HEAD("GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\tc\r\n\r\n"), 3, "folding"},
	        {HEAD("GET /metrics HTTP/1.1\r\n X: y\r\nHost: x\r\n\r\n"), 1, "folding"},
	        {HEAD("GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: b\0c\r\n\r\n"), 2, "NUL"},
	        {HEAD("GET /metrics HTTP/1.1\r\nX-\0A: b\r\n\r\n"), 1, "NUL"},
	        {HEAD("GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n"), 2, "bare CR"},
	        {HEAD("GET /metrics HTTP/1.1\r\nX-A: \x01\r\n\r\n"), 1, "control"},
	        {HEAD("GET /metrics HTTP/1.1\r\nX-A: \x7f\r\n\r\n"), 1, "control"},
	        {HEAD("GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n"), 1, "header name"},
	        {HEAD("GET /metrics HTTP/1.1\r\nHost\r\n\r\n"), 1, "colon"},
	        {HEAD("GET /metrics HTTP/1.1\r\n: x\r\n\r\n"), 1, "header name"},
	        {HEAD("GET /metrics%00 HTTP/1.1\r\nHost: x\r\n\r\n"), 0, "%00"},
	        {HEAD("GET /metrics?a=%00 HTTP/1.1\r\n\r\n"), 0, "%00"},
	        {HEAD("GET /metrics\0x HTTP/1.1\r\n\r\n"), 0, "NUL"},
	        {HEAD("GET /metrics\tHTTP/1.1\r\n\r\n"), 0, "control"},
	        /* the second request of a kept-alive connection is checked as the first */
	        {HEAD("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n"), 5,
	         "folding"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;
		int line = first_refused(bad[i].head, bad[i].len, &why);

		if (line != bad[i].line || !why || !strstr(why, bad[i].why))
			fail_msg("case %zu: line %d (%s), want %d (%s)", i, line, why ? why : "-",
			         bad[i].line, bad[i].why);
	}
}

/* What RFC 9112 lets through, and what stays libmicrohttpd's to judge. */
static void test_http_check_passed(void **state)
{
	static const struct {
		const char *head;
		size_t len;
	} good[] = {
	        {HEAD("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")},
	        {HEAD("GET /metrics HTTP/1.1\nHost: x\n\n")}, /* bare LF ends lines (§2.2) */
	        {HEAD("\r\n\r\nGET / HTTP/1.0\r\n\r\n")},     /* empty lines first (§2.2) */
	        {HEAD("GET / HTTP/1.1\r\nContent-Length: 0\r\ncontent-length:0\r\n\r\n")},
	        {HEAD("GET / HTTP/1.1\r\nX-A: a\tb \xc3\xa9\r\nAccept: */*\r\n\r\n")}, /* HTAB,
	                                                                                  obs-text
	                                                                                */
	        {HEAD("GET /%41%30%0%2 HTTP/1.1\r\n\r\n")}, /* other escapes: the server's */
	        {HEAD("GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n")}, /* 413 is MHD's */
	        /* a new request starts without the earlier one's Content-Length */
	        {HEAD("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\nGET / "
	              "HTTP/1.1\r\nContent-Length: "
	              "1\r\n\r\n")},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *why = NULL;
		int line = first_refused(good[i].head, good[i].len, &why);

		if (line != -1)
			fail_msg("case %zu: line %d refused: %s", i, line, why);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_listen_forms),
	        cmocka_unit_test(test_listen_refused),
	        cmocka_unit_test(test_label_escaping),
	        cmocka_unit_test(test_help_escaping),
	        cmocka_unit_test(test_textbuf_grows),
	        cmocka_unit_test(test_dcgm_table),
	        cmocka_unit_test(test_render_without_snapshot),
	        cmocka_unit_test(test_driver_and_xid_labels),
	        cmocka_unit_test(test_workload_labels),
	        cmocka_unit_test(test_workload_pod_without_names),
	        cmocka_unit_test(test_workload_hostile_names),
	        cmocka_unit_test(test_process_cap),
	        cmocka_unit_test(test_http_check_refused),
	        cmocka_unit_test(test_http_check_passed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
