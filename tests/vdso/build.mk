$(BUILD)/tests/vdso/clockcheck: tests/vdso/clockcheck.c $(BUILD)/tests/apps/origin/origin.o
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $^
ALL_TARGETS += $(BUILD)/tests/vdso/clockcheck
