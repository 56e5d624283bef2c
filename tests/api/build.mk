$(BUILD)/tests/api/api_request: tests/api/api_request.c include/ckpt.h
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -Iinclude -o $@ $<
ALL_TARGETS += $(BUILD)/tests/api/api_request
