/* Printing of libckpt's process description (struct ck_proc.desc) for
 * `ckpt inspect`. Weak: when no implementation is linked in, the symbol is
 * NULL and callers print only the size. A weak reference does not pull a
 * member out of a static library, so an implementation belongs in an object
 * linked directly into ckpt (a source file in launcher/ckpt/), or the link needs
 * -Wl,-u,ck_procdesc_print. */
#ifndef CK_PROCDESC_PRINT_H
#define CK_PROCDESC_PRINT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

void ck_procdesc_print(FILE *f, const uint8_t *desc, size_t len) __attribute__((weak));

#endif
