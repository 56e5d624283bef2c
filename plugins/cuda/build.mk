# CUDA plugin. plugins/cuda/*.c go into libckpt.so (the core's fragment
# compiles them); they include the project's own declaration of the Driver
# API (cuda_abi.h), so no CUDA toolkit is needed. The simulated driver (a test
# double for GPU-less machines) is a test's: tests/cuda/sim, built by
# tests/cuda/build.mk into $(BUILD)/sim/libcuda.so.1.
