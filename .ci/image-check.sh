#!/usr/bin/env bash
# Check the OCI archive as a runtime would see it: the config runs /volguard as 65532:65532 with
# the OCI labels, and the binary unpacked from the layer runs on its own (static).
set -euo pipefail
tar=target/image/volguard.oci.tar version=$1
cfg=$(skopeo inspect --config "oci-archive:$tar")
python3 - "$cfg" "$version" <<'PY'
import json, sys
c = json.loads(sys.argv[1]); cfg = c["config"]
assert cfg["User"] == "65532:65532", cfg.get("User")
assert cfg["Entrypoint"] == ["/volguard"], cfg.get("Entrypoint")
assert c["os"] == "linux" and c["architecture"] == "amd64", (c["os"], c["architecture"])
assert cfg["Labels"]["org.opencontainers.image.version"] == sys.argv[2], cfg["Labels"]
assert len(c["rootfs"]["diff_ids"]) == 1, c["rootfs"]
print("image config: user", cfg["User"], "entrypoint", cfg["Entrypoint"], "labels", len(cfg["Labels"]))
PY
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
skopeo copy --quiet "oci-archive:$tar" "oci:$tmp/oci:volguard"
umoci unpack --image "$tmp/oci:volguard" "$tmp/bundle" >/dev/null
ls -l "$tmp/bundle/rootfs"
# Only /volguard in the image: it must need no shared library.
if ldd "$tmp/bundle/rootfs/volguard" 2>&1 | grep -q '=>'; then echo "binary is not static" >&2; exit 1; fi
got=$(env -i "$tmp/bundle/rootfs/volguard" --version)
echo "unpacked binary: $got"
[ "$got" = "volguard $version" ]
