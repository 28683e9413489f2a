//! rules.md §2f "the lock is recorded, not inferred": the seed's compare-and-swap on the claim.
//!
//! Caches lag: two binds a few milliseconds apart both see no holder in any cache, and two webhook
//! replicas each have their own. So the first placement of a ReadWriteOnce claim on a node writes
//! a lock onto the claim (annotation `volguard.io/rwo-lock`: node, pod, UID, time) with a
//! compare-and-swap; whoever loses the swap reads again and decides again. The lock names the
//! node and the one placement on it that may still be in flight; whether it still holds is "does
//! a pod on that node still use the claim", read from the apiserver (the users at least as fresh
//! as the claim, or consistently). This file decides what to do with the
//! lock as read; the caller does the reads and the swap.

use super::Fact;
use crate::model::{Node, Pod, Pvc};
use std::time::Duration;

/// The annotation that carries the lock on a PersistentVolumeClaim.
pub const RWO_LOCK: &str = "volguard.io/rwo-lock";

/// How long a lock nobody on its node uses yet still holds, unless configured (`LockAge::grace`):
/// the placement it was written for is in flight (a bind persists milliseconds after admission; a
/// pod CREATE with `spec.nodeName` after every webhook). The apiserver gives up on a request
/// after its `--request-timeout`, whose default is this minute (a cluster that raises it gives
/// volguard the same, `--apiserver-request-timeout`, docs/rules.md §2f). Measured on the
/// observer's own monotonic clock from when it first saw the lock, never from the lock's `at`
/// (another process's clock: one running a minute fast, or a forged date, would move it).
pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// The lock's grace on a cluster whose kube-apiserver runs with `request_timeout`: that, or the
/// default minute if it is shorter (a shorter timeout is no reason to wait less), at most a day
/// (no apiserver waits that long on a request, and no reader's arithmetic then overflows).
pub fn lock_grace(request_timeout: std::time::Duration) -> std::time::Duration {
    request_timeout.clamp(DEFAULT_GRACE, MAX_LOCK_GRACE)
}

/// How long this process has seen a lock quiet (its own monotonic clock, or how long its cache
/// has held the value, whichever is longer), with the grace it waits: kube-apiserver's
/// `--request-timeout`, past which no placement admitted before the lock was written can land.
/// The grace travels with the age, so no reader compares an age with a grace of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockAge {
    pub quiet: std::time::Duration,
    pub grace: std::time::Duration,
}

impl LockAge {
    /// `quiet`, against the default grace (`DEFAULT_GRACE`).
    pub const fn quiet(quiet: std::time::Duration) -> LockAge {
        LockAge {
            quiet,
            grace: DEFAULT_GRACE,
        }
    }

    /// The placement the lock was written for is over (landed, or never to land).
    pub fn past_grace(self) -> bool {
        self.quiet >= self.grace
    }

    /// How long the controller leaves a quiet bind's lock (`BIND_LOCK_TIDY`, never under the
    /// grace).
    pub fn tidy(self) -> std::time::Duration {
        BIND_LOCK_TIDY.max(self.grace)
    }
}

/// How long the controller leaves a lock written for a bind, on a node in service with nobody
/// there using the claim, before it reads it live to clear it. Such a lock stops holding the
/// moment its pod is gone (a bind's pod was stored before its lock), so the next placement takes
/// it over, or renames it on its node, with the one write that placement makes anyway, and the
/// placement hint meanwhile points the claim's next pod at that node. Cleared after the grace,
/// every StatefulSet restart and churn paid twice: the clear (three reads and a write) and a
/// fresh lock. Kept this long for the claim's readers only (`explain`); a lock written for a pod
/// create keeps the grace (a webhook that never saw that pod stored waits the grace for it).
pub const BIND_LOCK_TIDY: std::time::Duration = std::time::Duration::from_secs(600);

/// How the placement a lock was written for reaches the apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// The scheduler's bind: the pod is stored before, so a pod missing later was deleted.
    Bind,
    /// A pod created with `spec.nodeName`: stored only after admission, so missing proves nothing.
    Create,
}

