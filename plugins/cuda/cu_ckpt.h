/* libckpt's plugin interface, as the CUDA plugin includes it. The pragma
 * keeps an early revision of that header (a "dir/" + "*.c" path inside
 * its comment trips -Wcomment) from failing this build under -Werror. */
#ifndef CK_CU_CKPT_H
#define CK_CU_CKPT_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcomment"
#include "ckrun/plugin.h"
#pragma GCC diagnostic pop

#endif
