#!/usr/bin/env bash
# What a release page carries, in target/dist/ (make release; make test runs it and checks it):
#   volguard-VERSION-linux-amd64.tar.gz   the static binary and LICENSE (also the kubectl plugin: krew links it
#                                         as kubectl-volguard; by hand, `ln -s volguard kubectl-volguard`)
#   volguard-VERSION.tgz                  the Helm chart (helm package)
#   volguard-VERSION.oci.tar              the image (make image), to push with skopeo
#   volguard-VERSION.yaml                 the kustomize base rendered, CEL policies included (kubectl apply -f)
#   volguard.krew.yaml                    the krew plugin manifest: its sha256 is the archive's, its uri
#                                         RELEASE_URL/ARCHIVE (RELEASE_URL: where the files are published)
#   LICENSE, SECURITY.md, CHANGELOG.md    the licence, how to report a flaw, this version's notes
#   IMAGE                                 the released image: volguard:VERSION@sha256:...
#   volguard-VERSION.cdx.json             CycloneDX SBOM of the binary (cargo-cyclonedx, from Cargo.lock),
#                                         plus the C runtime linked statically: glibc and libgcc
#   volguard-VERSION.image.cdx.json       CycloneDX SBOM of the image: the binary, its crates, glibc, libgcc
#   volguard-VERSION.intoto.json          in-toto Statement, SLSA provenance v1: source commit, builder,
#                                         materials (Cargo.lock, the toolchain), every file above as subject
#   volguard-VERSION.image.json           the image's signing payload (its manifest digest)
#   *.sig                                 ECDSA P-256 / SHA-256 signatures (base64 DER) over SHA256SUMS,
#                                         the chart and the image payload, with SIGNING_KEY (PEM); without
#                                         one nothing is signed. No public key ships with them: a reader
#                                         verifies against the one committed in keys/ (.ci/verify-release.sh)
#   SHA256SUMS                            sha256sum -c SHA256SUMS
# A registry push of the image and an upload of these files is all that is left to a publisher.
set -euo pipefail
version=$1 bin=$2 helm=$3 kubectl=$4 cyclonedx=$5 signing_key=${6:-}
# Where the release's files will be downloaded from (the krew manifest's uri is under it).
release_url=${RELEASE_URL:-https://github.com/volguard/volguard/releases/download/v$version}
release_url=${release_url%/}
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
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

# The released image by tag and digest: what the manifests and the packaged chart pull.
digest=$(skopeo inspect --format '{{.Digest}}' "oci-archive:target/image/volguard.oci.tar")
[[ $digest == sha256:* ]] || { echo "no image digest: $digest" >&2; exit 1; }
image="volguard:$version@$digest"
cp target/image/volguard.oci.tar "$out/volguard-$version.oci.tar"
echo "$image" > "$out/IMAGE"

# The chart's files/ and crds/ link into manifests/: copied with the links resolved, its values
# naming the released image, then packaged.
chart=$(mktemp -d)
trap 'rm -rf "$pkg" "$chart"' EXIT
cp -rL charts/volguard "$chart/volguard"
sed -i -e "s|^  tag: \"\"|  tag: \"$version\"|" -e "s|^  digest: \"\"|  digest: \"$digest\"|" "$chart/volguard/values.yaml"
sed -i "s|^      image: volguard:.*|      image: $image|" "$chart/volguard/Chart.yaml"
"$helm" package "$chart/volguard" --version "$version" --app-version "$version" --destination "$out" >/dev/null
"$kubectl" kustomize manifests/base | sed "s|image: volguard:dev\$|image: $image|" > "$out/volguard-$version.yaml"

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
    uri: $release_url/$archive
    sha256: $sha
    bin: volguard
    files:
    - {from: volguard, to: .}
    - {from: README.md, to: .}
    - {from: LICENSE, to: .}
KREW

# SBOMs: the binary's from Cargo.lock (its target's normal and build dependencies), and the
# image's: the same crates under the image (by digest) holding the binary (by sha256).
sbom=$(mktemp -d)
trap 'rm -rf "$pkg" "$chart" "$sbom"' EXIT
"$cyclonedx" cyclonedx --quiet --format json --spec-version 1.5 --describe binaries \
  --target x86_64-unknown-linux-gnu
# cargo-cyclonedx names the workspace's own crates by their path on the build machine
# (`path+file:///…/volguard#volguard@0.1.0`, or `…/volguard-core#0.1.0` when the directory is the
# crate's name): each reference becomes NAME@VERSION, so the SBOM carries no build path and is the
# same wherever it is built.
jq 'walk(if type == "string" and test("^path\\+file://") then
      (capture("^path\\+file://(?<dir>[^#]*)#(?<frag>.*)$") as $c
       | if ($c.frag | contains("@")) then $c.frag else ($c.dir | split("/") | last) + "@" + $c.frag end)
    else . end)' volguard_bin.cdx.json \
  > "$sbom/bin.cdx.json" && mv "$sbom/bin.cdx.json" volguard_bin.cdx.json
