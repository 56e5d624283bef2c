/* The fake plugin registry of the standalone CUDA plugin test. */
#ifndef FAKE_CKPT_H
#define FAKE_CKPT_H

#include "plugins/cuda/cu_ckpt.h"

extern const struct ck_plugin *fake_plugin;
extern char fake_fail_msg[512];
extern int fake_restarted;

/* Fires one event at the registered plugin; clears the failure message. */
int fake_fire(enum ck_event ev);

#endif