/// The lock as stored: `{"node":..,"pod":..,"uid":..,"via":..,"at":..}` (readable in `kubectl get
/// -o yaml`). It names the node that holds the claim and the placement it was last written for;
/// `at` is for people (`explain`), never for a decision.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RwoLock {
    pub node: String,
    pub pod: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Absent in locks written before it existed: judged as `Create` (missing proves nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
    /// The grace of the webhook that wrote it, in seconds, when longer than the default (its
    /// `--apiserver-request-timeout`): every reader waits at least that long, whatever its own
    /// (a controller or another replica not given the flag). Absent: the default.
    #[serde(default, rename = "grace", skip_serializing_if = "Option::is_none")]
    pub grace_seconds: Option<u64>,
    #[serde(deserialize_with = "crate::model::time")]
    pub at: jiff::Timestamp,
}

/// The longest grace (a day): a longer flag or a lock asking more is cut to it.
const MAX_LOCK_GRACE: std::time::Duration = std::time::Duration::from_secs(86_400);

impl RwoLock {
    pub fn new(pod: &Pod, node: &str, via: Via, now: jiff::Timestamp) -> RwoLock {
        RwoLock {
            node: node.to_string(),
            pod: pod.metadata.name.clone(),
            uid: pod.metadata.uid.to_string(),
            via: Some(via),
            grace_seconds: None,
            at: now,
        }
    }

    /// This lock, asking its readers for `grace` (written only when longer than the default, so
    /// a default lock reads as before).
    pub fn with_grace(mut self, grace: std::time::Duration) -> RwoLock {
        self.grace_seconds = (grace > DEFAULT_GRACE).then(|| grace.min(MAX_LOCK_GRACE).as_secs());
        self
    }

    /// The grace this lock asks of every reader: its writer's, never under the default, at most
    /// a day.
    pub fn grace(&self) -> std::time::Duration {
        lock_grace(std::time::Duration::from_secs(
            self.grace_seconds.unwrap_or(0),
        ))
    }

    /// The lock on `pvc`: `None` when there is none; a value that does not parse is no lock of
    /// volguard's (the holders in the caches still count).
    pub fn of(pvc: &Pvc) -> Option<RwoLock> {
        RwoLock::parse(pvc.metadata.annotation(RWO_LOCK)?)
    }

    pub fn parse(raw: &str) -> Option<RwoLock> {
        serde_json::from_str(raw).ok()
    }

    pub fn encode(&self) -> String {
        // A struct of strings and a timestamp: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Whether `pod` uses claim `ns/claim` on `node`: what a lock on `node` stands for. A pod that is
/// not terminal, scheduled there, naming the claim (read-only or not: any use keeps the volume
/// attached to that node).
pub fn uses_on(pod: &Pod, ns: &str, claim: &str, node: &str) -> bool {
    pod.metadata.namespace == ns
        && pod.node_name() == Some(node)
        && !pod.is_terminal()
        && super::claims::claims_of(pod).any(|c| c.name == claim)
}

/// What is known of a lock's node, for one claim.
pub struct NodeHold<'a> {
    /// The claim's name (in the namespace of the pods below).
    pub claim: &'a str,
    /// The non-terminal pods on the lock's node that use the claim, by a LIST at least as fresh as
    /// the claim when the lock's own pod is read or seen gone (every other user was stored before
    /// the lock's value), else a consistent one; a cache of this process may lag either: it must
    /// never decide a take-over.
    pub users: Fact<&'a [Pod]>,
    /// The pod of the name the lock names, by a quorum read: whether the placement the lock was
    /// written for can still land; or not read, and why (`LockPod`).
    pub writer: LockPod<&'a Pod>,
    /// The lock's node (a cached out-of-service taint is confirmed live by the caller).
    pub node: Fact<&'a Node>,
    /// When the node is gone: a NodeFence records its deletion on proof, made after the lock
    /// (rules.md §7). Without one, the node's machine may still run the pods.
    pub gone_recorded: bool,
    /// How long this process has seen this exact lock with nobody on its node using the claim
    /// (its own monotonic clock, restarted by a use), taken with how long its cache has held the
    /// lock's value, whichever is longer: the webhook and the controller read it alike.
    pub observed: LockAge,
    /// This process saw the pod of the lock's UID stored (its watch delivered it): the placement
    /// the lock was written for landed, so the quorum read that misses it shows it deleted.
    pub writer_stored: bool,
}

/// The pod of the name a lock names, as a reader knows it. A pod not read is never a pod read
/// missing: after a bind, missing means deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum LockPod<P> {
    /// What a quorum read answered (or the cache, when it shows that very UID: `Named`).
    Read(Fact<P>),
    /// Not read: this process's pod watch saw its UID deleted, and a UID is never created
    /// twice, so its placement can never land.
    SeenGone,
    /// Not read: this reader has held the lock for the grace, so its placement is over (landed,
    /// then a user on its node the consistent LIST shows, or never to land). Says nothing of the
    /// pod: only `observed` past the grace decides on it.
    PastGrace,
    /// Not read: the users on the lock's node decide (one uses the claim, or their read failed):
    /// the lock holds whatever its pod shows.
    InUse,
}

