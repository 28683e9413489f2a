#!/usr/bin/env bash
# Build target/image/volguard.oci.tar without a container daemon: the static release binary as
# the single layer of an empty image, assembled with umoci and packed by skopeo (Debian's
# packages). Same binary flags, user and entrypoint as the Dockerfile.
#   .ci/image.sh BIN VERSION [OUT]   (OUT defaults to target/image)
# Two builds of one commit give one manifest digest: every time in the image (the config's and its
# history's `created`) is the commit's time (SOURCE_DATE_EPOCH if set), never the clock's, and the
# layer's files have mtime 0; `make image-check` builds twice and compares digests and archives.
# IMAGE_REVISION names the commit in the image's labels (default: HEAD): rebuilding a released
# image from its binary takes the release's time and revision from its config (tests/adoption.rs).
set -euo pipefail
bin=$(realpath "$1") version=$2 out=$(realpath -m "${3:-target/image}")
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
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
umoci raw add-layer --image "$out/oci:volguard" --history.created "$created" "$layer/layer.tar"
umoci config --image "$out/oci:volguard" --created "$created" --history.created "$created" \
  --os linux --architecture amd64 \
  --config.entrypoint /volguard --config.user 65532:65532 --config.workingdir / \
  --config.label org.opencontainers.image.title=volguard \
  --config.label "org.opencontainers.image.description=Storage-safety layer for Kubernetes: admission webhook, finalizer controller, reports" \
  --config.label org.opencontainers.image.version="$version" \
  --config.label org.opencontainers.image.licenses=Apache-2.0 \
  --config.label org.opencontainers.image.created="$created" \
  --config.label org.opencontainers.image.revision="${IMAGE_REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
umoci gc --layout "$out/oci"
# The archive is the layout skopeo writes, tarred by GNU tar with fixed names order, owner and
# times (skopeo's own oci-archive stamps the clock's time on each entry): same image, same bytes.
skopeo copy --quiet "oci:$out/oci:volguard" "oci:$layer/oci:volguard:$version"
tar --create --file "$out/volguard.oci.tar" --format=posix --numeric-owner --owner=0 --group=0 \
  --sort=name --mode=u=rwX,go=rX --mtime="@$epoch" --pax-option=delete=atime,delete=ctime --directory "$layer/oci" \
  blobs index.json oci-layout
echo "wrote $out/volguard.oci.tar (volguard:$version)"
