#!/usr/bin/env bash
# Keeps the README a five-minute page and the docs' links alive (issue 35):
#   docs_check.sh lines FILE MAX   fails when FILE has more than MAX lines
#   docs_check.sh links ROOT       fails when a relative link in ROOT/README.md or ROOT/docs/**/*.md
#                                  names a file that does not exist (anchors are not checked)
set -euo pipefail

case "${1:-}" in
  lines)
    file=$2 max=$3
    n=$(wc -l < "$file")
    if (( n > max )); then
      echo "$file has $n lines; the limit is $max. Move the detail to docs/ and link it." >&2
      exit 1
    fi
    echo "$file: $n lines (limit $max)"
    ;;
  links)
    root=$2 bad=0 checked=0
    while IFS= read -r md; do
      dir=$(dirname "$md")
      # Every ](target) outside code spans; drop a #anchor and a "title"; skip absolute URLs.
      while IFS= read -r target; do
        target=${target%%#*}
        target=${target%% *}
        [[ -z $target || $target == *://* || $target == mailto:* ]] && continue
        checked=$((checked + 1))
        if [[ ! -e "$dir/$target" ]]; then
          echo "${md#"$root"/}: link to '$target' does not resolve" >&2
          bad=1
        fi
      done < <(sed 's/`[^`]*`//g' "$md" | grep -o '](\([^)]*\))' | sed 's/^](//; s/)$//')
    done < <(find "$root/README.md" "$root/docs" -name '*.md' | sort)
    (( bad == 0 )) || exit 1
    echo "$checked relative links resolve"
    ;;
  *)
    echo "usage: $0 lines FILE MAX | links ROOT" >&2
    exit 2
    ;;
esac
