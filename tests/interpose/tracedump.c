/*
 * tracedump: prints a trace as one line per record, for the interpose tests:
 *   <kind> tid=<tid> ts=<ts> <field>=<value> ...
 * Interned string references are resolved for the fields that hold them
 * (launch.name, thread.name, notice.message, marker.label), printed as
 * name="...".  API ids are printed with their apis.def name.  Exit status:
 * 0 complete trace, 5 truncated (complete records printed), 2 unreadable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tbprof/trace.h"

struct str { uint64_t id; char *s; };
static struct str *strs;
static size_t nstrs, capstrs;

static const char *lookup(uint64_t id)
{
	for (size_t i = nstrs; i-- > 0;)
		if (strs[i].id == id)
			return strs[i].s;
	return NULL;
}

static void print_str(const char *field, uint64_t id)
{
	const char *s = lookup(id);
	printf(" %s=\"%s\"", field, s ? s : "");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: tracedump TRACE\n");
		return 3;
	}
	struct tbp_reader *r;
	int rc = tbp_reader_open(&r, argv[1]);
	if (rc != TBP_OK) {
		fprintf(stderr, "tracedump: %s: %s\n", argv[1], tbp_error_name(rc));
		return 2;
	}
	struct tbp_record rec;
	while ((rc = tbp_reader_next(r, &rec)) == TBP_OK) {
		const struct tbp_kind_info *ki = tbp_kind_lookup(rec.kind);
		if (rec.kind == TBP_K_STRING) {
			if (nstrs == capstrs) {
				capstrs = capstrs ? capstrs * 2 : 256;
				strs = realloc(strs, capstrs * sizeof *strs);
			}
			char *s = malloc(rec.blob_len + 1);
			memcpy(s, rec.blob, rec.blob_len);
			s[rec.blob_len] = 0;
			strs[nstrs++] = (struct str){ rec.u.string.id, s };
		}
		printf("%s tid=%u ts=%llu", ki ? ki->name : "unknown", rec.tid, (unsigned long long)rec.ts);
		unsigned n = ki ? ki->nfields : rec.nfields;
		for (unsigned i = 0; i < n && i < TBP_MAX_FIELDS; i++) {
			const char *fname = ki ? ki->field_names[i] : "f";
			printf(" %s=%llu", fname, (unsigned long long)rec.u.v[i]);
			if (!strcmp(fname, "api") && rec.kind >= TBP_K_API && rec.kind <= TBP_K_SYNC) {
				const struct tbp_api_info *ai = tbp_api_lookup((unsigned)rec.u.v[i]);
				printf(" api_name=%s", ai ? ai->name : "?");
			}
		}
		if (rec.kind == TBP_K_LAUNCH)
			print_str("kname", rec.u.launch.name);
		if (rec.kind == TBP_K_THREAD)
			print_str("tname", rec.u.thread.name);
		if (rec.kind == TBP_K_DEVICE)
			print_str("dname", rec.u.device.name);
		if (rec.kind == TBP_K_NOTICE)
			print_str("text", rec.u.notice.message);
		if (rec.kind == TBP_K_MARKER)
			print_str("text", rec.u.marker.label);
		if (rec.kind == TBP_K_STRING)
			printf(" value=\"%s\"", strs[nstrs - 1].s);
		printf("\n");
	}
	if (rc == TBP_ERR_NO_EVENTS) {
		/* readable, but cut before its first event (an _exit before the
		 * writer's first drain): exit 6, told apart from truncation */
		fprintf(stderr, "tracedump: %s: offset %llu: %s\n", argv[1],
			(unsigned long long)tbp_reader_offset(r), tbp_reader_detail(r));
		tbp_reader_close(r);
		return 6;
	}
	int truncated = tbp_reader_truncated(r);
	if (rc != TBP_END && !truncated) {
		fprintf(stderr, "tracedump: %s: offset %llu: %s\n", argv[1],
			(unsigned long long)tbp_reader_offset(r), tbp_reader_detail(r));
		tbp_reader_close(r);
		return 2;
	}
	tbp_reader_close(r);
	return truncated ? 5 : 0;
}
