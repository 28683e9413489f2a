//! rules.md §7: partition healing, the decisions. Which nodes count as partitioned, whether an
//! incident may begin, and what proves a fence. The fencing controller (`src/fencing/`) gathers
//! the facts and performs each step; nothing here does I/O or reads a clock.

use jiff::{SignedDuration, Timestamp};

/// Per StorageClass, namespace or pod (`volguard.io/fencing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Fence through the configured backends.
    Auto,
    /// Only a person's `kubectl volguard fence confirm` fences.
    Manual,
    /// Upstream's behaviour: nothing happens until a person acts.
    Off,
}

impl Mode {
    fn parse(v: &str) -> Option<Mode> {
        match v {
            "auto" => Some(Mode::Auto),
            "manual" => Some(Mode::Manual),
            "off" => Some(Mode::Off),
            _ => None,
        }
    }
}

/// The mode for one pod's claim: its namespace's annotation, else the claim's StorageClass's, else
/// off — both an admin's. A pod may only lower it (to `manual` or `off`): one tenant must not
/// make a whole node eligible for fencing. A value that is not `auto|manual|off` counts as off
/// (doing nothing is upstream's behaviour, never a surprise); on a pod it is ignored.
pub fn mode(pod: Option<&str>, namespace: Option<&str>, class: Option<&str>) -> Mode {
    let granted = namespace
        .or(class)
        .and_then(Mode::parse)
        .unwrap_or(Mode::Off);
    match pod.and_then(Mode::parse) {
        Some(asked) if asked.rank() < granted.rank() => asked,
        _ => granted,
    }
}

impl Mode {
    /// Off < Manual < Auto: how much a mode lets volguard do on its own.
    fn rank(self) -> u8 {
        match self {
            Mode::Off => 0,
            Mode::Manual => 1,
            Mode::Auto => 2,
        }
    }
}

/// How long a pod tolerates `node.kubernetes.io/unreachable` (NoExecute): decoded with the pod.
pub use crate::model::Tolerates;

/// The seed's "forgiveness": the longest unreachable toleration among the node's affected pods.
/// `None` when one of them tolerates forever (its owner asked to wait for the node).
pub fn forgiveness(pods: impl IntoIterator<Item = Tolerates>) -> Option<SignedDuration> {
    let mut longest = 0i64;
    for t in pods {
        match t {
            Tolerates::NotAtAll => {}
            Tolerates::Seconds(s) => longest = longest.max(i64::from(s)),
            Tolerates::Forever => return None,
        }
    }
    Some(SignedDuration::from_secs(longest))
}

/// `--max-unhealthy-nodes`: a count, or a percentage of all nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnhealthy {
    Count(usize),
    Percent(u8),
}

impl std::str::FromStr for MaxUnhealthy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?}: expected a node count (2) or a percentage of nodes (10%)");
        match s.strip_suffix('%') {
            Some(p) => match p.parse::<u8>() {
                Ok(p) if p <= 100 => Ok(MaxUnhealthy::Percent(p)),
                _ => Err(bad()),
            },
            None => s.parse().map(MaxUnhealthy::Count).map_err(|_| bad()),
        }
    }
}

/// A network storm is not a dead node: more unhealthy nodes at once than allowed holds every new
/// incident (rules.md §7 "Decide").
pub fn storm(unhealthy: usize, total: usize, max: MaxUnhealthy) -> bool {
    let limit = match max {
        MaxUnhealthy::Count(n) => n,
        MaxUnhealthy::Percent(p) => total * usize::from(p) / 100,
    };
    unhealthy > limit
}

/// What is known of one node now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeHealth {
    /// The node's Lease renewTime changed last this long ago, by volguard's own clock (as
    /// kube-controller-manager measures it: the kubelet's clock is never compared with ours).
    /// `None` when volguard has not seen the Lease at all.
    pub lease_silent_for: Option<SignedDuration>,
    /// The Ready condition: `Some(true)` Ready, `Some(false)` NotReady or Unknown, `None` absent.
    pub ready: Option<bool>,
    /// When the Ready condition last changed.
    pub ready_changed: Option<Timestamp>,
    pub control_plane: bool,
    /// A planned-maintenance condition the node reports True (KEP-5683), if any.
    pub maintenance: Option<String>,
}

/// KEP-5683's Node conditions for planned work (alpha in 1.37): a node in one of them is not
/// partitioned, it is being worked on.
pub use crate::model::MAINTENANCE_CONDITIONS;

impl NodeHealth {
    /// Partitioned: its Lease silent for `after` and not Ready (rules.md §7 "Detect").
    pub fn unhealthy(&self, after: SignedDuration) -> bool {
        self.lease_silent_for.is_some_and(|s| s >= after) && self.ready != Some(true)
    }
}

