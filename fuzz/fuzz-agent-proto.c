// SPDX-License-Identifier: MIT
/*
 * fuzz-agent-proto.c: libFuzzer target for the parsers of enforce = cgroup (src/cli/agent-proto.c):
 * the agent socket's request and reply lines, and one line each of /proc/self/mountinfo,
 * /proc/PID/cgroup and /proc/devices.
 *
 * The first byte picks the parser (bit 128: a state file's line, of enforce = acl when bit 1
 * is set, else of the confined jobs; without bit 128 modulo 6; bit 8: the v1 cgroup line, bit
 * 64: within the character devices), the rest is one NUL-terminated line. Properties checked
 * beyond
 * "no crash, no leak": a request is accepted only when it asks for "confine" and names no other
 * pid than the caller's, and a refusal says why; a reply parsed gives a NUL-terminated text; a
 * mount point, a cgroup path and a device name are NUL-terminated and fit their buffers, a cgroup
 * path starts with '/'; a state line gives a job cgroup name "job-" and at most the devices
 * asked for, none of them empty or holding a space; an acl state line a mode of at most 07777
 * and a path under the device directory.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256], text[64], mnt[32], name[16];
	const char *path = NULL;
	bool ok = false, chars = size > 0 && (data[0] & 64);
	uint32_t major;
	char *line;
	int r;

	if (size < 1)
		return 0;
	line = malloc(size);
	if (!line)
		return 0;
	memcpy(line, data + 1, size - 1);
	line[size - 1] = '\0';
	if ((data[0] & 129) == 129) {
		struct agent_acl_state e;
		if (agent_acl_state_line(line, "/dev", &e) &&
		    (e.mode > 07777 || strncmp(e.path, "/dev/nvidia", 11) != 0 ||
		     (e.acl && (!e.acl[0] || strchr(e.acl, ' ')))))
			abort();
		free(line);
		return 0;
	}
	if (data[0] & 128) {
		const char *job = NULL, *uuids[4];
		uint64_t ticks;
		int32_t holder;
		size_t n = 0;
		if (agent_state_line(line, &holder, &ticks, &job, uuids, 4, &n)) {
			if (strncmp(job, "job-", 4) != 0 || holder < 0 || n > 4)
				abort();
			for (size_t k = 0; k < n; k++)
				if (!uuids[k][0] || strchr(uuids[k], ' '))
					abort();
		}
		free(line);
		return 0;
	}
	switch (data[0] % 6) {
	case 0:
		why[0] = '\0';
		r = agent_request_parse(line, 4242, why, sizeof(why));
		if ((r < 0 && !why[0]) || (r == 0 && !strstr(line, "confine")))
			abort();
		break;
	case 1:
		if (agent_reply_parse(line, &ok, text, sizeof(text)) == 0 &&
		    strnlen(text, sizeof(text)) == sizeof(text))
			abort();
		break;
	case 2:
	case 3:
		if (agent_mountinfo_cgroup(line, data[0] % 6 == 2, mnt, sizeof(mnt)) &&
		    strnlen(mnt, sizeof(mnt)) == sizeof(mnt))
			abort();
		break;
	case 4:
		if (agent_proc_cgroup_line(line, data[0] & 8, &path) && path[0] != '/')
			abort();
		break;
	default:
		r = agent_proc_devices_line(line, &chars, &major, name, sizeof(name));
		if ((r == 1 && (!chars || strnlen(name, sizeof(name)) == sizeof(name))) || r < -1 ||
		    r > 1)
			abort();
		break;
	}
	free(line);
	return 0;
}
