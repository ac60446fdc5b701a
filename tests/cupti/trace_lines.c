/*
 * Prints every record of a trace as one line, for the cupti suite's scripts:
 *   KIND ts=N tid=N stream_kind=N FIELD=VALUE ...     (STRING: text=...)
 * Field names come from the schema table (tbp_kind_lookup).  Exit 2 on a
 * bad trace, with the reader's error.
 */
#include <stdio.h>
#include <string.h>

#include "tbprof/trace.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s TRACE\n", argv[0]);
		return 3;
	}
	struct tbp_reader *r = NULL;
	int st = tbp_reader_open(&r, argv[1]);
	if (st != TBP_OK) {
		fprintf(stderr, "%s: %s\n", argv[1], tbp_error_name(st));
		return 2;
	}
	struct tbp_record rec;
	while ((st = tbp_reader_next(r, &rec)) == TBP_OK) {
		const struct tbp_kind_info *k = tbp_kind_lookup(rec.kind);
		if (!k) {
			printf("kind%u ts=%llu\n", rec.kind, (unsigned long long)rec.ts);
			continue;
		}
		printf("%s ts=%llu tid=%u stream_kind=%u", k->name, (unsigned long long)rec.ts,
		       rec.tid, rec.stream_kind);
		for (unsigned i = 0; i < k->nfields && i < rec.nfields; i++)
			printf(" %s=%llu", k->field_names[i], (unsigned long long)rec.u.v[i]);
		if (rec.blob) {
			/* Strings go last, newlines and tabs escaped. */
			fputs(" text=", stdout);
			const unsigned char *p = rec.blob;
			for (uint32_t i = 0; i < rec.blob_len; i++)
				if (p[i] == '\n')
					fputs("\\n", stdout);
				else
					putchar(p[i]);
		}
		putchar('\n');
	}
	int bad = st != TBP_END;
	if (bad)
		fprintf(stderr, "%s: offset %llu: %s (%s)\n", argv[1],
			(unsigned long long)tbp_reader_offset(r), tbp_error_name(st),
			tbp_reader_detail(r));
	tbp_reader_close(r);
	return bad ? 2 : 0;
}
