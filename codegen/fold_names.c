/* fold_names.c -- the names of the builtin folds (fold_names.h). */
#include "fold_names.h"

#include <string.h>

#include "util.h"

static const char *const builtin_names[] = {
    [FG_FOLD_BN_INTO_CONV] = "bn_into_conv",
    [FG_FOLD_BN_INTO_MATMUL] = "bn_into_matmul",
    [FG_FOLD_AFFINE_MERGE] = "affine_merge",
};
FG_STATIC_ASSERT(FG_COUNTOF(builtin_names) == FG_FOLD_BUILTIN_COUNT, "builtin_names out of sync with fg_fold_builtin");

int fg_fold_builtin_find(const char *name)
{
    for (int i = 0; name && i < FG_FOLD_BUILTIN_COUNT; i++)
        if (strcmp(name, builtin_names[i]) == 0)
            return i;
    return -1;
}

int fg_fold_is_builtin(const char *name) { return fg_fold_builtin_find(name) >= 0; }

const char *const *fg_fold_builtin_names(int *n)
{
    *n = FG_FOLD_BUILTIN_COUNT;
    return builtin_names;
}
