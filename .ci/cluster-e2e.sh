#!/usr/bin/env bash
# Every e2e suite, each against its own cluster, in three streams at once:
#   1. tests/cluster.rs and tests/partition.rs, every scenario, on the first version;
#   2. tests/nodes.rs (real kubelets, containerd, the CSI sidecars, upstream's e2e), tests/adoption.rs (the
#      release installed from a registry as pods), then one short seed
#      of tests/robustness.rs (the nemesis, with and without volguard) on the first version;
#   3. tests/e2e.rs, tests/chaos.rs and tests/install.rs on the first version, then tests/cluster.rs and
#      tests/partition.rs on the other versions, only the scenarios whose behaviour differs by version.
# The scenarios mostly wait on the control loops' own timers (PodGC's 20 s period, TTLs, lease expiry,
# the node monitor's grace), so the clusters overlap well on two cores. Each stream's output is
# printed whole once all have finished.
# `apiserver_side_by_side` is `make bench`'s (it needs the release floor binary), not a scenario.
# Usage: cluster-e2e.sh CACHE_DIR VERSION...   (the other VOLGUARD_* variables come from make)
set -euo pipefail
cache=$1
shift
first=$1
shift
# What differs between Kubernetes versions here: admission (ValidatingAdmissionPolicy and
# MutatingAdmissionPolicy, CEL, the registrations' API), the resources and subresources discovery
# lists (the door matrix), kubectl's output, kcm's PVC Unused condition, and the node lifecycle and
# pod status doors of partition healing.
differs=(unused_condition policy_webhook_down policy_agrees proof_door_matrix delete_protection
  registration_drift kubectl_ux partition_fenced partition_guards)
cargo test --locked --test cluster --test partition --test nodes --test adoption --test robustness --test e2e --test chaos --test install --no-run
mkdir -p target/e2e
run() { # VERSION TESTS... -- FILTERS...
  local v=$1
  shift
  VOLGUARD_CONTROLPLANE_DIR="$cache/kubernetes/$v" cargo test --locked --no-fail-fast "$@"
}
logs=(target/e2e/cluster-$first.log target/e2e/nodes-$first.log target/e2e/e2e-$first.log)
run "$first" --test cluster --test partition -- --ignored --test-threads=1 --nocapture \
  --skip apiserver_side_by_side >"${logs[0]}" 2>&1 &
pids=("$!")
run "$first" --test nodes --test adoption --test robustness -- --ignored --test-threads=1 --nocapture \
  --skip upstream_storage_suites >"${logs[1]}" 2>&1 &
pids+=("$!")
(
  status=0
  run "$first" --test e2e --test chaos --test install -- --ignored --test-threads=1 --nocapture || status=1
  for v in "$@"; do
    run "$v" --test cluster --test partition -- --ignored --test-threads=1 --nocapture \
      --exact "${differs[@]}" >"target/e2e/cluster-$v.log" 2>&1 || status=1
  done
  exit $status
) >"${logs[2]}" 2>&1 &
pids+=("$!")
for v in "$@"; do logs+=("target/e2e/cluster-$v.log"); done
failed=0
for p in "${pids[@]}"; do
  if ! wait "$p"; then failed=1; fi
done
for l in "${logs[@]}"; do
  echo "==================== $l ===================="
  cat "$l"
done
for l in "${logs[@]}"; do
  want=2
  case $l in *nodes-*) want=3 ;; *e2e-*) want=3 ;; esac
  # Every test binary of the stream ran something and passed (a binary whose filters matched
  # nothing prints "ok. 0 passed": not a pass).
  if [ "$(grep -c "^test result: ok" "$l")" = "$want" ] && ! grep -q "^test result: ok. 0 passed" "$l"; then
    echo "$l: ok ($(grep -c '^scenario .*: ok' "$l") scenarios)"
  else
    echo "$l: FAILED (want $want test binaries, each passing at least one test)"
    failed=1
  fi
done
exit "$failed"
