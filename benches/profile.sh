#!/usr/bin/env bash
# Per admission request, in process (callgrind over benches/handler.rs: the axum router, no sockets
# or TLS): instructions, and the simulated L1 instruction/data cache misses and branch
# mispredictions, volguard's router against the floor's. Deterministic, so a change of a few
# percent shows where wall-clock runs on a shared 2-core machine cannot; the misses show what
# instruction counts hide (a request that moves kilobytes of futures pays in cache lines).
# Usage: benches/profile.sh path/to/handler-example
set -euo pipefail
bin=${1:?usage: profile.sh HANDLER_BINARY}
command -v valgrind >/dev/null || { echo "profile: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Event totals of one run (Ir I1mr D1mr D1mw Bcm Bim, in that order); the per-request figure is
# the difference between N+1 and 1 requests, which cancels the setup (state generation, loading).
# Refusal log lines are off (RUST_LOG=warn): they are capped at 50 a second of wall-clock time, so
# under valgrind their number, and with it the deny row, followed the machine's speed (76k-86k).
events() {
  RUST_LOG=warn valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes --callgrind-out-file="$out/cg" \
    "$bin" --pvcs 2000 --only "$1" --app "$2" --requests "$3" >/dev/null 2>&1
  awk '/^events:/ { for (i = 2; i <= NF; i++) col[$i] = i }
       /^summary:/ { print $col["Ir"], $col["I1mr"], $col["D1mr"] + $col["D1mw"], $col["Bcm"] + $col["Bim"] }' "$out/cg"
}
n=2000
printf '%-24s %21s %17s %17s %17s\n' "" "instructions" "L1i misses" "L1d misses" "mispredicts"
printf '%-24s %8s %7s %4s %8s %8s %8s %8s %8s %8s\n' review volguard floor x volguard floor volguard floor volguard floor
for review in pvc_create_mutate pod_create_3_claims pod_delete_force_deny pod_binding_rwo; do
  for app in volguard floor; do
    read -r -a one <<<"$(events "$review" "$app" 1)"
    read -r -a many <<<"$(events "$review" "$app" $((n + 1)))"
    for i in 0 1 2 3; do eval "${app}_$i=$(( (many[i] - one[i]) / n ))"; done
  done
  printf '%-24s %8s %7s %4s %8s %8s %8s %8s %8s %8s\n' "$review" "$volguard_0" "$floor_0" \
    "$(awk -v v="$volguard_0" -v f="$floor_0" 'BEGIN{printf "%.2f", v/f}')" \
    "$volguard_1" "$floor_1" "$volguard_2" "$floor_2" "$volguard_3" "$floor_3"
done
