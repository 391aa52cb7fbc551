/*
 * opdef_load.c -- op definitions (`op:` documents of a rules directory):
 * name, kind, inputs, typed attributes with defaults, the expression and
 * the reduction where the op-kind table (kind.h) says the kind takes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kind.h"
#include "expr.h"
#include "load.h"

static const char *const op_keys[] = {"op", "kind", "inputs", "attrs", "expr", "reduce", "onnx", "dtype"};
static const char *const attr_keys[] = {"type", "len", "default"};
static const char *const input_keys[] = {"name", "optional", "per_channel"};

/* "2", "2 or 4", "1, 2 or 3": the lengths in the bit set lens, for messages. */
static const char *lens_text(unsigned lens, char *buf, size_t cap)
{
    int count = 0, seen = 0;
    size_t at = 0;
    buf[0] = 0;
    for (int n = 1; n <= FG_MAX_INTS; n++)
        count += (lens >> n) & 1u;
    for (int n = 1; n <= FG_MAX_INTS && at < cap; n++) {
        if (!((lens >> n) & 1u))
            continue;
        seen++;
        int w = snprintf(buf + at, cap - at, "%s%d", seen == 1 ? "" : seen == count ? " or " : ", ", n);
        if (w < 0)
            break;
        at += (size_t)w;
    }
    return buf;
}

int fg_attr_parse(fg_context *ctx, const fg_ynode *v, fg_attr_type type, unsigned lens, const char *what,
                  fg_attr_value *out)
{
    char d[96];
    memset(out, 0, sizeof *out);
    out->type = type;
    switch (type) {
    case FG_ATTR_INT:
    case FG_ATTR_BOOL: {
        int b;
        if (type == FG_ATTR_INT ? fg_yscalar_int(v, &out->i) : (fg_yscalar_bool(v, &b) && ((out->i = b), 1))) {
            out->f = (double)out->i;
            return 1;
        }
        break;
    }
    case FG_ATTR_FLOAT:
        if (fg_yscalar_float(v, &out->f))
            return 1;
        break;
    case FG_ATTR_STRING:
        if (v->kind == FG_YNODE_SCALAR && !fg_ynode_is_null(v)) {
            out->s = fg_intern(ctx, v->str);
            return 1;
        }
        break;
    case FG_ATTR_INTS:
        if (v->kind != FG_YNODE_SEQ)
            break;
        if (v->n < 1 || v->n > FG_MAX_INTS) {
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "%s must have 1 to %d values, got %d", what, FG_MAX_INTS, v->n);
            return 0;
        }
        for (int i = 0; i < v->n; i++) {
            if (!fg_yscalar_int(v->items[i], &out->ints[i])) {
                fg_diag_error(ctx, FG_ERR_INPUT, v->items[i]->loc, "%s must be ints, got %s in the list", what,
                              fg_ynode_describe(v->items[i], d, sizeof d));
                return 0;
            }
        }
        out->n = v->n;
        if (lens && !((lens >> v->n) & 1u)) {
            char t[64];
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "%s must have %s values, got %d", what,
                          lens_text(lens, t, sizeof t), v->n);
            return 0;
        }
        return 1;
    default:
        break;
    }
    fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "%s must be %s, got %s", what, fg_attr_type_name(type),
                  fg_ynode_describe(v, d, sizeof d));
    return 0;
}

static int parse_kind(fg_context *ctx, const fg_ynode *v, fg_op_kind *out)
{
    const char *s;
    const char *names[FG_OPK_COUNT];
    if (!fg_yget_str(ctx, v, "kind", &s))
        return 0;
    int k = fg_kind_find(s);
    if (k >= 0) {
        *out = (fg_op_kind)k;
        return 1;
    }
    for (k = 0; k < FG_OPK_COUNT; k++)
        names[k] = fg_op_kind_name((fg_op_kind)k);
    const char *sug = fg_suggest(s, names, FG_OPK_COUNT);
    char all[256];
    if (sug)
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "unknown op kind '%s' (did you mean '%s'?)", s, sug);
    else
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "unknown op kind '%s' (expected %s)", s,
                      fg_kinds_text(fg_kinds_with(0), " or ", all, sizeof all));
    return 0;
}

