/* SPDX-License-Identifier: MIT */
/*
 * nvml-internal.h: what the NVML loader's files share (src/lib/nvml/nvml-*.c), and nothing
 * outside them includes: the loaded library (struct nvml and its symbol table), the call in
 * flight, and the reader that fills a snapshot with the calls' results.
 *
 * Decisions:
 * - The symbol table is one X-macro list of fields and function types (nvml-abi.h); the names
 *   each field is looked up by are the loader's (nvml-load.c, NVML_NAMES_<field>), so the NVML
 *   names gpuctl uses stay string literals in the room's .c files, where
 *   tests/cli/test_real_nvml.py and bench/nvml_coverage.py read them.
 * - Every NVML call a reader makes goes through RAW (recorded in flight, counted), CALL (and its
 *   result judged by nvml_check_result) or READ (and a real error marks the fields it reads
 *   unreadable); the files that read never call a function of the table otherwise.
 */
#ifndef GPUCTL_NVML_INTERNAL_H
#define GPUCTL_NVML_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctx.h"
#include "facts-cache.h"
#include "nvml-abi.h"
#include "snapshot-internal.h"

/* X(field, function type, required): the functions gpuctl uses; names in nvml-load.c. */
#define NVML_SYMBOLS(X)                                                                            \
	X(init, nvml_fn_init_t, true)                                                              \
	X(shutdown, nvml_fn_shutdown_t, true)                                                      \
	X(error_string, nvml_fn_error_string_t, true)                                              \
	X(device_count, nvml_fn_get_count_t, true)                                                 \
	X(handle_by_index, nvml_fn_handle_by_index_t, true)                                        \
	X(driver_version, nvml_fn_sys_string_t, false)                                             \
	X(nvml_version, nvml_fn_sys_string_t, false)                                               \
	X(cuda_version, nvml_fn_sys_int_t, false)                                                  \
	X(uuid, nvml_fn_dev_string_t, false)                                                       \
	X(pci_info, nvml_fn_pci_info_t, false)                                                     \
	X(pci_info_v1, nvml_fn_pci_info_v1_t, false)                                               \
	X(name, nvml_fn_dev_string_t, false)                                                       \
	X(brand, nvml_fn_brand_t, false)                                                           \
	X(architecture, nvml_fn_arch_t, false)                                                     \
	X(compute_cap, nvml_fn_cc_t, false)                                                        \
	X(serial, nvml_fn_dev_string_t, false)                                                     \
	X(minor_number, nvml_fn_dev_uint_t, false)                                                 \
	X(memory_v2, nvml_fn_memory_v2_t, false)                                                   \
	X(memory, nvml_fn_memory_t, false)                                                         \
	X(utilization, nvml_fn_utilization_t, false)                                               \
	X(temperature, nvml_fn_temperature_t, false)                                               \
	X(temp_threshold, nvml_fn_temp_threshold_t, false)                                         \
	X(power_usage, nvml_fn_dev_uint_t, false)                                                  \
	X(power_limit, nvml_fn_dev_uint_t, false)                                                  \
	X(power_mgmt_limit, nvml_fn_dev_uint_t, false)                                             \
	X(fan_speed, nvml_fn_dev_uint_t, false)                                                    \
	X(pstate, nvml_fn_dev_uint_t, false)                                                       \
	X(clock, nvml_fn_clock_t, false)                                                           \
	X(max_clock, nvml_fn_clock_t, false)                                                       \
	X(clocks_event, nvml_fn_dev_ull_t, false)                                                  \
	X(pcie_gen, nvml_fn_dev_uint_t, false)                                                     \
	X(pcie_gen_max, nvml_fn_dev_uint_t, false)                                                 \
	X(pcie_width, nvml_fn_dev_uint_t, false)                                                   \
	X(pcie_width_max, nvml_fn_dev_uint_t, false)                                               \
	X(pcie_replay, nvml_fn_dev_uint_t, false)                                                  \
	X(encoder_util, nvml_fn_dev_uint2_t, false)                                                \
	X(decoder_util, nvml_fn_dev_uint2_t, false)                                                \
	X(energy, nvml_fn_dev_ull_t, false)                                                        \
	X(persistence, nvml_fn_enable_state_t, false)                                              \
	X(compute_mode, nvml_fn_compute_mode_t, false)                                             \
	X(ecc_mode, nvml_fn_ecc_mode_t, false)                                                     \
	X(mig_mode, nvml_fn_dev_uint2_t, false)                                                    \
	X(total_ecc, nvml_fn_total_ecc_t, false)                                                   \
	X(retired_pages, nvml_fn_retired_pages_t, false)                                           \
	X(retired_pending, nvml_fn_enable_state_t, false)                                          \
	X(remapped_rows, nvml_fn_remapped_rows_t, false)                                           \
	X(cpu_affinity, nvml_fn_cpu_affinity_t, false)                                             \
	X(memory_affinity, nvml_fn_memory_affinity_t, false)                                       \
	X(numa_node_id, nvml_fn_dev_uint_t, false)                                                 \
	X(max_mig_count, nvml_fn_dev_uint_t, false)                                                \
	X(mig_handle, nvml_fn_mig_handle_t, false)                                                 \
	X(gpu_instance_id, nvml_fn_dev_uint_t, false)                                              \
	X(compute_instance_id, nvml_fn_dev_uint_t, false)                                          \
	X(procs_v2, nvml_fn_procs_v2_t, false)                                                     \
	X(procs_v1, nvml_fn_procs_v1_t, false)                                                     \
	X(common_ancestor, nvml_fn_common_ancestor_t, false)                                       \
	X(p2p_status, nvml_fn_p2p_status_t, false)                                                 \
	X(nvlink_state, nvml_fn_nvlink_state_t, false)                                             \
	X(nvlink_remote_type, nvml_fn_nvlink_remote_type_t, false)                                 \
	X(nvlink_remote_pci, nvml_fn_nvlink_remote_pci_t, false)                                   \
	X(nvlink_remote_pci_v1, nvml_fn_nvlink_remote_pci_v1_t, false)                             \
	X(field_values, nvml_fn_field_values_t, false)                                             \
	X(violation, nvml_fn_violation_t, false)                                                   \
	X(bar1, nvml_fn_bar1_t, false)                                                             \
	X(pcie_throughput, nvml_fn_pcie_throughput_t, false)                                       \
	X(process_util, nvml_fn_process_util_t, false)                                             \
	X(nvlink_error_counter, nvml_fn_nvlink_error_counter_t, false)                             \
	X(supported_events, nvml_fn_dev_ull_t, false)                                              \
	X(event_set_create, nvml_fn_event_set_create_t, false)                                     \
	X(register_events, nvml_fn_register_events_t, false)                                       \
	X(event_set_wait, nvml_fn_event_set_wait_t, false)                                         \
	X(event_set_free, nvml_fn_event_set_free_t, false)

