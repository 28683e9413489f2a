#!/usr/bin/env bash
# tests/cluster.rs and tests/partition.rs on every Kubernetes version at once, each file against its
# own cluster (the files run one after the other within a version). The scenarios
# mostly wait on the control loops' own timers (PodGC's 40 s quarantine, TTLs, lease expiry), so two
# clusters overlap well on two cores. Each run's output is printed whole once all have finished.
# `apiserver_side_by_side` is `make bench`'s (it needs the release floor binary), not a scenario.
# Usage: cluster-e2e.sh CACHE_DIR VERSION...   (the other VOLGUARD_* variables come from make)
set -euo pipefail
cache=$1
shift
cargo test --locked --test cluster --test partition --no-run
mkdir -p target/e2e
pids=()
for v in "$@"; do
  VOLGUARD_CONTROLPLANE_DIR="$cache/kubernetes/$v" \
    cargo test --locked --no-fail-fast --test cluster --test partition -- --ignored --test-threads=1 --nocapture \
      --skip apiserver_side_by_side >"target/e2e/cluster-$v.log" 2>&1 &
  pids+=("$!")
done
failed=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then failed=1; fi
done
for v in "$@"; do
  echo "==================== tests/cluster.rs and tests/partition.rs on Kubernetes $v ===================="
  cat "target/e2e/cluster-$v.log"
done
for v in "$@"; do
  if [ "$(grep -c "^test result: ok" "target/e2e/cluster-$v.log")" = 2 ]; then
    echo "cluster e2e on $v: ok ($(grep -c '^scenario .*: ok' "target/e2e/cluster-$v.log") scenarios)"
  else
    echo "cluster e2e on $v: FAILED (target/e2e/cluster-$v.log)"
  fi
done
exit "$failed"
