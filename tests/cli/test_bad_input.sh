#!/usr/bin/env bash
# test_bad_input.sh -- every kind of bad input reaches the user as a located
# error ("file:line:col: error: ...") and exit code 2, through the command
# line: malformed YAML, tab indentation, an unknown op (with a suggestion), a
# wrong attribute type, a missing required field, duplicate rule names, a
# cycle, a shape mismatch, and Lua hooks that fail, loop forever, allocate
# without bound or call os.execute.  A crash (signal) fails the test too.
set -uo pipefail
F=${FUSEGEN_BIN:?FUSEGEN_BIN is not set (run through ctest)}
SRC=${FUSEGEN_SOURCE_DIR:-$(pwd)}
T=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-bad.XXXXXX")
trap 'rm -rf "$T"' EXIT
export FUSEGEN_CACHE=off FUSEGEN_HOOK_STEPS=200000 FUSEGEN_HOOK_MEMORY=8M
failures=0

# expect NAME PATTERN COMMAND...: exit code 2 and stderr matching PATTERN.
expect() {
    local name=$1 pattern=$2
    shift 2
    "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc -ne 2 ]; then
        echo "FAIL $name: exit $rc, expected 2"; cat "$T/err"; failures=$((failures + 1)); return
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
expect "Lua memory bomb" "h\.lua:[0-9]+:.*memory limit" "$F" plan "$T/conv.yaml" --rules "$d"

d=$(hook_rules lua_os <<'EOF'
function check(node)
  os.execute("touch /tmp/fusegen-should-not-exist")
  return true
end
EOF
)
expect "Lua os.execute" "h\.lua:2:.*'os'" "$F" plan "$T/conv.yaml" --rules "$d"
[ ! -e /tmp/fusegen-should-not-exist ] || { echo "FAIL os.execute ran"; failures=$((failures + 1)); }

if [ $failures -ne 0 ]; then
    echo "$failures failed"
    exit 1
fi
echo "all bad inputs rejected with located errors and exit 2"
