#!/usr/bin/env bash
# What make release-check asks of a bundle make release signed with a throwaway key (PUB is its
# public half): .ci/verify-release.sh passes it against PUB, refuses it against the committed
# release key, and refuses copies an attacker could make. SECURITY.md prints the committed key's
# fingerprint.
#   .ci/release-check.sh DIST PUB
set -euo pipefail
dist=$1 pub=$2
verify=.ci/verify-release.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "release-check: FAILED: $*" >&2; exit 1; }
refused() { # WHY DIR [PUBKEY]: verify must refuse, on the named ground
  local why=$1; shift
  if "$verify" "$@" >"$tmp/out" 2>&1; then cat "$tmp/out"; fail "verify accepted $why"; fi
  grep -q 'REFUSED' "$tmp/out" || { cat "$tmp/out"; fail "verify failed on $why without refusing"; }
  echo "release-check: refused as it must: $why ($(grep -o 'REFUSED: .*' "$tmp/out"))"
}
fingerprint() { openssl pkey -pubin -in "$1" -outform DER | sha256sum | cut -d' ' -f1; }

# The committed key is the one SECURITY.md names, and no bundle carries a key of its own.
committed=$(fingerprint keys/volguard-release.pub)
grep -q "$committed" SECURITY.md || fail "SECURITY.md does not print the release key's fingerprint $committed"
[[ -z $(find "$dist" -name '*.pub' -o -name '*.pem') ]] || fail "the bundle ships a key"
[[ $(fingerprint "$pub") != "$committed" ]] || fail "the throwaway key is the release key"

# (a) against the key that signed it: passes.
"$verify" "$dist" "$pub" || fail "the bundle does not verify against the key that signed it"
# (b) the same bundle against the committed release key (the default): refused.
refused "a bundle signed by another key than the committed one" "$dist"

# (c) tampered: the manifests changed, SHA256SUMS regenerated, everything re-signed with the
# attacker's key. It verifies only against the attacker's own key (which is why a key beside the
# files proves nothing); against the committed key and the real signer's, refused.
attacker=$tmp/attacker.pem
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$attacker" 2>/dev/null
openssl pkey -in "$attacker" -pubout -out "$tmp/attacker.pub"
cp -a "$dist" "$tmp/tampered"
yaml=$(cd "$tmp/tampered" && ls volguard-*.yaml)
echo "# tampered" >> "$tmp/tampered/$yaml"
(cd "$tmp/tampered" && sha256sum -- * | grep -vE ' (SHA256SUMS|.*\.sig)$' > SHA256SUMS)
for f in "$tmp/tampered"/*.sig; do
  openssl dgst -sha256 -sign "$attacker" "${f%.sig}" | base64 -w0 > "$f"
done
"$verify" "$tmp/tampered" "$tmp/attacker.pub" >/dev/null || fail "the tampered copy is not well formed"
refused "a tampered bundle re-signed by another key, against the committed key" "$tmp/tampered"
refused "a tampered bundle re-signed by another key, against the signer's key" "$tmp/tampered" "$pub"

# A file changed but its sum left alone, and a file the sums do not name: refused with the right key.
cp -a "$dist" "$tmp/changed"
echo "# changed" >> "$tmp/changed/$yaml"
refused "a changed file under the signed SHA256SUMS" "$tmp/changed" "$pub"
cp -a "$dist" "$tmp/extra"
echo "not released" > "$tmp/extra/extra.sh"
refused "a file SHA256SUMS does not name" "$tmp/extra" "$pub"
echo "release-check: the bundle verifies against its signer only; the committed release key sha256:$committed refuses it"
