/*
 * fold_names.h -- the registry of builtin parameter folds: their names, the
 * one table both the rule loader (rule_load.c: `fold:` names, suggestions)
 * and the folds themselves (fold.c: one function per entry, indexed by the
 * same enum) read, so the loader knows the names without knowing the
 * planner's folds.
 */
#ifndef FG_FOLD_NAMES_H
#define FG_FOLD_NAMES_H

/* The builtin folds (fold.h describes each). */
typedef enum fg_fold_builtin {
    FG_FOLD_BN_INTO_CONV = 0,
    FG_FOLD_BN_INTO_MATMUL,
    FG_FOLD_AFFINE_MERGE,
    FG_FOLD_BUILTIN_COUNT
} fg_fold_builtin;

/* The builtin fold called name, or -1 (also for NULL). */
int fg_fold_builtin_find(const char *name);
/* Nonzero when name is a builtin fold. */
int fg_fold_is_builtin(const char *name);
/* Names of the builtin folds, indexed by fg_fold_builtin (for suggestions);
 * *n set to the count. */
const char *const *fg_fold_builtin_names(int *n);

#endif /* FG_FOLD_NAMES_H */
