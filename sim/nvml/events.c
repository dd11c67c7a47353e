/* Simulated NVML: events. XID events come from the simulated kernel log,
 * $NVSIM_STATE_DIR/kmsg, where `nvsim xid` appends the driver's "NVRM: Xid (PCI:...): N, ..."
 * lines: one log feeds both channels, as on a real machine.
 *
 * Decisions:
 * - A set remembers the log's size when it is created, so it delivers only events that happen
 *   after that (NVML: "records only events that happen after registration"), each once, in
 *   log order. Lines of GPUs the set has no XID registration for are passed over.
 * - Only XID events are supported (nvmlDeviceGetSupportedEventTypes answers 0x8);
 *   registering other bits is NOT_SUPPORTED, as NVML answers for event types a device lacks.
 * - nvmlEventSetWait_v2 polls the log every 5 ms without holding the library lock, and
 *   answers TIMEOUT (10) when nothing came; a lost registered GPU answers GPU_IS_LOST.
 * - Sets are malloc'ed and kept on a list, so a stale or foreign set pointer is refused
 *   (INVALID_ARGUMENT) instead of dereferenced.
 * - Without a state directory (NVSIM_SCENARIO mode) there is no log: sets work and never fire. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SUPPORTED_EVENTS NVML_EVENT_TYPE_XID
#define POLL_NS          5000000L

struct nvmlEventSet_st {
	struct nvmlEventSet_st *next;          /* live sets */
	off_t offset;                          /* next byte of the log to read */
	unsigned long long mask[SIM_MAX_GPUS]; /* registered event types per GPU */
};

static struct nvmlEventSet_st *sets; /* guarded by sim_lib.lock */

static bool set_live(nvmlEventSet_t set)
{
	for (struct nvmlEventSet_st *s = sets; s; s = s->next)
		if (s == set)
			return true;
	return false;
}

static void kmsg_path(char *buf, size_t size)
{
	snprintf(buf, size, "%s/kmsg", sim_lib.state_dir);
}