# cargo-cyclonedx sees crates only; the static binary also holds the C runtime the linker took from
# the build host (glibc's libc.a under crt-static, libgcc's unwinder), named with the version and
# the distribution package each came from. glibc's version is read from the binary itself (libc.a
# links in its banner), so a binary without glibc inside fails here rather than get a wrong SBOM.
linked_from() { # FILE -> "package version" of the Debian package holding it, or nothing
  local pkg
  pkg=$(dpkg -S "$(realpath "$1")" 2>/dev/null | head -1 | cut -d: -f1) || return 0
  if [[ -n $pkg ]]; then echo "$pkg $(dpkg-query -W -f '${Version}' "$pkg")"; fi
}
distro=$(. /etc/os-release 2>/dev/null && echo "${ID:-linux}-${VERSION_ID:-}")
c_component() { # NAME VERSION LICENSE DESCRIPTION FILE
  local deb
  deb=$(linked_from "$5")
  jq -n --arg n "$1" --arg v "$2" --arg l "$3" --arg d "$4" --arg deb "$deb" --arg distro "$distro" '
    {type: "library", "bom-ref": ($n + "@" + $v), name: $n, version: $v, description: $d,
     licenses: [{expression: $l}], properties: [{name: "volguard:linkage", value: "static"}]}
    + (if $deb == "" then {} else ($deb | split(" ")) as [$p, $pv] |
        {purl: ("pkg:deb/" + ($distro | split("-")[0]) + "/" + $p + "@" + ($pv | @uri)
           + "?arch=amd64&distro=" + $distro)} end)'
}
cc=${CC:-cc}
glibc_banner=$(grep -a -o -E 'GNU C Library \([^)]*\) [a-z]+ release version [0-9]+(\.[0-9]+)+' "$bin" | head -1 || true)
glibc=${glibc_banner##* }
[[ -n $glibc ]] || { echo "release: $bin holds no glibc banner: not the crt-static glibc build?" >&2; exit 1; }
gcc_version=$("$cc" -dumpfullversion 2>/dev/null || "$cc" -dumpversion)
runtime=$(jq -n --argjson g "$(c_component glibc "$glibc" LGPL-2.1-or-later \
    "$glibc_banner, linked statically (crt-static)" "$("$cc" -print-file-name=libc.a)")" \
  --argjson l "$(c_component libgcc "$gcc_version" 'GPL-3.0-or-later WITH GCC-exception-3.1' \
    'GCC runtime library (libgcc, libgcc_eh: unwinding), linked statically' "$("$cc" -print-libgcc-file-name)")" '[$g, $l]')
jq --argjson rt "$runtime" --arg root "$(jq -r '.metadata.component."bom-ref"' volguard_bin.cdx.json)" '
  .components += $rt
  | .dependencies = [(.dependencies // [])[]
      | if .ref == $root then .dependsOn += [$rt[]."bom-ref"] else . end]
  | .dependencies += [$rt[] | {ref: ."bom-ref", dependsOn: []}]' \
  volguard_bin.cdx.json > "$out/volguard-$version.cdx.json"
rm volguard_bin.cdx.json
bin_sha=$(sha256sum "$bin" | cut -d' ' -f1)
jq --arg v "$version" --arg d "$digest" --arg b "$bin_sha" '
  .metadata.component as $bin
  | .metadata.component = {type: "container", "bom-ref": "image", name: "volguard", version: $v,
      purl: ("pkg:oci/volguard@" + ($d | sub(":"; "%3A")) + "?tag=" + $v),
      hashes: [{alg: "SHA-256", content: ($d | ltrimstr("sha256:"))}]}
  | .components = [$bin + {hashes: [{alg: "SHA-256", content: $b}]}] + .components' \
  "$out/volguard-$version.cdx.json" > "$out/volguard-$version.image.cdx.json"

# The image's signing payload: what a signature over the image says (its manifest digest).
jq -n --arg d "$digest" --arg v "$version" \
  '{critical: {identity: {"docker-reference": "volguard"}, image: {"docker-manifest-digest": $d},
    type: "volguard release image signature"}, optional: {tag: $v}}' > "$out/volguard-$version.image.json"

