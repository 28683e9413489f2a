#!/usr/bin/env bash
# The one image the real-node e2e runs, built without a registry or a daemon: Debian's static
# busybox (the writer's shell, date, cksum) and kubernetes' own pause (the pod sandbox, compiled
# statically from the module's build/pause/linux/pause.c), one layer, imported into each node's
# containerd with `ctr images import`. Pods name it with imagePullPolicy: Never.
#   image.sh PAUSE_C OUT.tar
set -euo pipefail
pause_c=$1 out=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/bin" "$work/root/tmp"
gcc -Os -static -DVERSION=e2e -o "$work/root/pause" "$pause_c"
install -m 0755 /bin/busybox "$work/root/bin/busybox"
for a in sh date crc32 cat echo sleep tail wc head ls mkdir hostname awk sed grep cut; do ln -s busybox "$work/root/bin/$a"; done
tar --create --file "$work/layer.tar" --format=posix --numeric-owner --owner=0 --group=0 \
  --mtime=@0 --pax-option=delete=atime,delete=ctime --directory "$work/root" .
umoci init --layout "$work/oci"
umoci new --image "$work/oci:e2e"
umoci raw add-layer --image "$work/oci:e2e" "$work/layer.tar"
umoci config --image "$work/oci:e2e" --os linux --architecture amd64 --config.entrypoint /pause \
  --config.env PATH=/bin
umoci gc --layout "$work/oci"
rm -f "$out"
skopeo copy --quiet "oci:$work/oci:e2e" "docker-archive:$out:e2e.volguard.io/node:e2e"
echo "wrote $out (e2e.volguard.io/node:e2e)"
