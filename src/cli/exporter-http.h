/* SPDX-License-Identifier: MIT */
/*
 * exporter-http.h: the HTTP side of `gpuctl exporter` (exporter-http.c): libmicrohttpd, the
 * listening socket, the paths and the page. cmd-exporter.c samples and hands it each page.
 *
 * Life: exporter_http_new (listening, nothing served yet), exporter_http_publish (the first
 * page, then one per sample), exporter_http_serve, exporter_http_stop, exporter_http_free.
 * Stop and free undo whatever part was done, so every path ends with the same two calls.
 */
#ifndef GPUCTL_CLI_EXPORTER_HTTP_H
#define GPUCTL_CLI_EXPORTER_HTTP_H

#include <stdbool.h>

#include "listen.h"
#include "metrics.h"
#include "util.h"

struct exporter_http;

/* Listens on spec (listen_text, the --listen given, names it in messages and must outlive the
 * server), loads libmicrohttpd and makes the fixed pages. 0, or the exit status after printing
 * the error. */
int exporter_http_new(const char *listen_text, const struct listen_spec *spec, bool verbose,
                      struct exporter_http **ret_http);

/* Renders in as the /metrics page and swaps it in, with /healthz answering ok or 503
 * (overdue). 0, or -ENOMEM when no page could be made (the old one stays). Main thread. */
int exporter_http_publish(struct exporter_http *http, const struct metrics_input *in, bool overdue);

struct status_history;
/* The status page's settings from cfg (docs/status-page.md): who may read "/" and
 * /api/v1/status, the peers whose origins may read the document (CORS); and the history the
 * documents show (*ret_history, NULL under status_page = off). Before serving. 0 or -ENOMEM. */
int exporter_http_status_open(struct exporter_http *http, const struct gpuctl_config *cfg,
                              struct status_history **ret_history);
/* Swaps in text (malloc'ed, len bytes, taken over) as the /api/v1/status document. */
void exporter_http_publish_status(struct exporter_http *http, char *text, size_t len);

/* Starts serving: MHD's thread, the gate on the listening socket, the reaper of requests past
 * timeout_s (also MHD's idle timeout). 0, or the exit status after printing the error (call
 * exporter_http_stop still). */
int exporter_http_serve(struct exporter_http *http, unsigned timeout_s);

/* Stops serving: the gate (the listening socket and the clients' connections), the reaper,
 * MHD. What never started is skipped; a second call does nothing. Accepts NULL. */
void exporter_http_stop(struct exporter_http *http);

/* Stops (exporter_http_stop) and frees the pages and the server. Accepts NULL. */
void exporter_http_free(struct exporter_http *http);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct exporter_http *, exporter_http_free)

#endif /* GPUCTL_CLI_EXPORTER_HTTP_H */
