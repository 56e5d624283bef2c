# The job of tests/suite/28-inspect.sh. No frame pointers: the stacks it
# checks can only be unwound from .eh_frame.
$(BUILD)/tests/inspect/deepstack: tests/inspect/deepstack.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fomit-frame-pointer -Wall -Wextra -Werror -pthread -o $@ $<
ALL_TARGETS += $(BUILD)/tests/inspect/deepstack