/// Whether an incident may begin for a partitioned node, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Open {
    Yes,
    /// Not now; the reason is for logs, events and `explain`.
    Hold(String),
}

pub struct Limits {
    pub partition_after: SignedDuration,
    pub max_unhealthy: MaxUnhealthy,
    pub max_concurrent: usize,
}

/// Decide whether to open an incident for a partitioned node that runs `affected` pods holding
/// opted-in RWO claims (rules.md §7 "Decide").
pub fn open(
    node: &NodeHealth,
    affected: usize,
    forgiveness: Option<SignedDuration>,
    storm: bool,
    active: usize,
    limits: &Limits,
    now: Timestamp,
) -> Open {
    if !node.unhealthy(limits.partition_after) {
        return Open::Hold("the node is not partitioned".into());
    }
    if node.control_plane {
        return Open::Hold("never a control-plane node".into());
    }
    if let Some(c) = &node.maintenance {
        return Open::Hold(format!(
            "the node reports {c}=True: planned maintenance is not a partition"
        ));
    }
    if affected == 0 {
        return Open::Hold(
            "no pod on it holds a ReadWriteOnce claim that opted in to fencing".into(),
        );
    }
    if storm {
        return Open::Hold(
            "more nodes are unhealthy at once than --max-unhealthy-nodes allows (a network storm is not a dead node)"
                .into(),
        );
    }
    let Some(forgive) = forgiveness else {
        return Open::Hold(
            "a pod tolerates node.kubernetes.io/unreachable forever: its owner waits for the node"
                .into(),
        );
    };
    let since = node.ready_changed.unwrap_or(now);
    if now.duration_since(since) < forgive {
        return Open::Hold(format!(
            "waiting out the pods' unreachable toleration ({}s)",
            forgive.as_secs()
        ));
    }
    if active >= limits.max_concurrent {
        return Open::Hold(format!(
            "{active} fences already in progress (--max-concurrent-fences)"
        ));
    }
    Open::Yes
}

/// The node came back: its Lease renewed since the incident saw it last, and Ready.
pub fn healed(
    lease_renew_now: Option<&str>,
    lease_renew_seen: Option<&str>,
    ready: Option<bool>,
) -> bool {
    renewed(lease_renew_now, lease_renew_seen) && ready == Some(true)
}

/// The Lease's renewTime differs from the one recorded (the kubelet renewed it since).
pub fn renewed(now: Option<&str>, seen: Option<&str>) -> bool {
    match (now, seen) {
        (Some(n), Some(s)) => n != s,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// rules.md §7 "Prove, then release": a backend's "fenced" counts only when the node's Lease was
/// not renewed since the incident recorded it and the node is still not Ready.
pub fn proof(
    lease_renew_now: Option<&str>,
    lease_renew_seen: Option<&str>,
    ready: Option<bool>,
) -> Result<(), String> {
    if renewed(lease_renew_now, lease_renew_seen) {
        return Err(format!(
            "the backend answered fenced, but the node's Lease was renewed since (renewTime {} after {}): the fence \
             did not hold",
            lease_renew_now.unwrap_or("?"),
            lease_renew_seen.unwrap_or("none")
        ));
    }
    if ready == Some(true) {
        return Err("the backend answered fenced, but the node reports Ready".into());
    }
    Ok(())
}

/// rules.md §7 "Guards": why a node is evidently alive, if it is — it reports Ready, or its Lease
/// was renewed within `partition_after` of `now` (the kubelet's clock against ours: a kubelet
/// clock ahead only makes the node look alive longer, the safe side). A node that heartbeats is
/// not down, whoever says so.
pub fn alive(
    ready: Option<bool>,
    lease_renewed: Option<Timestamp>,
    partition_after: SignedDuration,
    now: Timestamp,
) -> Option<String> {
    if ready == Some(true) {
        return Some("it reports Ready".into());
    }
    let renewed = lease_renewed?;
    let ago = now.duration_since(renewed);
    (ago < partition_after).then(|| {
        format!(
            "its Lease was renewed {}s ago (renewTime {renewed}, within --partition-after {}s)",
            ago.as_secs().max(0),
            partition_after.as_secs()
        )
    })
}

/// rules.md §7, §8: the record that `node`, read gone, was deleted on proof (a NodeFence of a
/// `GONE` kind made after `since`, what began there), as every door reads it (the webhook's
/// guards and the RWO lock, the controller's lock cleanup, explain): none while its Lease was
/// renewed after the record was made (a kubelet that still heartbeats runs its pods), and none
/// when the Lease could not be read (unsure: no proof). `renewed` is the Lease's renewTime
/// (`Found(None)`: no Lease, or never renewed).
pub fn gone_on_record<'a>(
    records: &'a [std::sync::Arc<crate::model::fence::NodeFence>],
    node: &str,
    since: Option<Timestamp>,
    renewed: &crate::rules::Fact<Option<Timestamp>>,
) -> Option<&'a crate::model::fence::NodeFence> {
    use crate::rules::Fact;
    // A record made before the Lease's last renewal is voided by it; a later one may still prove
    // the node gone (the machine stopped after that renewal): each record is judged on its own.
    let voided = |f: &crate::model::fence::NodeFence| match (renewed, f.metadata.creation_timestamp)
    {
        (Fact::Found(Some(renewed)), Some(at)) => *renewed > at,
        _ => false,
    };
    if matches!(renewed, Fact::Unknown(_)) {
        return None;
    }
    records
        .iter()
        .map(|f| f.as_ref())
        .filter(|f| f.proves_down(node, since, crate::model::fence::GONE))
        .find(|f| !voided(f))
}

