# The job of tests/suite/28-inspect.sh. No frame pointers: the stacks it
# checks can only be unwound from .eh_frame. -rdynamic: the chains' functions
# are in .dynsym too (the names left when the file is replaced).
$(BUILD)/tests/inspect/deepstack: tests/inspect/deepstack.c
	@mkdir -p $(dir $@)
	$(CC) -O1 -g -fomit-frame-pointer -Wall -Wextra -Werror -pthread -rdynamic -o $@ $<
ALL_TARGETS += $(BUILD)/tests/inspect/deepstack
