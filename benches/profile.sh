#!/usr/bin/env bash
# Per admission request, in process (callgrind over benches/handler.rs: the axum router, no sockets
# or TLS): instructions, and the simulated L1 instruction/data cache misses and branch
# mispredictions, volguard's router against the floor's. Deterministic, so a change of a few
# percent shows where wall-clock runs on a shared 2-core machine cannot; the misses show what
# instruction counts hide (a request that moves kilobytes of futures pays in cache lines).
# Usage: benches/profile.sh path/to/handler-example [path/to/decode_cost-example]
set -euo pipefail
bin=${1:?usage: profile.sh HANDLER_BINARY [DECODE_COST_BINARY]}
decode_cost=${2:-}
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
# Per request: the events of N+1 requests minus those of 1, over N, into ${app}_0..3.
measure() {
  local review=$1 app=$2 var=${2//-/_} i
  read -r -a one <<<"$(events "$review" "$app" 1)"
  read -r -a many <<<"$(events "$review" "$app" $((n + 1)))"
  for i in 0 1 2 3; do eval "${var}_$i=$(( (many[i] - one[i]) / n ))"; done
}
row() {
  local f0=${2}_0 f1=${2}_1 f2=${2}_2 f3=${2}_3
  printf '%-24s %8s %7s %4s %8s %8s %8s %8s %8s %8s\n' "$1" "$volguard_0" "${!f0}" \
    "$(awk -v v="$volguard_0" -v f="${!f0}" 'BEGIN{printf "%.2f", v/f}')" \
    "$volguard_1" "${!f1}" "$volguard_2" "${!f2}" "$volguard_3" "${!f3}"
}
for review in pvc_create_mutate pod_create_3_claims pod_delete_force_deny pod_binding_rwo; do
  measure "$review" volguard
  measure "$review" floor
  row "$review" floor
done
# The bind against the writing floor as well (benches/floor_store_writer.rs): the lock's rule must
# write, and a floor that writes nothing is not its floor (as in `make bench`'s side by side).
measure pod_binding_rwo writing-floor
row "pod_binding_rwo/writing" writing_floor

# The bound under those ratios: typed decoding against skipping the same bytes, one parser
# (benches/decode_cost.rs). Instructions of one run: N+1 runs minus 1.
if [ -n "$decode_cost" ]; then
  cost() {
    local one many
    one=$(valgrind --tool=callgrind --callgrind-out-file="$out/dc" "$decode_cost" "$1" 1 2>&1 >/dev/null | awk '/Collected :/ {print $NF}')
    many=$(valgrind --tool=callgrind --callgrind-out-file="$out/dc" "$decode_cost" "$1" $((n + 1)) 2>&1 >/dev/null | awk '/Collected :/ {print $NF}')
    echo $(( (many - one) / n ))
  }
  echo
  printf '%-44s %12s %8s\n' "pod CREATE review, serde_json alone" instructions "x skip"
  skip=$(cost skip-review)
  printf '%-44s %12s %8s\n' "skipped whole (the floor's parse)" "$skip" 1.00
  v=$(cost volguard-review)
  printf '%-44s %12s %8s\n' "volguard's decode (review::decode)" "$v" "$(awk -v a="$v" -v b="$skip" 'BEGIN{printf "%.2f", a/b}')"
  skip=$(cost skip-volumes)
  printf '%-44s %12s %8s\n' "its 5 volumes skipped" "$skip" 1.00
  for c in owned borrowed; do
    v=$(cost $c-volumes)
    printf '%-44s %12s %8s\n' "its 5 volumes decoded, $c strings" "$v" "$(awk -v a="$v" -v b="$skip" 'BEGIN{printf "%.2f", a/b}')"
  done
fi
