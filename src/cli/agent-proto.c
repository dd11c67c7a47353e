// SPDX-License-Identifier: MIT
/*
 * agent-proto.c: the pure parsers of enforce = cgroup (agent-proto.h): the socket's JSON lines
 * (jansson; docs/agent.md, "Enforcement: cgroup") and the kernel's text lines (proc(5): mountinfo,
 * /proc/PID/cgroup; /proc/devices), each one line at a time, strictly: what does not parse is
 * not ours. fuzz/fuzz-agent-proto.c drives every function.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-proto.h"

int agent_request_parse(const char *line, long caller_pid, char *why, size_t why_size)
{
	json_t *req = json_loads(line, JSON_REJECT_DUPLICATES, NULL), *pid;
	const char *what = json_string_value(json_object_get(req, "request"));
	int r = -EINVAL;

	if (!json_is_object(req) || !what)
		(void)snprintf(why, why_size, "not a request: expected {\"request\": \"confine\"}");
	else if (strcmp(what, "confine") != 0)
		(void)snprintf(why, why_size, "unknown request (expected confine)");
	else if ((pid = json_object_get(req, "pid")) &&
	         (!json_is_integer(pid) || json_integer_value(pid) != (json_int_t)caller_pid))
		(void)snprintf(why, why_size,
		               "a process can only confine itself (the caller is pid %ld)",
		               caller_pid);
	else
		r = 0;
	json_decref(req);
	return r;
}

int agent_reply_parse(const char *line, bool *ret_ok, char *text, size_t text_size)
{
	json_t *rep = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
	json_t *ok = json_object_get(rep, "ok");
	const char *t =
	        json_string_value(json_object_get(rep, json_is_true(ok) ? "cgroup" : "error"));
	int r = -EINVAL;

	if (json_is_boolean(ok) && t) {
		*ret_ok = json_is_true(ok);
		(void)snprintf(text, text_size, "%s", t);
		r = 0;
	}
	json_decref(rep);
	return r;
}

/* Whether the sep-separated list has word. */
static bool has_word(const char *list, char sep, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; p; p = strchr(p, sep), p = p ? p + 1 : NULL)
		if (!strncmp(p, word, n) && (p[n] == sep || p[n] == '\0' || p[n] == '\n'))
			return true;
	return false;
}

bool agent_mountinfo_cgroup(char *line, bool v1, char *mnt, size_t size)
{
	/* fields: 5 the mount point; after " - ": the fstype, the source, the super options */
	char point[4096], fstype[64], src[256], opts[1024];
	char *dash = strstr(line, " - ");

	if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
	    sscanf(dash + 3, "%63s %255s %1023s", fstype, src, opts) != 3)
		return false;
	if (strcmp(fstype, v1 ? "cgroup" : "cgroup2") != 0 ||
	    (v1 && !has_word(opts, ',', "devices")) || strlen(point) >= size)
		return false;
	memcpy(mnt, point, strlen(point) + 1);
	return true;
}

bool agent_proc_cgroup_line(char *line, bool v1, const char **ret_path)
{
	char *ctl = strchr(line, ':'), *p = ctl ? strchr(ctl + 1, ':') : NULL;

	if (!p)
		return false;
	*p++ = '\0';
	*ctl++ = '\0';
	if (v1 ? !has_word(ctl, ',', "devices") : strcmp(line, "0") != 0 || ctl[0])
		return false;
	p[strcspn(p, "\n")] = '\0';
	if (p[0] != '/')
		return false;
	*ret_path = p;
	return true;
}

int agent_proc_devices_line(const char *line, bool *in_chars, uint32_t *ret_major, char *name,
                            size_t name_size)
{
	unsigned long major;
	char word[128];
	char *end;

	if (!strncmp(line, "Character devices:", 18)) {
		*in_chars = true;
		return 0;
	}
	if (!strncmp(line, "Block devices:", 14))
		return -1;
	errno = 0;
	major = strtoul(line, &end, 10);
	if (!*in_chars || end == line || errno || major > UINT32_MAX ||
	    sscanf(end, "%127s", word) != 1 || strlen(word) >= name_size)
		return 0;
	*ret_major = (uint32_t)major;
	memcpy(name, word, strlen(word) + 1);
	return 1;
}

