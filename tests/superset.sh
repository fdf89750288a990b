#!/bin/sh
# The superset rule: the secure build catches every misuse case (tests/misuse.c) that the
# flagship catches. A case the flagship catches by luck of layout ("?" in the table) must be
# one the secure build catches every time.
#   superset.sh MISUSE FLAGSHIP.so SECURE.so
misuse=$1 flagship=$2 secure=$3
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
caught() { LD_PRELOAD=$1 "$misuse" 2>&1 | awk '$1 == "caught" {print $2}' | sort; }
caught "$flagship" >"$dir/flagship"
caught "$secure" >"$dir/secure"
[ -s "$dir/flagship" ] || { echo "superset: no case caught by $flagship: did misuse run?"; exit 1; }
missing=$(comm -23 "$dir/flagship" "$dir/secure")
if [ -n "$missing" ]; then
  echo "superset: caught by $(basename "$flagship") and missed by $(basename "$secure"):" $missing
  exit 1
fi
echo "superset: $(wc -l <"$dir/secure") cases caught by the secure build, including all $(wc -l <"$dir/flagship") the flagship catches"
