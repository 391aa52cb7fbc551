/* Temporary: weak command entries until their modules land (removed at integration). */
#include "cli.h"
#include <stdio.h>
static int missing(const char *n) { fprintf(stderr, "fusegen: '%s' is not built yet\n", n); return 1; }
__attribute__((weak)) int cmd_emit(int c, char **v) { (void)c; (void)v; return missing("emit"); }
__attribute__((weak)) int cmd_compile(int c, char **v) { (void)c; (void)v; return missing("compile"); }
__attribute__((weak)) int cmd_cache(int c, char **v) { (void)c; (void)v; return missing("cache"); }
__attribute__((weak)) int cmd_run(int c, char **v) { (void)c; (void)v; return missing("run"); }