/* Whether word is "job-PID-TICKS", both decimal, PID > 0. */
static bool job_name(const char *word)
{
	const char *p, *dash;

	if (strncmp(word, "job-", 4) != 0)
		return false;
	p = word + 4;
	dash = strchr(p, '-');
	if (!dash || dash == p || !dash[1] || *p == '0' || dash - p > 10 ||
	    strspn(p, "0123456789") != (size_t)(dash - p) ||
	    strspn(dash + 1, "0123456789") != strlen(dash + 1) || strlen(dash + 1) > 20)
		return false;
	return strtol(p, NULL, 10) <= INT32_MAX;
}

bool agent_state_line(char *line, int32_t *ret_holder, uint64_t *ret_ticks, const char **ret_name,
                      const char **uuids, size_t max, size_t *ret_n)
{
	char *save = NULL, *holder = strtok_r(line, " \n", &save), *end;
	char *ticks = strtok_r(NULL, " \n", &save), *name = strtok_r(NULL, " \n", &save);
	unsigned long long t;
	long h;
	size_t n = 0;

	if (!holder || !ticks || !name || !job_name(name) || !isdigit((unsigned char)*holder) ||
	    !isdigit((unsigned char)*ticks))
		return false;
	errno = 0;
	h = strtol(holder, &end, 10);
	if (*end || errno || h > INT32_MAX)
		return false;
	t = strtoull(ticks, &end, 10);
	if (*end || errno)
		return false;
	for (char *u; (u = strtok_r(NULL, " \n", &save));) {
		if (n == max)
			return false;
		uuids[n++] = u;
	}
	*ret_holder = (int32_t)h;
	*ret_ticks = t;
	*ret_name = name;
	*ret_n = n;
	return true;
}

/* Whether path names a node the agent guards under dev_dir: DEV_DIR/nvidiaN or
 * DEV_DIR/nvidia-caps/nvidia-capN, N decimal. */
static bool guardable(const char *dev_dir, const char *path)
{
	size_t k = strlen(dev_dir);
	const char *p;

	if (strncmp(path, dev_dir, k) != 0 || path[k] != '/')
		return false;
	p = path + k + 1;
	if (!strncmp(p, "nvidia-caps/nvidia-cap", 22))
		p += 22;
	else if (!strncmp(p, "nvidia", 6))
		p += 6;
	else
		return false;
	return *p && strspn(p, "0123456789") == strlen(p);
}

/* The unsigned number of base at *p (digits only, no sign), at most max: its end, or NULL. */
static char *number(char *p, int base, uint32_t max, uint32_t *ret)
{
	unsigned long v;
	char *end;

	if (!isdigit((unsigned char)*p))
		return NULL;
	errno = 0;
	v = strtoul(p, &end, base);
	if (errno || v > max)
		return NULL;
	*ret = (uint32_t)v;
	return end;
}

bool agent_acl_state_line(char *line, const char *dev_dir, struct agent_acl_state *ret)
{
	struct agent_acl_state e = {0};
	char *p = line, *acl;

	line[strcspn(line, "\n")] = '\0';
	if (!(p = number(p, 8, 07777, &e.mode)) || *p++ != ' ' ||
	    !(p = number(p, 10, UINT32_MAX, &e.uid)) || *p++ != ' ' ||
	    !(p = number(p, 10, UINT32_MAX, &e.gid)) || *p++ != ' ' ||
	    !(p = number(p, 10, UINT32_MAX, &e.major)) || *p++ != ':' ||
	    !(p = number(p, 10, UINT32_MAX, &e.minor)) || *p++ != ' ')
		return false;
	acl = p;
	p = strchr(p, ' ');
	if (!p || p == acl)
		return false;
	*p++ = '\0';
	if (!guardable(dev_dir, p))
		return false;
	e.acl = strcmp(acl, "-") ? acl : NULL;
	e.path = p;
	*ret = e;
	return true;
}
