/* Simulated NVML: telemetry (memory, utilisation, temperature, power, clocks, clock event
 * reasons, PCIe link, video engines, energy, clock violations, BAR1, PCIe throughput, power
 * management limits, fans, performance state). Values
 * come from the scenario with nvsim's "set" merged in; memory used adds the registered
 * processes' memory, utilization.gpu their "util" (capped at 100, as several processes
 * time-share the GPU). Utilisation is NOT_SUPPORTED while MIG is enabled (NVML documents
 * per-GPU utilisation as unavailable in MIG mode). Optional scenario keys that are absent
 * (power, thresholds, clocks, violations, BAR1, PCIe throughput) answer NOT_SUPPORTED.
 *
 * Violation counters are not stored: each reading is computed from the clock, so that any two
 * readings taken under the same setting differ by exactly the configured percentage (see
 * nvmlDeviceGetViolationStatus below). */
#include "internal.h"
#include "../util.h"

struct mem {
	unsigned long long total, reserved, used;
};

static struct mem memory_of(const struct sim_call *c)
{
	struct mem m;

	if (c->m) {
		m.total = c->m->memory_mib << 20;
		m.reserved = 0;
		m.used = sim_procs_bytes(c->g, c->m);
	} else {
		m.total = c->g->memory_total_mib << 20;
		m.reserved = c->g->memory_reserved_mib << 20;
		m.used = (c->g->memory_used_mib << 20) + sim_procs_bytes(c->g, NULL);
	}
	if (m.used > m.total - m.reserved)
		m.used = m.total - m.reserved;
	return m;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	struct mem m;

	SIM_DEVICE_CALL(nvmlDeviceGetMemoryInfo_v2, device, SIM_MIG_OK);
	if (!memory)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (memory->version != nvmlMemory_v2)
		return sim_end(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	m = memory_of(&c);
	memory->total = m.total;
	memory->reserved = m.reserved;
	memory->used = m.used;
	memory->free = m.total - m.reserved - m.used;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	struct mem m;

	SIM_DEVICE_CALL(nvmlDeviceGetMemoryInfo, device, SIM_MIG_OK);
	if (!memory)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	m = memory_of(&c);
	memory->total = m.total;
	memory->used = m.used + m.reserved; /* v1 "used" includes the reservation */
	memory->free = m.total - m.reserved - m.used;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                      nvmlUtilization_t *utilization)
{
	SIM_DEVICE_CALL(nvmlDeviceGetUtilizationRates, device, 0);
	if (!utilization)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (c.g->mig_enabled)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	utilization->gpu = c.g->utilization_gpu + sim_procs_util(c.g);
	if (utilization->gpu > 100)
		utilization->gpu = 100;
	utilization->memory = c.g->utilization_memory;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                 nvmlTemperatureSensors_t sensorType,
                                                 unsigned int *temp)
{
	SIM_DEVICE_CALL(nvmlDeviceGetTemperature, device, 0);
	if (!temp || sensorType != NVML_TEMPERATURE_GPU)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*temp = c.g->temperature_c;
	return sim_end(NVML_SUCCESS);
}

static nvmlReturn_t opt_out(const struct sim_opt *o, unsigned int *out)
{
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!o->valid)
		return NVML_ERROR_NOT_SUPPORTED;
	*out = (unsigned int)o->v;
	return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                                          nvmlTemperatureThresholds_t thresholdType,
                                                          unsigned int *temp)
{
	SIM_DEVICE_CALL(nvmlDeviceGetTemperatureThreshold, device, 0);
	if (!temp)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	switch (thresholdType) {
	case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
		return sim_end(opt_out(&c.g->temperature_shutdown_c, temp));
	case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
		return sim_end(opt_out(&c.g->temperature_slowdown_c, temp));
	default:
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	}
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
	SIM_DEVICE_CALL(nvmlDeviceGetPowerUsage, device, 0);
	return sim_end(opt_out(&c.g->power_draw_mw, power));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
	SIM_DEVICE_CALL(nvmlDeviceGetEnforcedPowerLimit, device, 0);
	return sim_end(opt_out(&c.g->power_limit_mw, limit));
}

