# Jobs of tests/suite/30-faults.sh's lifecycle part that are not
# conformance apps.
$(BUILD)/tests/lifecycle/%: tests/lifecycle/%.c $(BUILD)/tests/apps/origin/origin.o
	@mkdir -p $(dir $@)
	$(CC) -O2 -pthread -Wall -Wextra -Werror -o $@ $^
ALL_TARGETS += $(patsubst tests/lifecycle/%.c,$(BUILD)/tests/lifecycle/%,$(wildcard tests/lifecycle/*.c))
