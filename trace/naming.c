/*
 * The trace file naming rules (tbprof/naming.h): one module that libtbprof, the launcher and
 * tbanalyze share, so the name a process writes and the name the others look for cannot drift.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tbprof/naming.h"

void tbp_name_tagged(char *dst, size_t cap, const char *base, const char *tag)
{
	const char *slash = strrchr(base, '/');
	const char *dot = strchr(slash ? slash + 1 : base, '.');
	if (dot)
		snprintf(dst, cap, "%.*s.%s%s", (int)(dot - base), base, tag, dot);
	else
		snprintf(dst, cap, "%s.%s", base, tag);
}

void tbp_name_per_pid(char *dst, size_t cap, const char *base, long pid, int serial)
{
	char id[48];
	if (serial)
		snprintf(id, sizeof id, "%ld-%d", pid, serial);
	else
		snprintf(id, sizeof id, "%ld", pid);
	tbp_name_tagged(dst, cap, base, id);
}

void tbp_name_in_dir(char *dst, size_t cap, long long rank, bool agent)
{
	if (rank >= 0 && !agent)
		snprintf(dst, cap, "rank%lld" TBP_NAME_EXT, rank);
	else
		snprintf(dst, cap, "%s", agent ? "agent" TBP_NAME_EXT : TBP_NAME_DEFAULT);
}

void tbp_name_capture(char *dst, size_t cap, const char *base, const char *word, unsigned n, const char *tag)
{
	char what[64], one[4096 + 64];
	snprintf(what, sizeof what, "%s%u", word, n);
	tbp_name_tagged(one, sizeof one, base, what);
	const char *slash = strrchr(base, '/');
	const char *file = slash ? slash + 1 : base;
	size_t tl = tag ? strlen(tag) : 0;
	if (tl && !strncmp(file, tag, tl) && file[tl] == '.')
		tag = NULL;
	if (tag && *tag)
		tbp_name_tagged(dst, cap, one, tag);
	else
		snprintf(dst, cap, "%s", one);
}

bool tbp_name_expand(char *dst, size_t cap, const char *pattern, long pid, long long rank, bool agent)
{
	size_t o = 0;
	bool had_pid = false;
	if (!cap)
		return false;
	for (const char *p = pattern; *p && o + 1 < cap; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			o += (size_t)snprintf(dst + o, cap - o, "%ld", pid);
			p++;
			had_pid = true;
		} else if (p[0] == '%' && p[1] == 'r') {
			if (rank >= 0 && !agent)
				o += (size_t)snprintf(dst + o, cap - o, "%lld", rank);
			else
				o += (size_t)snprintf(dst + o, cap - o, "%s", agent ? "agent" : "norank");
			p++;
		} else {
			dst[o++] = *p;
		}
		if (o >= cap)
			o = cap - 1;
	}
	dst[o] = 0;
	return had_pid;
}

bool tbp_name_is_dir(const char *out)
{
	struct stat st;
	size_t len = strlen(out);
	return (len && out[len - 1] == '/') || (stat(out, &st) == 0 && S_ISDIR(st.st_mode));
}

long tbp_name_rank_of(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strncmp(base, "rank", 4) || base[4] < '0' || base[4] > '9')
		return -1;
	long v = 0;
	const char *p = base + 4;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (0x7fffffffL - 9) / 10)
			return -1;
		v = v * 10 + (*p - '0');
	}
	return strcmp(p, TBP_NAME_EXT) ? -1 : v;
}

bool tbp_name_is_output_of(const char *out, const char *file)
{
	char pat[4096], alt[4096 + 8];
	const char *slash = strrchr(out, '/');
	const char *base = slash ? slash + 1 : out;
	size_t o = 0;
	/* OUT's name as a glob: %p and %r match anything, glob characters stand for themselves */
	for (const char *p = base; *p && o + 2 < sizeof pat; p++) {
		if (p[0] == '%' && (p[1] == 'p' || p[1] == 'r')) {
			pat[o++] = '*';
			p++;
		} else if (strchr("*?[\\", *p)) {
			pat[o++] = '\\';
			pat[o++] = *p;
		} else {
			pat[o++] = *p;
		}
	}
	pat[o] = 0;
	/* <stem>.<tag><ext>: the stem ends at the first dot, as tbp_name_tagged puts it */
	char *dot = strchr(pat, '.');
	if (dot)
		snprintf(alt, sizeof alt, "%.*s.*%s", (int)(dot - pat), pat, dot);
	else
		snprintf(alt, sizeof alt, "%s.*", pat);
	return !fnmatch(pat, file, 0) || !fnmatch(alt, file, 0);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

enum tbp_out_kind tbp_name_classify(const char *out, const char **why)
{
	const char *unused;
	if (!why)
		why = &unused;
	*why = NULL;
	size_t len = strlen(out);
	bool pattern = strstr(out, "%p") || strstr(out, "%r");
	if (ends_with(out, TBP_NAME_EXT)) {
		if (len > strlen(TBP_NAME_EXT) && out[len - strlen(TBP_NAME_EXT) - 1] != '/')
			return TBP_OUT_FILE;
		*why = "a trace file needs a name before " TBP_NAME_EXT;
		return TBP_OUT_NOT_A_TRACE;
	}
	if (pattern) {
		*why = "a name with %p or %r is a file's and must end in " TBP_NAME_EXT;
		return TBP_OUT_NOT_A_TRACE;
	}
	struct stat st;
	if (stat(out, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return TBP_OUT_DIR;
		if (!S_ISREG(st.st_mode))
			return TBP_OUT_FILE;   /* /dev/null, a FIFO: written as they are */
		*why = "an existing file whose name does not end in " TBP_NAME_EXT;
		return TBP_OUT_NOT_A_TRACE;
	}
	if (len && out[len - 1] == '/')
		return TBP_OUT_DIR;
	/* A new name: a directory unless it looks like another kind of file (an extension). */
	const char *slash = strrchr(out, '/');
	const char *file = slash ? slash + 1 : out;
	const char *dot = strrchr(file, '.');
	if (dot && dot > file && dot[1]) {
		*why = "not a trace's name: a file name ends in " TBP_NAME_EXT ", a directory's has no extension "
		       "(or ends in /)";
		return TBP_OUT_NOT_A_TRACE;
	}
	return TBP_OUT_DIR;
}