/* Nonzero when name is already an input or attribute of op. */
static int name_taken(const fg_opdef *op, const char *name)
{
    for (int i = 0; i < op->ninputs; i++)
        if (op->inputs[i].name && strcmp(op->inputs[i].name, name) == 0)
            return 1;
    for (int i = 0; i < op->nattrs; i++)
        if (op->attrs[i].name && strcmp(op->attrs[i].name, name) == 0)
            return 1;
    return 0;
}

/* One entry of `inputs:`: `x`, `bias?` or {name:, optional:, per_channel:}. */
static void parse_input(fg_context *ctx, fg_opdef *op, const fg_ynode *v)
{
    fg_input_def in = {0};
    const char *name = NULL;
    const fg_ynode *at = v;
    if (v->kind == FG_YNODE_SCALAR && !fg_ynode_is_null(v)) {
        size_t n = strlen(v->str);
        char *tmp = fg_xstrdup(v->str);
        if (n > 1 && tmp[n - 1] == '?') {
            tmp[n - 1] = 0;
            in.optional = 1;
        }
        fg_ynode fake = *v;
        fake.str = tmp;
        fake.len = strlen(tmp);
        if (fg_yget_name(ctx, &fake, "input", &name))
            in.name = fg_intern(ctx, name);
        free(tmp);
    } else if (v->kind == FG_YNODE_MAP) {
        fg_ycheck_keys(ctx, v, "an input", input_keys, (int)FG_COUNTOF(input_keys));
        const fg_ynode *nm = fg_ymap_get(v, "name"), *o = fg_ymap_get(v, "optional"),
                       *pc = fg_ymap_get(v, "per_channel");
        if (!nm)
            fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "input of op '%s' has no `name`", op->name);
        else if (fg_yget_name(ctx, nm, "input name", &name))
            in.name = fg_intern(ctx, name), at = nm;
        if (o)
            fg_yget_bool(ctx, o, "optional", &in.optional);
        if (pc)
            fg_yget_bool(ctx, pc, "per_channel", &in.per_channel);
    } else {
        char d[96];
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "an input must be a name or a mapping, got %s",
                      fg_ynode_describe(v, d, sizeof d));
    }
    if (!in.name)
        return;
    if (name_taken(op, in.name)) {
        fg_diag_error(ctx, FG_ERR_INPUT, at->loc, "op '%s' has two inputs named '%s'", op->name, in.name);
        return;
    }
    if (op->ninputs >= FG_MAX_INPUTS) {
        fg_diag_error(ctx, FG_ERR_INPUT, at->loc, "op '%s' has more than %d inputs", op->name, FG_MAX_INPUTS);
        return;
    }
    op->inputs[op->ninputs++] = in;
}

static int parse_attr_type(fg_context *ctx, const fg_ynode *v, fg_attr_type *out)
{
    const char *s;
    const char *names[FG_ATTR_TYPE_COUNT];
    if (!fg_yget_str(ctx, v, "attribute type", &s))
        return 0;
    for (int t = 0; t < FG_ATTR_TYPE_COUNT; t++) {
        names[t] = fg_attr_type_name((fg_attr_type)t);
        if (strcmp(s, names[t]) == 0) {
            *out = (fg_attr_type)t;
            return 1;
        }
    }
    const char *sug = fg_suggest(s, names, FG_ATTR_TYPE_COUNT);
    if (sug)
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "unknown attribute type '%s' (did you mean '%s'?)", s, sug);
    else
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "unknown attribute type '%s' (expected int, float, bool, ints or string)",
                      s);
    return 0;
}

/* `len:` of an ints attribute: one length, `len: 2`, or a list of allowed
 * lengths, `len: [2, 4]`, each 1..FG_MAX_INTS, into the bit set *lens.
 * not_ints: the attribute's type is known and is not ints (an error). */
