/* fusegen.c -- the command line (placeholder main until the commands land). */
#include <stdio.h>
#include "fusegen.h"
int main(void) { printf("fusegen %s\n", fg_version()); return 0; }
