#!/usr/bin/env bash
# The images the real-node e2e runs, built without a registry or a daemon, one layer shared by all:
# Debian's static busybox (the writer's shell and tools, every applet linked; also as upstream's
# glibc-dns-testing), kubernetes' own pause
# (the pod sandbox, compiled statically from the module's build/pause/linux/pause.c) and, when given,
# agnhost (upstream's e2e test server, built from the same module). Each image is one docker archive in
# OUT_DIR, imported into each node's containerd with `ctr images import`; pods name them with
# imagePullPolicy Never or IfNotPresent. The upstream e2e suite finds them through its
# KUBE_TEST_REPO_LIST, which points its registries at e2e.volguard.io.
#   image.sh PAUSE_C OUT_DIR [AGNHOST_BIN]
set -euo pipefail
pause_c=$1 out=$2 agnhost=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/bin" "$work/root/tmp" "$work/root/data" "$out"
gcc -Os -static -DVERSION=e2e -o "$work/root/pause" "$pause_c"
install -m 0755 /bin/busybox "$work/root/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$work/root/bin/$a"; done
if [ -n "$agnhost" ]; then
  # What agnhost's own Dockerfile adds beside the binary: the tests probe /localhost.crt.
  module=${pause_c%/build/pause/linux/pause.c}
  install -m 0755 "$agnhost" "$work/root/agnhost"
  install -m 0644 "$module/test/images/agnhost/porter/localhost.crt" "$module/test/images/agnhost/porter/localhost.key" "$work/root/"
  mkdir -p "$work/root/uploads"
fi
tar --create --file "$work/layer.tar" --format=posix --numeric-owner --owner=0 --group=0 \
  --mtime=@0 --pax-option=delete=atime,delete=ctime --directory "$work/root" .
umoci init --layout "$work/oci"
# image NAME ENTRYPOINT [CMD] -> NAME's archive
image() {
  local name=$1 entry=$2 cmd=${3:-} tag=img
  umoci new --image "$work/oci:$tag"
  umoci raw add-layer --image "$work/oci:$tag" "$work/layer.tar"
  local args=(--os linux --architecture amd64 --config.env PATH=/bin)
  [ -z "$entry" ] || args+=(--config.entrypoint "$entry")
  [ -z "$cmd" ] || args+=(--config.cmd "$cmd")
  umoci config --image "$work/oci:$tag" "${args[@]}"
  local file=$out/$(echo "$name" | tr '/:' '__').tar
  rm -f "$file"
  skopeo copy --quiet "oci:$work/oci:$tag" "docker-archive:$file:$name"
  umoci rm --image "$work/oci:$tag"
  echo "wrote $file ($name)"
}
image e2e.volguard.io/node:e2e /pause
image e2e.volguard.io/pause:3.10.2 /pause
image e2e.volguard.io/e2e-test-images/busybox:1.37.0-2 "" sh
# What some storage suites' pods run (multiVolume; the volumes suite's exec test names nginx and
# gives its own command): the same shell and tools.
image e2e.volguard.io/e2e-test-images/glibc-dns-testing:2.1.1 "" sh
image e2e.volguard.io/e2e-test-images/nginx:1.27.0-2 "" sh
if [ -n "$agnhost" ]; then
  image e2e.volguard.io/e2e-test-images/agnhost:2.55 /agnhost pause
  image e2e.volguard.io/e2e-test-images/agnhost:2.66.1 /agnhost pause
fi
