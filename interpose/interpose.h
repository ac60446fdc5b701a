/*
 * What the interpose/ files share below the hook machinery (hook.h): lookups that must not go
 * through our own interposers.  The core (libtbprof/) never includes this: layers call down.
 */
#ifndef TBPROF_INTERPOSE_H
#define TBPROF_INTERPOSE_H

#include "core.h"
/* tbp_real_dlsym and tbp_real_sigaction: the C library's, never our own interposers (common.c, signal.c). */
#include "libc_real.h"

#endif
