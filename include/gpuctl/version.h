/* SPDX-License-Identifier: MIT */
/*
 * version.h: the version of libgpuctl: the header's macros and the library's gpuctl_version().
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_VERSION_H
#define GPUCTL_VERSION_H

#include "decls.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Version ---- */

/* The version of this header: the libgpuctl the program is compiled against. They equal
 * CMakeLists.txt's project(gpuctl VERSION ...); the library does not build when they differ.
 * GPUCTL_VERSION_NUMBER is 0xMMmmpp (one byte each, as LIBCURL_VERSION_NUM), so versions compare
 * as numbers: #if GPUCTL_VERSION_NUMBER >= GPUCTL_VERSION_ENCODE(0, 2, 0). */
#define GPUCTL_VERSION_MAJOR                       0
#define GPUCTL_VERSION_MINOR                       1
#define GPUCTL_VERSION_PATCH                       0
#define GPUCTL_VERSION_STRING                      "0.1.0"
#define GPUCTL_VERSION_ENCODE(major, minor, patch) (((major) << 16) | ((minor) << 8) | (patch))
#define GPUCTL_VERSION_NUMBER                                                                      \
	GPUCTL_VERSION_ENCODE(GPUCTL_VERSION_MAJOR, GPUCTL_VERSION_MINOR, GPUCTL_VERSION_PATCH)

/* The version of the libgpuctl the program runs with, as that library was built: with a shared
 * library it may be newer than the header the program was compiled with. Writes each ret_* that
 * is not NULL and returns "MAJOR.MINOR.PATCH" (static storage). Never fails; any thread. */
const char *gpuctl_version(unsigned *ret_major, unsigned *ret_minor, unsigned *ret_patch);

GPUCTL_END_DECLS

#endif /* GPUCTL_VERSION_H */