/* The resolved functions, each typed; NULL when the library lacks every name. */
struct nvml_syms {
#define X(field, type, req) type *field;
	NVML_SYMBOLS(X)
#undef X
};

/* The name each entry resolved to (or its newest name when missing), for messages. */
struct nvml_names {
#define X(field, type, req) const char *field;
	NVML_SYMBOLS(X)
#undef X
};

/* The loaded library: the context's nvml (ctx.h), made by gpuctl_nvml_load (nvml-load.c). */
struct nvml {
	void *dl;               /* dlopen handle */
	char *path;             /* where the dynamic linker found the library, or NULL */
	bool initialised;       /* nvmlInit succeeded: call nvmlShutdown on unload */
	struct nvml_syms sym;   /* function table */
	struct nvml_names name; /* names for messages */
	size_t procs_stride; /* bytes per entry written by sym.procs_v2 (24, or 32 on early R535) */
	nvmlDevice_t *handles; /* per NVML index, from the last snapshot (NULL: none had one) */
	size_t n_handles;      /* entries in handles */
};

/* ---- The call in flight (nvml-call.c) ---- */

#define NVML_CALL_NO_GPU UINT64_MAX /* ctx_nvml_call.gpu of a call about no GPU */

/* Records fn as in flight on ctx, about NVML index gpu (NVML_CALL_NO_GPU: none) whose PCI bus
 * id is bus (NULL: not known yet). */
