/* Number formatting the text reporters (an_report.c, an_report_ranks.c) share. */
#ifndef TBPROF_AN_FMT_H
#define TBPROF_AN_FMT_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

static inline double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* "1.234 ms" style, picking the unit by size. */
static inline const char *fmt_ns(uint64_t ns, char *buf, size_t len)
{
	if (ns >= 1000000000ULL)
		snprintf(buf, len, "%.3f s", ns / 1e9);
	else if (ns >= 1000000ULL)
		snprintf(buf, len, "%.3f ms", ns / 1e6);
	else if (ns >= 1000ULL)
		snprintf(buf, len, "%.1f us", ns / 1e3);
	else
		snprintf(buf, len, "%" PRIu64 " ns", ns);
	return buf;
}

#endif