/* Power management: the limit set is the one enforced (the simulator models no second limiter
 * below it); power management is on exactly where a limit is known. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
	SIM_DEVICE_CALL(nvmlDeviceGetPowerManagementLimit, device, 0);
	return sim_end(opt_out(&c.g->power_limit_mw, limit));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                                     unsigned int *minLimit,
                                                                     unsigned int *maxLimit)
{
	SIM_DEVICE_CALL(nvmlDeviceGetPowerManagementLimitConstraints, device, 0);
	if (!minLimit || !maxLimit)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->power_limit_min_mw.valid || !c.g->power_limit_max_mw.valid)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*minLimit = (unsigned int)c.g->power_limit_min_mw.v;
	*maxLimit = (unsigned int)c.g->power_limit_max_mw.v;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                                 unsigned int *defaultLimit)
{
	SIM_DEVICE_CALL(nvmlDeviceGetPowerManagementDefaultLimit, device, 0);
	return sim_end(opt_out(c.g->power_limit_default_mw.valid ? &c.g->power_limit_default_mw
	                                                         : &c.g->power_limit_mw,
	                       defaultLimit));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device,
                                                         nvmlEnableState_t *mode)
{
	SIM_DEVICE_CALL(nvmlDeviceGetPowerManagementMode, device, 0);
	if (!mode)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*mode = c.g->power_limit_mw.valid ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
	return sim_end(NVML_SUCCESS);
}

/* Fans: a scenario's fan_speed_pct is the board's one fan; without it the board has none. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
	SIM_DEVICE_CALL(nvmlDeviceGetFanSpeed, device, 0);
	return sim_end(opt_out(&c.g->fan_speed_pct, speed));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan,
                                                 unsigned int *speed)
{
	SIM_DEVICE_CALL(nvmlDeviceGetFanSpeed_v2, device, 0);
	if (!speed)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->fan_speed_pct.valid)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	if (fan != 0)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	return sim_end(opt_out(&c.g->fan_speed_pct, speed));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *numFans)
{
	SIM_DEVICE_CALL(nvmlDeviceGetNumFans, device, 0);
	if (!numFans)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->fan_speed_pct.valid)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*numFans = 1;
	return sim_end(NVML_SUCCESS);
}

/* P-state: the scenario's performance_state, P0 when it has none. GetPowerState is the older,
 * deprecated name of the same query. */
static nvmlReturn_t pstate(enum sim_fn fn, nvmlDevice_t device, unsigned int *p)
{
	struct sim_call c;
	nvmlReturn_t r = sim_begin_dev(fn, device, 0, &c);

	if (r != NVML_SUCCESS)
		return sim_end(r);
	if (!p)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*p = c.g->performance_state.valid ? (unsigned int)c.g->performance_state.v : 0;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, unsigned int *pState)
{
	return pstate(SIM_FN_nvmlDeviceGetPerformanceState, device, pState);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, unsigned int *pState)
{
	return pstate(SIM_FN_nvmlDeviceGetPowerState, device, pState);
}

static nvmlReturn_t clock_value(const struct sim_call *c, nvmlClockType_t type, unsigned int *out,
                                bool max)
{
	switch (type) {
	case NVML_CLOCK_GRAPHICS:
	case NVML_CLOCK_SM:
		return opt_out(max ? &c->g->max_clock_sm : &c->g->clock_sm, out);
	case NVML_CLOCK_MEM:
		return opt_out(max ? &c->g->max_clock_mem : &c->g->clock_mem, out);
	case NVML_CLOCK_VIDEO:
		return out ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
	default:
		return NVML_ERROR_INVALID_ARGUMENT;
	}
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                               unsigned int *clk)
{
	SIM_DEVICE_CALL(nvmlDeviceGetClockInfo, device, 0);
	return sim_end(clock_value(&c, type, clk, false));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                  unsigned int *clk)
{
	SIM_DEVICE_CALL(nvmlDeviceGetMaxClockInfo, device, 0);
	return sim_end(clock_value(&c, type, clk, true));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                               unsigned long long *reasons)
{
	SIM_DEVICE_CALL(nvmlDeviceGetCurrentClocksEventReasons, device, 0);
	if (!reasons)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*reasons = c.g->clocks_event_reasons;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                  unsigned long long *reasons)
{
	SIM_DEVICE_CALL(nvmlDeviceGetCurrentClocksThrottleReasons, device, 0);
	if (!reasons)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*reasons = c.g->clocks_event_reasons;
	return sim_end(NVML_SUCCESS);
}

static nvmlReturn_t uint_out(unsigned int v, unsigned int *out)
{
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	*out = v;
	return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device,
                                                            unsigned int *currLinkGen)
{
	SIM_DEVICE_CALL(nvmlDeviceGetCurrPcieLinkGeneration, device, 0);
	return sim_end(uint_out(c.g->pcie_gen, currLinkGen));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device,
                                                           unsigned int *maxLinkGen)
{
	SIM_DEVICE_CALL(nvmlDeviceGetMaxPcieLinkGeneration, device, 0);
	return sim_end(uint_out(c.g->pcie_max_gen, maxLinkGen));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device,
                                                       unsigned int *currLinkWidth)
{
	SIM_DEVICE_CALL(nvmlDeviceGetCurrPcieLinkWidth, device, 0);
	return sim_end(uint_out(c.g->pcie_width, currLinkWidth));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device,
                                                      unsigned int *maxLinkWidth)
{
	SIM_DEVICE_CALL(nvmlDeviceGetMaxPcieLinkWidth, device, 0);
	return sim_end(uint_out(c.g->pcie_max_width, maxLinkWidth));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
	SIM_DEVICE_CALL(nvmlDeviceGetPcieReplayCounter, device, 0);
	return sim_end(uint_out(c.g->pcie_replay, value));
}