impl<P> From<Fact<P>> for LockPod<P> {
    fn from(read: Fact<P>) -> Self {
        LockPod::Read(read)
    }
}

impl<P> LockPod<P> {
    /// The same knowledge of another form of the pod.
    pub fn map<Q>(self, f: impl FnOnce(P) -> Q) -> LockPod<Q> {
        match self {
            LockPod::Read(read) => LockPod::Read(read.map(f)),
            LockPod::SeenGone => LockPod::SeenGone,
            LockPod::PastGrace => LockPod::PastGrace,
            LockPod::InUse => LockPod::InUse,
        }
    }

    pub fn as_ref(&self) -> LockPod<&P> {
        match self {
            LockPod::Read(read) => LockPod::Read(read.as_ref()),
            LockPod::SeenGone => LockPod::SeenGone,
            LockPod::PastGrace => LockPod::PastGrace,
            LockPod::InUse => LockPod::InUse,
        }
    }

    /// Read, and the read failed: unsure.
    pub fn is_unknown(&self) -> bool {
        matches!(self, LockPod::Read(Fact::Unknown(_)))
    }
}

/// Why a lock still holds, or why it does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    Holds(&'static str),
    /// Nobody on its node uses the claim any more (past the grace), or its node is gone or out
    /// of service.
    Stale(&'static str),
}

/// Whether a lock still holds. The lock names a node; it holds while any non-terminal pod there
/// uses the claim. With nobody there, it holds while the placement it was written for may still
/// land (its pod not yet bound, or a created pod not yet stored), for the grace (`LockAge`) after
/// this process first saw the node empty. Unsure means it holds.
pub fn standing(lock: &RwoLock, hold: &NodeHold<'_>) -> Standing {
    match hold.node {
        // A Node deleted on proof (its deletion recorded); gone without a record, its machine may
        // still run the pods, so the users below decide.
        Fact::Missing if hold.gone_recorded => return Standing::Stale("node gone"),
        Fact::Found(n) if n.is_out_of_service() => return Standing::Stale("node out of service"),
        Fact::Found(_) | Fact::Missing | Fact::Unknown(_) => {}
    }
    match hold.users {
        Fact::Found(u) if !u.is_empty() => return Standing::Holds("in use on its node"),
        Fact::Unknown(_) => return Standing::Holds("its node's use could not be read"),
        Fact::Found(_) | Fact::Missing => {}
    }
    // The users and the lock's pod are two reads, two moments: a bind that landed between them
    // shows only in the second. Its pod on the lock's node, naming the claim, not ended, is a
    // user (found by the e2e race: taken over as "its pod does not use the claim").
    // Whatever its UID: a pod there using the claim is a user (the lock model's race, where a
    // pod of the lock's name landed under another UID between the two reads).
    if let LockPod::Read(Fact::Found(w)) = hold.writer
        && uses_on(w, &w.metadata.namespace, hold.claim, &lock.node)
    {
        return Standing::Holds("in use on its node");
    }
    // Past the grace the placement is over whatever its pod shows (a reader may then not have
    // read it: `LockPod::PastGrace`), so the reason names what was read.
    if hold.observed.past_grace() {
        return Standing::Stale("nobody on its node uses it");
    }
    match placement_gone(lock, &hold.writer, hold.writer_stored) {
        Some(why) => Standing::Stale(why),
        None => Standing::Holds("placement in progress"),
    }
}

