// SPDX-License-Identifier: MIT
/*
 * notices.c: "your lease was taken back": the eviction notices root left for the caller
 * (docs/leases.md "Taking a lease back"), each shown once on stderr by the caller's next gpuctl
 * command, whichever it is.
 *
 * Decisions:
 * - Cheap where nothing happened: one open of the caller's own notice directory
 *   (DIR/notices/<uid>), nothing more when there is none (gpuctl_lease_notices_mine).
 * - Where: main.c looks in the lease directory of $GPUCTL_LEASE_DIR (else /run/gpuctl) before
 *   the command runs; cli_site looks again in the lease directory the command settles on
 *   (--lease-dir, the configuration's lease_dir) when that is another one.
 * - One line per notice, then it is renamed as seen: shown once. A notice that cannot be marked
 *   is shown again next time rather than lost.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"

/* The lease directory whose notices were shown last (a path; "" none yet). */
static char shown_in[4096];

void cli_notices_show(const char *lease_dir)
{
	struct gpuctl_lease_notices *list = NULL;

	if (!lease_dir)
		lease_dir = getenv("GPUCTL_LEASE_DIR");
	if (!lease_dir || !lease_dir[0])
		lease_dir = "/run/gpuctl";
	if (!strcmp(shown_in, lease_dir))
		return;
	(void)snprintf(shown_in, sizeof(shown_in), "%s", lease_dir);
	if (gpuctl_lease_notices_mine(NULL, lease_dir, &list) < 0)
		return;
	for (size_t i = 0; i < gpuctl_lease_notices_count(list); i++) {
		const struct gpuctl_lease_notice *n = gpuctl_lease_notices_get(list, i);
		time_t t = (time_t)n->when;
		char when[32] = "?", who[64];
		struct tm tm;

		if (localtime_r(&t, &tm))
			(void)strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		if (n->by)
			(void)snprintf(who, sizeof(who), "%s", n->by);
		else
			(void)snprintf(who, sizeof(who), "uid %u", n->by_uid);
		cli_error("your lease of GPU %lld (%s) was taken back by %s at %s: %s%s",
		          (long long)n->index, n->device, who, when, n->reason,
		          n->ended ? "" : " (your processes on it run on, no longer leased)");
		(void)gpuctl_lease_notices_mark_seen(NULL, list, i);
	}
	gpuctl_lease_notices_free(list);
}
