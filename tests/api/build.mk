$(BUILD)/tests/api/api_request: tests/api/api_request.c $(BUILD)/tests/apps/origin/origin.o include/ckpt.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -Iinclude -o $@ $(filter %.c %.o,$^)
ALL_TARGETS += $(BUILD)/tests/api/api_request