/// Why the placement a lock was written for can no longer land, from a quorum read of the pod of
/// that name. `None`: it may still (bound soon, created soon) or could not be read. A pod missing
/// after a bind was deleted (a bound pod was stored first); after a create only when this process
/// saw that very pod stored (`stored`): a UID is never created twice, so its create cannot still
/// be in flight.
fn placement_gone(lock: &RwoLock, writer: &LockPod<&Pod>, stored: bool) -> Option<&'static str> {
    let writer = match writer {
        LockPod::Read(read) => read,
        LockPod::SeenGone => return Some("its pod was deleted"),
        LockPod::PastGrace | LockPod::InUse => return None,
    };
    match writer {
        Fact::Unknown(_) => None,
        Fact::Missing => (lock.via == Some(Via::Bind) || (stored && !lock.uid.is_empty()))
            .then_some("its pod was deleted"),
        // Another pod of that name. After a bind the lock's pod was stored first: replaced.
        // After a create the lock's UID may still be in flight behind it (the apiserver admits a
        // create before it finds the name taken, and stores it if that pod is gone by then):
        // replaced only once this process saw the lock's UID stored (the lock model's race).
        Fact::Found(p) if !lock.uid.is_empty() && *p.metadata.uid != *lock.uid => {
            (lock.via == Some(Via::Bind) || stored).then_some("its pod was replaced")
        }
        Fact::Found(p) if p.is_terminal() => Some("its pod ended"),
        Fact::Found(p) => match p.node_name() {
            Some(n) if n != lock.node => Some("its pod runs on another node"),
            // On the lock's node without using the claim any more, or not bound yet.
            Some(_) => Some("its pod does not use the claim"),
            None => None,
        },
    }
}

/// What is known, for a placement on the lock's own node, of the placement the lock names.
pub struct Named<'a> {
    /// The pod of the name the lock names: from the cache when it shows that very UID, else by a
    /// quorum read (a cache showing another UID may be older than the lock); or not read.
    pub writer: LockPod<&'a Pod>,
    /// How long this process has seen this exact lock (its own monotonic clock).
    pub observed: LockAge,
    /// This process saw the pod of the lock's UID stored (as `NodeHold::writer_stored`).
    pub writer_stored: bool,
}

/// Whether the placement a lock names is over: landed (its pod bound, on the lock's node a user
/// from then on), or never to land (deleted after a bind, replaced, ended, bound elsewhere), or
/// older than any request the apiserver still waits on. Unsure means in flight.
pub fn placement_settled(lock: &RwoLock, named: &Named<'_>) -> bool {
    if let LockPod::Read(Fact::Found(p)) = named.writer
        && (lock.uid.is_empty() || *p.metadata.uid == *lock.uid)
        && p.node_name().is_some()
    {
        return true;
    }
    placement_gone(lock, &named.writer, named.writer_stored).is_some()
        || named.observed.past_grace()
}

/// What placing a pod on `node` does to one claim's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStep {
    /// Write this lock: no lock yet, a stale one taken over (`took_over` says why), or this
    /// node's lock renamed for this placement once the one it named is settled. A lock must name
    /// every placement in flight on its node, or a take-over could not tell one is coming;
    /// renaming moves nothing, since a lock holds while any pod on its node uses the claim,
    /// whichever it names.
    Write {
        lock: RwoLock,
        took_over: Option<&'static str>,
    },
    /// Another node holds the claim, and why (a user there, its use unread, a placement that may
    /// still land): the refusal says which, so an unread fact is not mistaken for a user.
    Held(RwoLock, &'static str),
    /// This node holds the claim, and the placement its lock names may still be in flight: one
    /// at a time, so that the lock always names it (the scheduler retries in a moment).
    Busy(RwoLock),
}

/// Decide one claim's lock for `pod` going to `node` by `via`. `hold` is read only when the lock
/// names another node, `named` only when it names another placement on this one (`None` when
/// not read, or not in time: then the lock holds, or the placement is taken as in flight).
pub fn step(
    pod: &Pod,
    node: &str,
    via: Via,
    current: Option<&RwoLock>,
    hold: Option<&NodeHold<'_>>,
    named: Option<&Named<'_>>,
    now: jiff::Timestamp,
) -> LockStep {
    let fresh = || RwoLock::new(pod, node, via, now);
    let Some(lock) = current else {
        return LockStep::Write {
            lock: fresh(),
            took_over: None,
        };
    };
    if lock.node == node {
        if lock.pod == pod.metadata.name && *lock.uid == *pod.metadata.uid {
            // This very placement again: its first attempt was lost after admission (a stored
            // pod is never placed twice). Written afresh, so that every process watching the
            // lock sees a new one: a take-over judged on an unchanged lock's age would race
            // this new attempt (the model's counterexample).
            return LockStep::Write {
                lock: fresh(),
                took_over: None,
            };
        }
        // Renaming away a placement still in flight would hide it from a take-over judging
        // the named pod alone (the model's counterexample: rename, then the renamed pod
        // replaced, then a take-over while the first bind lands).
        return match named.is_some_and(|n| placement_settled(lock, n)) {
            true => LockStep::Write {
                lock: fresh(),
                took_over: None,
            },
            false => LockStep::Busy(lock.clone()),
        };
    }
    match hold.map(|h| standing(lock, h)) {
        Some(Standing::Stale(why)) => LockStep::Write {
            lock: fresh(),
            took_over: Some(why),
        },
        Some(Standing::Holds(why)) => LockStep::Held(lock.clone(), why),
        None => LockStep::Held(lock.clone(), NOT_READ),
    }
}

