/*
 * yaml_doc.h -- a small document tree over libyaml's event parser.
 *
 * Every loader (op definitions, rules, graphs) parses a file into this tree
 * first and then walks it, so that each value keeps its file:line:col and
 * a loader can report every problem it finds, not only the first.
 *
 * A node is a scalar (its text and quoting style), a sequence or a mapping.
 * Mappings keep their keys in file order as scalar nodes.  Anchors and
 * aliases are resolved (an alias shares the anchored node).  Nodes belong to
 * their fg_ydoc and are freed with it.
 */
#ifndef FG_YAML_DOC_H
#define FG_YAML_DOC_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

typedef enum fg_ykind {
    FG_YNODE_SCALAR = 0,
    FG_YNODE_SEQ,
    FG_YNODE_MAP,
} fg_ykind;

typedef enum fg_ystyle {
    FG_YSTYLE_PLAIN = 0,
    FG_YSTYLE_SINGLE,    /* 'text' */
    FG_YSTYLE_DOUBLE,    /* "text" */
    FG_YSTYLE_BLOCK,     /* | or > */
} fg_ystyle;

typedef struct fg_ynode fg_ynode;
struct fg_ynode {
    fg_ykind kind;
    fg_loc loc;            /* first character of the node (the quote of a quoted scalar) */
    const char *str;       /* SCALAR: text, NUL-terminated */
    size_t len;            /* SCALAR: text length */
    fg_ystyle style;       /* SCALAR */
    int n;                 /* SEQ: item count; MAP: pair count */
    fg_ynode **items;      /* SEQ: items[i]; MAP: items[2i] = key, items[2i+1] = value */
    int cap;
    unsigned long long weight; /* nodes in the tree under this one, aliases expanded (saturating) */
    fg_ynode *next_alloc;  /* every node of a document, for freeing */
};

typedef struct fg_ydoc {
    const char *file;      /* interned */
    int ndocs;             /* documents of the stream */
    fg_ynode **docs;
    fg_ynode *all;
} fg_ydoc;

/* Deepest nesting of sequences and mappings a document may have. */
#define FG_YAML_MAX_DEPTH 64
/* How many nodes aliases may add to the tree beyond those in the file. */
#define FG_YAML_MAX_ALIAS_NODES 1000000

/* Parses YAML text (a stream of documents).  file is the name used in
 * locations (interned here).  On a syntax error records one located error
 * (libyaml's problem at its problem mark; tab indentation gets a hint) and
 * returns FG_ERR_INPUT with *out NULL; so does nesting deeper than
 * FG_YAML_MAX_DEPTH, an alias to a collection that contains it, and aliases
 * adding more than FG_YAML_MAX_ALIAS_NODES nodes to the tree. */
fg_status fg_ydoc_parse(fg_context *ctx, const char *file, const char *text, size_t len, fg_ydoc **out);
void fg_ydoc_free(fg_ydoc *d);

/* Accessors.  fg_ymap_get returns the value of the first pair whose key is
 * key, or NULL; fg_ymap_key returns that key node. */
const fg_ynode *fg_ymap_get(const fg_ynode *map, const char *key);
const fg_ynode *fg_ymap_key(const fg_ynode *map, const char *key);
#define FG_YKEY(map, i) ((map)->items[2 * (i)])
#define FG_YVAL(map, i) ((map)->items[2 * (i) + 1])

/* A plain scalar ~, null, Null, NULL or empty text. */
int fg_ynode_is_null(const fg_ynode *n);
/* Where the text of a scalar starts (one past the quote of a quoted one). */
fg_loc fg_ynode_text_loc(const fg_ynode *n);
/* Describes a value for "... got %s" messages: "string 'high'", "integer 3",
 * "float 1.5", "bool true", "null", "a sequence", "a mapping".  Returns buf. */
const char *fg_ynode_describe(const fg_ynode *n, char *buf, size_t size);

/* Plain-scalar conversions: return 1 and set *out when n is a scalar of that
 * type (quoted scalars are strings), else 0.  Records nothing. */
int fg_yscalar_int(const fg_ynode *n, int64_t *out);
int fg_yscalar_float(const fg_ynode *n, double *out);   /* an integer is fine */
int fg_yscalar_bool(const fg_ynode *n, int *out);

/* Checked conversions: on a wrong type they record "<what> must be <type>,
 * got <description>" at the node and return 0; else 1. */
int fg_yget_int(fg_context *ctx, const fg_ynode *n, const char *what, int64_t *out);
int fg_yget_float(fg_context *ctx, const fg_ynode *n, const char *what, double *out);
int fg_yget_bool(fg_context *ctx, const fg_ynode *n, const char *what, int *out);
/* A non-null scalar: its text. */
int fg_yget_str(fg_context *ctx, const fg_ynode *n, const char *what, const char **out);
/* A scalar that is an identifier ([A-Za-z_][A-Za-z0-9_.]*). */
int fg_yget_name(fg_context *ctx, const fg_ynode *n, const char *what, const char **out);
/* Requires a mapping / a sequence; records "<what> must be a mapping, got ...". */
int fg_yexpect(fg_context *ctx, const fg_ynode *n, fg_ykind kind, const char *what);

/* Checks the keys of a mapping: every key a scalar from allowed[0..n), no
 * key twice.  Records "unknown key 'kidn' in <what> (did you mean 'kind'?)"
 * and "duplicate key 'x' in <what>".  Returns the number of errors. */
int fg_ycheck_keys(fg_context *ctx, const fg_ynode *map, const char *what, const char *const *allowed, int n);

#endif /* FG_YAML_DOC_H */
