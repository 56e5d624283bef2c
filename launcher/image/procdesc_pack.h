/* libckpt's process descriptor (ckrun/procdesc.h) in its compact form,
 * as stored in manifests: header, then the used threads, fds and epoll
 * items. */
#ifndef CK_LAUNCHER_PROCDESC_H
#define CK_LAUNCHER_PROCDESC_H

#include <stddef.h>
#include <stdint.h>

#include "ckrun/procdesc.h"

int ck_desc_pack(const struct ck_procdesc *pd, uint8_t **out, size_t *len);
/* Checks magic, version and sizes; -EBADMSG with a message if wrong. */
int ck_desc_unpack(const uint8_t *buf, size_t len, struct ck_procdesc **out);

#endif
