# Jobs that use the optional job API (include/ckpt.h).
$(BUILD)/tests/api/%: tests/api/%.c $(BUILD)/tests/apps/origin/origin.o include/ckpt.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -Iinclude -o $@ $(filter %.c %.o,$^)
ALL_TARGETS += $(patsubst tests/api/%.c,$(BUILD)/tests/api/%,$(wildcard tests/api/*.c))
