/* sim_native_vars.c — nvcc's device variables in the native sim libcudart: device memory from
 * the native allocator (under crac the shim assigns it; upperhalf/cudart/shim_fatbin.c). */
#include "sim.h"

#include "dalloc.h"

/* The native device-address allocator (sim_native.c). */
uint64_t sim_native_dev_alloc(size_t size, int kind);

void CUDARTAPI __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                 const char *deviceName, int ext, size_t size, int constant,
                                 int global)
{
    uint64_t addr = size ? sim_native_dev_alloc(size, SIM_MEM_DEVICE) : 0;
    sim___cudaRegisterVar(fatCubinHandle, hostVar, deviceAddress, deviceName, ext, size, constant,
                          global, addr);
}

void CUDARTAPI __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                        char *deviceAddress, const char *deviceName, int ext,
                                        size_t size, int constant, int global)
{
    uint64_t addr = size ? sim_native_dev_alloc(size, SIM_MEM_MANAGED) : 0;
    sim___cudaRegisterManagedVar(fatCubinHandle, hostVarPtrAddress, deviceAddress, deviceName, ext,
                                 size, constant, global, addr);
}
