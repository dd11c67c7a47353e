// SPDX-License-Identifier: MIT
/*
 * cmd-exporter.c: `gpuctl exporter`: serves the machine's GPU metrics to Prometheus over HTTP
 * (docs/metrics.md), with libmicrohttpd.
 *
 * Decisions:
 * - Sampling is decoupled from scraping. A sampler thread (sampler.h) takes every --interval
 *   one snapshot (only the fields metrics.c exports, plus processes and MIG), the XID events,
 *   the lease states and the verdicts; the main thread renders each sample's page once and
 *   swaps it in under a mutex. A scrape only queues the latest page (a reference-counted MHD
 *   response), so any number of scrapers cost no NVML call and no rendering.
 * - The main thread never calls NVML: it waits for the next sample, the overdue time or a
 *   signal (SIGINT/SIGTERM blocked in every thread, taken through a signalfd), so a signal
 *   ends the loop at once and the server stops (exit 0), even while a call hangs; a sample
 *   still under way then is not waited for (cli_exit_now).
 * - Overdue: no sample for more than two intervals (sampler.h) is a hung driver. The page then
 *   has the exporter's own metrics only, with last_sample_success 0 and
 *   sample_overdue_seconds (rendered again every interval), and /healthz answers 503. The GPU
 *   series are left out, not served with their old values: Prometheus would record those with
 *   the scrape's time, as if just measured, where a series gone from a scrape is marked stale
 *   (docs/metrics.md, "A hung driver").
 * - The listening socket is ours (bound before MHD starts), so "port in use" is one clear line
 *   (exit 1), and ":PORT" listens on IPv6 and IPv4 (IPv4 only where the host has no IPv6). The
 *   gate (http-gate.c) accepts on it and relays each connection to MHD, checking the request
 *   heads on the way (http-check.c): MHD 0.9.75 answers 200 to what RFC 9112 says is 400
 *   (obs-fold, a NUL in a header, conflicting Content-Length, "%00"), and its API cannot show it.
 * - Bounded: one polling thread, at most EXPORTER_MAX_CONNECTIONS connections and
 *   EXPORTER_PER_IP from one address, a per-connection memory pool of EXPORTER_CONN_MEMORY
 *   bytes (a longer request line or header gets MHD's error answer and the connection is
 *   closed), an idle timeout and a whole-request deadline of the same length (default 10 s;
 *   the GPUCTL_EXPORTER_TIMEOUT environment variable, in seconds, exists for tests). MHD's idle
 *   timer restarts on every byte, so a client sending a header line every few seconds
 *   (slowloris) would keep its connection for ever: a reaper thread shuts down the socket of
 *   any connection whose request (from accept, or the end of the previous request, to the end
 *   of the response) has lasted longer than the deadline. The per-address limit keeps one
 *   client from taking every connection. Only GET and
 *   HEAD (405 with Allow otherwise); a request with a body is refused (413); unknown paths 404.
 *   Connections are kept alive between a scraper's requests (answered at MHD's second call).
 * - Memory: most of what is resident is libmicrohttpd and the GnuTLS libraries it pulls in
 *   (about 3 MiB just to dlopen it). Of ours, one malloc arena and malloc_trim() after each
 *   sample keep the heap from holding on to freed connection pools and old pages.
 * - A sample refreshes the previous one (gpuctl_snapshot_refresh: the exported and health
 *   fields that can change, processes, MIG devices; one device count guards it) and takes a
 *   whole snapshot once a minute, after a failed sample, while a GPU is lost (a refresh would
 *   keep it lost: it comes back within one interval) or when the refresh fails, so
 *   identity, static facts and a changed machine are re-read within EXPORTER_FULL_EVERY.
 * - The sampling never waits for other users: the lease states are read with a lock wait of
 *   EXPORTER_LOCK_WAIT_S; past it (someone holds select.lock) the sample has no lease metrics
 *   and gpuctl_exporter_last_lease_success 0, and the GPU metrics are served as always.
 * - The first sample is taken before serving: no driver is exit 4 at start. Later NVML
 *   failures keep the server up: the page then has only the exporter's own metrics, and
 *   gpuctl_exporter_nvml_errors_total counts them (logged once per streak of failures).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>
#include <microhttpd.h>

#include "cmd.h"
#include "http-gate.h"
#include "listen.h"
#include "metrics.h"
#include "parse.h"
#include "sampler.h"

/* libmicrohttpd, loaded when the exporter starts: linking it would make every gpuctl command
 * load it and GnuTLS with it (about 1.5 ms of every start, docs/ARCHITECTURE.md). The header
 * gives the types and constants; these are the functions the exporter calls. */
static struct {
	void *handle;
	struct MHD_Daemon *(*start_daemon)(unsigned int flags, uint16_t port,
	                                   MHD_AcceptPolicyCallback apc, void *apc_cls,
	                                   MHD_AccessHandlerCallback dh, void *dh_cls, ...);
	void (*stop_daemon)(struct MHD_Daemon *daemon);
	struct MHD_Response *(*create_response_from_buffer)(size_t size, void *buffer,
	                                                    enum MHD_ResponseMemoryMode mode);
	enum MHD_Result (*add_response_header)(struct MHD_Response *response, const char *header,
	                                       const char *content);
	enum MHD_Result (*queue_response)(struct MHD_Connection *connection,
	                                  unsigned int status_code, struct MHD_Response *response);
	void (*destroy_response)(struct MHD_Response *response);
	const char *(*lookup_connection_value)(struct MHD_Connection *connection,
	                                       enum MHD_ValueKind kind, const char *key);
	const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *connection,
	                                                       enum MHD_ConnectionInfoType type,
	                                                       ...);
	enum MHD_Result (*add_connection)(struct MHD_Daemon *daemon, MHD_socket client_socket,
	                                  const struct sockaddr *addr, socklen_t addrlen);
} mhd;

