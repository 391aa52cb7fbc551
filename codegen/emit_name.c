/*
 * emit_name.c -- a kernel's name and identity from what it computes.
 *
 * Two groups that compute the same thing on the same shapes (the repeated
 * blocks of a ResNet, the layers of a transformer) render sources that
 * differ only in comments, in their parameters' names (taken from tensor
 * names) and in the entry point's name.  The canonical text of a source
 * drops exactly those: comments are removed, runs of white space become one
 * space, the entry point becomes `@K` (also inside identifiers such as its
 * params struct's name) and parameter i becomes `@Pi`.  Its
 * hash names the kernel (`fg_<rule>_<12 hex digits>`) and stands for the
 * source in the cache key, so identical groups share one entry point, one
 * cache entry and one compile, in one plan and across models.
 *
 * Equal canonical texts mean the sources are the same program up to a
 * consistent renaming of the parameter identifiers (a parameter token of
 * one can only face a parameter token of the other), which changes nothing
 * a compiler produces for the kernel.
 */
#include "emit_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static int ident_start(int c) { return isalpha(c) || c == '_'; }
static int ident_char(int c) { return isalnum(c) || c == '_'; }

/* Appends identifier [s, s+n) with every occurrence of `from` in it (the
 * entry point, also inside `fg_params_<entry point>`) replaced by `to`. */
static void put_renamed(fg_buf *out, const char *s, size_t n, const char *from, const char *to)
{
    size_t nf = strlen(from);
    while (n) {
        if (nf && n >= nf && memcmp(s, from, nf) == 0) {
            fg_buf_put(out, to);
            s += nf;
            n -= nf;
        } else {
            fg_buf_putn(out, s++, 1);
            n--;
        }
    }
}

/* The index of the parameter named [s, s+n) in k, or -1. */
static int param_index(const fg_kernel *k, const char *s, size_t n)
{
    for (int i = 0; i < k->nparams; i++)
        if (strlen(k->params[i].name) == n && memcmp(k->params[i].name, s, n) == 0)
            return i;
    return -1;
}

void fg_kernel_canonical(const fg_kernel *k, fg_buf *out)
{
    const char *p = k->source ? k->source : "";
    int space = 0;
    while (*p) {
        if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                p++;
            space = 1;
            continue;
        }
        if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
            space = 1;
            continue;
        }
        if (isspace((unsigned char)*p)) {
            space = 1;
            p++;
            continue;
        }
        if (space && out->len)
            fg_buf_put(out, " ");
        space = 0;
        if (ident_start((unsigned char)*p)) {
            const char *s = p;
            while (ident_char((unsigned char)*p))
                p++;
            int i = param_index(k, s, (size_t)(p - s));
            if (i >= 0)
                fg_buf_printf(out, "@P%d", i);
            else
                put_renamed(out, s, (size_t)(p - s), k->name, "@K");
            continue;
        }
        if (isdigit((unsigned char)*p)) {   /* a number, suffix included: never an identifier's tail */
            const char *s = p;
            while (ident_char((unsigned char)*p) || *p == '.')
                p++;
            fg_buf_putn(out, s, (size_t)(p - s));
            continue;
        }
        fg_buf_putn(out, p, 1);
        p++;
    }
}

/* src with `from` replaced by `to` in every identifier; a new string. */
static char *rename_token(const char *src, const char *from, const char *to)
{
    fg_buf b = {0};
    const char *p = src;
    while (*p) {
        if (ident_start((unsigned char)*p) || isdigit((unsigned char)*p)) {
            const char *s = p;
            while (ident_char((unsigned char)*p))
                p++;
            put_renamed(&b, s, (size_t)(p - s), from, to);
            continue;
        }
        fg_buf_putn(&b, p, 1);
        p++;
    }
    return fg_buf_take(&b);
}

void fg_kernel_source_hash(const fg_kernel *k, char hex[33])
{
    fg_buf canon = {0};
    fg_kernel_canonical(k, &canon);
    fg_hash128_hex(fg_hash128_of(canon.s ? canon.s : "", canon.len), hex);
    fg_buf_free(&canon);
}

void fg_kernel_name_by_content(fg_kernel *k, const char *base)
{
    char hex[33], name[sizeof k->name];
    fg_kernel_source_hash(k, hex);
    snprintf(name, sizeof name, "fg_%s_%.12s", base, hex);
    char *renamed = rename_token(k->source, k->name, name);
    free(k->source);
    k->source = renamed;
    snprintf(k->name, sizeof k->name, "%s", name);
}
