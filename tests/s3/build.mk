# S3 store test program (driven by tests/suite/40-s3.sh).
$(BUILD)/tests/s3/s3check: $(BUILD)/tests/s3/s3check.o $(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS)
ALL_TARGETS += $(BUILD)/tests/s3/s3check