static int parse_lens(fg_context *ctx, const fg_ynode *len, int not_ints, unsigned *lens)
{
    char d[96];
    const fg_ynode *one = len;
    int count = len->kind == FG_YNODE_SEQ ? len->n : 1;
    *lens = 0;
    if (not_ints) {
        fg_diag_error(ctx, FG_ERR_INPUT, len->loc, "`len` is only for ints attributes");
        return 0;
    }
    if (len->kind == FG_YNODE_SEQ && len->n == 0) {
        fg_diag_error(ctx, FG_ERR_INPUT, len->loc, "len must be a length or a list of lengths, got an empty list");
        return 0;
    }
    for (int i = 0; i < count; i++) {
        int64_t n;
        if (len->kind == FG_YNODE_SEQ)
            one = len->items[i];
        if (one->kind != FG_YNODE_SCALAR || !fg_yscalar_int(one, &n)) {
            fg_diag_error(ctx, FG_ERR_INPUT, one->loc, "len must be a length or a list of lengths, got %s",
                          fg_ynode_describe(one, d, sizeof d));
            return 0;
        }
        if (n < 1 || n > FG_MAX_INTS) {
            fg_diag_error(ctx, FG_ERR_INPUT, one->loc, "len must be between 1 and %d, got %lld", FG_MAX_INTS,
                          (long long)n);
            return 0;
        }
        if ((*lens >> n) & 1u) {
            fg_diag_error(ctx, FG_ERR_INPUT, one->loc, "len %lld listed twice", (long long)n);
            return 0;
        }
        *lens |= 1u << n;
    }
    return 1;
}

/* One pair of `attrs:`: name -> {type:, len:, default:}. */
static void parse_attr(fg_context *ctx, fg_opdef *op, const fg_ynode *k, const fg_ynode *v)
{
    fg_attr_def a = {0};
    const char *name;
    char what[160];
    if (!fg_yget_name(ctx, k, "attribute", &name))
        return;
    a.name = fg_intern(ctx, name);
    if (!fg_yexpect(ctx, v, FG_YNODE_MAP, "an attribute definition"))
        return;
    fg_ycheck_keys(ctx, v, "an attribute definition", attr_keys, (int)FG_COUNTOF(attr_keys));
    const fg_ynode *t = fg_ymap_get(v, "type"), *len = fg_ymap_get(v, "len"), *def = fg_ymap_get(v, "default");
    int ok = 1;
    if (!t) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "attribute '%s' of op '%s' has no `type`", a.name, op->name);
        ok = 0;
    } else {
        ok = parse_attr_type(ctx, t, &a.type);
    }
    if (len)
        ok = parse_lens(ctx, len, ok && a.type != FG_ATTR_INTS, &a.lens) && ok;
    if (ok && def) {
        snprintf(what, sizeof what, "default of attribute '%s'", a.name);
        ok = fg_attr_parse(ctx, def, a.type, a.lens, what, &a.def);
    } else if (ok) {
        a.required = 1;
        a.def.type = a.type;
    }
    if (!ok)
        return;
    if (name_taken(op, a.name)) {
        fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "op '%s' already has an input or attribute named '%s'", op->name,
                      a.name);
        return;
    }
    if (op->nattrs >= FG_MAX_ATTRS) {
        fg_diag_error(ctx, FG_ERR_INPUT, k->loc, "op '%s' has more than %d attributes", op->name, FG_MAX_ATTRS);
        return;
    }
    op->attrs[op->nattrs++] = a;
}

/* Input counts each kind needs (the shape rules of shape.c read inputs by
 * position). */
static void check_inputs(fg_context *ctx, fg_opdef *op, fg_loc loc)
{
    const fg_kind_info *ki = fg_kind(op->kind);
    int lo = ki->min_inputs, hi = ki->max_inputs;
    const char *form = ki->inputs_form;
    int required = 0;
    for (int i = 0; i < op->ninputs; i++)
        required += !op->inputs[i].optional;
    if (op->ninputs < lo || op->ninputs > hi || required < lo || (op->ninputs > 0 && op->inputs[0].optional))
        fg_diag_error(ctx, FG_ERR_INPUT, loc, "op '%s' of kind %s needs %s, got %d input%s", op->name,
                      fg_op_kind_name(op->kind), form, op->ninputs, op->ninputs == 1 ? "" : "s");
    for (int i = 0; i + 1 < op->ninputs; i++)
        if (op->inputs[i].optional && !op->inputs[i + 1].optional) {
            fg_diag_error(ctx, FG_ERR_INPUT, loc, "op '%s': optional input '%s' must come after the required ones",
                          op->name, op->inputs[i].name);
            break;
        }
}

/* `onnx: Type`: the ONNX operator (of the default domain) that the importer
 * maps one-to-one onto op (docs/onnx.md, "Operators as data"): only for the
 * element-wise kinds, whose expression also folds constant inputs; Type is an
 * operator name as ONNX writes them (letters and digits, a letter first). */
