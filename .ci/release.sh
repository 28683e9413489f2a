#!/usr/bin/env bash
# What a release page carries, in target/dist/ (make release; make test runs it and checks it):
#   volguard-VERSION-linux-amd64.tar.gz   the static binary and LICENSE (also the kubectl plugin: krew links it
#                                         as kubectl-volguard; by hand, `ln -s volguard kubectl-volguard`)
#   volguard-VERSION.tgz                  the Helm chart (helm package)
#   volguard-VERSION.oci.tar              the image (make image), to push with skopeo
#   volguard-VERSION.yaml                 the kustomize base rendered (kubectl apply -f)
#   volguard-policies-VERSION.yaml        the CEL policies rendered (optional, rules.md §9)
#   volguard.krew.yaml                    the krew plugin manifest (its sha256 is the archive's)
#   LICENSE, SECURITY.md, CHANGELOG.md    the licence, how to report a flaw, this version's notes
#   SHA256SUMS                            sha256sum -c SHA256SUMS
# A registry push of the image and an upload of these files is all that is left to a publisher.
set -euo pipefail
version=$1 bin=$2 helm=$3 kubectl=$4
out=target/dist
rm -rf "$out"
mkdir -p "$out"
repo=https://github.com/volguard/volguard

# The binary, as the plugin archive krew unpacks (fixed owner and time: same binary, same archive).
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
install -m 0755 "$bin" "$pkg/volguard"
cp README.md "$pkg/README.md"
cp LICENSE "$pkg/LICENSE"
archive=volguard-$version-linux-amd64.tar.gz
tar --create --format=posix --numeric-owner --owner=0 --group=0 --mtime=@0 \
  --pax-option=delete=atime,delete=ctime --directory "$pkg" volguard README.md LICENSE | gzip -n > "$out/$archive"

# The chart's files/ and crds/ link into manifests/: helm packages the linked files' contents.
"$helm" package charts/volguard --version "$version" --app-version "$version" --destination "$out" \
  2> >(grep -v 'found symbolic link' >&2) >/dev/null
cp target/image/volguard.oci.tar "$out/volguard-$version.oci.tar"
"$kubectl" kustomize manifests/base > "$out/volguard-$version.yaml"
"$kubectl" kustomize manifests/policies > "$out/volguard-policies-$version.yaml"

# The project's papers beside the artifacts: the licence, this version's notes, how to report a flaw.
cp LICENSE SECURITY.md "$out/"
cp CHANGELOG.md "$out/CHANGELOG.md"

sha=$(sha256sum "$out/$archive" | cut -d' ' -f1)
cat > "$out/volguard.krew.yaml" <<KREW
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: volguard
spec:
  version: v$version
  homepage: $repo
  shortDescription: Why a PVC, PV, pod or node is stuck, and what to do
  description: |
    volguard's kubectl plugin: \`kubectl volguard explain pvc|pv|pod|node NAME\` says what keeps a
    claim or volume from going away, why a pod will not start, or why a node is fenced, and the
    safe next step; \`kubectl volguard report unused\` lists idle claims and what they hold;
    \`kubectl volguard fence confirm NODE\` confirms a node is down.
  platforms:
  - selector:
      matchLabels: {os: linux, arch: amd64}
    uri: $repo/releases/download/v$version/$archive
    sha256: $sha
    bin: volguard
    files:
    - {from: volguard, to: .}
    - {from: README.md, to: .}
    - {from: LICENSE, to: .}
KREW
(cd "$out" && sha256sum -- * | grep -v ' SHA256SUMS$' > SHA256SUMS)

# Check what was written: the sums, the archive's binary (also as the plugin), the packaged chart
# renders with its symlinked files resolved, the krew manifest names the archive's digest.
(cd "$out" && sha256sum --quiet -c SHA256SUMS)
check=$(mktemp -d)
tar -xzf "$out/$archive" -C "$check"
"$check/volguard" version | grep -q "$version"
cmp LICENSE "$check/LICENSE"
grep -q "^## $version" "$out/CHANGELOG.md" || { echo "CHANGELOG.md has no entry for $version" >&2; exit 1; }
ln -s volguard "$check/kubectl-volguard"
"$check/kubectl-volguard" --help | grep -q "kubectl volguard"
rendered=$("$helm" template v "$out/volguard-$version.tgz" -n vg --set policies.enabled=true)
grep -q 'name: volguard-force-delete' <<<"$rendered"
grep -q 'kind: ValidatingWebhookConfiguration' <<<"$rendered"
grep -q "sha256: $sha" "$out/volguard.krew.yaml"
rm -rf "$check"
echo "wrote $out:"
(cd "$out" && ls -l --time-style=+ | awk 'NR>1 {print "  " $NF "  " $5 " bytes"}')