/* Loads libmicrohttpd (the Debian 12 soname, then the development name). 0, or -ENOENT with
 * the reason in buf. */
static int mhd_load(char *buf, size_t size)
{
	static const char *const names[] = {"libmicrohttpd.so.12", "libmicrohttpd.so"};
	for (size_t i = 0; !mhd.handle && i < sizeof(names) / sizeof(names[0]); i++)
		mhd.handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!mhd.handle) {
		snprintf(buf, size, "%s", dlerror());
		return -ENOENT;
	}
#define MHD_SYM(field, name)                                                                       \
	do {                                                                                       \
		*(void **)&mhd.field = dlsym(mhd.handle, name);                                    \
		if (!mhd.field) {                                                                  \
			snprintf(buf, size, "%s lacks %s", "libmicrohttpd", name);                 \
			return -ENOENT;                                                            \
		}                                                                                  \
	} while (0)
	MHD_SYM(start_daemon, "MHD_start_daemon");
	MHD_SYM(stop_daemon, "MHD_stop_daemon");
	MHD_SYM(create_response_from_buffer, "MHD_create_response_from_buffer");
	MHD_SYM(add_response_header, "MHD_add_response_header");
	MHD_SYM(queue_response, "MHD_queue_response");
	MHD_SYM(destroy_response, "MHD_destroy_response");
	MHD_SYM(lookup_connection_value, "MHD_lookup_connection_value");
	MHD_SYM(get_connection_info, "MHD_get_connection_info");
	MHD_SYM(add_connection, "MHD_add_connection");
#undef MHD_SYM
	return 0;
}

#define EXPORTER_DEFAULT_INTERVAL 5.0
#define EXPORTER_MIN_INTERVAL     0.1
#define EXPORTER_MAX_INTERVAL     86400.0
/* Seconds between whole snapshots; the samples between refresh the last one (identity and
 * static facts kept, what a GPU does not support not asked again). */
#define EXPORTER_FULL_EVERY      60.0
#define EXPORTER_LOCK_WAIT_S     0.1 /* the most a sample waits for the lease directory */
#define EXPORTER_MAX_CONNECTIONS 512
#define EXPORTER_PER_IP          8   /* connections from one address at once */
#define EXPORTER_REAP_MS         250 /* how often the deadline is checked */
#define EXPORTER_CONN_MEMORY     (16 * 1024)
#define EXPORTER_DEFAULT_TIMEOUT 10
#define EXPORTER_MAX_TIMEOUT     3600

enum {
	OPT_LISTEN = 0x100,
	OPT_INTERVAL,
	OPT_LEASE_DIR,
};

static const struct option exporter_options[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"interval", required_argument, NULL, OPT_INTERVAL},
        {"lease-dir", required_argument, NULL, OPT_LEASE_DIR},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

static const char index_page[] =
        "<!DOCTYPE html>\n"
        "<html><head><title>gpuctl exporter</title></head>\n"
        "<body><h1>gpuctl exporter</h1>\n"
        "<p><a href=\"/metrics\">Metrics</a> (Prometheus text format) &middot; "
        "<a href=\"/healthz\">Liveness</a></p>\n"
        "</body></html>\n";

/* A connection, for the whole-request deadline (EXPORTER_REQUEST_DEADLINE). */
struct conn_track {
	struct conn_track *prev, *next; /* in exporter.conns */
	int fd;                         /* its socket (MHD's; we only shut it down) */
	double since;                   /* CLOCK_MONOTONIC: accepted, or its last request ended */
	bool cut;                       /* shut down by the reaper */
};

struct exporter {
	pthread_mutex_t lock;           /* guards page and overdue */
	pthread_mutex_t conns_lock;     /* guards conns and every conn_track in it */
	struct conn_track *conns;       /* open connections (MHD's thread adds and removes) */
	double deadline_s;              /* a request's whole time, from accept or the end of the
	                                 * previous request to the end of its response */
	volatile sig_atomic_t stopping; /* the reaper thread ends */
	struct MHD_Response *page;      /* the latest /metrics page; swapped by the main thread */
	bool overdue;                   /* the page is an overdue one: /healthz answers 503 */
	struct MHD_Response *index;     /* "/" */
	struct MHD_Response *healthz;   /* "/healthz", 200 */
	struct MHD_Response *unhealthy; /* "/healthz" while the sample is overdue, 503 */
	struct MHD_Response *notfound;  /* 404 */
	struct MHD_Response *badmethod; /* 405, with Allow */
	struct MHD_Response *toolarge;  /* 413 */
	bool verbose;                   /* -v: MHD's own messages go to stderr */
};

/* ---- options ---- */

/* GPUCTL_EXPORTER_TIMEOUT: the idle timeout of a connection, whole seconds. */
static int connection_timeout(unsigned *ret)
{
	const char *e = getenv("GPUCTL_EXPORTER_TIMEOUT");
	size_t n;
	unsigned long v = 0;
	if (!e || !e[0]) {
		*ret = EXPORTER_DEFAULT_TIMEOUT;
		return 0;
	}
	n = strlen(e);
	if (n > 4 || strspn(e, "0123456789") != n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (unsigned long)(e[i] - '0');
	if (v < 1 || v > EXPORTER_MAX_TIMEOUT)
		return -EINVAL;
	*ret = (unsigned)v;
	return 0;
}

/* ---- the listening socket ---- */

static int bind_one(int family, const struct sockaddr *sa, socklen_t len, bool dual)
{
	int one = 1, zero = 0;
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual ? &zero : &one, sizeof(int)) < 0) ||
	    bind(fd, sa, len) < 0 || listen(fd, 128) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

/* Binds and listens on spec; returns the socket, or -errno of the last address tried
 * (-EHOSTUNREACH: the host name does not resolve). */