void nvml_call_begin(struct gpuctl_ctx *ctx, const char *fn, uint64_t gpu, const char *bus);
/* Marks the call begun last as answered; returns r, so it wraps the call's expression. */
nvmlReturn_t nvml_call_end(struct gpuctl_ctx *ctx, nvmlReturn_t r);

/* ---- The reader: one snapshot being filled (nvml-result.c) ---- */

#define NVML_SYSTEM_SCOPE SIZE_MAX /* "gpu" argument of calls that are about no GPU */

_Static_assert(GPUCTL__F_COUNT <= 64, "the field mask has one bit per field");

struct reader {
	struct gpuctl_ctx *ctx;       /* for logs */
	struct nvml *nv;              /* loaded NVML */
	struct gpuctl_snapshot *snap; /* being filled */
	nvmlDevice_t *handles;        /* per GPU; NULL when no handle could be had */
	uint64_t want;                /* per-GPU fields to read: bit (1 << field) */
	uint64_t shown;               /* of those, the ones the caller named (the others are read
	                               * for what depends on them) */
	unsigned flags;               /* the snapshot's gpuctl_snapshot_flags */
	unsigned calls;               /* NVML calls made for this snapshot */
	int oom;                      /* -ENOMEM once an allocation failed, else 0 */
	int *nvlink_count;            /* per GPU, NVLinks present: -1 unknown, -2 not asked yet
	                               * (read with the other field values; NULL: no NVLink
	                               * walk) */
	struct nvml_link_states *link_states; /* per GPU, the NVLink states the field values
	                                       * gave (NULL: no NVLink walk) */
	uint64_t reading;                /* the fields the call in flight reads (READ): a real error
	                                  * marks them unreadable */
	bool reading_nvlink;             /* the call in flight reads an NVLink health fact (a link's
	                                  * state, the first active link's far end): the same */
	const struct facts_cache *facts; /* what GPUs of this boot cannot change (NULL: none) */
};

/* The NVLink states of one GPU as nvmlDeviceGetFieldValues answered them
 * (NVML_FI_DEV_NVLINK_GET_STATE, one entry per link), so the link walk makes no call per link. */
struct nvml_link_states {
	bool read;                             /* the entries below hold the answers */
	nvmlReturn_t r[NVML_NVLINK_MAX_LINKS]; /* each link's return code */
	bool active[NVML_NVLINK_MAX_LINKS];    /* and, on success, whether it is up */
	bool switch_read; /* switch_links holds NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT's answer
	                   */
	int switch_links; /* the GPU's NVLinks into NVSwitches */
};

/* Handles a result. GPU_IS_LOST marks gpu lost unless pair is set (a pair call does not say
 * which GPU is gone). Returns true on success. */
bool nvml_check_result(struct reader *rd, size_t gpu, const char *fname, nvmlReturn_t r, bool pair);
/* Logs (once) that fname is not in the library; returns false. */
bool nvml_symbol_missing(struct reader *rd, const char *fname);
/* Whether calls about gpu can be made: it has a handle and is not lost (NVML_SYSTEM_SCOPE:
 * always). */
bool nvml_gpu_readable(const struct reader *rd, size_t gpu);
/* nvml_call_begin for a reader's call about gpu, with the bus id the snapshot has for it so
 * far. */
void nvml_reader_call_begin(const struct reader *rd, size_t gpu, const char *fn);
/* Ends a read (READ): the next call is for no field unless it says so. */
bool nvml_read_done(struct reader *rd, bool ok);

/* Raw call: records it in flight, counts it, returns NVML's code (the symbol must be
 * present). gpu: the GPU it is about (NVML_SYSTEM_SCOPE for none). */
#define RAW(rd, gpu, fn, ...)                                                                      \
	(nvml_reader_call_begin((rd), (gpu), (rd)->nv->name.fn), (rd)->calls++,                    \
	 nvml_call_end((rd)->ctx, (rd)->nv->sym.fn(__VA_ARGS__)))

/* Calls NVML function `fn` for GPU `gpu` (NVML_SYSTEM_SCOPE for none) and checks the result:
 * true on success. Nothing is called for a lost GPU or a missing symbol. */
