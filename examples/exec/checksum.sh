#!/bin/sh
# SPDX-License-Identifier: MIT
# A zkd exec type (docs/exec.md) in POSIX shell: the SHA-256 of one byte range of a file.
#   zkd run --exec "checksum=examples/exec/checksum.sh"
#   zkd submit checksum '{"file":"/etc/services","offset":0,"length":4096}' --wait
# Args (JSON) on stdin; the result (JSON) on stdout; progress lines on fd 3.
set -eu
args=$(cat)
# A small JSON reader for flat objects of strings and numbers (no jq needed).
field() {
    printf '%s' "$args" | tr ',{}' '\n\n\n' | sed -n "s/^[[:space:]]*\"$1\"[[:space:]]*:[[:space:]]*//p" |
        sed 's/^"\(.*\)"[[:space:]]*$/\1/; s/[[:space:]]*$//' | head -n 1
}
file=$(field file)
offset=$(field offset)
length=$(field length)
case "$offset$length" in
    *[!0-9]* | "") echo 'expects {"file": path, "offset": n, "length": n}' >&2; exit 2 ;;
esac
[ -r "$file" ] || { echo "cannot read $file" >&2; exit 1; }
echo '{"progress":0.1,"message":"reading"}' >&3 2>/dev/null || true
sum=$(tail -c +"$((offset + 1))" "$file" | head -c "$length" | sha256sum | cut -d' ' -f1)
echo '{"progress":1,"message":"done"}' >&3 2>/dev/null || true
printf '{"file":"%s","offset":%s,"length":%s,"sha256":"%s"}\n' "$file" "$offset" "$length" "$sum"
