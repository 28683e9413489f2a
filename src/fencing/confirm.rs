//! `kubectl volguard fence confirm NODE`: a person says the node is down. Recorded on the node's
//! open incident with the caller's identity as the apiserver authenticates it (a
//! SelfSubjectReview), which the `manual` backend then counts as the fence.

use crate::fencing::args::FenceConfirmArgs;
use crate::model::OUT_OF_SERVICE_TAINT;
use crate::model::fence::NodeFence;
use crate::rules::proof::Key;
use crate::state::query;

const CONFIRM_NODE_DOWN: Key = Key::ConfirmNodeDown;
use crate::state::{GoneConfirmation, Write, Writer};

/// The field manager of a person's confirmation.
const FIELD_MANAGER: &str = "volguard-fence-confirm";
use anyhow::Context;

/// Who the apiserver says the caller is.
async fn whoami(view: &crate::state::View) -> anyhow::Result<String> {
    view.read(query::WhoAmI)
        .await
        .context("asking the apiserver who you are (SelfSubjectReview)")?
        .context("the apiserver did not say who you are")
}

/// The node's incident that is still open (not Done, Failed or Aborted).
pub fn open_incident<'a>(all: &'a [NodeFence], node: &str) -> Option<&'a NodeFence> {
    all.iter()
        .filter(|f| f.spec.node == node && !f.status.phase.is_final() && !f.is_release_record())
        .max_by_key(|f| f.metadata.creation_timestamp)
}

pub async fn run(args: FenceConfirmArgs) -> anyhow::Result<()> {
    let client =
        crate::runtime::kube::client_for(args.kubeconfig.as_deref(), args.context.as_deref())
            .await?;
    // Nothing cached: every read below is live.
    let view =
        crate::state::View::from_store(client, Default::default(), crate::state::Needs::default());
    let writer = |identity: String| view.writer(FIELD_MANAGER, identity);
    // Asking who we are publishes no Event: no identity needed yet.
    let user = whoami(&view).await?;
    let node = args.node.as_str();
    let live = super::observe::node(&view, node)
        .await
        .with_context(|| format!("reading node {node:?}"))?;
    // A node that heartbeats is not down, whoever says so (rules.md §7).
    if let Some(n) = &live {
        refuse_if_alive(&view, n, node, args.partition_after).await?;
    }
    let all: Vec<NodeFence> = match view
        .read(query::Fences(
            crate::state::FencesOf::All,
            crate::state::Fresh::Unbounded,
        ))
        .await
    {
        crate::rules::Fact::Found(all) => all.iter().map(|f| (**f).clone()).collect(),
        crate::rules::Fact::Missing => Vec::new(),
        crate::rules::Fact::Unknown(e) => {
            return Err(anyhow::Error::new(e).context("listing NodeFence incidents"));
        }
    };
    let Some(f) = open_incident(&all, node) else {
        if live.is_none() {
            // The Node is gone without a record: the person's word goes on an incident that
            // volguard's controller verifies (the Node gone, its Lease silent) before it writes
            // the release (rules.md §8: a confirmation is an input, never a record).
            let rec = writer(user.clone())
                .apply(GoneConfirmation { node, by: &user })
                .await
                .with_context(|| {
                    format!("recording your confirmation for the deleted node {node:?}")
                })?;
            println!(
                "nodefence/{} recorded: node {node} (deleted) confirmed down by {user}; volguard's controller \
                 releases its pods once it has verified the Node gone and its Lease silent",
                rec.metadata.name
            );
            return Ok(());
        }
        anyhow::bail!(
            "node {node:?} has no open fencing incident (kubectl get nodefences). If you have confirmed the machine \
             is down and want its volumes released now: kubectl annotate node {node} {CONFIRM_NODE_DOWN}=true && \
             kubectl taint node {node} {OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute"
        );
    };
    confirm(&writer(user.clone()), f, &user).await
}

/// Record `user`'s confirmation on incident `f`, and say when it counts.
async fn confirm(writer: &Writer, f: &NodeFence, user: &str) -> anyhow::Result<()> {
    let at = jiff::Timestamp::now();
    let stamp = Write::ConfirmFence {
        name: f.metadata.name.clone(),
        resource_version: f.metadata.resource_version.as_deref().map(str::to_string),
        by: format!("{user} at {at}"),
    };
    writer.apply(stamp).await.with_context(|| {
        format!(
            "recording your confirmation on NodeFence {}",
            f.metadata.name
        )
    })?;
    let backend = f.status.backend.map(|b| b.as_str()).unwrap_or("none yet");
    println!(
        "nodefence/{} confirmed: node {} is down, by {user} at {at}",
        f.metadata.name, f.spec.node
    );
    if !f
        .spec
        .backends
        .contains(&crate::model::fence::BackendKind::Manual)
    {
        println!(
            "note: this incident's backends ({:?}) do not include manual; it will not use your confirmation",
            f.spec.backends
        );
    } else if f.status.backend != Some(crate::model::fence::BackendKind::Manual) {
        println!("it counts once the incident reaches its manual backend (now: {backend})");
    }
    Ok(())
}

/// An error saying why `node` is not down, if its heartbeat says it is alive.
async fn refuse_if_alive(
    view: &crate::state::View,
    n: &crate::model::Node,
    node: &str,
    partition_after: jiff::SignedDuration,
) -> anyhow::Result<()> {
    let lease = super::observe::lease(view, node)
        .await
        .with_context(|| format!("reading the Lease of node {node:?}"))?;
    let renewed = lease.as_deref().and_then(|t| t.parse().ok());
    if let Some(why) =
        crate::rules::fencing::alive(n.ready(), renewed, partition_after, jiff::Timestamp::now())
    {
        anyhow::bail!(
            "node {node:?} is not down: {why}. volguard does not confirm a node that heartbeats: stop its \
             kubelet or power the machine off, wait until `kubectl get node {node}` shows NotReady and its \
             Lease ({}/{node}, last renewed {}) stops renewing, then run this again",
            super::observe::LEASE_NAMESPACE,
            lease.as_deref().unwrap_or("never"),
        );
    }
    Ok(())
}