#define CALL(rd, gpu, fn, ...)                                                                     \
	(!nvml_gpu_readable((rd), (gpu)) ? false                                                   \
	 : !(rd)->nv->sym.fn             ? nvml_symbol_missing((rd), (rd)->nv->name.fn)            \
	                                 : nvml_check_result((rd), (gpu), (rd)->nv->name.fn,       \
	                                                     RAW((rd), (gpu), fn, __VA_ARGS__), false))

#define FBIT(f) (UINT64_C(1) << (f))

/* CALL for a read of the fields in mask (FBIT of each) of GPU gpu: a real error marks them
 * unreadable (snapshot_set_unreadable), which is not the same as unavailable. */
#define READ(rd, gpu, mask, fn, ...)                                                               \
	((rd)->reading = (mask), nvml_read_done((rd), CALL((rd), (gpu), fn, __VA_ARGS__)))

/* The usual read: field f, when wanted, from one call of fn whose last argument is an unsigned
 * out-parameter (the arguments before it given), set when the call succeeds. */
#define READ_UINT(rd, gpu, f, fn, ...)                                                             \
	do {                                                                                       \
		unsigned read_uint_;                                                               \
		if (nvml_want((rd), (f)) &&                                                        \
		    READ((rd), (gpu), FBIT(f), fn, __VA_ARGS__, &read_uint_))                      \
			nvml_set_int((rd), (gpu), (f), read_uint_);                                \
	} while (0)

/* Whether the caller asked for field f (gpuctl_snapshot_take_fields). Fields that one NVML call
 * answers together (memory total/used/free, ...) are read when any of them is wanted. */
bool nvml_want(const struct reader *rd, enum gpuctl_field f);
void nvml_set_int(struct reader *rd, size_t gpu, enum gpuctl_field f, int64_t v);
/* Sets a string field; an allocation failure is kept in rd->oom. */
void nvml_set_str(struct reader *rd, size_t gpu, enum gpuctl_field f, const char *s);
/* Whether field f of g was read and is v. */
bool nvml_field_is(const struct gpuctl_gpu *g, enum gpuctl_field f, int64_t v);
/* Architecture generation for the health rules; 0 when unknown. */
int nvml_arch_rank(const struct gpuctl_gpu *g);
/* Reads the architecture (GPUCTL_F_ARCHITECTURE), whether wanted or not: for the identity, and
 * the health reads that depend on it (nvml-health.c). */
void nvml_read_architecture(struct reader *rd, size_t i, nvmlDevice_t dev);
#define NVML_RANK_AMPERE 6
/* A PCI bus id in NVML's form, "00000000:07:00.0", whatever form the driver writes. */
void nvml_format_bus_id(char *buf, size_t size, uint32_t domain, uint32_t bus, uint32_t device);

/* ---- The readers, each filling its part of the snapshot ---- */

/* nvml-device.c: per-GPU fields */
bool nvml_read_memory(struct reader *rd, size_t gpu, nvmlDevice_t dev, int64_t *total,
                      int64_t *used, int64_t *freeb);
void nvml_read_identity(struct reader *rd, size_t i, nvmlDevice_t dev);
void nvml_read_state(struct reader *rd, size_t i, nvmlDevice_t dev);
void nvml_read_placement(struct reader *rd, size_t i, nvmlDevice_t dev);
/* nvml-health.c: the field values (with the ECC mode, health counters and NVLink states among
 * them; returns the fields whose direct calls they answered) and the health facts */
uint64_t nvml_read_field_values(struct reader *rd, size_t i, nvmlDevice_t dev);
void nvml_read_health(struct reader *rd, size_t i, nvmlDevice_t dev);
/* nvml-procs.c: compute processes */
void nvml_read_processes(struct reader *rd, size_t i, nvmlDevice_t dev);
void nvml_read_process_util(struct reader *rd, size_t i, nvmlDevice_t dev);
/* nvml-mig.c: MIG devices */
void nvml_read_migs(struct reader *rd, size_t i, nvmlDevice_t dev);
/* nvml-link.c: NVLinks and pair facts */
int nvml_link_count_of(const nvmlFieldValue_t *fv);
void nvml_read_nvlinks(struct reader *rd, size_t i, nvmlDevice_t dev, int *direct);
void nvml_read_topology(struct reader *rd);

#endif /* GPUCTL_NVML_INTERNAL_H */
