/*
 * The TBPROF_* settings table (tbprof/options.def) and the one parser of their values, shared by
 * libtbprof (which reads them), the launcher (which checks its flags and sets them) and the
 * tests (which check the docs against the table).  Internal to the project; no allocation.
 */
#ifndef TBPROF_OPTIONS_H
#define TBPROF_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "tbprof/naming.h"   /* TBP_NAME_DEFAULT, the default TBPROF_OUT */

#ifdef __cplusplus
extern "C" {
#endif

enum tbp_opt_type {
	TBP_OPT_BOOL,    /* 1/true/yes/on, 0/false/no/off, any case */
	TBP_OPT_UINT,    /* unsigned decimal within [lo, hi] */
	TBP_OPT_SIZE,    /* unsigned decimal, optional K/M/G/T (powers of 1024, then B or iB), [lo, hi] */
	TBP_OPT_SECONDS, /* a decimal number in (0, hi]; unset: 0, off */
	TBP_OPT_LEVEL,   /* one digit lo..hi, or a boolean (on = 1) */
	TBP_OPT_STRING,  /* any text */
	TBP_OPT_CHOICE,  /* one of the '|'-separated words of metavar; a word PREFIX:NAME[@DOMAIN] takes PREFIX:
	                    followed by a name (not starting with '@') */
};

enum tbp_opt_id {
#define TBP_OPTION(id, ...) TBP_OPT_##id,
#include "tbprof/options.def"
#undef TBP_OPTION
	TBP_OPT_COUNT
};

struct tbp_option {
	const char *var;          /* TBPROF_... */
	enum tbp_opt_type type;
	const char *dflt;         /* text of the default; NULL: none */
	unsigned long long lo, hi;
	const char *flag, *short_flag; /* tbprof record's spellings; NULL: none */
	const char *sets;         /* a flag without value sets this; NULL: the flag takes a value */
	const char *metavar;      /* the value's name in --help (CHOICE: the words) */
	const char *help;
};

extern const struct tbp_option tbp_options[TBP_OPT_COUNT];

union tbp_opt_value {
	bool b;                  /* BOOL */
	unsigned long long u;    /* UINT, SIZE, LEVEL */
	double d;                /* SECONDS */
	const char *s;           /* STRING, CHOICE: the text itself */
};

/* Parses `text` as option `o`'s value.  False when it is not one: *why (when given) says what is
 * wrong in a few words ("not a boolean", "out of range", ...). */
bool tbp_opt_parse(const struct tbp_option *o, const char *text, union tbp_opt_value *v, const char **why);

/* The option's default as a value (0/false/NULL when it has none). */
union tbp_opt_value tbp_opt_default(const struct tbp_option *o);

/* The boolean grammar alone: true/false into *b, or false when text is no boolean. */
bool tbp_parse_bool(const char *text, bool *b);

/* The option whose variable is `var`, or NULL. */
const struct tbp_option *tbp_opt_by_var(const char *var);

#ifdef __cplusplus
}
#endif
#endif
