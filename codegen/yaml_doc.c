/*
 * yaml_doc.c -- builds the document tree of yaml_doc.h from libyaml events
 * and provides the typed, located accessors the loaders use.  Input is
 * bounded: nesting deeper than FG_YAML_MAX_DEPTH stops the parse (libyaml's
 * scanner takes time quadratic in the depth of flow collections, so the
 * stop comes as soon as the depth is reached), an alias may not name a
 * collection that is still open (the tree would contain itself), and
 * aliases may not make the tree a walker sees larger than the file by more
 * than FG_YAML_MAX_ALIAS_NODES nodes (each use of an anchor counts the nodes
 * under it: "billion laughs").  Anchors are found by hash.
 */
#include "yaml_doc.h"

#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <yaml.h>

#include "oom.h"
#include "util.h"

static fg_ynode *node_new(fg_ydoc *d, fg_ykind kind, const yaml_mark_t *m)
{
    fg_ynode *n = fg_xcalloc(1, sizeof *n);
    n->kind = kind;
    n->loc.file = d->file;
    n->loc.line = (int)m->line + 1;
    n->loc.col = (int)m->column + 1;
    n->next_alloc = d->all;
    d->all = n;
    return n;
}

static void node_push(fg_ynode *parent, fg_ynode *child)
{
    fg_grow((void **)&parent->items, &parent->cap, parent->n + 1, sizeof *parent->items);
    parent->items[parent->n++] = child;
}

void fg_ydoc_free(fg_ydoc *d)
{
    if (!d)
        return;
    fg_ynode *n = d->all;
    while (n) {
        fg_ynode *next = n->next_alloc;
        if (n->kind == FG_YNODE_SCALAR)
            free((char *)n->str);
        free(n->items);
        free(n);
        n = next;
    }
    free(d->docs);
    free(d);
}

/* Records libyaml's error at its problem mark.  A tab where a token should
 * start gets a hint, since that is by far the most common cause. */
static fg_status parse_error(fg_context *ctx, fg_ydoc *d, const yaml_parser_t *p, const char *text, size_t len)
{
    fg_loc loc = {d->file, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1};
    const char *problem = p->problem ? p->problem : "invalid YAML";
    const char *hint = "";
    size_t at = p->problem_mark.index;
    if (!strstr(problem, "tab") && at < len && text[at] == '\t')
        hint = " (tab indentation is not allowed in YAML)";
    if (p->error == YAML_MEMORY_ERROR)
        return fg_diag_error(ctx, FG_ERR_NOMEM, loc, "out of memory while parsing YAML");
    if (p->context && p->context_mark.line != p->problem_mark.line && !*hint)
        return fg_diag_error(ctx, FG_ERR_INPUT, loc, "%s%s (%s at line %d)", problem, hint, p->context,
                             (int)p->context_mark.line + 1);
    return fg_diag_error(ctx, FG_ERR_INPUT, loc, "%s%s", problem, hint);
}

typedef struct anchor {
    UT_hash_handle hh;
    fg_ynode *node;       /* the latest node of that name */
    char name[];
} anchor;

static unsigned long long sat_add(unsigned long long a, unsigned long long b)
{
    return a > ULLONG_MAX - b ? ULLONG_MAX : a + b;
}

/* The parser and the event in hand, on the heap so that the guard can
 * release them after unwinding out of fg_ydoc_parse. */
typedef struct yaml_state {
    yaml_parser_t p;
    yaml_event_t ev;
} yaml_state;

static void yaml_state_delete(void *arg)
{
    yaml_state *y = arg;
    yaml_event_delete(&y->ev);
    yaml_parser_delete(&y->p);
}

