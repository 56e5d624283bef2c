$(BUILD)/tests/unsupported/%: tests/unsupported/%.c $(BUILD)/tests/apps/origin/origin.o
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -pthread -o $@ $^
ALL_TARGETS += $(patsubst tests/unsupported/%.c,$(BUILD)/tests/unsupported/%,$(wildcard tests/unsupported/*.c))

# nolibckpt's child as a static program (libc6-dev's libc.a): libckpt can
# never be loaded into it
$(BUILD)/tests/unsupported/nolibckpt-static: tests/unsupported/nolibckpt.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -static -o $@ $<
ALL_TARGETS += $(BUILD)/tests/unsupported/nolibckpt-static
