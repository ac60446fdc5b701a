/* Fuzz target: the header codec on arbitrary bytes (the content of the
 * header skippable frame). */
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct tbp_schema schema;
	struct tbp_header hdr;
	const char *why = NULL;
	int rc = tbp_header_parse(data, size, &hdr, &schema, &why);
	if (rc != TBP_OK && !why)
		__builtin_trap(); /* every refusal says why */
	if (rc == TBP_OK) {
		for (unsigned k = 0; k <= TBP_SCHEMA_MAX_KIND; k++)
			if (schema.kind[k].present && schema.kind[k].nfields > TBP_SCHEMA_MAX_FIELDS)
				__builtin_trap();
	}
	return 0;
}
