/*
 * load.h -- the loaders of rule directories, built on the document tree of
 * yaml_doc.h: op definitions (opdef_load.c) and fusion rules (rule_load.c).
 * fg_rules_load (rules_dir.c) drives them over a directory; the graph loader
 * (graph_load.c) uses attr parsing from opdef_load.c.
 */
#ifndef FG_LOAD_H
#define FG_LOAD_H

#include "ir.h"
#include "yaml_doc.h"

/* Loads one op definition from a mapping with an `op:` key and adds it to the
 * context.  Records every problem found; returns FG_OK or the first error. */
fg_status fg_opdef_load(fg_context *ctx, const fg_ynode *map, uint64_t file_hash);

/* A rules directory being loaded (rules_dir.c): its path, the directory
 * opened once, and the hook files (*.lua) read from it, each with the hash of
 * the bytes that were loaded. */
typedef struct fg_rules_src {
    const char *dir;
    int dirfd;
    int nlua;
    char *const *lua_names;      /* sorted */
    const uint64_t *lua_hashes;  /* 0: the file could not be read */
} fg_rules_src;

/* Loads one fusion rule from a mapping with a `rule:` key and adds it to the
 * context.  src is the rules directory the rule file lies in (for `hooks:`:
 * a file of it, whose bytes join the rule's hash: the hash of the bytes its
 * hooks were loaded from, or of a file opened once beneath src->dirfd). */
fg_status fg_rule_load(fg_context *ctx, const fg_ynode *map, const fg_rules_src *src, uint64_t file_hash);

/* Parses an attribute value of type `def->type` (and, for INTS, a length
 * allowed by the bit set def->lens: bit n = length n, 0 = any) from node v
 * into *out; what names the attribute in messages, e.g.
 * "attribute 'stride' of conv2d".  Records a located error and returns 0 on
 * a wrong type or length. */
int fg_attr_parse(fg_context *ctx, const fg_ynode *v, fg_attr_type type, unsigned lens, const char *what,
                  fg_attr_value *out);

#endif /* FG_LOAD_H */