static int bind_listen(const struct listen_spec *spec)
{
	if (spec->kind == LISTEN_ANY) {
		struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(spec->port)};
		a6.sin6_addr = in6addr_any;
		int fd = bind_one(AF_INET6, (struct sockaddr *)&a6, sizeof(a6), true);
		if (fd != -EAFNOSUPPORT)
			return fd;
		struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(spec->port)};
		a4.sin_addr.s_addr = htonl(INADDR_ANY);
		return bind_one(AF_INET, (struct sockaddr *)&a4, sizeof(a4), false);
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char port[8];
	snprintf(port, sizeof(port), "%u", (unsigned)spec->port);
	hints.ai_family = spec->kind == LISTEN_IPV4   ? AF_INET
	                  : spec->kind == LISTEN_IPV6 ? AF_INET6
	                                              : AF_UNSPEC;
	if (spec->kind != LISTEN_NAME)
		hints.ai_flags |= AI_NUMERICHOST;
	int g = getaddrinfo(spec->host, port, &hints, &res);
	if (g != 0)
		return g == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
	int fd = -EADDRNOTAVAIL;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = bind_one(ai->ai_family, ai->ai_addr, ai->ai_addrlen, false);
		if (fd >= 0 || fd == -EADDRINUSE)
			break;
	}
	freeaddrinfo(res);
	return fd;
}

/* ---- HTTP ---- */

/* The gate's hand-over (http-gate.h): MHD takes the socket, closing it when it refuses. */
static int gate_add(void *cls, int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	return mhd.add_connection(cls, fd, addr, addrlen) == MHD_YES ? 0 : -1;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
	struct exporter *ex = cls;
	struct MHD_Response *resp;
	unsigned code = MHD_HTTP_OK;
	enum MHD_Result r;
	(void)version;
	(void)upload_data;

	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return mhd.queue_response(conn, MHD_HTTP_METHOD_NOT_ALLOWED, ex->badmethod);
	/* No request of ours has a body: refuse one before reading it (MHD then closes). */
	const char *cl =
	        mhd.lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if ((cl && strcmp(cl, "0") != 0) || *upload_data_size ||
	    mhd.lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return mhd.queue_response(conn, MHD_HTTP_CONTENT_TOO_LARGE, ex->toolarge);
	/* MHD calls this once the headers are in and again once the whole request is. A response
	 * queued at the first call is an early answer after which MHD closes the connection
	 * (libmicrohttpd 0.9.75, Debian 12), so a good request is answered at the second call and
	 * the connection stays open for the scraper's next request (keep-alive). */
	if (!*req_cls) {
		*req_cls = ex;
		return MHD_YES;
	}

	if (strcmp(url, "/metrics") == 0) {
		pthread_mutex_lock(&ex->lock);
		r = mhd.queue_response(conn, MHD_HTTP_OK, ex->page);
		pthread_mutex_unlock(&ex->lock);
		return r;
	}
	if (strcmp(url, "/") == 0) {
		resp = ex->index;
	} else if (strcmp(url, "/healthz") == 0) {
		pthread_mutex_lock(&ex->lock);
		bool overdue = ex->overdue;
		pthread_mutex_unlock(&ex->lock);
		resp = overdue ? ex->unhealthy : ex->healthz;
		code = overdue ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK;
	} else {
		resp = ex->notfound;
		code = MHD_HTTP_NOT_FOUND;
	}
	return mhd.queue_response(conn, code, resp);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct exporter *ex = cls;
	char buf[512];
	if (!ex->verbose)
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	cli_error("exporter: debug: %s", buf);
}

/* MHD_OPTION_NOTIFY_CONNECTION: tracks each connection for the deadline. An untracked one
 * (out of memory) still has MHD's idle timeout. Runs in MHD's thread; CLOSED comes before MHD
 * closes the socket, so the reaper never shuts down a descriptor that was reused. */
static void notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
	struct exporter *ex = cls;
	struct conn_track *t;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
		        mhd.get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		*socket_context = NULL;
		if (!ci || !(t = calloc(1, sizeof(*t))))
			return;
		t->fd = ci->connect_fd;
		t->since = cli_now(CLOCK_MONOTONIC);
		pthread_mutex_lock(&ex->conns_lock);
		t->next = ex->conns;
		if (ex->conns)
			ex->conns->prev = t;
		ex->conns = t;
		pthread_mutex_unlock(&ex->conns_lock);
		*socket_context = t;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED && (t = *socket_context)) {
		pthread_mutex_lock(&ex->conns_lock);
		if (t->prev)
			t->prev->next = t->next;
		else
			ex->conns = t->next;
		if (t->next)
			t->next->prev = t->prev;
		pthread_mutex_unlock(&ex->conns_lock);
		free(t);
		*socket_context = NULL;
	}
}

/* MHD_OPTION_NOTIFY_COMPLETED: a request ended (answered, or the connection failed): the
 * next one on the connection has a deadline of its own. */
static void request_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                              enum MHD_RequestTerminationCode toe)
{
	struct exporter *ex = cls;
	const union MHD_ConnectionInfo *ci =
	        mhd.get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn_track *t = ci ? ci->socket_context : NULL;
	(void)req_cls;
	(void)toe;

	if (!t)
		return;
	pthread_mutex_lock(&ex->conns_lock);
	t->since = cli_now(CLOCK_MONOTONIC);
	pthread_mutex_unlock(&ex->conns_lock);
}

/* The reaper thread: every EXPORTER_REAP_MS, shuts down the sockets of connections whose
 * request has run past the deadline; MHD then sees the hang-up and closes them. */
