#!/usr/bin/env bash
# Commit subjects after BASE fit in 72 characters (issue 35; older commits cannot be rewritten).
# Skipped, with a line saying why, outside a git checkout or where BASE is absent (a shallow or
# exported tree).
set -euo pipefail
base=${1:-d9e0b00}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! git rev-parse --git-dir > /dev/null 2>&1; then
  echo "commit subjects: not a git checkout, skipped"
  exit 0
fi
if ! git cat-file -e "$base^{commit}" 2> /dev/null; then
  echo "commit subjects: base $base is not in this clone, skipped"
  exit 0
fi
bad=0
while IFS=$'\t' read -r hash subject; do
  if (( ${#subject} > 72 )); then
    echo "commit $hash: subject is ${#subject} characters (at most 72): $subject" >&2
    bad=1
  fi
done < <(git log --format='%h%x09%s' "$base..HEAD")
exit $bad
