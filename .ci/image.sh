#!/usr/bin/env bash
# Build target/image/volguard.oci.tar without a container daemon: the static release binary as
# the single layer of an empty image, assembled with umoci and packed by skopeo (Debian's
# packages). Same binary flags, user and entrypoint as the Dockerfile.
set -euo pipefail
bin=$(realpath "$1") version=$2 out=$(pwd)/target/image
rm -rf "$out/oci" "$out/volguard.oci.tar"
mkdir -p "$out"
umoci init --layout "$out/oci"
umoci new --image "$out/oci:volguard"
# The layer is written by GNU tar, not `umoci insert`: umoci 0.4.7's layer ends right after the
# file's data (no padding, no end-of-archive blocks), which GNU tar and Python's tarfile reject.
# Fixed owner, mode and time: the same binary gives the same layer.
layer=$(mktemp -d)
trap 'rm -rf "$layer"' EXIT
install -m 0755 "$bin" "$layer/volguard"
tar --create --file "$layer/layer.tar" --format=posix --numeric-owner --owner=0 --group=0 \
  --mtime=@0 --pax-option=delete=atime,delete=ctime --directory "$layer" volguard
umoci raw add-layer --image "$out/oci:volguard" "$layer/layer.tar"
umoci config --image "$out/oci:volguard" \
  --os linux --architecture amd64 \
  --config.entrypoint /volguard --config.user 65532:65532 --config.workingdir / \
  --config.label org.opencontainers.image.title=volguard \
  --config.label "org.opencontainers.image.description=Storage-safety layer for Kubernetes: admission webhook, finalizer controller, reports" \
  --config.label org.opencontainers.image.version="$version" \
  --config.label org.opencontainers.image.licenses=Apache-2.0 \
  --config.label org.opencontainers.image.revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
umoci gc --layout "$out/oci"
skopeo copy --quiet "oci:$out/oci:volguard" "oci-archive:$out/volguard.oci.tar:volguard:$version"
echo "wrote $out/volguard.oci.tar (volguard:$version)"