fg_status fg_ydoc_parse(fg_context *ctx, const char *file, const char *text, size_t len, fg_ydoc **out)
{
    fg_ydoc *d = fg_xcalloc(1, sizeof *d);
    fg_ynode **stack = NULL;
    int nstack = 0, stack_cap = 0, docs_cap = 0;
    anchor *anchors = NULL;   /* uthash on name */
    unsigned long long nreal = 0, expanded = 0;   /* nodes in the file; in the tree as walked */
    fg_status st = FG_OK;
    int done = 0;

    *out = NULL;
    d->file = fg_intern(ctx, file ? file : "<input>");
    yaml_state *y = fg_xcalloc(1, sizeof *y);
    if (!yaml_parser_initialize(&y->p)) {
        free(y);
        free(d);
        return fg_diag_error(ctx, FG_ERR_NOMEM, FG_NOLOC, "cannot initialise the YAML parser");
    }
    fg_oom_defer(yaml_state_delete, y);   /* libyaml's memory, released if parsing unwinds (oom.h) */
    yaml_parser_set_input_string(&y->p, (const unsigned char *)text, len);
    while (!done) {
        if (!yaml_parser_parse(&y->p, &y->ev)) {
            st = parse_error(ctx, d, &y->p, text, len);
            break;
        }
        fg_ynode *n = NULL;
        const char *anchor_name = NULL;
        switch (y->ev.type) {
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        case YAML_SCALAR_EVENT:
            n = node_new(d, FG_YNODE_SCALAR, &y->ev.start_mark);
            n->str = fg_xstrndup((const char *)y->ev.data.scalar.value, y->ev.data.scalar.length);
            n->len = y->ev.data.scalar.length;
            switch (y->ev.data.scalar.style) {
            case YAML_SINGLE_QUOTED_SCALAR_STYLE: n->style = FG_YSTYLE_SINGLE; break;
            case YAML_DOUBLE_QUOTED_SCALAR_STYLE: n->style = FG_YSTYLE_DOUBLE; break;
            case YAML_LITERAL_SCALAR_STYLE:
            case YAML_FOLDED_SCALAR_STYLE: n->style = FG_YSTYLE_BLOCK; break;
            default: n->style = FG_YSTYLE_PLAIN; break;
            }
            anchor_name = (const char *)y->ev.data.scalar.anchor;
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (nstack >= FG_YAML_MAX_DEPTH) {
                fg_loc loc = {d->file, (int)y->ev.start_mark.line + 1, (int)y->ev.start_mark.column + 1};
                st = fg_diag_error(ctx, FG_ERR_INPUT, loc, "nested too deeply (more than %d levels of sequences "
                                   "and mappings)", FG_YAML_MAX_DEPTH);
                done = 1;
                break;
            }
            if (y->ev.type == YAML_SEQUENCE_START_EVENT) {
                n = node_new(d, FG_YNODE_SEQ, &y->ev.start_mark);
                anchor_name = (const char *)y->ev.data.sequence_start.anchor;
            } else {
                n = node_new(d, FG_YNODE_MAP, &y->ev.start_mark);
                anchor_name = (const char *)y->ev.data.mapping_start.anchor;
            }
            break;
        case YAML_ALIAS_EVENT: {
            const char *a = (const char *)y->ev.data.alias.anchor;
            anchor *an = NULL;
            HASH_FIND_STR(anchors, a, an);
            n = an ? an->node : NULL;
            fg_loc loc = {d->file, (int)y->ev.start_mark.line + 1, (int)y->ev.start_mark.column + 1};
            if (!n) {
                st = fg_diag_error(ctx, FG_ERR_INPUT, loc, "unknown alias '*%s'", a);
                done = 1;
                break;
            }
            expanded = sat_add(expanded, n->weight);
            if (expanded - nreal > FG_YAML_MAX_ALIAS_NODES) {
                st = fg_diag_error(ctx, FG_ERR_INPUT, loc, "aliases expand the document by more than %d nodes "
                                   "(alias '*%s')", FG_YAML_MAX_ALIAS_NODES, a);
                done = 1;
                n = NULL;
                break;
            }
            for (int i = 0; i < nstack; i++) {
                if (stack[i] == n) {
                    st = fg_diag_error(ctx, FG_ERR_INPUT, loc, "alias '*%s' refers to a collection that contains it",
                                       a);
                    done = 1;
                    n = NULL;
                    break;
                }
            }
            break;
        }
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            if (y->ev.type == YAML_MAPPING_END_EVENT)
                stack[nstack - 1]->n /= 2; /* items counted while building; pairs from now on */
            nstack--;
            if (nstack > 0)   /* a finished collection weighs in its parent */
                stack[nstack - 1]->weight = sat_add(stack[nstack - 1]->weight, stack[nstack]->weight);
            break;
        default:
            break;
        }
        if (n && y->ev.type != YAML_ALIAS_EVENT) {
            nreal++;
            expanded = sat_add(expanded, 1);
            n->weight = 1;
        }
        if (anchor_name && n) {
            anchor *an = NULL;
            HASH_FIND_STR(anchors, anchor_name, an);
            if (!an) {
                size_t k = strlen(anchor_name);
                an = fg_xmalloc(sizeof *an + k + 1);
                memcpy(an->name, anchor_name, k + 1);
                HASH_ADD(hh, anchors, name[0], k, an);
            }
            an->node = n;   /* a later anchor of the same name wins */
        }
        if (n) {
            if (nstack > 0) {
                node_push(stack[nstack - 1], n);
                /* a scalar or an alias weighs in now; a collection when it ends */
                if (y->ev.type == YAML_SCALAR_EVENT || y->ev.type == YAML_ALIAS_EVENT)
                    stack[nstack - 1]->weight = sat_add(stack[nstack - 1]->weight, n->weight);
            } else {
                *FG_PUSH(d->docs, d->ndocs, docs_cap) = n;
            }
            /* An alias to a container does not reopen it. */
            if (y->ev.type == YAML_SEQUENCE_START_EVENT || y->ev.type == YAML_MAPPING_START_EVENT)
                *FG_PUSH(stack, nstack, stack_cap) = n;
        }
        yaml_event_delete(&y->ev);
    }
    fg_oom_undefer(y);
    yaml_state_delete(y);
    free(y);
    anchor *an, *tmp;
    HASH_ITER(hh, anchors, an, tmp) {
        HASH_DEL(anchors, an);
        free(an);
    }
    free(stack);
    if (st != FG_OK) {
        fg_ydoc_free(d);
        return st;
    }
    *out = d;
    return FG_OK;
}

