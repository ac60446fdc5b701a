/*
 * What the interpose/ files share below the hook machinery (hook.h): lookups that must not go
 * through our own interposers.  The core (libtbprof/) never includes this: layers call down.
 */
#ifndef TBPROF_INTERPOSE_H
#define TBPROF_INTERPOSE_H

#include "core.h"

/* The real dlsym/dlvsym, bypassing tbprof's own dlsym interposer (common.c). */
void *tbp_real_dlsym(void *handle, const char *name) TBP_HIDDEN;

#endif