static void *reaper_main(void *arg)
{
	struct exporter *ex = arg;
	struct timespec tick = {.tv_sec = 0, .tv_nsec = EXPORTER_REAP_MS * 1000000L};

	while (!ex->stopping) {
		double now = cli_now(CLOCK_MONOTONIC);

		pthread_mutex_lock(&ex->conns_lock);
		for (struct conn_track *t = ex->conns; t; t = t->next)
			if (!t->cut && now - t->since > ex->deadline_s) {
				(void)shutdown(t->fd, SHUT_RDWR);
				t->cut = true;
			}
		pthread_mutex_unlock(&ex->conns_lock);
		(void)nanosleep(&tick, NULL);
	}
	return NULL;
}

static struct MHD_Response *static_response(const char *text, const char *type)
{
	struct MHD_Response *r =
	        mhd.create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (r && mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES) {
		mhd.destroy_response(r);
		r = NULL;
	}
	return r;
}

static int exporter_init(struct exporter *ex)
{
	static const char text[] = "text/plain; charset=utf-8";
	if (pthread_mutex_init(&ex->lock, NULL) != 0 ||
	    pthread_mutex_init(&ex->conns_lock, NULL) != 0)
		return -ENOMEM;
	ex->index = static_response(index_page, "text/html; charset=utf-8");
	ex->healthz = static_response("ok\n", text);
	ex->unhealthy =
	        static_response("503 NVML not answering: the latest sample is overdue\n", text);
	ex->notfound = static_response("404 not found: try /metrics\n", text);
	ex->badmethod = static_response("405 method not allowed: GET or HEAD\n", text);
	ex->toolarge = static_response("413 request bodies are not accepted\n", text);
	if (!ex->index || !ex->healthz || !ex->unhealthy || !ex->notfound || !ex->badmethod ||
	    !ex->toolarge ||
	    mhd.add_response_header(ex->badmethod, MHD_HTTP_HEADER_ALLOW, "GET, HEAD") != MHD_YES ||
	    mhd.add_response_header(ex->toolarge, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES)
		return -ENOMEM;
	return 0;
}

static void exporter_done(struct exporter *ex)
{
	struct MHD_Response **all[] = {&ex->page,     &ex->index,     &ex->healthz, &ex->unhealthy,
	                               &ex->notfound, &ex->badmethod, &ex->toolarge};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (*all[i])
			mhd.destroy_response(*all[i]);
		*all[i] = NULL;
	}
	pthread_mutex_destroy(&ex->lock);
}

/* ---- sampling (on the sampler's thread, sampler.h) ---- */

/* What the sampler's thread keeps between samples: only it touches this once sampling began. */
struct sampling {
	const struct gpuctl_site *site; /* the configuration and lease directory (read-only) */
	enum gpuctl_field fields[64];   /* what the snapshot reads */
	size_t n_fields;
	enum gpuctl_field dynamic[64]; /* of those, what a refresh re-reads (not static_field) */
	size_t n_dynamic;
	double last_full_s;                 /* CLOCK_MONOTONIC time of the last whole snapshot */
	struct metrics_stats stats;         /* the exporter's counters */
	bool first;                         /* the next sample is the first */
	bool nvml_failing;                  /* the previous sample failed (log once per streak) */
	bool lease_failing;                 /* the same for the lease directory */
	struct gpuctl_xid_watch *xid_watch; /* NVML's XID events, NULL when it has none */
	bool xid_tried;                     /* the watch was made (or could not be) */
	bool verbose;                       /* -v: say why there are no XID events */
	struct metrics_xid *xids;           /* their counts per GPU and code (owned) */
	size_t n_xids;
	uint64_t xid_seq; /* events counted so far */
};

/* One sample, as the main thread renders it. Never changes once made. */
struct exporter_sample {
	struct gpuctl_snapshot *snap;        /* NULL when NVML failed (status, error) */
	int status;                          /* that failure's -errno */
	char error[256];                     /* its message */
	struct gpuctl_lease_list *leases;    /* NULL: no lease directory, or unreadable */
	struct gpuctl_health_report *health; /* NULL: none */
	struct metrics_stats stats;          /* the counters after this sample */
	struct metrics_xid *xids;            /* the XID counts after it (a copy) */
	size_t n_xids;
};

static void exporter_sample_free(void *p)
{
	struct exporter_sample *x = p;

	gpuctl_snapshot_free(x->snap);
	gpuctl_lease_list_free(x->leases);
	gpuctl_health_report_free(x->health);
	free(x->xids);
	free(x);
}

/* Facts that change only with a driver reload, a reboot, a GPU reset or an administrator's
 * mode change: read by the whole snapshot every EXPORTER_FULL_EVERY seconds, not by the
 * refreshes between. */
static bool static_field(enum gpuctl_field f)
{
	switch (f) {
	case GPUCTL_F_UUID:
	case GPUCTL_F_PCI_BUS_ID:
	case GPUCTL_F_PCI_DEVICE_ID:
	case GPUCTL_F_NAME:
	case GPUCTL_F_BRAND:
	case GPUCTL_F_ARCHITECTURE:
	case GPUCTL_F_COMPUTE_CAP:
	case GPUCTL_F_SERIAL:
	case GPUCTL_F_MINOR_NUMBER:
	case GPUCTL_F_TEMP_SLOWDOWN:
	case GPUCTL_F_TEMP_SHUTDOWN:
	case GPUCTL_F_CLOCK_SM_MAX:
	case GPUCTL_F_CLOCK_MEM_MAX:
	case GPUCTL_F_PCIE_GEN_MAX:
	case GPUCTL_F_PCIE_WIDTH_MAX:
	case GPUCTL_F_ECC_MODE:
	case GPUCTL_F_ECC_MODE_PENDING:
	case GPUCTL_F_MIG_MODE:
	case GPUCTL_F_MIG_MODE_PENDING:
	case GPUCTL_F_NUMA_NODE:
	case GPUCTL_F_GPU_NUMA_NODE:
	case GPUCTL_F_CPU_AFFINITY:
		return true;
	default:
		return false;
	}
}

