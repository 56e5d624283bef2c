# ckrun top-level build. Each component adds its targets in its own fragment
# (*/build.mk), so components can be developed side by side.
PREFIX    ?= /usr/local
BUILD     ?= build
CC        ?= cc
WARN      := -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror
CFLAGS    ?= -O2 -g
CFLAGS    += $(WARN) -D_GNU_SOURCE -fno-strict-aliasing -Iinclude -I.
LDFLAGS   ?=
ifeq ($(ASAN),1)
CFLAGS    += -fsanitize=address -fno-omit-frame-pointer
LDFLAGS   += -fsanitize=address
endif
ifeq ($(UBSAN),1)
CFLAGS    += -fsanitize=undefined -fno-sanitize-recover=undefined
LDFLAGS   += -fsanitize=undefined
endif

# Filled by fragments.
ALL_TARGETS   :=
TEST_TARGETS  :=
UNIT_TESTS    :=
BENCH_TARGETS :=
INSTALL_BINS  :=
INSTALL_LIBS  :=

.PHONY: all build-all deps-check test test-unit bench demo fresh-check install clean lint format
# The packages come first, the build in a second make: with -j, a rule
# that only listed deps-check as a prerequisite compiled next to apt-get
# (gelf.h missing on a fresh machine).
all: deps-check
	@$(MAKE) --no-print-directory build-all

include $(sort $(wildcard libckpt/build.mk launcher/build.mk plugins/*/build.mk tests/build.mk tests/*/build.mk scripts/build.mk))

build-all: $(ALL_TARGETS)

# Installs missing Debian packages when root, else prints the apt-get line.
deps-check:
	@scripts/deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

test-unit: all
	@$(MAKE) --no-print-directory $(UNIT_TESTS)
	@scripts/run-unit.sh $(UNIT_TESTS)

test: all
	@scripts/test.sh

bench: all
	@scripts/bench.sh
	@if [ "$${CKPT_BENCH_S3:-1}" != 0 ]; then CKPT_DEPS_EXTRA="ceph awscli" scripts/deps.sh && scripts/bench-s3.sh; fi

demo: all
	@scripts/demo.sh

# The README's commands in a pristine Debian 12 root (root only; builds
# nothing here). FRESH_STEPS: demo, unit, test (default: demo test).
fresh-check:
	@scripts/fresh-check.sh $(FRESH_STEPS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/ckrun
	install -m 0755 $(INSTALL_BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(INSTALL_LIBS) $(DESTDIR)$(PREFIX)/lib/ckrun/

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning -Iinclude -I. libckpt launcher plugins

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD)
