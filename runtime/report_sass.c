/*
 * report_sass.c -- fields and opcode counts from the text NVIDIA's tools
 * print (report_sass.h).
 */
#include "report_sass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Value of "KEY<n>" within line [s, end), or -1. */
static int field(const char *s, const char *end, const char *key)
{
    size_t len = strlen(key);
    for (const char *p = s; p + len <= end; p++) {
        if (memcmp(p, key, len) == 0 && (p == s || p[-1] == ' ' || p[-1] == '\t')) {
            char *e;
            long v = strtol(p + len, &e, 10);
            return e != p + len && v >= 0 && v < (1L << 30) ? (int)v : -1;
        }
    }
    return -1;
}

int fg_res_usage_parse(const char *text, const char *name, fg_res_usage *r)
{
    r->registers = r->stack = r->shared = r->local = -1;
    if (!text)
        return -1;
    const char *line = NULL, *first = NULL;
    for (const char *s = strstr(text, " Function "); s; s = strstr(s + 1, " Function ")) {
        const char *nm = s + strlen(" Function ");
        size_t len = strcspn(nm, ":\n");
        if (nm[len] != ':')
            continue;
        const char *next = strchr(nm, '\n');
        if (!next)
            break;
        if (!first)
            first = next + 1;
        if (name && strlen(name) == len && memcmp(nm, name, len) == 0) {
            line = next + 1;
            break;
        }
    }
    if (!line)
        line = first;
    if (!line)
        return -1;
    const char *end = line + strcspn(line, "\n");
    r->registers = field(line, end, "REG:");
    r->stack = field(line, end, "STACK:");
    r->shared = field(line, end, "SHARED:");
    r->local = field(line, end, "LOCAL:");
    return r->registers < 0 ? -1 : 0;
}

/* The opcode of one SASS line ("LDG.E.128.CONSTANT"), or 0 when the line
 * holds no instruction: an instruction line starts with an address comment
 * (a slash, a star and hex digits), then an optional predicate. */
static size_t opcode_at(const char *line, const char *end, const char **op)
{
    const char *s = line;
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    if (end - s < 4 || s[0] != '/' || s[1] != '*')
        return 0;
    const char *c = strstr(s + 2, "*/");
    if (!c || c >= end)
        return 0;
    for (const char *h = s + 2; h < c; h++)
        if (!strchr("0123456789abcdefABCDEF", *h))
            return 0;
    s = c + 2;
    while (s < end && (*s == ' ' || *s == '\t' || *s == '{'))
        s++;
    if (s < end && *s == '@') {
        while (s < end && *s != ' ' && *s != '\t')
            s++;
        while (s < end && (*s == ' ' || *s == '\t'))
            s++;
    }
    size_t len = 0;
    while (s + len < end && s[len] != ' ' && s[len] != '\t' && s[len] != ';')
        len++;
    if (len == 0 || s[0] < 'A' || s[0] > 'Z')
        return 0;
    *op = s;
    return len;
}

/* Whether opcode [op, op+len) is base (followed by '.' or its end). */
static int is(const char *op, size_t len, const char *base)
{
    size_t b = strlen(base);
    return len >= b && memcmp(op, base, b) == 0 && (len == b || op[b] == '.');
}

/* Whether the opcode carries the modifier mod (".128"). */
static int has_mod(const char *op, size_t len, const char *mod)
{
    size_t m = strlen(mod);
    for (size_t i = 0; i + m <= len; i++)
        if (memcmp(op + i, mod, m) == 0 && (i + m == len || op[i + m] == '.'))
            return 1;
    return 0;
}

void fg_sass_mix_count(const char *sass, fg_sass_mix *m)
{
    memset(m, 0, sizeof *m);
    if (!sass)
        return;
    for (const char *line = sass; *line;) {
        const char *end = line + strcspn(line, "\n");
        const char *op;
        size_t len = opcode_at(line, end, &op);
        if (len) {
            m->instructions++;
            if (is(op, len, "HMMA"))
                m->hmma++;
            else if (is(op, len, "HGMMA"))
                m->hgmma++;
            else if (is(op, len, "LDG"))
                m->ldg128 += has_mod(op, len, ".128");
            else if (is(op, len, "STG"))
                m->stg128 += has_mod(op, len, ".128");
            else if (is(op, len, "LDGSTS"))
                m->ldgsts++;
            else if (is(op, len, "UTMALDG"))
                m->utmaldg++;
            else if (is(op, len, "LDSM"))
                m->ldsm++;
            else if (is(op, len, "LDL"))
                m->ldl++;
            else if (is(op, len, "STL"))
                m->stl++;
        }
        line = *end ? end + 1 : end;
    }
}

/* Opcodes that may touch global memory, and those that leave the straight
 * line, for fg_sass_grid_dep_scan. */
static const char *const global_ops[] = {"LDG",    "STG",    "LD",     "ST",      "ATOM",   "ATOMG", "RED",
                                         "LDGSTS", "UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "UTMACCTL",
                                         "UBLKCP", "UBLKRED", "UBLKPF", "CCTL",    "SULD",   "SUST",  "SURED",
                                         "SUATOM", "TLD",    "TEX"};
static const char *const flow_ops[] = {"BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "BSSY", "BREAK"};

void fg_sass_grid_dep_scan(const char *sass, fg_sass_grid_dep *g)
{
    memset(g, 0, sizeof *g);
    for (const char *line = sass ? sass : ""; *line;) {
        const char *end = line + strcspn(line, "\n");
        const char *op;
        size_t len = opcode_at(line, end, &op);
        if (len && is(op, len, "ACQBULK")) {
            g->waits++;
        } else if (len && is(op, len, "PREEXIT")) {
            g->launches++;
        } else if (len && !g->waits && !g->before_wait[0]) {
            int hit = 0;
            for (size_t i = 0; i < FG_COUNTOF(global_ops) && !hit; i++)
                hit = is(op, len, global_ops[i]);
            for (size_t i = 0; i < FG_COUNTOF(flow_ops) && !hit; i++)
                hit = is(op, len, flow_ops[i]);
            if (hit)
                snprintf(g->before_wait, sizeof g->before_wait, "%.*s", (int)len, op);
        }
        line = *end ? end + 1 : end;
    }
}

int fg_ptxas_spills_parse(const char *log, const char *name, int *stack, int *spill_stores, int *spill_loads)
{
    *stack = *spill_stores = *spill_loads = -1;
    if (!log || !name)
        return -1;
    char head[160];
    snprintf(head, sizeof head, "Function properties for %s\n", name);
    const char *s = strstr(log, head);
    if (!s)
        return -1;
    s += strlen(head);
    const char *f = strstr(s, "bytes stack frame");
    const char *end = s + strcspn(s, "\n");
    if (!f || f > end)
        return -1;
    const char *num = f;
    while (num > s && (num[-1] == ' ' || (num[-1] >= '0' && num[-1] <= '9')))
        num--;
    int a = -1, b = -1, c = -1;
    if (sscanf(num, "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &a, &b, &c) != 3)
        return -1;
    *stack = a;
    *spill_stores = b;
    *spill_loads = c;
    return 0;
}
