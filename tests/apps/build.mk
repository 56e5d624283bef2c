# Test applications: tests/apps/NAME.c -> $(BUILD)/tests/apps/NAME.
# Each is an ordinary, self-contained program that knows nothing of ckrun; the
# conformance and fault suites run them bare and under ckrun and compare.
# They are built on purpose without the project's include path or libraries.
# A file that needs extra flags gets them from APP_CFLAGS_<name>.
# Every app links tests/apps/origin/origin.c: with CKPT_TEST_ORIGIN=1 it
# prints the run's origin on stderr (the suites' proof that a resumed job
# was restored, not started again); a bare run prints nothing extra.
APPS_SRCS  := $(wildcard tests/apps/*.c)
APPS_BINS  := $(APPS_SRCS:tests/apps/%.c=$(BUILD)/tests/apps/%)
APPS_FLAGS := -O2 -g -pthread -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror
APPS_LIBS  := -lm

APP_CFLAGS_fpu_avx := -mavx2

APPS_ORIGIN := $(BUILD)/tests/apps/origin/origin.o # also linked by tests/{api,lifecycle,sockets,stdio,unsupported,vdso}

$(APPS_ORIGIN): tests/apps/origin/origin.c tests/apps/build.mk
	@mkdir -p $(dir $@)
	$(CC) $(APPS_FLAGS) -c -o $@ $<

$(BUILD)/tests/apps/%: tests/apps/%.c $(APPS_ORIGIN) tests/apps/build.mk
	@mkdir -p $(dir $@)
	$(CC) $(APPS_FLAGS) $(APP_CFLAGS_$*) -o $@ $< $(APPS_ORIGIN) $(APPS_LIBS)

ALL_TARGETS  += $(APPS_BINS)
TEST_TARGETS += $(APPS_BINS)

.PHONY: apps
apps: $(APPS_BINS)