/// Why a lock holds when its node's facts were not read within the decision's time.
pub const NOT_READ: &str = "its node's use was not read in time";

/// Who tries again after a refused placement: the scheduler retries a bind, but nothing retries a
/// refused create of a pod that names its node (`spec.nodeName`): its creator must.
pub fn retry_hint(pod: &Pod, when: &str) -> String {
    match pod.node_name() {
        Some(_) => format!(
            "nothing retries a refused create: create the pod again {when} (or leave spec.nodeName empty and let \
             the scheduler place it)"
        ),
        None => format!("the scheduler retries this pod {when}"),
    }
}

/// The refusal when another node holds the lock, saying why it holds (`why`, from `standing`).
pub fn held_message(pod: &Pod, node: &str, claim: &str, lock: &RwoLock, why: &str) -> String {
    format!(
        "pod {:?} cannot run on node {node:?}: PersistentVolumeClaim {claim:?} is ReadWriteOnce and is \
         locked to node {:?} (first placed there by pod {:?}, since {}; it holds: {why}). Two nodes \
         writing one volume corrupt it; {}. For a Deployment use `strategy: Recreate` (a RollingUpdate \
         starts the new pod before the old one stops)",
        pod.metadata.name,
        lock.node,
        lock.pod,
        lock.at,
        retry_hint(
            pod,
            &format!("once no pod on node {:?} uses the claim", lock.node)
        )
    )
}

/// The refusal while another placement on the same node is in flight.
pub fn busy_message(pod: &Pod, node: &str, claim: &str, lock: &RwoLock) -> String {
    let retry = match pod.node_name() {
        Some(_) => retry_hint(pod, "in a moment"),
        None => {
            "the scheduler retries this pod in a moment; nothing is needed from you".to_string()
        }
    };
    format!(
        "pod {:?} cannot be placed on node {node:?} yet: ReadWriteOnce PersistentVolumeClaim {claim:?} \
         is being placed on that node for pod {:?} right now, and volguard takes one placement per \
         node at a time so that its lock always names the one in flight. {}{}",
        pod.metadata.name,
        lock.pod,
        retry[..1].to_uppercase(),
        &retry[1..]
    )
}

/// The refusal when the lock's swap was lost (another placement just won) and the claim could
/// not be read again (`unread`), or kept being lost.
pub fn lost_message(pod: &Pod, node: &str, claims: &str, unread: Option<&str>) -> String {
    let why = match unread {
        Some(e) => format!(
            "another placement just took its lock and volguard could not read the claim again ({e})"
        ),
        None => "other placements kept taking its lock first".to_string(),
    };
    let retry = match pod.node_name() {
        Some(_) => retry_hint(pod, "in a moment"),
        None => "the scheduler retries this pod; nothing is needed from you".to_string(),
    };
    format!(
        "pod {:?} cannot run on node {node:?} yet: ReadWriteOnce PersistentVolumeClaim {claims:?}: {why}. \
         {}{}",
        pod.metadata.name,
        retry[..1].to_uppercase(),
        &retry[1..]
    )
}

/// The refusal when the lock's write got no answer in time: it may or may not have landed.
pub fn unconfirmed_message(pod: &Pod, node: &str, claim: &str, why: &str) -> String {
    let retry = match pod.node_name() {
        Some(_) => retry_hint(pod, "in a moment"),
        None => "the scheduler retries this pod; nothing is needed from you".to_string(),
    };
    format!(
        "pod {:?} cannot run on node {node:?} yet: volguard could not confirm the ReadWriteOnce lock \
         it wrote on PersistentVolumeClaim {claim:?} ({why}), and a placement whose lock may be \
         missing could put a second node on the volume. {}{}",
        pod.metadata.name,
        retry[..1].to_uppercase(),
        &retry[1..]
    )
}

