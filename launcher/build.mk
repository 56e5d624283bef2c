# Launcher side: a static library shared by ckrun and ckpt (store backends,
# manifest, chunk I/O, S3 client), and the two programs.
LAUNCHER_SRCS := $(wildcard launcher/common/*.c launcher/store/*.c launcher/store/s3/*.c launcher/image/*.c)
LAUNCHER_OBJS := $(LAUNCHER_SRCS:%.c=$(BUILD)/%.o)
LAUNCHER_LIBS := -lzstd -lcrypto -lcurl -lelf -lpthread
# Weak references do not pull objects out of a static library: name the
# optional backends so the linker takes them when they are built.
ifneq ($(wildcard launcher/store/s3/*.c),)
LAUNCHER_LIBS += -Wl,-u,ck_store_s3_open
endif

$(BUILD)/libcklaunch.a: $(LAUNCHER_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# Plugins' agent halves (plugins/NAME/agent/*.c) run inside ckrun.
CKRUN_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard launcher/ckrun/*.c plugins/*/agent/*.c))
CKPT_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(wildcard launcher/ckpt/*.c))

$(BUILD)/ckrun: $(CKRUN_OBJS) $(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS)

# Only ckpt unwinds stacks (inspect --backtrace, export-core): libunwind's
# remote unwinder, for x86-64 whatever the host.
$(BUILD)/ckpt: $(CKPT_OBJS) $(BUILD)/libcklaunch.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LAUNCHER_LIBS) -lunwind-generic -lunwind

ifneq ($(CKRUN_OBJS),)
ALL_TARGETS += $(BUILD)/ckrun
INSTALL_BINS += $(BUILD)/ckrun
endif
ifneq ($(CKPT_OBJS),)
ALL_TARGETS += $(BUILD)/ckpt
INSTALL_BINS += $(BUILD)/ckpt
endif
ALL_TARGETS += $(BUILD)/libcklaunch.a
