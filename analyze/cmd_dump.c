/*
 * tbanalyze dump TRACE [--json] [--kind NAME[,NAME...]]
 * One line per record in file order, fields by schema name; string ids are
 * resolved (a first pass collects the string table, so a reference that
 * comes before its definition still resolves).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "tr_common.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: tbanalyze dump TRACE.zst [--json] [--kind NAME[,NAME...]]\n"
		   "  one line per record; --json writes JSON lines; --kind keeps only the named kinds\n");
}

/* Fields holding signed quantities (stored two's complement). */
static int field_is_signed(unsigned kind, unsigned field)
{
	return kind == TBP_K_CLOCK && field == 2;
}

static int field_is_api(const struct tbp_kind_info *ki, unsigned field)
{
	return field == 1 && ki->nfields > 1 && !strcmp(ki->field_names[1], "api");
}

/* The record kind names, comma-separated, for error messages. */
static const char *kind_names(void)
{
	static char names[2048];
	size_t o = 0;
	for (unsigned k = 0; k < TBP_K__MAX && o < sizeof names; k++) {
		const struct tbp_kind_info *ki = tbp_kind_lookup(k);
		if (ki && ki->name)
			o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", o ? ", " : "", ki->name);
	}
	return names;
}

/* Errors read "tbanalyze dump: --kind: VALUE: REASON; see ..." (exit 3). */
static int parse_kinds(const char *list, unsigned char *keep)
{
	if (!list || !*list)
		return cmd_usage_error("--kind: value missing (NAME[,NAME...], one of: %s)", kind_names());
	size_t len = strlen(list);
	char copy[len + 1];
	memcpy(copy, list, len + 1);
	int any = 0;
	for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int found = 0;
		any = 1;
		for (unsigned k = 0; k < TBP_K__MAX; k++) {
			const struct tbp_kind_info *ki = tbp_kind_lookup(k);
			if (ki && ki->name && !strcmp(ki->name, tok)) {
				keep[k] = 1;
				found = 1;
			}
		}
		if (!found)
			return cmd_usage_error("--kind: %s: unknown record kind (valid: %s)", tok, kind_names());
	}
	if (!any)
		return cmd_usage_error("--kind: %s: no kind named", list);
	return 0;
}

static void print_text(FILE *out, const struct tbp_record *rec, const struct tr_strings *strs)
{
	const struct tbp_kind_info *ki = tbp_kind_lookup(rec->kind);
	fprintf(out, "%" PRIu64 " %s:%" PRIu32 " %s", rec->ts, tr_stream_kind_name(rec->stream_kind), rec->tid,
		ki->name);
	for (unsigned i = 0; i < rec->nfields; i++) {
		uint64_t v = rec->u.v[i];
		fprintf(out, " %s=", ki->field_names[i]);
		if (field_is_signed(rec->kind, i)) {
			fprintf(out, "%" PRId64, (int64_t)v);
		} else if (ki->string_fields & (1u << i) && v) {
			size_t len;
			const char *s = tr_strings_get(strs, v, &len);
			if (s)
				tr_json_string(out, s, len);
			else
				fprintf(out, "%" PRIu64, v);
		} else if (field_is_api(ki, i) && v < TBP_API__MAX && tbp_api_lookup((unsigned)v)) {
			fputs(tbp_api_lookup((unsigned)v)->name, out);
		} else {
			fprintf(out, "%" PRIu64, v);
		}
	}
	if (ki->has_blob) {
		fputc(' ', out);
		tr_json_string(out, rec->blob, rec->blob_len);
	}
	fputc('\n', out);
}