SIM_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	nvmlReturn_t r = sim_begin(SIM_FN_nvmlEventSetCreate, true);
	struct nvmlEventSet_st *s;
	struct stat st;
	char path[4200];

	if (r != NVML_SUCCESS)
		return sim_end(r);
	if (!set)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	s = calloc(1, sizeof(*s));
	if (!s)
		return sim_end(NVML_ERROR_MEMORY);
	if (sim_lib.state_dir[0]) {
		kmsg_path(path, sizeof(path));
		if (stat(path, &st) == 0)
			s->offset = st.st_size;
	}
	s->next = sets;
	sets = s;
	*set = s;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                                 nvmlEventSet_t set)
{
	SIM_DEVICE_CALL(nvmlDeviceRegisterEvents, device, 0);
	if (!set_live(set))
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (eventTypes & ~SUPPORTED_EVENTS)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	set->mask[c.gpu] |= eventTypes;
	return sim_end(NVML_SUCCESS);
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* "dddd:bb:dd" or "dddddddd:bb:dd.f" → bus and device (the domain is 0 in every scenario). */
static bool bus_device(const char *s, unsigned *bus, unsigned *dev)
{
	const char *c = strchr(s, ':');

	if (!c || hexval(c[1]) < 0 || hexval(c[2]) < 0 || c[3] != ':' || hexval(c[4]) < 0 ||
	    hexval(c[5]) < 0)
		return false;
	*bus = (unsigned)(hexval(c[1]) << 4 | hexval(c[2]));
	*dev = (unsigned)(hexval(c[4]) << 4 | hexval(c[5]));
	return true;
}

/* Parses one log line: the GPU index and XID of "NVRM: Xid (PCI:0000:07:00): 79, ...". Called
 * with the library lock held (the scenario may be re-read by other calls). */
static bool parse_line(const char *line, unsigned *ret_gpu, unsigned long long *ret_xid)
{
	const char *p = strstr(line, "NVRM: Xid (");
	unsigned bus, dev, b, d;
	char *end;

	if (!p)
		return false;
	p += strlen("NVRM: Xid (");
	if (strncmp(p, "PCI:", 4) == 0)
		p += 4;
	if (!bus_device(p, &bus, &dev))
		return false;
	p = strchr(p, ')');
	if (!p || p[1] != ':')
		return false;
	unsigned long long xid = strtoull(p + 2, &end, 10);
	if (end == p + 2 || xid == 0)
		return false;
	for (unsigned g = 0; g < sim_lib.n_gpus; g++)
		if (bus_device(sim_lib.sc->gpus[g].pci_bus_id, &b, &d) && b == bus && d == dev) {
			*ret_gpu = g;
			*ret_xid = xid;
			return true;
		}
	return false;
}

/* The next event for set from the log, under the lock: SUCCESS (data filled), TIMEOUT (none
 * yet), or GPU_IS_LOST. */
static nvmlReturn_t next_event(nvmlEventSet_t set, struct nvmlEventData_st *data)
{
	char path[4200], buf[4096];
	int fd;

	if (!sim_lib.state_dir[0])
		return NVML_ERROR_TIMEOUT;
	for (unsigned g = 0; g < sim_lib.n_gpus; g++)
		if (set->mask[g] && sim_gpu_lost(g))
			return NVML_ERROR_GPU_IS_LOST;
	kmsg_path(path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NVML_ERROR_TIMEOUT;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, set->offset);
		char *nl;
		unsigned gpu;
		unsigned long long xid;

		if (n <= 0)
			break;
		buf[n] = '\0';
		nl = memchr(buf, '\n', (size_t)n);
		if (!nl) {
			if ((size_t)n == sizeof(buf) - 1) /* an over-long line: pass over it */
				set->offset += n;
			break; /* else a line still being written */
		}
		*nl = '\0';
		set->offset += nl - buf + 1;
		if (parse_line(buf, &gpu, &xid) && (set->mask[gpu] & NVML_EVENT_TYPE_XID)) {
			close(fd);
			*data = (struct nvmlEventData_st){
			        .device = &sim_lib.handles[gpu * (1 + SIM_MAX_MIG)],
			        .eventType = NVML_EVENT_TYPE_XID,
			        .eventData = xid,
			        .gpuInstanceId = 0xFFFFFFFFu,
			        .computeInstanceId = 0xFFFFFFFFu,
			};
			return NVML_SUCCESS;
		}
	}
	close(fd);
	return NVML_ERROR_TIMEOUT;
}

SIM_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, struct nvmlEventData_st *data,
                                            unsigned int timeoutms)
{
	nvmlReturn_t r = sim_begin(SIM_FN_nvmlEventSetWait_v2, true);
	struct timespec start, now;

	if (r != NVML_SUCCESS)
		return sim_end(r);
	if (!set_live(set) || !data)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		r = next_event(set, data);
		if (r != NVML_ERROR_TIMEOUT)
			return sim_end(r);
		clock_gettime(CLOCK_MONOTONIC, &now);
		long long ms = (now.tv_sec - start.tv_sec) * 1000LL +
		               (now.tv_nsec - start.tv_nsec) / 1000000L;
		if (ms >= (long long)timeoutms)
			return sim_end(NVML_ERROR_TIMEOUT);
		/* wait without the lock, so other threads' calls go on */
		sim_end(NVML_SUCCESS);
		nanosleep(&(struct timespec){0, POLL_NS}, NULL);
		pthread_mutex_lock(&sim_lib.lock);
		if (!sim_lib.init_count || !set_live(set))
			return sim_end(NVML_ERROR_UNINITIALIZED);
	}
}

SIM_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	nvmlReturn_t r = sim_begin(SIM_FN_nvmlEventSetFree, true);

	if (r != NVML_SUCCESS)
		return sim_end(r);
	for (struct nvmlEventSet_st **p = &sets; *p; p = &(*p)->next)
		if (*p == set) {
			*p = set->next;
			free(set);
			return sim_end(NVML_SUCCESS);
		}
	return sim_end(NVML_ERROR_INVALID_ARGUMENT);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                         unsigned long long *eventTypes)
{
	SIM_DEVICE_CALL(nvmlDeviceGetSupportedEventTypes, device, 0);
	if (!eventTypes)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*eventTypes = SUPPORTED_EVENTS;
	return sim_end(NVML_SUCCESS);
}