/* The sampler thread's end: the XID watch goes before its context. */
static void sampling_finish(struct gpuctl_ctx *ctx, void *userdata)
{
	struct sampling *s = userdata;
	(void)ctx;

	gpuctl_xid_watch_free(s->xid_watch);
	free(s->xids);
	s->xid_watch = NULL;
	s->xids = NULL;
	s->n_xids = 0;
}

/* Drains the XID events NVML has for us into the per-(GPU, code) counts: memory stays bounded
 * by the codes seen, however many events come. -ENOMEM keeps what was counted. */
static int count_xids(struct gpuctl_ctx *ctx, struct sampling *s)
{
	struct gpuctl_xid_log *log = NULL;
	int r = 0;

	if (!s->xid_watch || gpuctl_xid_log_new(&log) < 0)
		return s->xid_watch ? -ENOMEM : 0;
	while (gpuctl_xid_watch_wait(ctx, s->xid_watch, 0, log) > 0)
		;
	for (size_t k = 0; r == 0 && k < gpuctl_xid_log_count(log); k++) {
		size_t g, j;
		unsigned code;
		if (gpuctl_xid_log_get(log, k, &g, &code, NULL) < 0)
			continue;
		for (j = 0; j < s->n_xids && !(s->xids[j].gpu == g && s->xids[j].code == code); j++)
			;
		if (j == s->n_xids) {
			struct metrics_xid *nx = realloc(s->xids, (s->n_xids + 1) * sizeof(*nx));
			if (!nx) {
				r = -ENOMEM;
				break;
			}
			s->xids = nx;
			s->xids[s->n_xids++] = (struct metrics_xid){.gpu = g, .code = code};
		}
		s->xids[j].count++;
		s->xids[j].seq = ++s->xid_seq;
	}
	gpuctl_xid_log_free(log);
	return r;
}

/* The lease states of snap's devices, NULL when there is no lease directory or it cannot be
 * read (counted and logged once). */
static struct gpuctl_lease_list *read_leases(struct gpuctl_ctx *ctx, struct sampling *s,
                                             const struct gpuctl_snapshot *snap)
{
	struct gpuctl_lease_dir *dir = NULL;
	struct gpuctl_lease_list *list = NULL;
	struct stat st;
	const char *path = gpuctl_site_lease_dir_path(s->site);
	int r;

	s->stats.lease_ok = true;
	if (lstat(path, &st) < 0 && errno == ENOENT)
		return NULL; /* nothing is leased */
	r = gpuctl_lease_dir_open(ctx, path, &dir);
	if (r >= 0)
		r = gpuctl_lease_list(ctx, dir, snap, &list);
	gpuctl_lease_dir_free(dir);
	if (r < 0) {
		s->stats.lease_errors++;
		s->stats.lease_ok = false;
		if (!s->lease_failing) {
			const char *msg = gpuctl_errmsg(ctx);
			cli_error("exporter: lease directory %s: %s (no lease metrics until it "
			          "can be read)",
			          path, msg && msg[0] ? msg : strerror(-r));
		}
		s->lease_failing = true;
		return NULL;
	}
	s->lease_failing = false;
	return list;
}

/* Whether a GPU of snap was lost: a refresh keeps it lost (it re-reads only the devices it
 * has), so the next sample is a whole snapshot, which sees it come back at once. */
static bool any_lost(const struct gpuctl_snapshot *snap)
{
	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++)
		if (gpuctl_gpu_lost(gpuctl_snapshot_gpu(snap, g)))
			return true;
	return false;
}

/* The snapshot of a sample: a refresh of the previous one while its whole snapshot is recent;
 * a whole snapshot when it is not, after a failed sample, or when the refresh cannot be
 * trusted (NVML cannot count the GPUs, or their number changed): that snapshot then decides. */
static int read_snapshot(struct gpuctl_ctx *ctx, struct sampling *s,
                         const struct exporter_sample *prev, double t0,
                         struct gpuctl_snapshot **ret_snap)
{
	int r;

	if (prev && prev->snap && t0 - s->last_full_s < EXPORTER_FULL_EVERY &&
	    !any_lost(prev->snap) &&
	    gpuctl_snapshot_refresh(ctx, prev->snap, METRICS_SNAP_FLAGS, s->dynamic, s->n_dynamic,
	                            ret_snap) >= 0)
		return 0;
	r = gpuctl_snapshot_take_fields(ctx, METRICS_SNAP_FLAGS, s->fields, s->n_fields, ret_snap);
	s->last_full_s = t0;
	return r;
}

/* The sampler's take: the snapshot, the XIDs since the last sample, the lease states and the
 * verdicts. An NVML failure is a sample too (no snapshot: the page then has the exporter's own
 * metrics only); only running out of memory fails. */