static void print_json(FILE *out, const struct tbp_record *rec, const struct tr_strings *strs)
{
	const struct tbp_kind_info *ki = tbp_kind_lookup(rec->kind);
	fprintf(out, "{\"kind\":\"%s\",\"stream\":\"%s\",\"sid\":%" PRIu32 ",\"ts\":%" PRIu64, ki->name,
		tr_stream_kind_name(rec->stream_kind), rec->tid, rec->ts);
	for (unsigned i = 0; i < rec->nfields; i++) {
		uint64_t v = rec->u.v[i];
		if (field_is_signed(rec->kind, i))
			fprintf(out, ",\"%s\":%" PRId64, ki->field_names[i], (int64_t)v);
		else
			fprintf(out, ",\"%s\":%" PRIu64, ki->field_names[i], v);
		if (ki->string_fields & (1u << i) && v) {
			size_t len;
			const char *s = tr_strings_get(strs, v, &len);
			if (s) {
				fprintf(out, ",\"%s_str\":", ki->field_names[i]);
				tr_json_string(out, s, len);
			}
		} else if (field_is_api(ki, i) && v < TBP_API__MAX && tbp_api_lookup((unsigned)v)) {
			fprintf(out, ",\"api_name\":\"%s\"", tbp_api_lookup((unsigned)v)->name);
		}
	}
	if (ki->has_blob) {
		fputs(",\"blob\":", out);
		tr_json_string(out, rec->blob, rec->blob_len);
	}
	fputs("}\n", out);
}

/* First pass: the string table.  Errors are left for the second pass to
 * report, at the same place, in the usual format. */
static int collect_strings(const char *path, struct tr_strings *strs)
{
	struct tbp_reader *r = NULL;
	if (tbp_reader_open(&r, path) != TBP_OK) {
		tbp_reader_close(r);
		return 0;
	}
	struct tbp_record rec;
	int rc = 0;
	while (tbp_reader_next(r, &rec) == TBP_OK)
		if (tr_strings_note(strs, &rec) < 0) {
			rc = -1;
			break;
		}
	tbp_reader_close(r);
	return rc;
}

/* --kind NAME[,NAME...] / --kind=...: the kinds kept (ctx: keep[TBP_K__MAX];
 * a --kind that names none is an error, so any kept means a filter). */
static int kind_opt(int argc, char **argv, int *i, void *ctx)
{
	unsigned char *keep = ctx;
	const char *v;
	if (!strncmp(argv[*i], "--kind=", 7))
		v = argv[*i] + 7;
	else if (!strcmp(argv[*i], "--kind")) /* last, or followed by another option: no value */
		v = *i + 1 < argc && argv[*i + 1][0] != '-' ? argv[++*i] : NULL;
	else
		return 0;
	return parse_kinds(v, keep) ? CMD_ARG_ERROR : CMD_ARG_TAKEN;
}

int cmd_dump(int argc, char **argv)
{
	static const struct cmd_args_spec spec = {usage, 1, 1, 1, {"TRACE.zst"}};
	const char *paths[1];
	struct cmd_args args = {paths, 0, 0};
	unsigned char keep[TBP_K__MAX] = {0};
	int status = cmd_parse(argc, argv, &spec, &args, kind_opt, keep);
	if (status != CMD_GO_ON)
		return status;
	int filter = 0;
	for (unsigned k = 0; k < TBP_K__MAX; k++)
		filter |= keep[k];
	const char *path = paths[0];
	int json = args.json;
	struct tbp_reader *r;
	status = tr_open(path, &r);
	if (status != TBA_EXIT_OK)
		return status;
	an_check_opened(path, 0);
	struct tr_strings strs;
	tr_strings_init(&strs);
	if (collect_strings(path, &strs)) {
		fprintf(stderr, "tbanalyze: dump: out of memory\n");
		tbp_reader_close(r);
		tr_strings_free(&strs);
		return TBA_EXIT_INTERNAL;
	}
	struct tbp_record rec;
	int rc;
	while ((rc = tr_next(r, path, &rec)) > 0) {
		if (filter && !keep[rec.kind])
			continue;
		if (json)
			print_json(stdout, &rec, &strs);
		else
			print_text(stdout, &rec, &strs);
	}
	status = rc < 0 ? tr_exit_status(r) : TBA_EXIT_OK;
	tbp_reader_close(r);
	tr_strings_free(&strs);
	return cmd_output_close(stdout, NULL, status);
}
