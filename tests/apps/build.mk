# Test applications: tests/apps/NAME.c -> $(BUILD)/tests/apps/NAME.
# Each is an ordinary, self-contained program that knows nothing of ckrun; the
# conformance and fault suites run them bare and under ckrun and compare.
# They are built on purpose without the project's include path or libraries.
# A file that needs extra flags gets them from APP_CFLAGS_<name>.
APPS_SRCS  := $(wildcard tests/apps/*.c)
APPS_BINS  := $(APPS_SRCS:tests/apps/%.c=$(BUILD)/tests/apps/%)
APPS_FLAGS := -O2 -g -pthread -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror
APPS_LIBS  := -lm

APP_CFLAGS_fpu_avx := -mavx2

$(BUILD)/tests/apps/%: tests/apps/%.c tests/apps/build.mk
	@mkdir -p $(dir $@)
	$(CC) $(APPS_FLAGS) $(APP_CFLAGS_$*) -o $@ $< $(APPS_LIBS)

ALL_TARGETS  += $(APPS_BINS)
TEST_TARGETS += $(APPS_BINS)

.PHONY: apps
apps: $(APPS_BINS)
