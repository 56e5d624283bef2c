/* S3 backend extras beyond struct ck_store_ops, for tests and tools. */
#ifndef CK_STORE_S3_H
#define CK_STORE_S3_H

#include <stdint.h>

#include "launcher/store/store.h"

/* How many request attempts were repeated (retries) on this store so far. */
uint64_t ck_store_s3_retries(struct ck_store *st);

#endif
