/* embedded.c -- lookup in the table of embedded template files. */
#include "embedded.h"

#include <string.h>

const fg_embedded_file *fg_embedded_find(const char *name)
{
    for (const fg_embedded_file *f = fg_embedded_templates; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}
