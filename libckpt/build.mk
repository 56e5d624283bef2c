# libckpt.so (preloaded into the job; plugins compiled in) and the static,
# libc-free restorer ckpt-restore linked at CK_RST_BASE.
LIBCKPT_SRCS := $(wildcard libckpt/*.c libckpt/*.S plugins/*/*.c)
LIBCKPT_OBJS := $(patsubst %,$(BUILD)/pic/%.o,$(LIBCKPT_SRCS))
# The restart and suspend paths run where libc and TLS may not be usable:
# no stack protector, no instrumentation.
LIBCKPT_CFLAGS := $(filter-out -fsanitize=%,$(CFLAGS)) -fPIC -fno-stack-protector -fno-tree-loop-distribute-patterns

$(BUILD)/pic/%.c.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(LIBCKPT_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/pic/%.S.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(LIBCKPT_CFLAGS) -c $< -o $@

$(BUILD)/libckpt.so: $(LIBCKPT_OBJS)
	$(CC) -shared -o $@ $^ -ldl -lpthread -Wl,-z,defs -Wl,-z,now -Wl,-soname,libckpt.so

RESTORER_SRCS := $(wildcard libckpt/restore/*.c libckpt/restore/*.S)
RESTORER_CFLAGS := -O2 -g $(WARN) -D_GNU_SOURCE -I. -Iinclude -ffreestanding -fno-stack-protector -fpie \
	-fno-builtin -fcf-protection=none -mno-red-zone -fno-asynchronous-unwind-tables
$(BUILD)/ckpt-restore: $(RESTORER_SRCS) libckpt/ck_sys.h $(wildcard include/ckrun/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(RESTORER_CFLAGS) -static -nostdlib -no-pie -Wl,-Ttext-segment=0x200000000000 \
		-Wl,--build-id=none -o $@ $(RESTORER_SRCS)

ALL_TARGETS += $(BUILD)/libckpt.so $(BUILD)/ckpt-restore
INSTALL_LIBS += $(BUILD)/libckpt.so $(BUILD)/ckpt-restore
