# MPI plugin (issue 20, first step): the stand-in libmpi.so.40 the job's
# programs load, and ckmpi-agent, the per-rank process that owns the real
# Open MPI. Both need Debian's libopenmpi-dev (the stand-in is generated from
# the real library's symbol table); without it nothing here is built (the
# 60-mpi suite installs it: CKPT_DEPS_EXTRA=mpi scripts/deps.sh, then
# `make mpi`). The channel (plugins/mpi/channel) needs no MPI: its unit test
# is always built.
#
# Not plugins/mpi/agent: that name is for ckrun's halves of plugins (linked
# into ckrun); this agent is a program of its own linked with libmpi.
MPI_LIBDIR := $(shell pkg-config --variable=libdir ompi-c 2>/dev/null)
MPI_REAL   := $(if $(MPI_LIBDIR),$(realpath $(MPI_LIBDIR)/libmpi.so))
MPI_INC    := $(patsubst -I%,-isystem %,$(filter -I%,$(shell pkg-config --cflags ompi-c 2>/dev/null)))
MPI_PIC    := $(filter-out -fsanitize=%,$(CFLAGS)) -fPIC $(MPI_INC)

$(BUILD)/mpi/pic/%.o: plugins/mpi/%.c
	@mkdir -p $(dir $@)
	$(CC) $(MPI_PIC) -MMD -MP -c $< -o $@

# The channel's unit test (no MPI needed; its own copy of the channel,
# compiled like the tests, sanitizers included).
$(BUILD)/tests/unit/test_mpi_chan: $(BUILD)/tests/unit/test_mpi_chan.o $(BUILD)/tests/unit/unit.o \
		$(BUILD)/plugins/mpi/channel/mpi_chan.o $(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS)

.PHONY: mpi
ifneq ($(MPI_REAL),)
STI_OBJS := $(patsubst plugins/mpi/%.c,$(BUILD)/mpi/pic/%.o,$(wildcard plugins/mpi/standin/*.c)) \
	$(BUILD)/mpi/pic/channel/mpi_chan.o
AGENT_OBJS := $(patsubst plugins/mpi/%.c,$(BUILD)/mpi/pic/%.o,$(wildcard plugins/mpi/rankagent/*.c)) \
	$(BUILD)/mpi/pic/channel/mpi_chan.o

$(BUILD)/mpi/standin-abi.S: plugins/mpi/standin/gen-abi.sh $(MPI_REAL) $(STI_OBJS)
	@mkdir -p $(dir $@)
	plugins/mpi/standin/gen-abi.sh $(MPI_REAL) $@ $(STI_OBJS)

$(BUILD)/mpi/standin-abi.o: $(BUILD)/mpi/standin-abi.S
	$(CC) -c $< -o $@

# No -z now: nothing is left unresolved anyway (-z defs), and a program
# loads this library as it loaded the real one.
$(BUILD)/mpi/lib/libmpi.so.40: $(STI_OBJS) $(BUILD)/mpi/standin-abi.o
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ -lpthread -Wl,-z,defs -Wl,-soname,libmpi.so.40

$(BUILD)/mpi/ckmpi-agent: $(AGENT_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ -L$(MPI_LIBDIR) -lmpi -lpthread

# The job's main process under ckrun --np (no MPI of its own).
$(BUILD)/mpi/ckmpi-ranks: $(BUILD)/mpi/pic/ranks/ranks_main.o
	$(CC) $(filter-out -fsanitize=%,$(LDFLAGS)) -o $@ $^

# Test programs: unmodified MPI programs built with Debian's mpicc.
MPI_TEST_PROGS := $(patsubst tests/mpi/%.c,$(BUILD)/tests/mpi/%,$(wildcard tests/mpi/*.c))
$(BUILD)/tests/mpi/%: tests/mpi/%.c
	@mkdir -p $(dir $@)
	mpicc -O2 -Wall -Wextra -Werror -o $@ $<

MPI_TARGETS := $(BUILD)/mpi/lib/libmpi.so.40 $(BUILD)/mpi/ckmpi-agent $(BUILD)/mpi/ckmpi-ranks $(MPI_TEST_PROGS)
ALL_TARGETS += $(MPI_TARGETS)
mpi: $(MPI_TARGETS)
else
mpi:
	@echo "make mpi: Open MPI's development files are missing (CKPT_DEPS_EXTRA=mpi scripts/deps.sh)" >&2; exit 69
endif
