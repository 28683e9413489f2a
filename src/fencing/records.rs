//! A node's records of release as every door reads them (rules.md §7, §8): the webhook's guards
//! (force delete, pod status, the RWO lock's holders and take-over) and the controller's lock
//! cleanup ask this one function whether a node read gone was deleted on proof; the judgement is
//! `rules::fencing::gone_on_record`'s.

use crate::rules::Fact;
use crate::state::query;
use crate::state::{FencesOf, Fresh, View};

/// When `node` is gone (`fact`, as read), the NodeFence that records its deletion on proof, made
/// after `since`, read live with the node's Lease. `None` when the node is there, or gone without
/// a record, or a record or the Lease could not be read (unsure: no proof), or the Lease renewed
/// after the record.
pub async fn gone_record<N>(
    view: &View,
    node: &str,
    fact: &Fact<N>,
    since: Option<jiff::Timestamp>,
) -> Option<String> {
    if !matches!(fact, Fact::Missing) {
        return None;
    }
    let Fact::Found(records) = view
        .read(query::Fences(FencesOf::Node(node), Fresh::Live))
        .await
    else {
        return None;
    };
    // The Lease is read only when a record could prove something.
    crate::model::fence::proof_of_down(&records, node, since, crate::model::fence::GONE)?;
    let renewed = lease_renewed(view, node).await;
    crate::rules::fencing::gone_on_record(&records, node, since, &renewed)
        .map(|f| f.metadata.name.clone())
}

/// The node's Lease renewTime, read live (`Found(None)`: no Lease, never renewed, or not a time).
pub async fn lease_renewed(view: &View, node: &str) -> Fact<Option<jiff::Timestamp>> {
    view.read(query::RenewTime(node, Fresh::Live))
        .await
        .map(|t| t.and_then(|t| t.parse().ok()))
}