static void parse_onnx(fg_context *ctx, fg_opdef *op, const fg_ynode *v, fg_loc keyloc, int kind_ok)
{
    const char *s;
    if (kind_ok && !(fg_kind(op->kind)->traits & FG_KIND_EXPR)) {
        char kinds[160];
        fg_diag_error(ctx, FG_ERR_INPUT, keyloc, "`onnx` is only for %s ops (a one-to-one element-wise operator)",
                      fg_kinds_text(fg_kinds_with(FG_KIND_EXPR), " and ", kinds, sizeof kinds));
        return;
    }
    if (!fg_yget_str(ctx, v, "onnx", &s))
        return;
    int ok = s[0] && ((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')) && strlen(s) <= 64;
    for (const char *c = s; ok && *c; c++)
        ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9');
    if (!ok) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc,
                      "`onnx` must name an ONNX operator (letters and digits, a letter first, as 'Relu'), got '%.80s'", s);
        return;
    }
    op->onnx = fg_intern(ctx, s);
}

/* `dtype: D` (element-wise kinds): the output's element type is D, a dtype
 * name (fg_dtype_name); or the type of the input named D; or the value of
 * the string attribute named D (a dtype name, checked on each node). */
static void parse_dtype(fg_context *ctx, fg_opdef *op, const fg_ynode *v, fg_loc keyloc, int kind_ok)
{
    const char *s;
    int reduce = kind_ok && op->kind == FG_OPK_REDUCE;   /* a fixed dtype only (argmax: int64) */
    if (kind_ok && !reduce && !(fg_kind(op->kind)->traits & FG_KIND_EXPR) && op->kind != FG_OPK_POINTWISE) {
        fg_diag_error(ctx, FG_ERR_INPUT, keyloc, "`dtype` is only for element-wise and reduce ops");
        return;
    }
    if (!fg_yget_str(ctx, v, "dtype", &s))
        return;
    for (int t = 0; t < FG_DTYPE_COUNT; t++)
        if (strcmp(s, fg_dtype_name((fg_dtype)t)) == 0) {
            op->dtype_fixed = t;
            return;
        }
    if (reduce) {
        fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "`dtype` of a reduce op must be a dtype (fp32, fp16, bf16, int64, "
                      "int32, bool), got '%.80s'", s);
        return;
    }
    for (int i = 0; i < op->ninputs; i++)
        if (strcmp(s, op->inputs[i].name) == 0) {
            op->dtype_input = i;
            return;
        }
    for (int a = 0; a < op->nattrs; a++)
        if (strcmp(s, op->attrs[a].name) == 0) {
            if (op->attrs[a].type != FG_ATTR_STRING)
                fg_diag_error(ctx, FG_ERR_INPUT, v->loc, "`dtype: %s` names attribute '%s', which is not a string",
                              s, s);
            else
                op->dtype_attr = a;
            return;
        }
    fg_diag_error(ctx, FG_ERR_INPUT, v->loc,
                  "`dtype` must be a dtype (fp32, fp16, bf16, int64, int32, bool), an input or a string attribute "
                  "of op '%s', got '%.80s'", op->name, s);
}

