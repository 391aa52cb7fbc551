#!/usr/bin/env bash
# test_bad_input.sh -- every kind of bad input reaches the user as a located
# error ("file:line:col: error: ...") and exit code 2, through the command
# line: malformed YAML, tab indentation, an unknown op (with a suggestion), a
# wrong attribute type, a missing required field, duplicate rule names, a
# cycle, a shape mismatch, and Lua hooks that fail, loop forever, allocate
# without bound or call os.execute.  A crash (signal) fails the test too.
# And what a hostile rules directory tries (docs/hooks.md, trust model): an
# epilogue hook returning C text to close the kernel or include a file, a
# file name holding a newline, a FIFO named like a rules file, YAML nested
# 100000 deep, a backtracking pattern in a hook file's main chunk -- each a
# located error within seconds, never a hang.
set -uo pipefail
F=${FUSEGEN_BIN:?FUSEGEN_BIN is not set (run through ctest)}
SRC=${FUSEGEN_SOURCE_DIR:-$(pwd)}
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-bad.XXXXXX")
trap 'rm -rf "$T"' EXIT
export FUSEGEN_CACHE=off FUSEGEN_HOOK_STEPS=200000 FUSEGEN_HOOK_MEMORY=8M
failures=0

# expect NAME PATTERN COMMAND...: exit code 2 (or $EXPECT_RC) within 60
# seconds and stderr matching PATTERN.
expect() {
    local name=$1 pattern=$2 want=${EXPECT_RC:-2}
    shift 2
    timeout 60 "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -ne "$want" ]; then
        echo "FAIL $name: exit $rc, expected $want"; cat "$T/err"; failures=$((failures + 1)); return
    fi
    if ! grep -Eq -- "$pattern" "$T/err"; then
        echo "FAIL $name: no match for /$pattern/ in:"; cat "$T/err"; failures=$((failures + 1)); return
    fi
    echo "ok   $name: $(grep -E -m1 -- "$pattern" "$T/err")"
}

# A rules directory: the shipped vocabulary plus one file.
rules_with() {
    local d="$T/$1"
    mkdir -p "$d"
    cp "$SRC/rules/ops.yaml" "$SRC/rules/pointwise.yaml" "$d/"
    cat >"$d/$2"
    echo "$d"
}

# A rule that asks a Lua predicate about every conv, and a graph with a conv.
hook_rules() {
    local d
    d=$(rules_with "$1" r.yaml <<'EOF'
rule: hooked
hooks: h.lua
match:
  - conv: { op: conv2d, where_hook: check }
  - act:  { op: relu }
kernel:
  template: conv2d
  epilogue:
    - apply: act
EOF
)
    cat >"$d/h.lua"
    echo "$d"
}
cat >"$T/conv.yaml" <<'EOF'
graph: conv
inputs: [ { name: x, shape: [1, 4, 8, 8] } ]
weights: [ { name: w, shape: [4, 4, 3, 3] } ]
nodes:
  - { name: c, op: conv2d, inputs: [x, w], attrs: { padding: [1, 1] } }
  - { name: r, op: relu, inputs: [c] }
outputs: [r]
EOF

