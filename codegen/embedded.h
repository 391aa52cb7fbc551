/* embedded.h -- files of templates/ compiled into the library (cmake/embed.cmake). */
#ifndef FG_EMBEDDED_H
#define FG_EMBEDDED_H

#include <stddef.h>

typedef struct fg_embedded_file {
    const char *name;      /* file name inside templates/, e.g. "prelude.cuh" */
    const char *text;      /* NUL-terminated contents */
    size_t len;
    const char *const *placeholders;   /* the names its {{...}} tags use, NULL-terminated (embed.cmake);
                                          NULL: no tags, not a kernel template (the preludes) */
} fg_embedded_file;

/* Terminated by an entry with name == NULL. */
extern const fg_embedded_file fg_embedded_templates[];

/* The names of the embedded kernel templates (files with placeholders),
 * NULL-terminated. */
extern const char *const fg_embedded_kernel_templates[];

/* The embedded file of that name, or NULL. */
const fg_embedded_file *fg_embedded_find(const char *name);

#endif /* FG_EMBEDDED_H */
