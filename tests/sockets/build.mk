# Programs of tests/suite/37-sockets.sh (jobs whose output depends on a
# peer outside the job, so not conformance apps).
$(BUILD)/tests/sockets/%: tests/sockets/%.c $(BUILD)/tests/apps/origin/origin.o
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $^
ALL_TARGETS += $(patsubst tests/sockets/%.c,$(BUILD)/tests/sockets/%,$(wildcard tests/sockets/*.c))
