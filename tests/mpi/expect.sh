#!/usr/bin/env bash
# expect.sh CODE PATTERN [ONCE] -- COMMAND...
# Runs COMMAND and passes when its exit code is CODE ("nonzero": any but 0) and its output (stdout and stderr)
# matches the extended regular expression PATTERN, exactly once when ONCE is "once".
set -u
want="$1" pattern="$2"
shift 2
once=""
if [ "$1" = once ]; then once=1; shift; fi
[ "$1" = -- ] && shift
out="$("$@" 2>&1)"
rc=$?
printf '%s\n' "$out"
fail() { echo "expect.sh: $*" >&2; exit 1; }
if [ "$want" = nonzero ]; then [ "$rc" -ne 0 ] || fail "exit code 0, expected non-zero"
else [ "$rc" -eq "$want" ] || fail "exit code $rc, expected $want"; fi
n="$(printf '%s\n' "$out" | grep -cE -- "$pattern")"
[ "$n" -ge 1 ] || fail "no line matches: $pattern"
[ -z "$once" ] || [ "$n" -eq 1 ] || fail "$n lines match, expected one: $pattern"
echo "expect.sh: exit code $rc and output as expected"
