//! What typed decoding costs against skipping the same bytes, with the same parser (serde_json):
//! the bound under `make profile`'s instruction ratio. The floor skips a review's object; volguard
//! must decode the fields its rules read. Run under callgrind by `benches/profile.sh`, one case
//! per process (the difference between N+1 and 1 runs is one run's instructions).
//!
//! Cases, on the pod CREATE review of `make profile` (`synth::reviews`):
//! - `skip-review`: the whole review as `IgnoredAny` (the floor's parse, without its router);
//! - `volguard-review`: `admission::review::decode`, the decode every volguard rule starts from;
//! - `skip-volumes` / `owned-volumes` / `borrowed-volumes`: the pod's five volumes skipped, decoded
//!   by serde's derive into owned strings (volguard's model), and into strings borrowed from the
//!   body (what a borrowed model would do).
//!
//! Usage: decode_cost CASE N

// Only its reviews are used here.
#[allow(dead_code)]
#[path = "synth.rs"]
mod synth;

use serde::Deserialize;
use serde::de::IgnoredAny;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnedVolume {
    #[serde(default)]
    name: String,
    #[serde(default)]
    persistent_volume_claim: Option<OwnedClaim>,
    #[serde(default)]
    ephemeral: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnedClaim {
    #[serde(default)]
    claim_name: String,
    #[serde(default)]
    read_only: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BorrowedVolume<'a> {
    #[serde(default, borrow)]
    name: &'a str,
    #[serde(default, borrow)]
    persistent_volume_claim: Option<BorrowedClaim<'a>>,
    #[serde(default)]
    ephemeral: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BorrowedClaim<'a> {
    #[serde(default, borrow)]
    claim_name: &'a str,
    #[serde(default)]
    read_only: bool,
}

/// One run of `case` over `review` (the whole body) or `volumes` (the pod's list); returns a
/// number that depends on what was decoded, so nothing is optimised away.
fn run(case: &str, review: &[u8], volumes: &str) -> anyhow::Result<usize> {
    let claims = |names: &mut dyn Iterator<Item = (usize, usize)>| names.map(|(a, b)| a + b).sum();
    Ok(match case {
        "skip-review" => {
            serde_json::from_slice::<IgnoredAny>(review)?;
            1
        }
        "volguard-review" => {
            let r = volguard::admission::review::decode(review)?;
            r.uid.len()
        }
        "skip-volumes" => {
            serde_json::from_str::<IgnoredAny>(volumes)?;
            1
        }
        "owned-volumes" => {
            let v: Vec<OwnedVolume> = serde_json::from_str(volumes)?;
            claims(&mut v.iter().map(|v| {
                let c = v.persistent_volume_claim.as_ref();
                (
                    v.name.len() + usize::from(v.ephemeral.is_some()),
                    c.map_or(0, |c| c.claim_name.len() + usize::from(c.read_only)),
                )
            }))
        }
        "borrowed-volumes" => {
            let v: Vec<BorrowedVolume<'_>> = serde_json::from_str(volumes)?;
            claims(&mut v.iter().map(|v| {
                let c = v.persistent_volume_claim.as_ref();
                (
                    v.name.len() + usize::from(v.ephemeral.is_some()),
                    c.map_or(0, |c| c.claim_name.len() + usize::from(c.read_only)),
                )
            }))
        }
        other => anyhow::bail!("unknown case {other:?}"),
    })
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(case), Some(n)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: decode_cost CASE N");
    };
    let n: usize = n.parse()?;
    let (_, _, review) = synth::reviews()
        .into_iter()
        .find(|(name, _, _)| *name == "pod_create_3_claims")
        .ok_or_else(|| anyhow::anyhow!("no pod_create_3_claims review"))?;
    let body: serde_json::Value = serde_json::from_slice(&review)?;
    let volumes = serde_json::to_string(&body["request"]["object"]["spec"]["volumes"])?;
    let mut total = 0;
    for _ in 0..n {
        total += run(
            case,
            std::hint::black_box(&review),
            std::hint::black_box(&volumes),
        )?;
    }
    println!("{total}");
    Ok(())
}
