/* Internal seams between the loader (an_core.c) and the passes (an_passes.c). */
#ifndef TBANALYZE_AN_INTERNAL_H
#define TBANALYZE_AN_INTERNAL_H

#include "an.h"

int an_pass_init(struct analysis *a);
/* One record, in time order for API/GPU/marker records; definitions never
 * come here; facts (LOST, END, NOTICE, ...) and Python spans come as read. */
void an_pass_record(struct analysis *a, const struct tbp_record *r);
int an_pass_finish(struct analysis *a);
void an_pass_free(struct analysis *a);

#endif
