/*
 * The TBPROF_* settings table and the one parser of their values (tbprof/options.h): libtbprof
 * and the launcher accept exactly the same spellings, so a value the launcher lets through is one
 * libtbprof takes, and TBPROF_TRACE_ALL=false means false to both.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tbprof/options.h"

const struct tbp_option tbp_options[TBP_OPT_COUNT] = {
#define TBP_OPTION(id, var, type, dflt, lo, hi, flag, shrt, sets, metavar, help) \
	[TBP_OPT_##id] = { var, TBP_OPT_##type, dflt, lo, hi, flag, shrt, sets, metavar, help },
#include "tbprof/options.def"
#undef TBP_OPTION
};

bool tbp_parse_bool(const char *text, bool *b)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		if (!strcasecmp(text, yes[i])) {
			*b = true;
			return true;
		}
		if (!strcasecmp(text, no[i])) {
			*b = false;
			return true;
		}
	}
	return false;
}

/* Unsigned decimal, with a K/M/G/T suffix (an optional B or iB after it) when `suffixes`. */
static bool parse_uint(const char *text, bool suffixes, unsigned long long *out, const char **why)
{
	unsigned long long n = 0;
	const char *p = text;
	*why = "not a non-negative integer";
	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned digit = (unsigned)(*p - '0');
		if (n > (ULLONG_MAX - digit) / 10) {
			*why = "too large";
			return false;
		}
		n = n * 10 + digit;
	}
	if (*p && suffixes) {
		unsigned shift = 0;
		switch (*p) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		case 't': case 'T': shift = 40; break;
		default: *why = "unknown suffix (K, M, G, T)"; return false;
		}
		p++;
		if (*p == 'i' && (p[1] == 'B' || p[1] == 'b'))
			p++;
		if (*p == 'B' || *p == 'b')
			p++;
		if (n > (ULLONG_MAX >> shift)) {
			*why = "too large";
			return false;
		}
		n <<= shift;
	}
	if (*p) {
		*why = suffixes ? "trailing characters" : "not a non-negative integer";
		return false;
	}
	*out = n;
	return true;
}

static bool is_choice(const char *words, const char *text)
{
	size_t len = strlen(text);
	for (const char *w = words; w && *w;) {
		const char *bar = strchr(w, '|');
		size_t wl = bar ? (size_t)(bar - w) : strlen(w);
		if (wl == len && !strncmp(w, text, len))
			return true;
		/* "nvtx:NAME[@DOMAIN]": the word up to its ':' is a prefix, the rest a name of the user's */
		const char *colon = memchr(w, ':', wl);
		size_t pl = colon ? (size_t)(colon - w) + 1 : 0;
		if (colon && len > pl && !strncmp(w, text, pl) && text[pl] != '@')
			return true;
		w = bar ? bar + 1 : NULL;
	}
	return false;
}

bool tbp_opt_parse(const struct tbp_option *o, const char *text, union tbp_opt_value *v, const char **why)
{
	const char *unused;
	if (!why)
		why = &unused;
	*why = NULL;
	switch (o->type) {
	case TBP_OPT_BOOL:
		if (tbp_parse_bool(text, &v->b))
			return true;
		*why = "not a boolean (true/false, yes/no, on/off, 1/0)";
		return false;
	case TBP_OPT_UINT:
	case TBP_OPT_SIZE:
		if (!parse_uint(text, o->type == TBP_OPT_SIZE, &v->u, why))
			return false;
		if (v->u < o->lo || v->u > o->hi) {
			*why = "out of range";
			return false;
		}
		return true;
	case TBP_OPT_SECONDS: {
		char *end;
		double d = strtod(text, &end);
		if (end == text || *end || !(d > 0) || d > (double)o->hi) {
			*why = "not a positive number within range";
			return false;
		}
		v->d = d;
		return true;
	}
	case TBP_OPT_LEVEL: {
		bool b;
		if (text[0] >= '0' && text[0] <= '9' && !text[1] && (unsigned)(text[0] - '0') >= o->lo &&
		    (unsigned)(text[0] - '0') <= o->hi) {
			v->u = (unsigned)(text[0] - '0');
			return true;
		}
		if (tbp_parse_bool(text, &b)) {
			v->u = b;
			return true;
		}
		*why = "not a boolean (true/false, yes/no, on/off, 1/0)";
		return false;
	}
	case TBP_OPT_CHOICE:
		if (is_choice(o->metavar, text)) {
			v->s = text;
			return true;
		}
		*why = "not one of the allowed words";
		return false;
	case TBP_OPT_STRING:
		v->s = text;
		return true;
	}
	*why = "unknown option type";
	return false;
}

union tbp_opt_value tbp_opt_default(const struct tbp_option *o)
{
	union tbp_opt_value v;
	memset(&v, 0, sizeof v);
	if (o->dflt && !tbp_opt_parse(o, o->dflt, &v, NULL))
		memset(&v, 0, sizeof v);   /* a table error; the test options_doc catches it */
	return v;
}

const struct tbp_option *tbp_opt_by_var(const char *var)
{
	for (size_t i = 0; i < TBP_OPT_COUNT; i++)
		if (!strcmp(tbp_options[i].var, var))
			return &tbp_options[i];
	return NULL;
}