# Provenance (SLSA v1 in an in-toto Statement): every file so far, and the image, as subjects.
commit=$(git rev-parse HEAD)
dirty=$(git status --porcelain --untracked-files=no | wc -l)
subjects=$(cd "$out" && for f in *; do sha256sum "$f"; done | jq -R -s --arg d "$digest" '
  [split("\n")[] | select(length > 0) | capture("^(?<s>[0-9a-f]+)  (?<n>.+)$") | {name: .n, digest: {sha256: .s}}]
  + [{name: "volguard", digest: {sha256: ($d | ltrimstr("sha256:"))}}]')
jq -n --argjson subjects "$subjects" --arg repo "$repo" --arg commit "$commit" --arg v "$version" \
  --argjson dirty "$dirty" --arg lock "$(sha256sum Cargo.lock | cut -d' ' -f1)" \
  --arg rustc "$(rustc -V)" --arg cargo "$(cargo -V)" --arg helm "$("$helm" version --short)" \
  --arg host "$(uname -srm)" --arg started "$started" --arg finished "$(date -u +%Y-%m-%dT%H:%M:%SZ)" '
  {_type: "https://in-toto.io/Statement/v1", subject: $subjects,
   predicateType: "https://slsa.dev/provenance/v1",
   predicate: {
     buildDefinition: {
       buildType: ($repo + "/blob/" + $commit + "/.ci/release.sh"),
       externalParameters: {version: $v, source: {uri: ("git+" + $repo), digest: {gitCommit: $commit}},
         uncommittedChanges: $dirty},
       internalParameters: {rustc: $rustc, cargo: $cargo, helm: $helm},
       resolvedDependencies: [
         {uri: ("git+" + $repo), digest: {gitCommit: $commit}},
         {name: "Cargo.lock", digest: {sha256: $lock}}]},
     runDetails: {builder: {id: ($repo + "/blob/" + $commit + "/Makefile#release")},
       metadata: {invocationId: ("make release on " + $host), startedOn: $started, finishedOn: $finished}}}}' \
  > "$out/volguard-$version.intoto.json"

(cd "$out" && sha256sum -- * | grep -v ' SHA256SUMS$' > SHA256SUMS)

# Signatures with the release manager's key (never in the repository): SHA256SUMS (which covers
# every file), the chart, and the image payload. ECDSA P-256 over SHA-256, base64 DER. Its public
# half is not shipped: readers verify against keys/volguard-release.pub, committed here.
signing_pub=$(mktemp)
trap 'rm -rf "$pkg" "$chart" "$sbom" "$signing_pub"' EXIT
if [[ -n $signing_key ]]; then
  openssl pkey -in "$signing_key" -pubout -out "$signing_pub"
  for f in SHA256SUMS "volguard-$version.tgz" "volguard-$version.image.json"; do
    openssl dgst -sha256 -sign "$signing_key" "$out/$f" | base64 -w0 > "$out/$f.sig"
  done
  if ! cmp -s <(openssl pkey -pubin -in "$signing_pub" -outform DER) \
      <(openssl pkey -pubin -in keys/volguard-release.pub -outform DER); then
    echo "release: SIGNING_KEY is not the release key (keys/volguard-release.pub): this bundle will not" \
      "verify against it" >&2
  fi
else
  echo "release: no SIGNING_KEY, nothing signed" >&2
fi

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
# ArtifactHub's image list names the released image too.
"$helm" show chart "$out/volguard-$version.tgz" | grep -q "image: $image"
# Every image the chart and the manifests name is the released one, by tag and digest.
for f in <(cat <<<"$rendered") "$out/volguard-$version.yaml"; do
  images=$(grep -E '^ +image: ' "$f" | sed -E 's/^ +image: //; s/"//g' | sort -u)
  [[ $images == "$image" ]] || { echo "images named: $images (want $image)" >&2; exit 1; }
done
# The krew manifest: one platform, whose sha256 is the archive's and whose uri is the archive
# under RELEASE_URL (what `kubectl krew install` downloads and compares).
krew_sha=$(sed -n 's/^    sha256: //p' "$out/volguard.krew.yaml")
krew_uri=$(sed -n 's/^    uri: //p' "$out/volguard.krew.yaml")
[[ $krew_sha == "$(sha256sum < "$out/$archive" | cut -d' ' -f1)" ]] ||
  { echo "krew manifest sha256 $krew_sha is not the archive's" >&2; exit 1; }
[[ $krew_uri == "$release_url/$archive" ]] || { echo "krew manifest uri $krew_uri (want $release_url/$archive)" >&2; exit 1; }
# No SBOM names the machine it was built on.
! grep -l -e "$PWD" -e 'path+file://' "$out/volguard-$version.cdx.json" "$out/volguard-$version.image.cdx.json" ||
  { echo "an SBOM names a build path" >&2; exit 1; }
jq -e '[.components[]."bom-ref"] | (all(contains("@"))) and (length == (unique | length))' \
  "$out/volguard-$version.cdx.json" >/dev/null || { echo "SBOM references are not unique NAME@VERSION" >&2; exit 1; }
# The SBOM lists every crate the binary links, each at its Cargo.lock version and nothing else.
jq -r '.components[] | select(.purl | startswith("pkg:cargo/")) | "\(.name)@\(.version)"' \
  "$out/volguard-$version.cdx.json" | sort -u > "$check/sbom"
awk '/^name = /{n=$3} /^version = /{print n "@" $3}' Cargo.lock | tr -d '"' | sort -u > "$check/lock"
cargo tree --locked --offline -e normal --target x86_64-unknown-linux-gnu --prefix none -f '{p}' \
  | awk '$1 != "volguard" {print $1 "@" substr($2, 2)}' | sort -u > "$check/linked"
[[ -z $(comm -23 "$check/sbom" "$check/lock") ]] || { echo "SBOM names crates not in Cargo.lock" >&2; exit 1; }
[[ -z $(comm -13 "$check/sbom" "$check/linked") ]] || { echo "SBOM misses linked crates" >&2; exit 1; }
jq -e --arg d "$digest" '.metadata.component.hashes[0].content == ($d | ltrimstr("sha256:"))' \
  "$out/volguard-$version.image.cdx.json" >/dev/null
# Both SBOMs name the C runtime the binary links statically, at the build host's versions, and the
# binary is static (it needs no loader, so its libc is the one inside it).
for f in "volguard-$version.cdx.json" "volguard-$version.image.cdx.json"; do
  jq -e --arg g "$glibc" --arg l "$gcc_version" '
    ([.components[] | select(.name == "glibc" and .version == $g and .type == "library")] | length == 1)
    and ([.components[] | select(.name == "libgcc" and .version == $l)] | length == 1)
    and ([.dependencies[] | select(.dependsOn | index("glibc@" + $g))] | length == 1)' "$out/$f" >/dev/null ||
    { echo "$f does not list glibc $glibc and libgcc $gcc_version" >&2; exit 1; }
done
if ldd "$bin" 2>&1 | grep -q '=>'; then echo "$bin is not static: the SBOM's glibc would be wrong" >&2; exit 1; fi
# A distribution's glibc names its package version in the banner: the purl's must be that one.
banner_pkg=$(sed -nE 's/^GNU C Library \([A-Za-z]+ GLIBC ([^)]+)\).*/\1/p' <<<"$glibc_banner")
if [[ -n $banner_pkg ]]; then
  jq -e --arg v "$banner_pkg" '[.components[] | select(.name == "glibc") | .purl | contains("@" + ($v | @uri) + "?")] == [true]' \
    "$out/volguard-$version.cdx.json" >/dev/null || { echo "SBOM glibc purl is not $banner_pkg (the binary's)" >&2; exit 1; }
fi
# The provenance names this commit and every file it vouches for by its sha256.
jq -e --arg c "$commit" '.predicate.buildDefinition.externalParameters.source.digest.gitCommit == $c' \
  "$out/volguard-$version.intoto.json" >/dev/null
(cd "$out" && jq -r '.subject[] | select(.name != "volguard") | "\(.digest.sha256)  \(.name)"' \
  "volguard-$version.intoto.json" | sha256sum --quiet -c -)
# The bundle verifies as a reader would verify it, against the signing key's public half
# (make release-check also checks what other keys and a tampered copy get).
if [[ -n $signing_key ]]; then
  .ci/verify-release.sh "$out" "$signing_pub"
fi
rm -rf "$check"
echo "wrote $out:"
(cd "$out" && ls -l --time-style=+ | awk 'NR>1 {print "  " $NF "  " $5 " bytes"}')
