#!/usr/bin/env bash
# Verify a release bundle (the files of a release page, or make release's target/dist):
#   .ci/verify-release.sh DIR [PUBKEY]
# PUBKEY defaults to keys/volguard-release.pub, the release key committed in this repository (its
# fingerprint is in SECURITY.md). A public key shipped inside DIR is never used: whoever can change
# the bundle can re-sign it with a key of their own and put that key beside it.
# Passes only if SHA256SUMS, the chart and the image payload each carry a signature by PUBKEY,
# every file SHA256SUMS names has that sum, and every other file in DIR is named by it.
set -euo pipefail
dir=${1:?usage: verify-release.sh DIR [PUBKEY]}
committed=$(cd "$(dirname "$0")/.." && pwd)/keys/volguard-release.pub
pub=${2:-$committed}
fail() { echo "verify-release: REFUSED: $*" >&2; exit 1; }

# The fingerprint: sha256 of the DER SubjectPublicKeyInfo (SECURITY.md says how to compute it).
fp=$(openssl pkey -pubin -in "$pub" -outform DER 2>/dev/null | sha256sum | cut -d' ' -f1) ||
  fail "$pub is not a public key"
[[ $fp =~ ^[0-9a-f]{64}$ ]] || fail "$pub is not a public key"
if [[ $pub -ef $committed ]]; then which="the committed release key"; else which="$pub"; fi
echo "verify-release: key sha256:$fp ($which)"

[[ -f $dir/SHA256SUMS ]] || fail "no SHA256SUMS in $dir"
# Names only, no paths: a sums file must not reach outside the bundle.
if awk '{print $2}' "$dir/SHA256SUMS" | grep -q /; then fail "SHA256SUMS names a path outside $dir"; fi
chart=$(awk '$2 ~ /^volguard-[^-]+\.tgz$/ {print $2}' "$dir/SHA256SUMS")
payload=$(awk '$2 ~ /^volguard-[^-]+\.image\.json$/ {print $2}' "$dir/SHA256SUMS")
[[ -n $chart && -n $payload ]] || fail "SHA256SUMS names no chart or no image payload"

sig=$(mktemp); trap 'rm -f "$sig"' EXIT
for f in SHA256SUMS "$chart" "$payload"; do
  [[ -f $dir/$f.sig ]] || fail "$f is not signed ($f.sig missing)"
  base64 -d "$dir/$f.sig" > "$sig" 2>/dev/null || fail "$f.sig is not base64"
  openssl dgst -sha256 -verify "$pub" -signature "$sig" "$dir/$f" >/dev/null 2>&1 ||
    fail "$f: signature is not by key sha256:$fp"
  echo "verify-release: $f: signature ok"
done

(cd "$dir" && sha256sum --quiet --strict -c SHA256SUMS) || fail "a file differs from SHA256SUMS"
# A file the signed sums do not name is vouched for by nobody.
extra=$(cd "$dir" && for f in *; do
  case $f in SHA256SUMS | *.sig) continue ;; esac
  awk -v f="$f" '$2 == f {found=1} END {exit !found}' SHA256SUMS || echo "$f"
done)
[[ -z $extra ]] || fail "not in SHA256SUMS: $(echo $extra)"
# The image named in IMAGE is the one the signed payload vouches for.
if [[ -f $dir/IMAGE ]]; then
  want=$(jq -r '.critical.image."docker-manifest-digest"' "$dir/$payload")
  [[ $(cat "$dir/IMAGE") == *"@$want" ]] || fail "IMAGE is not the signed image digest $want"
fi
echo "verify-release: OK: $(wc -l < "$dir/SHA256SUMS") files match SHA256SUMS, signed by key sha256:$fp ($which)"
