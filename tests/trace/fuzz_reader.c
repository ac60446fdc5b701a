/* Fuzz target: the whole reader on arbitrary bytes (tbp_reader_open_mem,
 * then tbp_reader_next until it stops).  Must never crash, hang or leak. */
#include <stddef.h>
#include <stdint.h>

#include "tbprof/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tbp_reader *r = NULL;
	int rc = tbp_reader_open_mem(&r, data, size, "fuzz");
	if (rc == TBP_OK) {
		struct tbp_record rec;
		uint64_t sum = 0;
		while ((rc = tbp_reader_next(r, &rec)) == TBP_OK) {
			/* Touch everything the reader hands out. */
			sum += rec.ts + rec.nfields + rec.tid;
			for (unsigned i = 0; i < rec.nfields && i < TBP_MAX_FIELDS; i++)
				sum += rec.u.v[i];
			for (uint32_t i = 0; i < rec.blob_len; i++)
				sum += ((const uint8_t *)rec.blob)[i];
		}
		(void)sum;
		/* Errors are sticky and described. */
		if (tbp_reader_next(r, &rec) != rc)
			__builtin_trap();
	}
	(void)tbp_reader_offset(r);
	(void)tbp_reader_detail(r);
	tbp_reader_close(r);
	return 0;
}