static int exporter_take(struct gpuctl_ctx *ctx, void *userdata, const void *prevp, void **ret_data)
{
	struct sampling *s = userdata;
	struct exporter_sample *x = calloc(1, sizeof(*x));
	double t0 = cli_now(CLOCK_MONOTONIC);
	bool first = s->first;
	int r;

	if (!x)
		return -ENOMEM;
	s->first = false;
	s->stats.last_time_s = cli_now(CLOCK_REALTIME);
	r = read_snapshot(ctx, s, prevp, t0, &x->snap);
	s->stats.samples++;
	if (r < 0) {
		const char *msg = gpuctl_errmsg(ctx);
		x->snap = NULL;
		x->status = r;
		snprintf(x->error, sizeof(x->error), "%s", msg && msg[0] ? msg : strerror(-r));
		s->stats.nvml_errors++;
		/* the first sample's failure is the command's error (it exits) */
		if (!s->nvml_failing && !first)
			cli_error("exporter: NVML: %s (serving no GPU metrics until it recovers)",
			          x->error);
		s->nvml_failing = true;
	} else {
		if (s->nvml_failing)
			cli_error("exporter: NVML: sampling again");
		s->nvml_failing = false;
		/* XID events from the first good snapshot on (none when NVML cannot deliver
		 * them: the kernel log still counts for the verdicts) */
		if (!s->xid_tried) {
			s->xid_tried = true;
			if (gpuctl_xid_watch_new(ctx, x->snap, &s->xid_watch) < 0) {
				s->xid_watch = NULL;
				if (s->verbose)
					cli_error("exporter: no XID events: %s",
					          gpuctl_errmsg(ctx));
			}
		}
		x->leases = read_leases(ctx, s, x->snap);
		/* XIDs since the last sample, then the verdicts (docs/health.md: the kernel log and
		 * what health --watch recorded, as gpuctl health reads them) */
		if (count_xids(ctx, s) < 0)
			cli_error("exporter: out of memory counting XIDs");
		if (gpuctl_site_health(ctx, s->site, x->snap, &x->health) < 0) {
			/* the other metrics are served */
			cli_error("exporter: health check: %s", gpuctl_errmsg(ctx));
			x->health = NULL;
		}
	}
	s->stats.last_ok = x->snap != NULL;
	/* the duration covers the NVML and lease reads; rendering is measured by `make bench` */
	s->stats.last_duration_s = cli_now(CLOCK_MONOTONIC) - t0;
	x->stats = s->stats;
	if (s->n_xids) {
		x->xids = malloc(s->n_xids * sizeof(*x->xids));
		if (!x->xids) {
			exporter_sample_free(x);
			return -ENOMEM;
		}
		memcpy(x->xids, s->xids, s->n_xids * sizeof(*x->xids));
		x->n_xids = s->n_xids;
	}
	*ret_data = x;
	return 0;
}

/* ---- publishing (on the main thread) ---- */

/* Renders in as the /metrics page and swaps it in, with /healthz answering ok or 503. 0, or
 * -ENOMEM when no page could be made (the old one stays). */
static int publish(struct exporter *ex, const struct metrics_input *in, bool overdue)
{
	struct textbuf buf = {0};
	int r = metrics_render(in, &buf);

	if (r < 0) {
		textbuf_free(&buf);
		return r;
	}
	struct MHD_Response *page =
	        mhd.create_response_from_buffer(buf.len, buf.data, MHD_RESPMEM_MUST_FREE);
	if (!page) {
		textbuf_free(&buf);
		return -ENOMEM;
	}
	if (mhd.add_response_header(page, MHD_HTTP_HEADER_CONTENT_TYPE,
	                            "text/plain; version=0.0.4; charset=utf-8") != MHD_YES) {
		mhd.destroy_response(page);
		return -ENOMEM;
	}
	pthread_mutex_lock(&ex->lock);
	struct MHD_Response *old = ex->page;
	ex->page = page;
	ex->overdue = overdue;
	/* connections still sending the old page hold their own reference */
	if (old)
		mhd.destroy_response(old);
	pthread_mutex_unlock(&ex->lock);
	return 0;
}

/* Publishes a sample's page; *ret_stats gets its counters (for the overdue pages after it). */
static int publish_sample(struct exporter *ex, const struct exporter_sample *x,
                          const char *hostname, struct metrics_stats *ret_stats)
{
	struct metrics_input in = {.snap = x->snap,
	                           .leases = x->leases,
	                           .hostname = hostname,
	                           .stats = &x->stats,
	                           .health = x->health,
	                           .xids = x->xids,
	                           .n_xids = x->n_xids};

	*ret_stats = x->stats;
	return publish(ex, &in, false);
}

/* While the latest sample is overdue: the exporter's own metrics only, with
 * last_sample_success 0 and how long NVML has been silent; no GPU series, so Prometheus marks
 * them stale instead of recording old values as new (docs/metrics.md, "A hung driver"). */
static int publish_overdue(struct exporter *ex, const struct metrics_stats *last, double silent_s,
                           const char *hostname)
{
	struct metrics_stats st = *last;
	struct metrics_input in = {.hostname = hostname, .stats = &st};

	st.last_ok = false;
	st.overdue_s = silent_s;
	return publish(ex, &in, true);
}

/* Serves until SIGINT or SIGTERM (blocked in every thread, taken here): each new sample's
 * page, and while the sampler is overdue an overdue page every interval. */
static void serve(struct exporter *ex, struct sampler *smp, uint64_t seq,
                  const struct metrics_stats *first, double interval, const char *hostname,
                  const sigset_t *stop)
{
	struct metrics_stats last = *first;
	bool overdue = false;
	double again = 0; /* while overdue: when to render its page again */

	for (;;) {
		struct pollfd p = {.fd = sampler_fd(smp), .events = POLLIN};
		const struct sampler_sample *m;
		double now;

		if (cli_wait_fds(&p, 1, overdue ? again : sampler_overdue_at(smp), stop))
			return;
		m = sampler_latest(smp);
		if (m && m->seq > seq) {
			seq = m->seq;
			if (overdue)
				cli_error("exporter: NVML answering again");
			overdue = false;
			if (!m->data || publish_sample(ex, m->data, hostname, &last) < 0)
				cli_error("exporter: out of memory rendering the metrics (serving "
				          "the previous page)");
#ifdef __GLIBC__
			/* give back what the sample freed (and what connections that closed
			 * left), not only the top of the heap: about 0.1 MiB after a load */
			malloc_trim(0);
#endif
		}
		sampler_put(m);
		now = cli_now(CLOCK_MONOTONIC);
		if (!sampler_overdue(smp, now) || (overdue && now < again))
			continue;
		double silent = sampler_silence(smp, now);
		if (!overdue)
			cli_error("exporter: NVML not answering for %.0f s (serving only the "
			          "exporter's own metrics, /healthz 503, until it answers)",
			          silent);
		overdue = true;
		again = now + interval;
		if (publish_overdue(ex, &last, silent, hostname) < 0)
			cli_error("exporter: out of memory rendering the metrics");
	}
}

