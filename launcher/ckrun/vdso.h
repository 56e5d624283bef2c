#ifndef CK_VDSO_H
#define CK_VDSO_H
#include <stddef.h>
#include "launcher/image/manifest.h"
#include "ckrun/proto.h"
/* Decides how the restorer carries the vDSO (see vdso.c) and fills the
 * layout's vdso fields. old_img: the saved vDSO bytes, or NULL. */
int ck_vdso_plan(const struct ck_proc *p, const void *old_img, size_t old_len, struct ck_rst_layout *l);
#endif