d=$(rules_with malformed r.yaml <<'EOF'
rule: broken
match: [ { conv: { op: conv2d } }
EOF
)
expect "malformed YAML" "r\.yaml:[0-9]+:[0-9]+: error: " "$F" rules check "$d"

d=$(rules_with tabs r.yaml < <(printf 'rule: tabbed\nmatch:\n\t- conv: { op: conv2d }\n'))
expect "tab indentation" "r\.yaml:3:1: error: .*tab" "$F" rules check "$d"

d=$(rules_with unknown_op r.yaml <<'EOF'
rule: typo
match:
  - conv: { op: con2d }
kernel: { template: conv2d }
EOF
)
expect "unknown op" "r\.yaml:3:[0-9]+: error: unknown op 'con2d' \(did you mean 'conv2d'\?\)" "$F" rules check "$d"

cat >"$T/attr.yaml" <<'EOF'
graph: attr
inputs: [ { name: x, shape: [1, 4, 8, 8] } ]
weights: [ { name: w, shape: [4, 4, 3, 3] } ]
nodes:
  - { name: c, op: conv2d, inputs: [x, w], attrs: { stride: 1.5 } }
outputs: [c]
EOF
expect "wrong attribute type" "attr\.yaml:5:[0-9]+: error: .*stride.*ints" "$F" plan "$T/attr.yaml"

d=$(rules_with missing r.yaml <<'EOF'
rule: nomatch
kernel: { template: conv2d }
EOF
)
expect "missing required field" "r\.yaml:1:[0-9]+: error: .*match" "$F" rules check "$d"

d=$(rules_with dup r.yaml <<'EOF'
rule: twice
match: [ { conv: { op: conv2d } } ]
kernel: { template: conv2d }
---
rule: twice
match: [ { conv: { op: conv2d } } ]
kernel: { template: conv2d }
EOF
)
expect "duplicate rule names" "r\.yaml:5:[0-9]+: error: duplicate rule 'twice'" "$F" rules check "$d"

cat >"$T/cycle.yaml" <<'EOF'
graph: cycle
inputs: [ { name: x, shape: [1, 4] } ]
nodes:
  - { name: a, op: add, inputs: [x, b] }
  - { name: b, op: relu, inputs: [a] }
outputs: [b]
EOF
expect "cycle" "cycle\.yaml:[0-9]+:[0-9]+: error: cycle in graph" "$F" plan "$T/cycle.yaml"

cat >"$T/shape.yaml" <<'EOF'
graph: shape
inputs: [ { name: x, shape: [1, 32, 8, 8] } ]
weights: [ { name: w, shape: [16, 64, 3, 3] } ]
nodes:
  - { name: c, op: conv2d, inputs: [x, w] }
outputs: [c]
EOF
expect "shape mismatch" "shape\.yaml:5:[0-9]+: error: .*32 channels" "$F" plan "$T/shape.yaml"

d=$(hook_rules lua_error <<'EOF'
function check(node)
  error("boom")
end
EOF
)
expect "Lua error" "h\.lua:2:.*boom" "$F" plan "$T/conv.yaml" --rules "$d"

d=$(hook_rules lua_loop <<'EOF'
function check(node)
  while true do end
end
EOF
)
expect "Lua infinite loop" "h\.lua:[0-9]+:.*instruction budget" "$F" plan "$T/conv.yaml" --rules "$d"

d=$(hook_rules lua_memory <<'EOF'
function check(node)
  local t = {}
  while true do t[#t + 1] = string.rep("x", 1000000) .. #t end
end
EOF
)
# (library work and allocation are charged as steps too: enough steps to fill 8M)
expect "Lua memory bomb" "h\.lua:[0-9]+:.*memory limit" env FUSEGEN_HOOK_STEPS=100000000 "$F" plan "$T/conv.yaml" \
    --rules "$d"

d=$(hook_rules lua_os <<'EOF'
function check(node)
  os.execute("touch /tmp/fusegen-should-not-exist")
  return true
end
EOF
)
expect "Lua os.execute" "h\.lua:2:.*'os'" "$F" plan "$T/conv.yaml" --rules "$d"
[ ! -e /tmp/fusegen-should-not-exist ] || { echo "FAIL os.execute ran"; failures=$((failures + 1)); }

# ---- a hostile rules directory ----

# A rules directory whose rule runs epilogue hook `epi` of h.lua (stdin).
hostile_epilogue() {
    local d
    d=$(rules_with "$1" r.yaml <<'EOF'
rule: hooked
priority: 100
hooks: h.lua
match:
  - conv: { op: conv2d }
  - act:  { op: relu }
kernel:
  template: conv2d
  epilogue:
    - hook: epi
EOF
)
    cat >"$d/h.lua"
    echo "$d"
}

# C text that closes the kernel function and defines a host constructor
# (which would run when the emulator dlopens the kernel).
d=$(hostile_epilogue inject_ctor <<'EOF'
function epi(group)
  return 'v; } __attribute__((constructor)) static void pwn(void) { __builtin_trap(); } static float y(float v) { return v'
end
EOF
)
expect "epilogue injection (constructor)" "h\.lua:1:1: error: hook 'epi' returned .*not an expression over v and c" \
    "$F" emit "$T/conv.yaml" -o "$T/out_ctor" --rules "$d"
if grep -rqs "constructor" "$T/out_ctor"; then
    echo "FAIL injected text reached a source file"; failures=$((failures + 1))
fi

d=$(hostile_epilogue inject_include <<'EOF'
function epi(group)
  return 'v\n#include "/etc/passwd"\n'
end
EOF
)
expect "epilogue injection (#include)" "h\.lua:1:1: error: .*unexpected character '#' in expression" \
    "$F" run "$T/conv.yaml" --device emu --rules "$d"

d=$(hostile_epilogue epilogue_ok <<'EOF'
function epi(group)
  return 'v > 0 ? v : 0'
end
EOF
)
if ! "$F" emit "$T/conv.yaml" -o "$T/out_ok" --rules "$d" >/dev/null 2>"$T/err" ||
   ! grep -rqsF "v = ((v > 0.0f) ? v : 0.0f);" "$T/out_ok"; then
    echo "FAIL an expression epilogue hook: not in the source"; cat "$T/err"; failures=$((failures + 1))
else
    echo "ok   epilogue hook: the expression is rendered into the kernel"
fi

# A file name holding a newline would break out of the provenance comment.
d=$(rules_with newline_name r.yaml <<'EOF'
rule: fine
match: [ { conv: { op: conv2d } } ]
kernel: { template: conv2d }
EOF
)
printf 'rule: evil\nmatch: [ { conv: { op: conv2d } } ]\nkernel: { template: conv2d }\n' >"$d/$(printf 'a\n} x.yaml')"
expect "file name with a newline" "newline_name: error: refusing rules file 'a\\\\n\} x\.yaml'" "$F" rules check "$d"

# A FIFO named like a rules file: nobody ever writes to it.  (An I/O error:
# exit 1.)
d=$(rules_with fifo ok.yaml </dev/null)
mkfifo "$d/pipe.yaml"
EXPECT_RC=1 expect "FIFO in the rules directory" "pipe\.yaml: error: cannot read: not a regular file \(a FIFO\)" \
    "$F" rules check "$d"

# YAML nested 100000 levels deep.
d=$(rules_with deep ok.yaml </dev/null)
python3 -c 'import sys; sys.stdout.write("rule: deep\nmatch: " + "{a: " * 100000 + "1" + "}" * 100000 + "\n")' \
    >"$d/deep.yaml"
expect "YAML nested 100000 deep" "deep\.yaml:2:[0-9]+: error: nested too deeply" "$F" rules check "$d"

# A backtracking pattern in a hook file's main chunk, under the default budget.
d=$(rules_with pattern ok.yaml </dev/null)
cat >"$d/h.lua" <<'EOF'
local s = string.rep("a", 300)
local found = string.find(s, string.rep("a.-", 5) .. "b")
EOF
# (the instruction budget stops it; a slow machine or a sanitizer build may
# reach the wall-clock deadline first -- either is a located stop)
expect "backtracking pattern at load" "h\.lua:2:1: error: hook file .* exceeded its (instruction budget|time limit)" \
    env -u FUSEGEN_HOOK_STEPS "$F" rules check "$d"

if [ $failures -ne 0 ]; then
    echo "$failures failed"
    exit 1
fi
echo "all bad inputs rejected with located errors and exit 2"
