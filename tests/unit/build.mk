# Unit tests: tests/unit/test_*.c, each a program linked with the launcher
# library; exit 0 = pass. `make test-unit ASAN=1 UBSAN=1 BUILD=build/asan`
# runs them under the sanitizers (scripts/test.sh does both).
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_TESTS += $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(BUILD)/tests/unit/unit.o $(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS)

# ckrun's --map-path and --env rules (a ckrun object).
$(BUILD)/tests/unit/test_pathmap: $(BUILD)/tests/unit/test_pathmap.o $(BUILD)/tests/unit/unit.o \
		$(BUILD)/launcher/ckrun/pathmap.o $(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS)

# ckrun's plugin registry (a ckrun object, not in the launcher library).
$(BUILD)/tests/unit/test_agent_registry: $(BUILD)/tests/unit/test_agent_registry.o $(BUILD)/tests/unit/unit.o \
		$(BUILD)/launcher/ckrun/agent_plugin.o $(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS)

# ckpt report's writers (ckpt objects, not in the launcher library).
REPORT_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard launcher/ckpt/report_*.c))
$(BUILD)/tests/unit/test_report: $(BUILD)/tests/unit/test_report.o $(BUILD)/tests/unit/unit.o $(REPORT_OBJS) \
		$(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS)

# The socket plugin's saved queue with descriptors in flight (its own
# ck_agent_fd_make stands in for ckrun's).
$(BUILD)/tests/unit/test_sock_rights: $(BUILD)/tests/unit/test_sock_rights.o $(BUILD)/tests/unit/unit.o \
		$(BUILD)/plugins/socket/agent/sock_rights.o $(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS)

# The writer's priority over a round (ckrun objects: pace.c and its clock).
$(BUILD)/tests/unit/test_pace: $(BUILD)/tests/unit/test_pace.o $(BUILD)/tests/unit/unit.o \
		$(BUILD)/launcher/ckrun/pace.o $(BUILD)/launcher/ckrun/clock.o $(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS)
