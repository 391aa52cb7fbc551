/*
 * emit_render.c -- template text: the embedded template files and the
 * placeholders each uses (found in the files at embed time,
 * cmake/embed.cmake), the emitter's dictionary (placeholder -> text) and
 * rendering of {{X}} placeholders and {{#X}} / {{^X}} sections.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded.h"
#include "emit_impl.h"

/* ---- template files and their placeholders -------------------------------- */

const char *const *fg_template_placeholders(const char *file)
{
    const fg_embedded_file *f = fg_embedded_find(file);
    return f ? f->placeholders : NULL;
}

const char *const *fg_template_files(void) { return fg_embedded_kernel_templates; }

const char *fg_template_text(const char *name)
{
    const fg_embedded_file *f = fg_embedded_find(name);
    return f ? f->text : NULL;
}

void fg_em_set(fg_emitter *em, const char *name, const char *fmt, ...)
{
    fg_buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    fg_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    for (int i = 0; i < em->nvars; i++)
        if (strcmp(em->vars[i].name, name) == 0) {
            free(em->vars[i].value);
            em->vars[i].value = fg_buf_take(&b);
            return;
        }
    if (em->nvars == FG_EM_MAX_VARS) {
        fg_em_fail(em, "more than %d placeholders", FG_EM_MAX_VARS);
        fg_buf_free(&b);
        return;
    }
    em->vars[em->nvars].name = name;
    em->vars[em->nvars].value = fg_buf_take(&b);
    em->nvars++;
}

static const char *em_get(const fg_emitter *em, const char *name, size_t len)
{
    for (int i = 0; i < em->nvars; i++)
        if (strlen(em->vars[i].name) == len && memcmp(em->vars[i].name, name, len) == 0)
            return em->vars[i].value;
    return NULL;
}

/* ---- rendering -------------------------------------------------------------- */

static int is_name_char(int ch) { return isupper(ch) || isdigit(ch) || ch == '_'; }

/* Parses a tag `{{X}}` at s (s points at "{{"): sets kind ('#', '^', '/', or
 * 0), the name, and returns the tag length, or 0 when malformed. */
static size_t parse_tag(const char *s, char *kind, const char **name, size_t *nlen)
{
    const char *q = s + 2;
    *kind = 0;
    if (*q == '#' || *q == '^' || *q == '/')
        *kind = *q++;
    *name = q;
    while (is_name_char((unsigned char)*q))
        q++;
    *nlen = (size_t)(q - *name);
    if (*nlen == 0 || q[0] != '}' || q[1] != '}')
        return 0;
    return (size_t)(q + 2 - s);
}

fg_status fg_em_render(fg_emitter *em, const char *tname, const char *text, fg_buf *out)
{
    int keep[16], depth = 0, line = 1;
    const char *opened[16];
    size_t openlen[16];
    keep[0] = 1;
    const char *s = text;
    while (*s) {
        const char *eol = strchr(s, '\n');
        size_t len = eol ? (size_t)(eol - s) : strlen(s);
        /* a section tag alone on its line */
        const char *t = s;
        while (t < s + len && (*t == ' ' || *t == '\t'))
            t++;
        char kind;
        const char *name;
        size_t nlen, tl = 0;
        if (t + 2 < s + len && t[0] == '{' && t[1] == '{')
            tl = parse_tag(t, &kind, &name, &nlen);
        if (tl && kind) {
            const char *rest = t + tl;
            while (rest < s + len && (*rest == ' ' || *rest == '\t'))
                rest++;
            if (rest != s + len)
                return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: section tag must stand alone", tname, line);
            if (kind == '/') {
                if (depth == 0 || openlen[depth] != nlen || memcmp(opened[depth], name, nlen) != 0)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: unmatched {{/%.*s}}", tname, line,
                                       (int)nlen, name);
                depth--;
            } else {
                if (depth == 15)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: sections nested too deep", tname, line);
                const char *v = em_get(em, name, nlen);
                if (!v)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: no value for placeholder {{%.*s}}",
                                       tname, line, (int)nlen, name);
                int truthy = v[0] && strcmp(v, "0") != 0;
                depth++;
                opened[depth] = name;
                openlen[depth] = nlen;
                keep[depth] = keep[depth - 1] && (kind == '#' ? truthy : !truthy);
            }
        } else if (keep[depth] && tl && !kind && t + tl == s + len && em_get(em, name, nlen) &&
                   !*em_get(em, name, nlen)) {
            /* a line holding only an empty placeholder disappears */
        } else if (keep[depth]) {
            const char *q = s;
            while (q < s + len) {
                const char *o = strstr(q, "{{");
                if (!o || o >= s + len) {
                    fg_buf_putn(out, q, (size_t)(s + len - q));
                    break;
                }
                fg_buf_putn(out, q, (size_t)(o - q));
                size_t l = parse_tag(o, &kind, &name, &nlen);
                if (!l || kind)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: malformed placeholder", tname, line);
                const char *v = em_get(em, name, nlen);
                if (!v)
                    return fg_em_error(em, FG_ERR_INTERNAL, "template %s:%d: no value for placeholder {{%.*s}}",
                                       tname, line, (int)nlen, name);
                fg_buf_put(out, v);
                q = o + l;
            }
            if (eol)
                fg_buf_put(out, "\n");
        }
        s += len + (eol ? 1 : 0);
        line++;
    }
    if (depth)
        return fg_em_error(em, FG_ERR_INTERNAL, "template %s: section {{%.*s}} not closed", tname, (int)openlen[depth],
                           opened[depth]);
    return FG_OK;
}