/// rules.md §7 "Recover": a node that returned after its volumes were released may be unfenced
/// (its storage given back, the taint removed) only once its machine restarted (`bootID` differs
/// from the one seen at detection) or its kubelet reports none of the released volumes mounted
/// or attached: the released pods' processes may otherwise still run, or flush buffered writes
/// (rook#17790). `Err`: why recovery waits.
pub fn rebooted_or_released(
    boot_now: Option<&str>,
    boot_seen: Option<&str>,
    volumes_now: &[String],
    released: &[String],
) -> Result<(), String> {
    if let (Some(now), Some(seen)) = (boot_now, boot_seen)
        && now != seen
    {
        return Ok(());
    }
    let still: Vec<&String> = released
        .iter()
        .filter(|v| volumes_now.contains(v))
        .collect();
    if still.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the node is back without a reboot (bootID {}) and its kubelet still reports {} released volume(s) ({}): \
         the taint stays and nothing is unfenced until the machine restarts or the volumes are unmounted",
        boot_now.unwrap_or("unknown"),
        still.len(),
        still
            .iter()
            .take(3)
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The storage system behind one volume a node's pods use: a CSI driver, or an in-tree kind
/// (`hostPath`, `nfs`, `iscsi`...). `Unknown`: the claim is not bound, or its volume unreadable.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Storage {
    Csi(String),
    InTree(String),
    Unknown(String),
}

impl Storage {
    /// The storage system of a volume: its CSI driver, else its in-tree source's kind.
    pub fn of(pv: &crate::model::Pv) -> Storage {
        match pv.source() {
            (true, driver) => Storage::Csi(driver.to_string()),
            (false, kind) => Storage::InTree(kind.to_string()),
        }
    }
}

impl std::fmt::Display for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Storage::Csi(d) => write!(f, "CSI driver {d}"),
            Storage::InTree(k) => write!(f, "{k} volumes"),
            Storage::Unknown(c) => write!(f, "claim {c} (its volume unknown)"),
        }
    }
}

/// What a fence cuts off (rules.md §7 "A fence has a scope").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The machine (power off, a person's confirmation): every volume.
    Machine,
    /// One CSI driver's storage network (a csi-addons NetworkFence): that driver's volumes.
    Driver(String),
    /// Nothing that can be shown (a NetworkFence whose driver volguard was not told).
    Unknown,
}

/// The volumes a fence of `scope` leaves uncovered among `used` (each storage system once). The
/// out-of-service taint releases every volume on the node, so it waits until this is empty.
pub fn uncovered(scope: &Scope, used: &[Storage]) -> Vec<Storage> {
    let mut out: Vec<Storage> = used
        .iter()
        .filter(|v| match (scope, v) {
            (Scope::Machine, _) => false,
            (Scope::Driver(d), Storage::Csi(x)) => d != x,
            _ => true,
        })
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Why a fence does not cover the node's volumes, for the incident's status and its Event.
pub fn scope_message(node: &str, scope: &Scope, missing: &[Storage]) -> String {
    let covers = match scope {
        Scope::Machine => "the whole machine".to_string(),
        Scope::Driver(d) => format!("CSI driver {d}"),
        Scope::Unknown => "no storage volguard can name (set --networkfence-driver)".to_string(),
    };
    let list = missing
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "the fence covers {covers}; pods on node {node} also use {list}: the out-of-service taint would release those \
         too, so the node is not released (fence them with a backend that covers them, or take the pods off)"
    )
}

/// The backend after `index` in a chain of `len`, if any (rules.md §7: the next backend on failure).
pub fn next_backend(index: usize, len: usize) -> Option<usize> {
    (index + 1 < len).then_some(index + 1)
}

pub use super::fencing_step::{
    Announce, Answer, Do, Effects, Now, Record, Transition, after_fence, after_unfence, request,
    step,
};

#[cfg(test)]
#[path = "fencing_tests.rs"]
mod tests;
