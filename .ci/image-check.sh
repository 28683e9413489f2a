#!/usr/bin/env bash
# Check the OCI archive as a runtime would see it: the config runs /volguard as 65532:65532 with
# the OCI labels, and the binary unpacked from the layer runs on its own (static); a second build
# of the same binary gives the same digest and the same archive.
set -euo pipefail
tar=target/image/volguard.oci.tar version=$1 bin=$2
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
# Every layer is a complete tar for strict readers: Python's tarfile reads every member's data,
# GNU tar lists it, and it ends with the two zero blocks of the end-of-archive marker.
python3 - "$tmp/oci" <<'PY'
import gzip, json, os, sys, tarfile, io
root = sys.argv[1]
def blob(d):
    alg, h = d.split(":")
    return os.path.join(root, "blobs", alg, h)
index = json.load(open(os.path.join(root, "index.json")))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
for layer in manifest["layers"]:
    raw = open(blob(layer["digest"]), "rb").read()
    data = gzip.decompress(raw) if layer["mediaType"].endswith("gzip") else raw
    assert len(data) % 512 == 0, f"layer is {len(data)} bytes, not whole 512-byte blocks"
    assert data[-1024:] == bytes(1024), "layer lacks the end-of-archive blocks"
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as t:
        names = []
        for m in t:
            names.append(m.name)
            if m.isfile():
                assert len(t.extractfile(m).read()) == m.size, m.name
    assert names == ["volguard"], names
    open(os.path.join(root, "layer.tar"), "wb").write(data)
    print("layer:", layer["digest"][:19], len(data), "bytes, members", names, "(strict tar: ok)")
PY
tar --list --file "$tmp/oci/layer.tar" >/dev/null
umoci unpack --image "$tmp/oci:volguard" "$tmp/bundle" >/dev/null
ls -l "$tmp/bundle/rootfs"
# Only /volguard in the image: it must need no shared library.
if ldd "$tmp/bundle/rootfs/volguard" 2>&1 | grep -q '=>'; then echo "binary is not static" >&2; exit 1; fi
got=$(env -i "$tmp/bundle/rootfs/volguard" --version)
echo "unpacked binary: $got"
# "volguard VERSION (commit C)": the version, and the commit it was built from.
case "$got" in "volguard $version (commit "*) ;; *) echo "unexpected --version: $got" >&2; exit 1 ;; esac

# Reproducible: the same binary built into an image again, a clock second later (a time taken from
# the clock would differ), gives the same manifest digest and the same archive, byte for byte.
sleep 1.1
.ci/image.sh "$bin" "$version" "$tmp/again" >/dev/null
first=$(skopeo inspect --format '{{.Digest}}' "oci-archive:$tar")
second=$(skopeo inspect --format '{{.Digest}}' "oci-archive:$tmp/again/volguard.oci.tar")
echo "image digest, built twice: $first $second"
[[ $first == sha256:* && $first == "$second" ]] || { echo "two builds of one binary gave two image digests" >&2; exit 1; }
cmp "$tar" "$tmp/again/volguard.oci.tar" || { echo "two builds of one binary gave two image archives" >&2; exit 1; }
echo "image archive, built twice: $(sha256sum < "$tar" | cut -d' ' -f1) (identical)"
