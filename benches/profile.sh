#!/usr/bin/env bash
# Instructions per admission request (callgrind), volguard's router against the floor's, in
# process: deterministic, so a change of a few percent shows where wall-clock benchmarks on a
# shared 2-core machine cannot. Usage: benches/profile.sh path/to/handler-example
set -euo pipefail
bin=${1:?usage: profile.sh HANDLER_BINARY}
command -v valgrind >/dev/null || { echo "profile: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Instructions of one run; the per-request figure is the difference between N+1 and 1 requests,
# which cancels the setup (state generation and loading).
instructions() {
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" "$bin" --pvcs 2000 --only "$1" --app "$2" --requests "$3" \
    2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
n=2000
printf '%-24s %14s %14s %7s\n' review volguard floor ratio
for review in pvc_create_mutate pod_create_3_claims pod_delete_force_deny pod_binding_rwo; do
  for app in volguard floor; do
    one=$(instructions "$review" "$app" 1)
    many=$(instructions "$review" "$app" $((n + 1)))
    eval "$app=$(( (many - one) / n ))"
  done
  printf '%-24s %14s %14s %7s\n' "$review" "$volguard" "$floor" "$(awk -v v="$volguard" -v f="$floor" 'BEGIN{printf "%.2f", v/f}')"
done
