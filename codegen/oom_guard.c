/* oom_guard.c -- fg_oom_guard (oom.h): oom.c's guard, with the located
 * "out of memory while ..." error recorded when the guarded call unwound. */
#include "oom.h"

fg_status fg_oom_guard(fg_context *ctx, fg_loc loc, const char *what, fg_oom_body_fn body, fg_oom_undo_fn undo,
                       void *arg)
{
    int unwound;
    fg_status st = fg_oom_run(body, undo, arg, &unwound);
    return unwound ? fg_diag_error(ctx, FG_ERR_NOMEM, loc, "out of memory while %s", what) : st;
}
