//! rules.md §8 "break glass is for named people": a `volguard.io/*` override (allow-finalizer-
//! removal, confirm-force-delete, allow-lock-removal, confirm-node-down) is judged when it is set
//! (`rules::proof`): the setter must be a person who may use the break-glass verb, asked here
//! with a SubjectAccessReview carrying that person's own groups, for the virtual resource
//! `breakglass` in group `volguard.io`, verb `use`, named after the rule, in the object's namespace
//! (the chart's ClusterRole `volguard-break-glass` grants it; bind it to the people you name). A
//! stored override then counts when its stamp names a person: no question at use time, so a later
//! caller cannot lend it authority. The rules receive a proof only as `rules::proof::Reader`
//! read it.

use super::context::Admission;
use super::review::Request;
use crate::state::query;
use std::time::Duration;

pub use crate::rules::proof::BreakGlass;

pub const GROUP: &str = "volguard.io";
pub const RESOURCE: &str = "breakglass";
pub const VERB: &str = "use";
/// How long one authorization may take; past it the override does not count.
const SAR_TIMEOUT: Duration = Duration::from_secs(2);

/// How this request reads stored proofs (rules.md §8): the break-glass mode, and with
/// `--break-glass-expiry` how long a proof counts, on this process's clock now.
pub(super) fn proofs(cx: &Admission) -> crate::rules::proof::Reader {
    crate::rules::proof::Reader {
        mode: cx.break_glass,
        expiry: cx
            .break_glass_expiry
            .map(|after| crate::rules::proof::Expiry {
                after,
                now: jiff::Timestamp::now(),
            }),
    }
}

/// What the authorizer says of the setter of `o` (the caller of `req`, with their groups).
pub(super) async fn authority(
    cx: &Admission,
    req: &Request<'_>,
    o: crate::rules::proof::Override,
) -> crate::rules::proof::Authority {
    use crate::rules::proof::Authority;
    match authorized(cx, req, o.rule).await {
        Ok(true) => Authority::Allowed,
        Ok(false) => Authority::Denied,
        Err(e) => Authority::Unknown(e),
    }
}

async fn authorized(cx: &Admission, req: &Request<'_>, rule: &str) -> Result<bool, String> {
    let ask = crate::state::authorizer::Ask {
        user: &req.user_info,
        group: GROUP,
        resource: RESOURCE,
        verb: VERB,
        name: rule,
        namespace: req.namespace.as_deref(),
    };
    Box::pin(cx.cluster.read(query::May(ask, SAR_TIMEOUT))).await
}
