# CUDA tests: workloads written against the Driver API (tests/cuda/wl_*.c, with
# the project's plugins/cuda/cuda_abi.h: no CUDA toolkit needed),
# each built bare against the simulated driver as $(BUILD)/tests/cuda/cuda-NAME,
# and the standalone plugin harness cuda-plugin-test (plugin sources + a fake
# plugin registry + every workload). tests/suite/50-cuda.sh runs them.
#
# The simulated driver (tests/cuda/sim, a test double of libcuda.so.1 for
# machines without a GPU) comes first: the rules below need it.
CKSIM_SRCS := $(wildcard tests/cuda/sim/*.c)
CKSIM_OBJS := $(CKSIM_SRCS:%.c=$(BUILD)/pic/%.o)
CKSIM_LIB  := $(BUILD)/sim/libcuda.so.1

$(BUILD)/pic/tests/cuda/sim/%.o: tests/cuda/sim/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

# -Bsymbolic: the driver's calls to its own entry points must not be caught
# by an interposer loaded before it, as with the real driver.
$(CKSIM_LIB): $(CKSIM_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-z,defs -Wl,-Bsymbolic -o $@ $^ -lpthread
	ln -sf libcuda.so.1 $(BUILD)/sim/libcuda.so

ALL_TARGETS += $(CKSIM_LIB)

CUTEST_WLS   := $(patsubst tests/cuda/wl_%.c,%,$(wildcard tests/cuda/wl_*.c))
CUTEST_BARE  := $(CUTEST_WLS:%=$(BUILD)/tests/cuda/cuda-%)
CUTEST_LINK   = -L$(BUILD)/sim -lcuda -Wl,-rpath,'$$ORIGIN/../../sim'

$(BUILD)/tests/cuda/bare_%.o: tests/cuda/bare_main.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DCUTEST_WL=wl_$* -MMD -MP -c $< -o $@

$(BUILD)/tests/cuda/cuda-%: $(BUILD)/tests/cuda/bare_%.o $(BUILD)/tests/cuda/wl_%.o $(BUILD)/tests/cuda/cutest.o $(CKSIM_LIB)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(CUTEST_LINK)

ALL_TARGETS += $(CUTEST_BARE)
# Keep the objects: they are shared with the plugin harness.
.SECONDARY: $(CUTEST_WLS:%=$(BUILD)/tests/cuda/wl_%.o) $(CUTEST_WLS:%=$(BUILD)/tests/cuda/bare_%.o) $(BUILD)/tests/cuda/cutest.o

# The plugin harness: the plugin's sources compiled here (not through
# libckpt.so) and linked with the fake registry and all workloads. The
# driver is found through the run path, as libcuda.so.1.
CUPLUG_SRCS := $(wildcard plugins/cuda/*.c)
CUPLUG_OBJS := $(CUPLUG_SRCS:plugins/cuda/%.c=$(BUILD)/tests/cuda/plugin/%.o)
CUTEST_PLUGIN := $(BUILD)/tests/cuda/cuda-plugin-test

$(BUILD)/tests/cuda/plugin/%.o: plugins/cuda/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(CUTEST_PLUGIN): $(BUILD)/tests/cuda/plugin_test.o $(BUILD)/tests/cuda/fake_ckpt.o $(CUPLUG_OBJS) \
		$(CUTEST_WLS:%=$(BUILD)/tests/cuda/wl_%.o) $(BUILD)/tests/cuda/cutest.o $(CKSIM_LIB)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -ldl -lpthread -Wl,-rpath,'$$ORIGIN/../../sim'

ALL_TARGETS += $(CUTEST_PLUGIN)

# The preload test: plugin + fake registry + timer rounds in one library,
# preloaded into the unmodified bare workloads.
CUPRELOAD := $(BUILD)/tests/cuda/libcuda-plugin-preload.so
CUPRELOAD_OBJS := $(CUPLUG_SRCS:plugins/cuda/%.c=$(BUILD)/tests/cuda/pic/%.o) \
	$(BUILD)/tests/cuda/pic/fake_ckpt.o $(BUILD)/tests/cuda/pic/fake_rounds.o

$(BUILD)/tests/cuda/pic/%.o: plugins/cuda/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/tests/cuda/pic/%.o: tests/cuda/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(CUPRELOAD): $(CUPRELOAD_OBJS)
	$(CC) $(LDFLAGS) -shared -Wl,-z,defs -o $@ $^ -ldl -lpthread

ALL_TARGETS += $(CUPRELOAD)

# The runtime-style program (not linked with the driver), and the directory
# whose libcuda.so.1 is the preload library, for runtime-style lookups.
CUTEST_RT := $(BUILD)/tests/cuda/cuda-rt-style
CUTEST_SHIM := $(BUILD)/tests/cuda/shim/libcuda.so.1

$(CUTEST_RT): $(BUILD)/tests/cuda/rt_style.o
	$(CC) $(LDFLAGS) -o $@ $^ -ldl

$(CUTEST_SHIM): $(CUPRELOAD)
	@mkdir -p $(dir $@)
	ln -sf ../libcuda-plugin-preload.so $@

ALL_TARGETS += $(CUTEST_RT) $(CUTEST_SHIM)