const fg_ynode *fg_ymap_key(const fg_ynode *map, const char *key)
{
    if (!map || map->kind != FG_YNODE_MAP)
        return NULL;
    for (int i = 0; i < map->n; i++) {
        const fg_ynode *k = FG_YKEY(map, i);
        if (k->kind == FG_YNODE_SCALAR && strcmp(k->str, key) == 0)
            return k;
    }
    return NULL;
}

const fg_ynode *fg_ymap_get(const fg_ynode *map, const char *key)
{
    if (!map || map->kind != FG_YNODE_MAP)
        return NULL;
    for (int i = 0; i < map->n; i++) {
        const fg_ynode *k = FG_YKEY(map, i);
        if (k->kind == FG_YNODE_SCALAR && strcmp(k->str, key) == 0)
            return FG_YVAL(map, i);
    }
    return NULL;
}

int fg_ynode_is_null(const fg_ynode *n)
{
    if (!n || n->kind != FG_YNODE_SCALAR || n->style != FG_YSTYLE_PLAIN)
        return 0;
    return n->len == 0 || !strcmp(n->str, "~") || !strcmp(n->str, "null") || !strcmp(n->str, "Null") ||
           !strcmp(n->str, "NULL");
}

fg_loc fg_ynode_text_loc(const fg_ynode *n)
{
    fg_loc l = n->loc;
    if (n->kind == FG_YNODE_SCALAR && (n->style == FG_YSTYLE_SINGLE || n->style == FG_YSTYLE_DOUBLE))
        l.col += 1;
    else if (n->kind == FG_YNODE_SCALAR && n->style == FG_YSTYLE_BLOCK)
        l.line += 1; /* block text starts on the line after the indicator */
    return l;
}

int fg_yscalar_int(const fg_ynode *n, int64_t *out)
{
    if (!n || n->kind != FG_YNODE_SCALAR || n->style != FG_YSTYLE_PLAIN || n->len == 0)
        return 0;
    const char *s = n->str;
    if (*s == '+' || *s == '-')
        s++;
    if (!isdigit((unsigned char)*s))
        return 0;
    for (const char *c = s; *c; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    errno = 0;
    long long v = strtoll(n->str, NULL, 10);
    if (errno)
        return 0;
    *out = v;
    return 1;
}

int fg_yscalar_float(const fg_ynode *n, double *out)
{
    if (!n || n->kind != FG_YNODE_SCALAR || n->style != FG_YSTYLE_PLAIN || n->len == 0)
        return 0;
    const char *s = n->str;
    if (!strcmp(s, ".inf") || !strcmp(s, "+.inf") || !strcmp(s, ".Inf")) {
        *out = INFINITY;
        return 1;
    }
    if (!strcmp(s, "-.inf") || !strcmp(s, "-.Inf")) {
        *out = -INFINITY;
        return 1;
    }
    if (!strcmp(s, ".nan") || !strcmp(s, ".NaN")) {
        *out = NAN;
        return 1;
    }
    /* Only decimal notation: no hex floats, no "inf"/"nan" words. */
    for (const char *c = s; *c; c++)
        if (!isdigit((unsigned char)*c) && !strchr("+-.eE", *c))
            return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE)
        return 0;
    *out = v;
    return 1;
}

int fg_yscalar_bool(const fg_ynode *n, int *out)
{
    if (!n || n->kind != FG_YNODE_SCALAR || n->style != FG_YSTYLE_PLAIN)
        return 0;
    const char *s = n->str;
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
        *out = 1;
        return 1;
    }
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) {
        *out = 0;
        return 1;
    }
    return 0;
}

