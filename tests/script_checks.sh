# Checks shared by the tests of bench's scripts (sourced; the sourcing test sets $name, and $out
# to the output under test).

# expect TEXT: the output holds TEXT.
expect() {
  if ! grep -qF -- "$1" <<<"$out"; then echo "$name: missing: $1"; exit 1; fi
}

# fails COMMAND... MESSAGE: the command exits 1 with one line that holds MESSAGE.
fails() {
  local msg rc=0 want=${*: -1}
  msg=$("${@:1:$#-1}" 2>&1) || rc=$?
  if [[ $rc != 1 || $(wc -l <<<"$msg") != 1 || $msg != *"$want"* ]]; then
    echo "$name: ${*:1:$#-1}: expected one line with '$want' and exit 1, got $rc: $msg"; exit 1
  fi
}
