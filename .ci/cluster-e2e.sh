#!/usr/bin/env bash
# The cluster e2e, each suite against its own cluster, all at once: tests/cluster.rs and
# tests/partition.rs with every scenario on the first version and, on the others, the scenarios whose
# behaviour differs by version (below); tests/nodes.rs (real kubelets, containerd, the CSI sidecars)
# on the first version only. The scenarios mostly wait on the control loops' own timers (PodGC's 40 s
# quarantine, TTLs, lease expiry, the node monitor's grace), so the clusters overlap well on two cores.
# Each run's output is printed whole once all have finished.
# `apiserver_side_by_side` is `make bench`'s (it needs the release floor binary), not a scenario.
# Usage: cluster-e2e.sh CACHE_DIR VERSION...   (the other VOLGUARD_* variables come from make)
set -euo pipefail
cache=$1
shift
first=$1
# What differs between Kubernetes versions here: admission (ValidatingAdmissionPolicy and
# MutatingAdmissionPolicy, CEL, the registrations' API), the resources and subresources discovery
# lists (the door matrix), kubectl's output, kcm's PVC Unused condition, and the node lifecycle and
# pod status doors of partition healing.
differs=(unused_condition policy_webhook_down policy_agrees proof_door_matrix delete_protection
  registration_drift kubectl_ux partition_fenced partition_guards)
cargo test --locked --test cluster --test partition --test nodes --no-run
mkdir -p target/e2e
pids=() logs=()
for v in "$@"; do
  filter=(--skip apiserver_side_by_side)
  [ "$v" = "$first" ] || filter=(--exact "${differs[@]}")
  VOLGUARD_CONTROLPLANE_DIR="$cache/kubernetes/$v" \
    cargo test --locked --no-fail-fast --test cluster --test partition -- --ignored --test-threads=1 --nocapture \
      "${filter[@]}" >"target/e2e/cluster-$v.log" 2>&1 &
  pids+=("$!") logs+=("target/e2e/cluster-$v.log")
done
VOLGUARD_CONTROLPLANE_DIR="$cache/kubernetes/$first" \
  cargo test --locked --no-fail-fast --test nodes -- --ignored --test-threads=1 --nocapture \
  >"target/e2e/nodes-$first.log" 2>&1 &
pids+=("$!") logs+=("target/e2e/nodes-$first.log")
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then failed=1; fi
done
for l in "${logs[@]}"; do
  echo "==================== $l ===================="
  cat "$l"
done
for l in "${logs[@]}"; do
  want=2
  case $l in *nodes-*) want=1 ;; esac
  if [ "$(grep -c "^test result: ok" "$l")" = "$want" ]; then
    echo "$l: ok ($(grep -c '^scenario .*: ok' "$l") scenarios)"
  else
    echo "$l: FAILED"
  fi
done
exit "$failed"
