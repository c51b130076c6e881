"""`crac kernels`: the device code of CUDA C++ sources compiled for the CPU, for crac's sim."""