fg_status fg_opdef_load(fg_context *ctx, const fg_ynode *map, uint64_t file_hash)
{
    int errs0 = ctx->nerrors;
    const char *name;
    fg_opdef *op = fg_xcalloc(1, sizeof *op);
    const fg_ynode *namev = fg_ymap_get(map, "op");

    fg_ycheck_keys(ctx, map, "an op definition", op_keys, (int)FG_COUNTOF(op_keys));
    op->loc = fg_ymap_key(map, "op")->loc;
    op->file_hash = file_hash;
    op->dtype_fixed = op->dtype_input = op->dtype_attr = -1;
    if (fg_yget_name(ctx, namev, "op name", &name))
        op->name = fg_intern(ctx, name);
    else
        op->name = fg_intern(ctx, "?");

    const fg_ynode *kind = fg_ymap_get(map, "kind");
    int kind_ok = 0;
    if (!kind)
        fg_diag_error(ctx, FG_ERR_INPUT, op->loc, "op '%s' has no `kind`", op->name);
    else
        kind_ok = parse_kind(ctx, kind, &op->kind);

    const fg_ynode *inputs = fg_ymap_get(map, "inputs");
    if (inputs) {
        if (fg_yexpect(ctx, inputs, FG_YNODE_SEQ, "inputs"))
            for (int i = 0; i < inputs->n; i++)
                parse_input(ctx, op, inputs->items[i]);
    } else {
        op->inputs[0].name = fg_intern(ctx, "x");
        op->ninputs = 1;
    }
    if (kind_ok)
        check_inputs(ctx, op, inputs ? inputs->loc : op->loc);

    const fg_ynode *attrs = fg_ymap_get(map, "attrs");
    if (attrs && !fg_ynode_is_null(attrs) && fg_yexpect(ctx, attrs, FG_YNODE_MAP, "attrs"))
        for (int i = 0; i < attrs->n; i++)
            parse_attr(ctx, op, FG_YKEY(attrs, i), FG_YVAL(attrs, i));

    const fg_ynode *reduce = fg_ymap_get(map, "reduce");
    if (kind_ok && fg_kind(op->kind)->reductions) {
        const char *r, *def = fg_kind(op->kind)->reduce_default;
        char allowed[160];
        fg_kind_reductions_text(op->kind, allowed, sizeof allowed);
        if (!reduce && def)
            op->reduce = fg_intern(ctx, def);
        else if (!reduce)
            fg_diag_error(ctx, FG_ERR_INPUT, op->loc, "%s op '%s' has no `reduce` (%s)", fg_op_kind_name(op->kind),
                          op->name, allowed);
        else if (fg_yget_str(ctx, reduce, "reduce", &r)) {
            if (!fg_kind_reduction_ok(op->kind, r))
                fg_diag_error(ctx, FG_ERR_INPUT, reduce->loc, "reduce must be %s, got '%s'", allowed, r);
            else
                op->reduce = fg_intern(ctx, r);
        }
    } else if (kind_ok && reduce) {
        char kinds[160];
        fg_diag_error(ctx, FG_ERR_INPUT, fg_ymap_key(map, "reduce")->loc, "`reduce` is only for %s ops",
                      fg_kinds_text(fg_kinds_reducing(), " and ", kinds, sizeof kinds));
    }

    const fg_ynode *expr = fg_ymap_get(map, "expr");
    int wants_expr = kind_ok && (fg_kind(op->kind)->traits & FG_KIND_EXPR);
    if (wants_expr && !expr) {
        fg_diag_error(ctx, FG_ERR_INPUT, op->loc, "%s op '%s' has no `expr`", fg_op_kind_name(op->kind), op->name);
    } else if (kind_ok && !wants_expr && expr) {
        char kinds[160];
        fg_diag_error(ctx, FG_ERR_INPUT, fg_ymap_key(map, "expr")->loc, "`expr` is only for %s ops",
                      fg_kinds_text(fg_kinds_with(FG_KIND_EXPR), " and ", kinds, sizeof kinds));
    } else if (expr) {
        const char *src;
        if (fg_yget_str(ctx, expr, "expr", &src)) {
            /* the text is quoted in comments of generated source: one line */
            char *flat = fg_xstrdup(src);
            for (char *c = flat; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                    *c = ' ';
            op->expr_src = fg_intern(ctx, flat);
            free(flat);
            if (ctx->nerrors == errs0) {
                const char *vars[FG_MAX_INPUTS + FG_MAX_ATTRS];
                int nv = 0;
                for (int i = 0; i < op->ninputs; i++)
                    vars[nv++] = op->inputs[i].name;
                for (int i = 0; i < op->nattrs; i++)
                    vars[nv++] = op->attrs[i].name;
                op->expr = fg_expr_parse(ctx, src, fg_ynode_text_loc(expr), vars, nv);
                if (!op->expr && ctx->nerrors == errs0)
                    fg_diag_error(ctx, FG_ERR_INPUT, fg_ynode_text_loc(expr), "invalid expression");
            }
        }
    }

    const fg_ynode *onnx = fg_ymap_get(map, "onnx");
    if (onnx)
        parse_onnx(ctx, op, onnx, fg_ymap_key(map, "onnx")->loc, kind_ok);
    const fg_ynode *dtype = fg_ymap_get(map, "dtype");
    if (dtype)
        parse_dtype(ctx, op, dtype, fg_ymap_key(map, "dtype")->loc, kind_ok);

    if (ctx->nerrors != errs0) {
        fg_expr_free(op->expr);
        free(op);
        return FG_ERR_INPUT;
    }
    return fg_ctx_add_op(ctx, op);
}