/// What the controller may clear: a lock that no longer holds (read consistently by the caller).
pub fn clearable(lock: &RwoLock, hold: &NodeHold<'_>) -> Option<&'static str> {
    match standing(lock, hold) {
        Standing::Stale(why) => Some(why),
        Standing::Holds(_) => None,
    }
}

/// What the controller does with one claim's lock (rules.md §2f "the controller cleans up"),
/// from what it knows so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleanup {
    /// Leave the lock: it holds, or may.
    Keep,
    /// Look at the claim again after this long, when the grace ends (at most `BIND_LOCK_TIDY`
    /// away: no date written by anyone else sets that time).
    LookAgainAfter(Duration),
    /// The caches cannot decide: read the lock's node, its users and its pod live, then ask
    /// `cleanup_live`.
    ReadLive,
    /// Remove the lock (`test`ing its value), for this reason.
    Clear(&'static str),
}

/// What the controller's caches show of a lock's node.
pub struct CachedHold<'a> {
    /// A pod in the cache uses the claim on the lock's node (`uses_on`).
    pub in_use: bool,
    /// The lock's node in the cache (`None`: not there).
    pub node: Option<&'a Node>,
    /// How the lock's placement reached the apiserver (`None`: a lock written before `via`).
    pub via: Option<Via>,
}

impl CachedHold<'_> {
    /// How long a lock seen quiet on a node in service is left before a live read: a bind's
    /// `BIND_LOCK_TIDY`, else the grace.
    fn wait(&self, age: LockAge) -> Duration {
        match self.via {
            Some(Via::Bind) => age.tidy(),
            _ => age.grace,
        }
    }

    /// Whether the caches show the lock in use: a user on its node, present and in service. The
    /// lock clock is told so (it restarts); otherwise it runs.
    pub fn seen_in_use(&self) -> bool {
        self.in_use && !self.node_released()
    }

    fn node_released(&self) -> bool {
        self.node.is_none_or(Node::is_out_of_service)
    }
}

/// The controller's first look, from its caches; `observed` is what the lock clock answered when
/// told `cached.seen_in_use()`.
pub fn cleanup_cached(cached: &CachedHold<'_>, observed: LockAge) -> Cleanup {
    if cached.seen_in_use() {
        return Cleanup::Keep;
    }
    // Within the grace (a bind's lock: `BIND_LOCK_TIDY`), on a node the cache shows present and
    // in service, the lock stays unless a live read finds the node released after all (a taint the cache has not seen yet): that
    // clear may wait for the grace's end, since keeping a lock is never unsafe and the webhook
    // takes over from a released node itself. Read at once, a fresh lock's node GET, quorum LIST
    // and pod GET raced the very bind that wrote it (the bind took 1.19× a writing no-op with
    // them, on a 2-core machine).
    if !cached.node_released() {
        let wait = cached.wait(observed);
        if observed.quiet < wait {
            return Cleanup::LookAgainAfter(wait - observed.quiet + Duration::from_secs(1));
        }
    }
    Cleanup::ReadLive
}

impl NodeHold<'_> {
    /// Whether the live read found the lock in use: users on its node, or unsure. The lock clock
    /// is told so (it restarts); otherwise it is not asked again.
    pub fn seen_in_use(&self) -> bool {
        !matches!(self.users, Fact::Found(u) if u.is_empty())
    }

    /// The node is out of service, or gone with its deletion recorded on proof.
    fn released(&self) -> bool {
        match self.node {
            Fact::Found(n) => n.is_out_of_service(),
            Fact::Missing => self.gone_recorded,
            Fact::Unknown(_) => false,
        }
    }
}

/// The controller's decision after the live read (`cleanup_cached` said `ReadLive`), on the hold
/// read as the webhook reads it for a take-over.
pub fn cleanup_live(lock: &RwoLock, hold: &NodeHold<'_>) -> Cleanup {
    let released = hold.released();
    if !released {
        if hold.seen_in_use() {
            return Cleanup::Keep;
        }
        // Within the grace the controller leaves a lock alone unless its node is released: a
        // take-over never waits for the controller (the webhook judges the lock itself), and a
        // StatefulSet's restart renames the lock anyway (its pod deleted, then replaced by one of
        // the same name): clearing first would be a second write per restart. Keeping a lock is
        // never unsafe; it is looked at again when the grace ends.
        if !hold.observed.past_grace() {
            return look_again_after_grace(hold.observed);
        }
    }
    match clearable(lock, hold) {
        Some(why) => Cleanup::Clear(why),
        None => Cleanup::Keep,
    }
}

/// Once the lock has been seen quiet for the grace, and a second more.
fn look_again_after_grace(observed: LockAge) -> Cleanup {
    Cleanup::LookAgainAfter(observed.grace.saturating_sub(observed.quiet) + Duration::from_secs(1))
}

#[cfg(test)]
#[path = "rwo_lock_tests.rs"]
mod tests;
