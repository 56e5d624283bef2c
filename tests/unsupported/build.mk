$(BUILD)/tests/unsupported/%: tests/unsupported/%.c $(BUILD)/tests/apps/origin/origin.o
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -pthread -o $@ $^
ALL_TARGETS += $(patsubst tests/unsupported/%.c,$(BUILD)/tests/unsupported/%,$(wildcard tests/unsupported/*.c))
