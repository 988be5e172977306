/* TEMPORARY: replaced by text_parse.c / text_write.c (delete this file then). */
#include "trace.h"
int trace_text_open(const char *path, trace_reader *r, trace_error *err)
{ (void)r; trace_error_set(err, TRACE_EUSAGE, "%s: text parser not built yet", path); return -1; }
int trace_text_open_string(const char *name, const char *text, size_t len, trace_reader *r, trace_error *err)
{ (void)text; (void)len; (void)r; trace_error_set(err, TRACE_EUSAGE, "%s: text parser not built yet", name); return -1; }
int trace_text_parse_file(const char *path, trace **out, trace_error *err)
{ *out = NULL; trace_error_set(err, TRACE_EUSAGE, "%s: text parser not built yet", path); return -1; }
int trace_text_parse_string(const char *name, const char *text, size_t len, trace **out, trace_error *err)
{ (void)text; (void)len; *out = NULL; trace_error_set(err, TRACE_EUSAGE, "%s: text parser not built yet", name); return -1; }
int trace_text_write(FILE *out, trace_reader *r, trace_error *err)
{ (void)out; (void)r; trace_error_set(err, TRACE_EUSAGE, "text writer not built yet"); return -1; }
