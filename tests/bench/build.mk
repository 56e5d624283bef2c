$(BUILD)/tests/bench/membench: tests/bench/membench.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -pthread -o $@ $<
ALL_TARGETS += $(BUILD)/tests/bench/membench

$(BUILD)/tests/bench/mpbench: tests/bench/mpbench.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $<
ALL_TARGETS += $(BUILD)/tests/bench/mpbench

$(BUILD)/tests/bench/pagecost: tests/bench/pagecost.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -pthread -o $@ $<
ALL_TARGETS += $(BUILD)/tests/bench/pagecost

$(BUILD)/tests/bench/scalejob: tests/bench/scalejob.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -pthread -o $@ $<
ALL_TARGETS += $(BUILD)/tests/bench/scalejob
