/* TEMPORARY: replaced by store.c / recorder.c (delete this file then). */
#include "trace.h"
trace_store *trace_store_open(const char *path, bool create, trace_error *err)
{ (void)create; trace_error_set(err, TRACE_EUSAGE, "%s: store not built yet", path); return NULL; }
void trace_store_close(trace_store *st) { (void)st; }
int trace_store_open_reader(const char *path, int64_t run, trace_reader *r, trace_error *err)
{ (void)run; (void)r; trace_error_set(err, TRACE_EUSAGE, "%s: store not built yet", path); return -1; }
int trace_store_reader(trace_store *st, int64_t run, trace_reader *r, trace_error *err)
{ (void)st; (void)run; (void)r; trace_error_set(err, TRACE_EUSAGE, "store not built yet"); return -1; }
