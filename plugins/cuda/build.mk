# CUDA plugin. plugins/cuda/*.c go into libckpt.so (the core's fragment
# compiles them); they include the project's own declaration of the Driver
# API (cuda_abi.h), so no CUDA toolkit is needed. The simulated driver (a test
# double for GPU-less machines) lives in sim/ and is built here into
# $(BUILD)/sim/libcuda.so.1.
CKSIM_SRCS := $(wildcard plugins/cuda/sim/*.c)
CKSIM_OBJS := $(CKSIM_SRCS:%.c=$(BUILD)/pic/%.o)
CKSIM_LIB  := $(BUILD)/sim/libcuda.so.1

$(BUILD)/pic/plugins/cuda/sim/%.o: plugins/cuda/sim/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

# -Bsymbolic: the driver's calls to its own entry points must not be caught
# by an interposer loaded before it, as with the real driver.
$(CKSIM_LIB): $(CKSIM_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-z,defs -Wl,-Bsymbolic -o $@ $^ -lpthread
	ln -sf libcuda.so.1 $(BUILD)/sim/libcuda.so

ALL_TARGETS += $(CKSIM_LIB)