/* Video engines: the scenario's utilization_encoder/decoder (absent: no such engine, as on
 * boards without NVENC/NVDEC); the sampling period is a fixed 1 s. */
static nvmlReturn_t engine_util(const struct sim_opt *o, unsigned int *util, unsigned int *period)
{
	if (!util || !period)
		return NVML_ERROR_INVALID_ARGUMENT;
	*period = 1000000;
	return opt_out(o, util);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device,
                                                        unsigned int *utilization,
                                                        unsigned int *samplingPeriodUs)
{
	SIM_DEVICE_CALL(nvmlDeviceGetEncoderUtilization, device, 0);
	return sim_end(engine_util(&c.g->utilization_encoder, utilization, samplingPeriodUs));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device,
                                                        unsigned int *utilization,
                                                        unsigned int *samplingPeriodUs)
{
	SIM_DEVICE_CALL(nvmlDeviceGetDecoderUtilization, device, 0);
	return sim_end(engine_util(&c.g->utilization_decoder, utilization, samplingPeriodUs));
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                            unsigned long long *energy)
{
	SIM_DEVICE_CALL(nvmlDeviceGetTotalEnergyConsumption, device, 0);
	if (!energy)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->energy_mj.valid)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*energy = c.g->energy_mj.v;
	return sim_end(NVML_SUCCESS);
}

/* Clock violations: the scenario gives a percentage; a reading is built so that the share a
 * tool computes between two readings, d(violationTime ns) / (d(referenceTime us) * 1000), is
 * exactly that percentage: referenceTime = CLOCK_MONOTONIC in us, violationTime = pct/100 of
 * the nanoseconds since the clock's origin (pct * us * 10). The counter is thus as if the GPU
 * had always been held back at the current rate: after an nvsim set changes the percentage,
 * the first interval measured across the change is meaningless (it can even go backwards);
 * the intervals after it are exact again. */
static nvmlReturn_t violation(const struct sim_opt *pct, nvmlViolationTime_t *out)
{
	unsigned long long us;

	if (!pct->valid)
		return NVML_ERROR_NOT_SUPPORTED;
	us = sim_now_us();
	out->referenceTime = us;
	out->violationTime = pct->v * us * 10;
	return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device,
                                                     nvmlPerfPolicyType_t perfPolicyType,
                                                     nvmlViolationTime_t *violTime)
{
	SIM_DEVICE_CALL(nvmlDeviceGetViolationStatus, device, 0);
	if (!violTime)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	switch (perfPolicyType) {
	case NVML_PERF_POLICY_POWER:
		return sim_end(violation(&c.g->violation_power_pct, violTime));
	case NVML_PERF_POLICY_THERMAL:
		return sim_end(violation(&c.g->violation_thermal_pct, violTime));
	case NVML_PERF_POLICY_SYNC_BOOST:
	case NVML_PERF_POLICY_BOARD_LIMIT:
	case NVML_PERF_POLICY_LOW_UTILIZATION:
	case NVML_PERF_POLICY_RELIABILITY:
	case NVML_PERF_POLICY_TOTAL_APP_CLOCKS:
	case NVML_PERF_POLICY_TOTAL_BASE_CLOCKS:
		return sim_end(NVML_ERROR_NOT_SUPPORTED); /* no scenario key models these */
	default:
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	}
}

/* BAR1: scenario bar1_total_mib/bar1_used_mib (the parser keeps used <= total). */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device,
                                                    nvmlBAR1Memory_t *bar1Memory)
{
	unsigned long long total, used;

	SIM_DEVICE_CALL(nvmlDeviceGetBAR1MemoryInfo, device, 0);
	if (!bar1Memory)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->bar1_total_mib.valid)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	total = c.g->bar1_total_mib.v << 20;
	used = c.g->bar1_used_mib.v << 20; /* 0 when absent */
	bar1Memory->bar1Total = total;
	bar1Memory->bar1Used = used;
	bar1Memory->bar1Free = total - used;
	return sim_end(NVML_SUCCESS);
}

/* PCIe throughput: the scenario's pcie_throughput_kbs, as a fixed rate (no 20 ms sampling). */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device,
                                                    nvmlPcieUtilCounter_t counter,
                                                    unsigned int *value)
{
	SIM_DEVICE_CALL(nvmlDeviceGetPcieThroughput, device, 0);
	switch (counter) {
	case NVML_PCIE_UTIL_TX_BYTES:
		return sim_end(opt_out(&c.g->pcie_tx_kbs, value));
	case NVML_PCIE_UTIL_RX_BYTES:
		return sim_end(opt_out(&c.g->pcie_rx_kbs, value));
	default:
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	}
}