/* ---- the command ---- */

static int cmd_exporter_exec(struct cli *cli, int argc, char **argv)
{
	const char *listen_text = LISTEN_DEFAULT, *lease_dir = NULL, *why = NULL;
	double interval = EXPORTER_DEFAULT_INTERVAL;
	struct listen_spec spec;
	struct exporter ex = {0};
	struct sampling s = {.first = true};
	struct sampler *smp = NULL;
	char hostname[256]; /* the Hostname label */
	struct MHD_Daemon *daemon = NULL;
	unsigned timeout;
	sigset_t stop, old;
	int opt, status, fd;

	while ((opt = getopt_long(argc, argv, "+:h", exporter_options, NULL)) != -1) {
		switch (opt) {
		case OPT_LISTEN:
			listen_text = optarg;
			break;
		case OPT_INTERVAL:
			if (parse_seconds(optarg, EXPORTER_MIN_INTERVAL, EXPORTER_MAX_INTERVAL,
			                  &interval) < 0)
				return cmd_usage_error(
				        &cmd_exporter_entry,
				        "--interval: '%s' is not a number of seconds "
				        "from 0.1 to 86400",
				        optarg);
			break;
		case OPT_LEASE_DIR:
			if (!optarg[0])
				return cmd_usage_error(&cmd_exporter_entry,
				                       "--lease-dir: empty path");
			lease_dir = optarg;
			break;
		case 'h':
			cmd_usage(&cmd_exporter_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_exporter_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_exporter_entry, "unexpected argument '%s'",
		                       argv[optind]);
	if (listen_parse(listen_text, &spec, &why) < 0)
		return cmd_usage_error(&cmd_exporter_entry, "--listen: '%s': %s", listen_text, why);
	if (connection_timeout(&timeout) < 0)
		return cmd_usage_error(&cmd_exporter_entry,
		                       "GPUCTL_EXPORTER_TIMEOUT: '%s' is not a number of seconds "
		                       "from 1 to %d",
		                       getenv("GPUCTL_EXPORTER_TIMEOUT"), EXPORTER_MAX_TIMEOUT);
	/* the configuration and the lease directory's path; the directory itself is read at every
	 * sample (it may appear, or become unreadable, while the exporter runs) */
	status = cli_site(cli, &cmd_exporter_entry, lease_dir, GPUCTL_SITE_NO_LEASES);
	if (status)
		return status;
	s.site = cli->site;
	s.verbose = cli->verbose;

	/* Blocked before the socket listens (a client may connect, and a supervisor stop us, at
	 * once: the signal then waits for serve(), which exits 0) and before MHD starts its
	 * thread, which inherits the mask (the sampler's thread blocks all): only the main
	 * thread's signalfd takes them (cli_wait_fds), whatever the sampler does. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	fd = bind_listen(&spec);
	if (fd < 0) {
		cli_error("exporter: cannot listen on '%s': %s", listen_text,
		          fd == -EHOSTUNREACH ? "the host name does not resolve" : strerror(-fd));
		return CLI_EXIT_FAILURE;
	}
	s.n_fields = metrics_fields(s.fields, sizeof(s.fields) / sizeof(s.fields[0]));
	/* and what the health verdicts need (docs/health.md; the NVLink states come with
	 * METRICS_SNAP_FLAGS) */
	size_t nh = 0;
	const enum gpuctl_field *hf = gpuctl_health_fields(&nh);
	for (size_t i = 0; i < nh && s.n_fields < sizeof(s.fields) / sizeof(s.fields[0]); i++) {
		bool have = false;
		for (size_t k = 0; k < s.n_fields; k++)
			have |= s.fields[k] == hf[i];
		if (!have)
			s.fields[s.n_fields++] = hf[i];
	}
	for (size_t k = 0; k < s.n_fields; k++)
		if (!static_field(s.fields[k]))
			s.dynamic[s.n_dynamic++] = s.fields[k];
	if (gethostname(hostname, sizeof(hostname)) < 0)
		hostname[0] = '\0';
	hostname[sizeof(hostname) - 1] = '\0';
	ex.verbose = cli->verbose;

	char mhd_why[256];
	if (mhd_load(mhd_why, sizeof(mhd_why)) < 0) {
		cli_error("exporter: cannot load libmicrohttpd (Debian: apt-get install "
		          "libmicrohttpd12): "
		          "%s",
		          mhd_why);
		close(fd);
		return CLI_EXIT_FAILURE;
	}
	if (exporter_init(&ex) < 0) {
		cli_error("exporter: out of memory");
		close(fd);
		exporter_done(&ex);
		return CLI_EXIT_FAILURE;
	}

	/* NVML is read on the sampler's thread, with a context of its own; the first sample is
	 * taken before serving: no driver is exit 4 now, not an empty page later */
	struct gpuctl_ctx *sctx = NULL;
	status = cli_context_new(cli, &sctx);
	if (status) {
		close(fd);
		exporter_done(&ex);
		return status;
	}
	/* a select.lock held by someone else delays a sample by this much at most: the lease
	 * metrics are left out then, never the GPUs' (docs/metrics.md) */
	(void)gpuctl_ctx_set_lock_wait(sctx, EXPORTER_LOCK_WAIT_S);
	struct sampler_config cfg = {.interval = interval,
	                             .ctx = sctx,
	                             .take = exporter_take,
	                             .free_data = exporter_sample_free,
	                             .finish = sampling_finish,
	                             .userdata = &s};
	int r = sampler_start(&cfg, &smp);
	if (r < 0) {
		cli_error("exporter: cannot start the sampler: %s", strerror(-r));
		gpuctl_ctx_free(sctx);
		close(fd);
		exporter_done(&ex);
		return CLI_EXIT_FAILURE;
	}
	const struct sampler_sample *m = NULL;
	if (cli_first_sample(smp, "exporter", &stop, &m)) {
		close(fd);
		status = CLI_EXIT_OK; /* stopped before it served */
		goto stop_sampler;
	}
	const struct exporter_sample *x = m->data;
	if (!x || !x->snap) {
		status = x ? cli_driver_error_msg(x->status, x->error)
		           : (cli_error("exporter: out of memory"), CLI_EXIT_FAILURE);
		sampler_put(m);
		close(fd);
		goto stop_sampler;
	}
	struct metrics_stats first;
	uint64_t seq = m->seq;
	r = publish_sample(&ex, x, hostname, &first);
	sampler_put(m);
	if (r < 0) {
		cli_error("exporter: out of memory");
		close(fd);
		status = CLI_EXIT_FAILURE;
		goto stop_sampler;
	}

	signal(SIGPIPE, SIG_IGN);
#ifdef __GLIBC__
	/* One malloc arena: MHD's thread would otherwise get an arena of its own, which keeps
	 * the connections' memory pools (EXPORTER_CONN_MEMORY each) resident after they close
	 * (measured: about 0.4 MiB more resident after 50 scrapers left). The sampler
	 * allocates once per interval, so the threads hardly ever contend. */
	mallopt(M_ARENA_MAX, 1);
#endif

	/* no listening socket of its own: the gate accepts and hands each connection over */
	daemon = mhd.start_daemon(
	        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG |
	                MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC,
	        0, NULL, NULL, handle, &ex, MHD_OPTION_CONNECTION_LIMIT,
	        (unsigned)EXPORTER_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT, timeout,
	        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)EXPORTER_CONN_MEMORY,
	        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)EXPORTER_PER_IP,
	        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, &ex, MHD_OPTION_NOTIFY_COMPLETED,
	        request_completed, &ex, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &ex, MHD_OPTION_END);
	if (!daemon) {
		cli_error("exporter: cannot start the HTTP server on '%s'", listen_text);
		close(fd);
		status = CLI_EXIT_FAILURE;
		goto stop_sampler;
	}
	/* three descriptors a connection (the client's socket and the pair): the soft limit is
	 * raised toward the hard one, since systemd starts services with 1024 */
	struct rlimit rl;
	rlim_t want = 3 * (rlim_t)EXPORTER_MAX_CONNECTIONS + 64;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	struct http_gate *gate = NULL;
	r = http_gate_start(fd, EXPORTER_MAX_CONNECTIONS, gate_add, daemon, cli->verbose, &gate);
	if (r < 0) { /* the gate closed fd */
		cli_error("exporter: cannot start serving on '%s': %s", listen_text, strerror(-r));
		mhd.stop_daemon(daemon);
		status = CLI_EXIT_FAILURE;
		goto stop_sampler;
	}
	ex.deadline_s = timeout;
	pthread_t reaper;
	bool reaping = pthread_create(&reaper, NULL, reaper_main, &ex) == 0;
	if (!reaping)
		cli_error("exporter: no request deadline (cannot start a thread); the idle "
		          "timeout stays");
	if (cli->verbose)
		cli_error("exporter: serving http://%s/metrics, sampling every %gs", listen_text,
		          interval);

	serve(&ex, smp, seq, &first, interval, hostname, &stop);

	ex.stopping = 1;
	/* the gate first: it closes the listening socket and the clients' connections */
	http_gate_stop(gate);
	if (reaping)
		pthread_join(reaper, NULL);
	mhd.stop_daemon(daemon);
	status = CLI_EXIT_OK;
stop_sampler:
	/* a sample hung in NVML is not waited for: the process ends without it */
	if (sampler_stop(smp, SAMPLER_STOP_WAIT_S) < 0)
		cli_exit_now(status);
	exporter_done(&ex);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return status;
}

