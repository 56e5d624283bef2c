# Test tools: the fault-injecting TCP proxy used by the S3 suite, and a
# runner that makes one system call fail as an old kernel would.
$(BUILD)/tests/tools/faultproxy: $(BUILD)/tests/tools/faultproxy.o
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread
ALL_TARGETS += $(BUILD)/tests/tools/faultproxy

# nosyscall: a program run as on a kernel without one system call.
$(BUILD)/tests/tools/nosyscall: $(BUILD)/tests/tools/nosyscall.o
	$(CC) $(LDFLAGS) -o $@ $^
ALL_TARGETS += $(BUILD)/tests/tools/nosyscall
