/* SPDX-License-Identifier: MIT */
/*
 * gpuctl/decls.h: what opens and closes the declarations of every public header: C linkage for
 * C++ callers, and default visibility (the library is compiled with -fvisibility=hidden), so
 * that these headers alone decide libgpuctl's ABI (gpuctl.h). In the manner of glib's
 * G_BEGIN_DECLS; the pragma is written with _Pragma so that a macro can carry it.
 */
#ifndef GPUCTL_DECLS_H
#define GPUCTL_DECLS_H

#ifdef __cplusplus
#define GPUCTL_EXTERN_C_BEGIN extern "C" {
#define GPUCTL_EXTERN_C_END   }
#else
#define GPUCTL_EXTERN_C_BEGIN
#define GPUCTL_EXTERN_C_END
#endif

#if defined(__GNUC__)
#define GPUCTL_VISIBLE_BEGIN _Pragma("GCC visibility push(default)")
#define GPUCTL_VISIBLE_END   _Pragma("GCC visibility pop")
#else
#define GPUCTL_VISIBLE_BEGIN
#define GPUCTL_VISIBLE_END
#endif

/* Around a public header's declarations: GPUCTL_BEGIN_DECLS after its includes,
 * GPUCTL_END_DECLS before its include guard's #endif. */
#define GPUCTL_BEGIN_DECLS GPUCTL_EXTERN_C_BEGIN GPUCTL_VISIBLE_BEGIN
#define GPUCTL_END_DECLS   GPUCTL_VISIBLE_END GPUCTL_EXTERN_C_END

#endif /* GPUCTL_DECLS_H */