const struct cmd_entry cmd_exporter_entry = {
        .name = "exporter",
        .usage = "[--listen ADDR:PORT] [--interval SECONDS] [--lease-dir DIR]",
        .summary = "serve GPU metrics to Prometheus (dcgm-exporter names, plus leases)",
        .options = "  --listen ADDR:PORT   where to serve: :PORT (every address), IPV4:PORT,\n"
                   "                       [IPV6]:PORT or HOST:PORT (default " LISTEN_DEFAULT ")\n"
                   "  --interval SECONDS   sample every SECONDS, 0.1 to 86400 (default 5);\n"
                   "                       scrapes serve the latest sample\n"
                   "  --lease-dir DIR      the lease directory (default $GPUCTL_LEASE_DIR,\n"
                   "                       else the configuration's lease_dir, else\n"
                   "                       /run/gpuctl); a missing one: no lease metrics\n"
                   "  -h, --help           print this help\n"
                   "\n"
                   "Paths: /metrics (Prometheus text format 0.0.4; docs/metrics.md), / (a\n"
                   "page linking to it), /healthz (\"ok\"; 503 while NVML is not answering:\n"
                   "no sample for two intervals, and only the exporter's own metrics are\n"
                   "served). SIGINT or SIGTERM stop it at once (exit 0).\n"
                   "GPUCTL_EXPORTER_TIMEOUT sets the idle timeout of a connection and the\n"
                   "longest a request may last, in seconds (default 10).\n",
        .exec = cmd_exporter_exec,
        .exits = CMD_EXITS_DRIVER,
};
