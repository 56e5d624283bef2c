# Test tools: the fault-injecting TCP proxy used by the S3 suite.
$(BUILD)/tests/tools/faultproxy: $(BUILD)/tests/tools/faultproxy.o
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread
ALL_TARGETS += $(BUILD)/tests/tools/faultproxy
