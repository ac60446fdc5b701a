/* What tests/cupti/fake_core.c keeps for the unit test. */
#ifndef TBP_FAKE_CORE_H
#define TBP_FAKE_CORE_H
#include <stddef.h>
#include "tbprof/trace.h"
extern struct tbp_record *fake_records;
extern size_t fake_nrecords;
extern int fake_warnings;
const char *fake_string(uint64_t id);
#endif
