"""The CUDA runtime API spec (cuda_spec.py) and the generator of the C glue built from it
(generate.py; `python -m crac_py.codegen --coverage`), the CUDA runtime's location, and the
toolchain that builds sim kernels."""
