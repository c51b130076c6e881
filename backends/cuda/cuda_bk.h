/* cuda_bk.h — the real-CUDA backend's internals: the loaded runtime and driver, and the device
 * window's mappings (docs/CUDA.md). */
#ifndef CRAC_CUDA_BK_H
#define CRAC_CUDA_BK_H

#include "cudart_cuda_gen.h" /* generated: struct cuda_real, cudabk_* prototypes */

#include <stddef.h>
#include <stdint.h>

/* Memory kinds, as the loader's device records name them (image_device.c). */
enum { CUDA_BK_DEVICE = 1, CUDA_BK_MANAGED = 2 };

/* Room for one more element of a growing array *v (n used, *cap allocated); 0, or -1 without
 * memory (the array is unchanged). */
int cuda_bk_reserve(void **v, size_t n, size_t *cap, size_t elem);

/* The driver's virtual-memory API (libcuda.so.1), loaded beside the runtime; 0 without. */
int cuda_vmm_load(char *err, uint64_t errlen);
int cuda_vmm_available(void);
/* The device window D the loader reserved (PROT_NONE) and hands to the driver piece by piece. */
void cuda_vmm_window(uint64_t start, uint64_t end);
/* Backs [addr, addr+size) with device memory of the current device at exactly that address. */
cudaError_t cuda_vmm_map(uint64_t addr, uint64_t size);
cudaError_t cuda_vmm_unmap(uint64_t addr);
/* Managed memory at a chosen address: host memory the device reaches through HMM/ATS. */
cudaError_t cuda_managed_map(uint64_t addr, uint64_t size);
int cuda_vmm_kind_of(uint64_t addr);
int cuda_vmm_range_of(uint64_t addr, uint64_t *end);
void cuda_vmm_reset(void);

/* Makes the runtime's primary context current on this thread; the runtime's own error (e.g.
 * cudaErrorInsufficientDriver without a driver) as a native program would see it. */
cudaError_t cuda_bk_context(void);

/* nvcc's device variables (cuda_vars.c): their values into the shadows in D before a checkpoint
 * saves D; the number that failed. */
void cuda_vars_resolve(void *runtime);
uint64_t cuda_vars_init_module(uint64_t module, uint64_t a1, uint64_t a2);
int cuda_vars_to_shadows(void);
void cuda_mem_resolve(void *runtime);

/* device.img's copies (cuda_io.c): managed memory in place, device memory streamed through
 * pinned buffers on several streams (cuda_xfer.c). */
int cuda_io_read(uint64_t addr, void *dst, uint64_t len);
int cuda_io_write(uint64_t addr, const void *src, uint64_t len);
const void *cuda_io_host_view(uint64_t addr, uint64_t len);
int cuda_io_flush(void);
void cuda_io_reset(void);

/* The error the upper shim reports (crac_sim_record_error) for this thread, merged into
 * cudaGetLastError/cudaPeekAtLastError. */
void cuda_bk_record_error(cudaError_t e);

#endif
