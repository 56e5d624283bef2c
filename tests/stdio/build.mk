# Programs of tests/suite/24-stdio.sh that are not conformance apps (they
# write to stderr).
$(BUILD)/tests/stdio/%: tests/stdio/%.c $(BUILD)/tests/apps/origin/origin.o
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $^
ALL_TARGETS += $(patsubst tests/stdio/%.c,$(BUILD)/tests/stdio/%,$(wildcard tests/stdio/*.c))
