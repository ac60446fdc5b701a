/* What the HTML pages share (an_report_html.c, an_diff_html.c,
 * an_report_ranks.c): one self-contained file each, no network, readable
 * from 800 to 2560 px wide. */
#ifndef TBPROF_AN_HTML_H
#define TBPROF_AN_HTML_H

#include <stddef.h>
#include <stdio.h>

/* Text escaped for HTML content and attribute values. */
void html_text(FILE *f, const char *s, size_t len);
static inline void html_str(FILE *f, const char *s)
{
	html_text(f, s ? s : "", s ? __builtin_strlen(s) : 0);
}
/* A JavaScript string literal, safe inside a <script> element. */
void html_js_string(FILE *f, const char *s, size_t len);
/* <!DOCTYPE html> to <body> with the shared style sheet; title escaped. */
void html_page_begin(FILE *f, const char *title);
/* The shared script (zoomable timelines, charts' hover) and </html>. */
void html_page_end(FILE *f);
/* Series colours, by index (wraps). */
const char *html_color(size_t i);

#endif