const char *fg_ynode_describe(const fg_ynode *n, char *buf, size_t size)
{
    int64_t i;
    double f;
    int b;
    if (!n)
        snprintf(buf, size, "nothing");
    else if (n->kind == FG_YNODE_SEQ)
        snprintf(buf, size, "a sequence");
    else if (n->kind == FG_YNODE_MAP)
        snprintf(buf, size, "a mapping");
    else if (fg_ynode_is_null(n))
        snprintf(buf, size, "null");
    else if (fg_yscalar_int(n, &i))
        snprintf(buf, size, "integer %s", n->str);
    else if (fg_yscalar_float(n, &f))
        snprintf(buf, size, "float %s", n->str);
    else if (fg_yscalar_bool(n, &b))
        snprintf(buf, size, "bool %s", n->str);
    else
        snprintf(buf, size, "string '%.60s%s'", n->str, n->len > 60 ? "..." : "");
    return buf;
}

static int wrong_type(fg_context *ctx, const fg_ynode *n, const char *what, const char *type)
{
    char d[96];
    fg_diag_error(ctx, FG_ERR_INPUT, n->loc, "%s must be %s, got %s", what, type, fg_ynode_describe(n, d, sizeof d));
    return 0;
}

int fg_yget_int(fg_context *ctx, const fg_ynode *n, const char *what, int64_t *out)
{
    return fg_yscalar_int(n, out) ? 1 : wrong_type(ctx, n, what, "an integer");
}

int fg_yget_float(fg_context *ctx, const fg_ynode *n, const char *what, double *out)
{
    return fg_yscalar_float(n, out) ? 1 : wrong_type(ctx, n, what, "a number");
}

int fg_yget_bool(fg_context *ctx, const fg_ynode *n, const char *what, int *out)
{
    return fg_yscalar_bool(n, out) ? 1 : wrong_type(ctx, n, what, "true or false");
}

int fg_yget_str(fg_context *ctx, const fg_ynode *n, const char *what, const char **out)
{
    if (n->kind != FG_YNODE_SCALAR || fg_ynode_is_null(n))
        return wrong_type(ctx, n, what, "a string");
    *out = n->str;
    return 1;
}

int fg_yget_name(fg_context *ctx, const fg_ynode *n, const char *what, const char **out)
{
    if (n->kind != FG_YNODE_SCALAR || fg_ynode_is_null(n))
        return wrong_type(ctx, n, what, "a name");
    const char *s = n->str;
    int ok = isalpha((unsigned char)s[0]) || s[0] == '_';
    for (const char *c = s; ok && *c; c++)
        ok = isalnum((unsigned char)*c) || *c == '_' || *c == '.';
    if (!ok) {
        fg_diag_error(ctx, FG_ERR_INPUT, n->loc, "%s '%s' is not a valid name (letters, digits, '_' and '.')", what,
                      s);
        return 0;
    }
    *out = s;
    return 1;
}

int fg_yexpect(fg_context *ctx, const fg_ynode *n, fg_ykind kind, const char *what)
{
    if (n->kind == kind)
        return 1;
    return wrong_type(ctx, n, what, kind == FG_YNODE_MAP ? "a mapping" : kind == FG_YNODE_SEQ ? "a sequence" : "a scalar");
}

int fg_ycheck_keys(fg_context *ctx, const fg_ynode *map, const char *what, const char *const *allowed, int n)
{
    int errs = 0;
    if (map->kind != FG_YNODE_MAP)
        return 0;
    for (int i = 0; i < map->n; i++) {
        const fg_ynode *k = FG_YKEY(map, i);
        if (k->kind != FG_YNODE_SCALAR) {
            fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "a key in %s must be a plain name", what);
            errs++;
            continue;
        }
        int known = 0;
        for (int j = 0; j < n && !known; j++)
            known = strcmp(k->str, allowed[j]) == 0;
        if (!known) {
            const char *s = fg_suggest(k->str, allowed, n);
            if (s)
                fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "unknown key '%s' in %s (did you mean '%s'?)", k->str, what, s);
            else
                fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "unknown key '%s' in %s", k->str, what);
            errs++;
            continue;
        }
        for (int j = 0; j < i; j++) {
            const fg_ynode *o = FG_YKEY(map, j);
            if (o->kind == FG_YNODE_SCALAR && strcmp(o->str, k->str) == 0) {
                fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "duplicate key '%s' in %s (first at line %d)", k->str, what,
                              o->loc.line);
                errs++;
                break;
            }
        }
    }
    return errs;
}
