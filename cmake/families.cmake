# Writes OUT, the C list of the built-in template families: every
# `FG_TEMPLATE_FAMILY(name, rows)` declaration at the start of a line of a
# DIR/*.c file (DIR: codegen/) becomes one entry of
#   const fg_template_family *const fg_builtin_families[] = { &fg_family_name, ..., 0 };
# so that a family is added by its own file alone (codegen/template.h).
file(GLOB files ${DIR}/*.c)
set(names "")
foreach(f ${files})
  file(STRINGS ${f} decls REGEX "^FG_TEMPLATE_FAMILY\\([a-z0-9_]+,")
  foreach(d ${decls})
    string(REGEX REPLACE "^FG_TEMPLATE_FAMILY\\(([a-z0-9_]+),.*" "\\1" n "${d}")
    list(APPEND names ${n})
  endforeach()
endforeach()
list(SORT names)
set(body "/* Generated from the FG_TEMPLATE_FAMILY declarations of codegen/ by cmake/families.cmake: do not edit. */\n#include \"template.h\"\n\n")
foreach(n ${names})
  string(APPEND body "extern const fg_template_family fg_family_${n};\n")
endforeach()
string(APPEND body "\nconst fg_template_family *const fg_builtin_families[] = {\n")
foreach(n ${names})
  string(APPEND body "    &fg_family_${n},\n")
endforeach()
string(APPEND body "    0,\n};\n")
# rewritten only when it changes, so that a rebuild does not recompile it
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL body)
  file(WRITE ${OUT} "${body}")
endif()
