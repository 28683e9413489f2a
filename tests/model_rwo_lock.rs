//! The RWO lock's protocol, model-checked (trust review point 14): two webhook replicas, each
//! with its own lagging cache and its own clock, the controller's cleanup, the apiserver's
//! compare-and-swap, pods created, bound, ended, deleted and replaced by a pod of the same name,
//! placements whose answer is lost, and a node taken out of service. Every decision calls the
//! functions the webhook and the controller call (`rules::rwo::place`, `rules::rwo_lock::step`,
//! `uses_on`, `clearable`); only the I/O around them is modelled: what a replica's cache shows,
//! what a quorum read shows, what a compare-and-swap does, and `LockClock`'s rule (the grace runs
//! from the first time this process saw the lock's node empty; a use restarts it).
//!
//! A second configuration adds the pod CREATE with `spec.nodeName` (`Via::Create`): its admission
//! (the lock step and the lock's write) is one step, the pod stored a later one (or never: the
//! create fails after admission, a pod of that name still stored included), so other replicas
//! decide in between. Each process's pod watch (`View::pod_seen`: what it saw stored) lags in a
//! step of its own and is sampled where `lock_step` and the controller sample it, before the
//! quorum reads; the apiserver's request timeout is a step after which every request that arrived
//! before the stored lock's write is over, so no placement in flight stays (no replica learns it
//! but by its own clock: a lock's age from its managedFields time is not read, since clients may
//! write managedFields).
//!
//! A replica's clock is also how long its cache has held the lock's value (`Pvc::lock_seen`: a
//! `Sync` or its own write brings a value, which ages with its `Tick`), taken with the quiet
//! clock's answer, whichever is older.
//!
//! Each replica also keeps the UIDs its pod watch saw go (`GonePods`): a lock whose pod's UID it
//! saw go has its pod taken as missing without a read (`LockHolds::seen_gone`), in every
//! configuration, as the code does; the users' LIST is still read (a shortcut that skipped it is
//! a replayed counterexample below, and one judged on the pod cache an exhaustive one).
//!
//! A fourth configuration (`cache_since`) lets each process's pod cache catch up on its own
//! (`PodSync`, `ControllerPods`: a cache then at least as new as every claim version that process
//! holds, as `View::pod_absent_since` asks of its pod watch) and takes the shortcut of a process
//! that never saw a lock's pod go (`LockHolds::absent_since`): a bind's lock whose pod UID such a
//! cache lacks has its pod taken as gone without a read. The broken `CacheSinceCreates` (the same
//! for a create's lock, whose pod is stored after it) is found. A cache catches up whole: one
//! whose watch skipped an event vouches for no version (`state::watch`), so it is not modelled.
//! The controller's cache counts as fresh against the stored claim (every claim write clears
//! it); the code compares its cached claim's version, older or equal, which takes the shortcut
//! in more states, each of which judges a lock value already replaced, so its `test` fails.
//!
//! A take-over's two reads (the users on the lock's node, the lock's pod) are issued at
//! once, so a placement in flight may land between them in either order (`writer_first`). The
//! users' LIST is read "not older than" the claim's resourceVersion (the apiserver's watch
//! cache) when the lock's pod is read or seen gone: here its least answer (`least_users`), the
//! users both when the claim was last written (`S::at_claim`) and when the LIST is served, which
//! misses every user stored since and every one ended or gone since (any real answer shows at
//! least these, which only holds the lock longer). The lock's pod is not read for a lock the
//! reader's cache has held for the grace (its placement is over: landed, a user the LIST shows,
//! or never to land); the LIST is then a quorum read, and the broken `ClaimListPastGrace` (at the
//! claim's version there too) is found. Nor is the placement a rename waits on read past the
//! grace (`named_placement`: settled by its age whatever its pod shows); a shortcut that never
//! read the lock's pod is found. That the grace ends every placement in flight is the model's
//! assumption (`Tick` only with nothing in flight, `ApiTimeout` ending every flight), as it is
//! the rule's: kube-apiserver's request timeout, not something the model can check.
//!
//! What it does not show: time passing inside one placement (a placement is one step), which is
//! why the code takes a lock's age before its reads are sent (an adversary review's variant that
//! let time pass between the reads and the age found two nodes in 5 actions). stateright's depth
//! counts states, the first included: "depth 10" is 8 actions; a broken rule that carried the
//! cache's first sight across a change of the lock's value needs 9 (found at depth 11, not here).
//!
//! Invariant: no ReadWriteOnce claim is used by non-terminal pods on two nodes of which more than
//! one is in service. Checked exhaustively to a stated depth (binds only: depth 10, 10.6 million
//! states; with creates: depth 8, 3.2 million states; one name raced: depth 8, 6.4 million; caches
//! catching up: depth 7, 1.3 million, and by hand at depth 8, 9.4 million; the
//! three about five minutes in a debug build on two cores, since the controller's cache age and
//! its two reads in either order joined the model); deliberately broken rules must each find a counterexample: the take-over judged on the
//! replica's cache (as before the trust review), a placement on the lock's own node admitted
//! without writing the lock (what the review's point 5 asked for, and why volguard renames the
//! lock instead), and "seen stored" sampled after the quorum read of the lock's pod (what the
//! adversary review found).
//!
//! A configuration with creates also races two pods of one name (a create admitted while
//! another pod of that name is stored, that pod deleted before the create lands): it found that
//! a created lock's pod under another UID proves nothing, which the rule now knows
//! (`model_rwo_lock_with_creates_racing_one_name_holds` says how).

use stateright::{Checker, Model, Property};
use std::time::Duration;
use volguard::model::{ClaimSource, Node, Pod, Pvc, Volume};
use volguard::rules::Fact;
use volguard::rules::claims::Claim;
use volguard::rules::rwo::{self, ClaimFacts};
use volguard::rules::rwo_lock::{
    self, DEFAULT_GRACE as BIND_GRACE, LockAge, LockPod, LockStep, Named, NodeHold, RwoLock, Via,
};

const NODES: [&str; 2] = ["n1", "n2"];
const NS: &str = "ns";
const CLAIM: &str = "data";
/// Pod names (a deleted pod's name may be taken again by a new UID).
const NAMES: usize = 2;

/// A stored pod.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct P {
    name: u8,
    uid: u8,
    node: Option<u8>,
    ended: bool,
}

/// The claim's lock annotation: its node and the placement (pod name, uid) it names.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct L {
    node: u8,
    name: u8,
    uid: u8,
    /// When it was written (the claim's version then): a lock written afresh for the same
    /// placement is a new lock to every process's clock, as the real one's `at` makes it.
    at: u8,
    /// Written for a pod CREATE with `spec.nodeName` (`Via::Create`), else for a bind.
    create: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Claimed {
    lock: Option<L>,
    rv: u8,
}

/// One process's `LockClock` entry: the lock it saw with nobody on its node, and whether the
/// grace has passed since.
#[derive(Clone, Debug, Hash, PartialEq, Eq, Default)]
struct Quiet(Option<(L, bool)>);

impl Quiet {
    /// The grace passed for this very lock, not restarted by anything: how long the cache has held
    /// it (`Pvc::lock_seen`, set when a `Sync` or the replica's own write brings a new value).
    fn held(&self, lock: &L) -> Duration {
        match &self.0 {
            Some((l, true)) if l == lock => BIND_GRACE,
            _ => Duration::ZERO,
        }
    }

    /// A lock value the cache now holds: a new one starts young, the same one keeps its age
    /// (broken, `carry`: a new one too, as a cache that kept the first sight across a change).
    fn hold(&mut self, lock: Option<&L>, carry: bool) {
        match (lock, &mut self.0) {
            (Some(l), Some((held, _))) if held == l => {}
            (Some(l), Some((held, _))) if carry => *held = l.clone(),
            (Some(l), _) => self.0 = Some((l.clone(), false)),
            (None, _) => self.0 = None,
        }
    }

    /// `LockClock::quiet_for`, abstractly: zero on a use; the grace once it has passed.
    fn look(&mut self, lock: &L, in_use: bool) -> Duration {
        if in_use {
            self.0 = None;
            return Duration::ZERO;
        }
        match &self.0 {
            Some((l, old)) if l == lock => {
                if *old {
                    BIND_GRACE
                } else {
                    Duration::ZERO
                }
            }
            _ => {
                self.0 = Some((lock.clone(), false));
                Duration::ZERO
            }
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Replica {
    pods: Vec<P>,
    claim: Claimed,
    quiet: Quiet,
    /// How long its cache has held the claim's lock value (`Pvc::lock_seen`).
    cached: Quiet,
    /// The UIDs its pod watch delivered stored (`View::pod_seen`: in the cache, or gone
    /// since), sorted; always empty when the model places by bind only (it decides nothing
    /// there: a bound pod was stored before its lock).
    seen: Vec<u8>,
    /// The UIDs its pod watch saw go (`GonePods`): stored, then deleted. Empty unless the model
    /// has `gone`.
    gone: Vec<u8>,
    /// Its pod cache (`pods`) is at least as new as its claim's version (`View::pod_absent_since`:
    /// the pod watch has applied that version). Set by a sync; cleared when its claim moves ahead.
    pods_fresh: bool,
}

/// A placement volguard allowed that the apiserver has not stored yet.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Flight {
    name: u8,
    uid: u8,
    node: u8,
    /// A pod CREATE with `spec.nodeName` (the pod is stored when it lands), else a bind.
    create: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct S {
    pods: Vec<P>,
    claim: Claimed,
    replicas: [Replica; 2],
    controller: Quiet,
    /// How long the controller's cache has held the claim's lock value (as `Replica::cached`:
    /// the controller reads a hold as the webhook does, `lock_hold::LockHolds::read`).
    controller_cached: Quiet,
    /// What the controller's pod watch delivered stored (as `Replica::seen`).
    controller_seen: Vec<u8>,
    /// The UIDs the controller's pod watch saw go (as `Replica::gone`).
    controller_gone: Vec<u8>,
    flights: Vec<Flight>,
    out_of_service: [bool; 2],
    next_uid: u8,
    /// The apiserver's clock has passed the stored lock's write by its request timeout
    /// (`BIND_GRACE`): every request that arrived before that write is over. Cleared by every
    /// write of the lock.
    aged: bool,
    /// UIDs of pods stored and then deleted (what a watch may report gone).
    deleted: Vec<u8>,
    /// The pods stored when the claim was last written: the oldest answer a LIST "not older than
    /// the claim's resourceVersion" may give (the apiserver's watch cache at that version).
    at_claim: Vec<P>,
    /// The controller's pod cache, and whether it is at least as new as the stored claim's version
    /// (it judges the stored claim): empty and stale unless the model has `cache_since`.
    controller_pods: Vec<P>,
    controller_pods_fresh: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum A {
    Create(u8),
    /// The scheduler's bind of a stored pod, admitted through `replica`.
    Place {
        replica: u8,
        name: u8,
        node: u8,
        /// A placement in flight lands between the quorum read of the users and the read of
        /// the lock's pod (two reads, two moments).
        mid: Option<u8>,
        /// The two reads in the other order: the webhook issues them at once, so either may be
        /// answered first (only told apart when `mid` lands between them).
        writer_first: bool,
        /// Only with `Rule::LateStoredSample`: a placement in flight lands after the read of
        /// the lock's pod and this replica's watch delivers it before "seen stored" is sampled.
        late: Option<u8>,
    },
    /// A pod CREATE with `spec.nodeName` admitted through `replica` (a new UID): the lock step
    /// and the lock's write; the pod is stored by a later `Persist`, or never (`Lose`, or a pod
    /// of that name still stored).
    Admit {
        replica: u8,
        name: u8,
        node: u8,
        mid: Option<u8>,
        writer_first: bool,
        late: Option<u8>,
    },
    Persist(u8),
    Lose(u8),
    End(u8),
    Delete(u8),
    Sync(u8),
    /// A replica's pod watch delivers what is stored (its "seen stored" only: ahead of its
    /// cache, the most it can know).
    Watch(u8),
    /// A replica's pod watch catches up with what is stored (`cache_since`): its pod cache is
    /// then at least as new as any claim's version it holds.
    PodSync(u8),
    /// The controller's pod watch catches up (`cache_since`).
    ControllerPods,
    /// Time passes for a replica (only while no placement is in flight: the apiserver gives up on
    /// a request within the grace).
    Tick(u8),
    ControllerTick,
    /// The controller's claim watch delivers the stored lock value (its cache's age restarts on
    /// a new value).
    ControllerSync,
    ControllerWatch,
    ControllerClear {
        mid: Option<u8>,
        late: Option<u8>,
        /// The lock's pod read before the users (`LockHolds::read` issues both at once).
        writer_first: bool,
    },
    /// The apiserver's request timeout passes since the stored lock's write (`S::aged`).
    ApiTimeout,
    OutOfService(u8),
}

struct LockModel {
    /// Pods ever created (bounds the space), pod CREATEs admitted with a new UID included.
    max_pods: u8,
    rule: Rule,
    /// Pod CREATEs with `spec.nodeName`, the pod watches and the apiserver's clock are modelled.
    creates: bool,
    /// A pod may be created (with a node or not) while another of its name is stored or its
    /// create is in flight: the apiserver admits the create and fails it only when it stores it,
    /// so the other may be deleted in between and the create land.
    same_name_race: bool,
    /// The webhook's "seen gone" shortcut (`LockHolds::seen_gone`): a lock whose pod UID this
    /// replica's watch saw go has its pod taken as missing without a read.
    gone: bool,
    /// The shortcut of a restarted process (`LockHolds::absent_since`): a bind's lock whose pod the
    /// pod cache lacks, that cache at least as new as the claim's version, has its pod taken as
    /// gone without a read.
    cache_since: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rule {
    /// volguard's.
    Sound,
    /// A take-over judged on the replica's cache (before the trust review).
    CacheTakeOver,
    /// A placement on the lock's own node admitted with no write (the lock keeps naming the
    /// placement it was written for).
    SilentSameNode,
    /// "Seen stored" sampled after the quorum read of the lock's pod (before the adversary
    /// review): a create landing between that read and the sample looks deleted.
    LateStoredSample,
    /// Broken shortcut: a lock's pod not in the replica's pod cache counts as seen gone.
    GoneIfUncached,
    /// Broken shortcut: a lock's pod seen gone skips the users' LIST too (stale at once).
    GoneSkipsList,
    /// Broken cache clock: the first sight kept across a change of the lock's value.
    CarryAcrossChange,
    /// Broken shortcut: the lock's pod never read, taken as missing, however young the lock (the
    /// sound shortcut skips the read only for a lock its cache has held for the grace).
    WriterUnread,
    /// Broken: the users' LIST not older than the claim also for a lock whose pod is not read for
    /// its age (its placement may have landed after the claim's version).
    ClaimListPastGrace,
    /// Broken: `cache_since`'s "absent at the claim's version, so gone" for a create's lock too
    /// (its pod is stored after the lock: absent, it may still land).
    CacheSinceCreates,
}

/// One placement's request: which replica admits it, where, and what lands meanwhile.
struct Try {
    replica: usize,
    node: u8,
    via: Via,
    mid: Option<u8>,
    writer_first: bool,
    late: Option<u8>,
}

fn pod_of(p: &P) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = format!("p{}", p.name);
    pod.metadata.namespace = NS.into();
    pod.metadata.uid = format!("u{}", p.uid).into();
    pod.spec.node_name = p.node.map(|n| NODES[n as usize].into());
    pod.status.phase = Some(if p.ended { "Succeeded" } else { "Running" }.into());
    pod.spec.volumes.push(Volume {
        name: "d".into(),
        persistent_volume_claim: Some(ClaimSource {
            claim_name: CLAIM.into(),
            read_only: false,
        }),
        ..Default::default()
    });
    pod
}

fn pvc_of(c: &Claimed) -> Pvc {
    let mut pvc = Pvc::default();
    pvc.metadata.name = CLAIM.into();
    pvc.metadata.namespace = NS.into();
    pvc.spec.access_modes = ["ReadWriteOnce"].into();
    if let Some(l) = &c.lock {
        let lock = lock_of(l);
        pvc.metadata.annotations = Some(
            [(rwo_lock::RWO_LOCK.to_string(), lock.encode())]
                .into_iter()
                .collect(),
        );
    }
    pvc
}

fn lock_of(l: &L) -> RwoLock {
    RwoLock {
        node: NODES[l.node as usize].into(),
        pod: format!("p{}", l.name),
        uid: format!("u{}", l.uid),
        via: Some(if l.create { Via::Create } else { Via::Bind }),
        grace_seconds: None,
        at: jiff::Timestamp::from_second(i64::from(l.at)).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
    }
}

/// The stored pod of the name a lock names (a quorum read).
fn writer_of<'a>(truth: &'a [Pod], lock: &RwoLock) -> Fact<&'a Pod> {
    truth
        .iter()
        .find(|p| p.metadata.name == lock.pod)
        .map_or(Fact::Missing, Fact::Found)
}

fn node_of(i: u8, out_of_service: bool) -> Node {
    let mut n = Node::default();
    n.metadata.name = NODES[i as usize].into();
    if out_of_service {
        n = n_oos(n);
    }
    n
}

fn n_oos(mut n: Node) -> Node {
    n.spec.taints.push(volguard::model::Taint {
        key: volguard::model::OUT_OF_SERVICE_TAINT.into(),
        value: None,
        effect: "NoExecute".into(),
    });
    n
}

fn node_index(name: &str) -> u8 {
    NODES.iter().position(|n| *n == name).unwrap_or(0) as u8
}

/// Add `uid` to a sorted set.
fn note(seen: &mut Vec<u8>, uid: u8) {
    if let Err(i) = seen.binary_search(&uid) {
        seen.insert(i, uid);
    }
}

/// A watch delivers what is stored now.
fn watch(seen: &mut Vec<u8>, pods: &[P]) {
    for p in pods {
        note(seen, p.uid);
    }
}

impl LockModel {
    /// The webhook's decision for placing `target` (a stored pod for a bind, a new one for a
    /// create) through `t.replica`, and its effect.
    fn place(&self, s: &mut S, target: &P, t: &Try) {
        let r = t.replica;
        let node = t.node;
        let pod = pod_of(target);
        let node_name = NODES[node as usize];
        let nodes: Vec<Node> = (0..2)
            .map(|i| node_of(i, s.out_of_service[i as usize]))
            .collect();
        // 1. The holders the replica's cache knows of (rules::rwo::place).
        let cached: Vec<Pod> = s.replicas[r].pods.iter().map(pod_of).collect();
        let cached_pvc = pvc_of(&s.replicas[r].claim);
        let others: Vec<(&Pod, Fact<&Node>)> = cached
            .iter()
            .filter(|p| {
                p.metadata.name != pod.metadata.name
                    && !p.is_terminal()
                    && p.node_name().is_some_and(|n| n != node_name)
            })
            .map(|p| {
                let n = node_index(p.node_name().unwrap_or_default());
                (p, Fact::Found(&nodes[n as usize]))
            })
            .collect();
        let facts = [ClaimFacts {
            claim: Claim {
                name: CLAIM.into(),
                ephemeral: false,
                read_only: false,
            },
            pvc: Fact::Found(&cached_pvc),
            others,
        }];
        if !rwo::place(&pod, node_name, &facts).allowed {
            return;
        }
        // 2. The lock as the replica's cache shows the claim.
        let current = s.replicas[r].claim.lock.clone();
        let current_lock = current.as_ref().map(lock_of);
        // Whether this replica's watch saw the lock's pod stored: sampled before any quorum
        // read, as `lock_step` does.
        let stored_before = current.as_ref().is_some_and(|l| {
            s.replicas[r].seen.contains(&l.uid) || s.replicas[r].gone.contains(&l.uid)
        });
        // `seen_gone`, sampled before the quorum reads (as `LockHolds::read` and `named_placement`).
        let gone = self.gone
            && current.as_ref().is_some_and(|l| match self.rule {
                Rule::GoneIfUncached => !s.replicas[r].pods.iter().any(|p| p.uid == l.uid),
                _ => s.replicas[r].gone.contains(&l.uid),
            });
        // A take-over's reading only (`LockHolds::read`; a rename's `named_placement` does not).
        let absent = current
            .as_ref()
            .is_some_and(|l| self.absent_since(s.replicas[r].pods_fresh, &s.replicas[r].pods, l));
        let truth: Vec<Pod> = s.pods.iter().map(pod_of).collect();
        // What the replica reads: the lock's node when it names another (`hold`), the placement
        // it names when it names another on this node (`named`).
        let (mut hold_facts, mut named_facts) = (None, None);
        match &current {
            Some(l) if l.node != node => {
                let lock_node = NODES[l.node as usize];
                // The quorum read (or, broken, the replica's cache).
                let broken = self.rule == Rule::CacheTakeOver;
                let seen: &[Pod] = if broken { &cached } else { &truth };
                let users_in = |pods: &[Pod]| -> Vec<Pod> {
                    pods.iter()
                        .filter(|p| rwo_lock::uses_on(p, NS, CLAIM, lock_node))
                        .cloned()
                        .collect()
                };
                // The quorum LIST of the users and the live GET of the lock's pod, in either
                // order (`LockHolds::read` issues them at once); `mid` lands between the two.
                let (users, later) = match t.mid {
                    Some(i) if !broken => {
                        let first = truth.clone();
                        land(s, i);
                        let second: Vec<Pod> = s.pods.iter().map(pod_of).collect();
                        match t.writer_first {
                            true => (users_in(&second), first),
                            false => (users_in(&first), second),
                        }
                    }
                    _ => (users_in(seen), seen.to_vec()),
                };
                let unread = self.unread(gone || absent, &s.replicas[r].cached, l);
                // The LIST not older than the claim: its least answer.
                let users = match broken || self.quorum_list(&unread) {
                    true => users,
                    false => least_users(&s.at_claim, &truth, lock_node),
                };
                let users = match (gone || absent) && self.rule == Rule::GoneSkipsList {
                    true => Vec::new(),
                    false => users,
                };
                let observed = s.replicas[r]
                    .quiet
                    .look(l, !users.is_empty())
                    .max(s.replicas[r].cached.held(l));
                hold_facts = Some((users, later, l.clone(), observed, unread));
            }
            // On the lock's node, naming another placement: that one's pod by a quorum read.
            Some(l) if l.name != target.name || l.uid != target.uid => {
                let observed = s.replicas[r]
                    .quiet
                    .look(l, false)
                    .max(s.replicas[r].cached.held(l));
                named_facts = Some((l.clone(), observed));
            }
            _ => {}
        }
        // Broken: sampled after the read of the lock's pod, which a create may follow into the
        // store, and this replica's watch deliver it, before the sample.
        if let Some(i) = t.late
            && let Some(uid) = land(s, i)
        {
            note(&mut s.replicas[r].seen, uid);
        }
        let writer_stored = match self.rule {
            Rule::LateStoredSample => current
                .as_ref()
                .is_some_and(|l| s.replicas[r].seen.contains(&l.uid)),
            _ => stored_before,
        };
        let hold = hold_facts
            .as_ref()
            .map(|(users, later, l, observed, unread)| NodeHold {
                claim: CLAIM,
                users: Fact::Found(users),
                writer: unread
                    .clone()
                    .unwrap_or_else(|| self.writer(later, l).into()),
                node: Fact::Found(&nodes[l.node as usize]),
                gone_recorded: false,
                observed: LockAge::quiet(*observed),
                writer_stored,
            });
        let named = named_facts.as_ref().map(|(l, observed)| Named {
            // Older than the grace, `named_placement` reads nothing: `placement_settled` is
            // true whatever the pod shows.
            writer: if *observed >= BIND_GRACE {
                LockPod::PastGrace
            } else if gone {
                LockPod::SeenGone
            } else {
                self.writer(&truth, l).into()
            },
            observed: LockAge::quiet(*observed),
            writer_stored,
        });
        let step = rwo_lock::step(
            &pod,
            node_name,
            t.via,
            current_lock.as_ref(),
            hold.as_ref(),
            named.as_ref(),
            jiff::Timestamp::UNIX_EPOCH,
        );
        let create = t.via == Via::Create;
        if self.rule == Rule::SilentSameNode && current.as_ref().is_some_and(|l| l.node == node) {
            s.flights.push(Flight {
                name: target.name,
                uid: target.uid,
                node,
                create,
            });
            if create {
                s.next_uid += 1;
            }
            return;
        }
        match step {
            LockStep::Held(..) | LockStep::Busy(_) => {}
            LockStep::Write { lock, .. } => {
                // The compare-and-swap against the stored claim's resourceVersion.
                if s.replicas[r].claim.rv != s.claim.rv {
                    // Lost: read again; this request is refused (the scheduler retries; a create
                    // decided again is another admission of that pod, as good as a new UID).
                    s.replicas[r].claim = s.claim.clone();
                    s.replicas[r].pods_fresh = false;
                    let carry = self.rule == Rule::CarryAcrossChange;
                    s.replicas[r].cached.hold(s.claim.lock.as_ref(), carry);
                    return;
                }
                let l = L {
                    node: node_index(&lock.node),
                    name: target.name,
                    uid: target.uid,
                    at: s.claim.rv.wrapping_add(1),
                    create,
                };
                s.claim = Claimed {
                    lock: Some(l.clone()),
                    rv: s.claim.rv.wrapping_add(1),
                };
                s.at_claim = s.pods.clone();
                s.aged = false;
                s.replicas[r].claim = s.claim.clone();
                s.replicas[r].pods_fresh = false;
                s.controller_pods_fresh = false;
                // Written here: young on this process's clock.
                s.replicas[r].quiet = Quiet(Some((l.clone(), false)));
                let carry = self.rule == Rule::CarryAcrossChange;
                s.replicas[r].cached.hold(Some(&l), carry);
                s.flights.push(Flight {
                    name: target.name,
                    uid: target.uid,
                    node,
                    create,
                });
                if create {
                    s.next_uid += 1;
                }
            }
        }
    }

    /// The controller's cleanup: consistent reads, its own clock taken with its cache's age of
    /// the lock (as the webhook's), a `test` on the lock's value.
    /// It calls `clearable` on every live read, more eagerly than `cleanup_live` (which also
    /// waits for its grace on a node in service): a superset of its clears.
    fn clear(&self, s: &mut S, mid: Option<u8>, late: Option<u8>, writer_first: bool) {
        let Some(l) = s.claim.lock.clone() else {
            return;
        };
        // Sampled before the live reads, as `clear_stale_lock` does (`pod_seen` counts a UID
        // seen gone too).
        let stored_before =
            s.controller_seen.contains(&l.uid) || s.controller_gone.contains(&l.uid);
        // `seen_gone`: the lock's pod taken as missing without a read (`LockHolds::read`).
        let gone = (self.gone && s.controller_gone.contains(&l.uid))
            || self.absent_since(s.controller_pods_fresh, &s.controller_pods, &l);
        let lock_node = NODES[l.node as usize];
        // The users' LIST and the lock's pod's GET, in either order; `mid` lands between them.
        // The LIST is not older than the claim: its oldest answer, whatever lands; the order
        // decides what the GET shows.
        let users_in = |pods: &[Pod]| -> Vec<Pod> {
            pods.iter()
                .filter(|p| rwo_lock::uses_on(p, NS, CLAIM, lock_node))
                .cloned()
                .collect()
        };
        let first: Vec<Pod> = s.pods.iter().map(pod_of).collect();
        let least = least_users(&s.at_claim, &first, lock_node);
        if let Some(i) = mid {
            land(s, i);
        }
        let second: Vec<Pod> = s.pods.iter().map(pod_of).collect();
        let (quorum, later) = match writer_first {
            true => (users_in(&second), first),
            false => (users_in(&first), second),
        };
        let unread = self.unread(gone, &s.controller_cached, &l);
        let users = match self.quorum_list(&unread) {
            true => quorum,
            false => least,
        };
        // It reconciles the claim its cache holds: the value it judges is the stored one.
        s.controller_cached
            .hold(Some(&l), self.rule == Rule::CarryAcrossChange);
        let observed = s
            .controller
            .look(&l, !users.is_empty())
            .max(s.controller_cached.held(&l));
        let node = node_of(l.node, s.out_of_service[l.node as usize]);
        let named = lock_of(&l);
        if let Some(i) = late
            && let Some(uid) = land(s, i)
        {
            note(&mut s.controller_seen, uid);
        }
        let writer_stored = match self.rule {
            Rule::LateStoredSample => s.controller_seen.contains(&l.uid),
            _ => stored_before,
        };
        let hold = NodeHold {
            claim: CLAIM,
            users: Fact::Found(&users),
            writer: unread.unwrap_or_else(|| self.writer(&later, &l).into()),
            node: Fact::Found(&node),
            gone_recorded: false,
            observed: LockAge::quiet(observed),
            writer_stored,
        };
        if rwo_lock::clearable(&named, &hold).is_some() {
            s.claim = Claimed {
                lock: None,
                rv: s.claim.rv.wrapping_add(1),
            };
            s.at_claim = s.pods.clone();
            s.aged = false;
            s.controller_pods_fresh = false;
        }
    }

    /// `LockHolds::absent_since`: a bind's lock (or, broken, any) whose pod a pod cache at least
    /// as new as the claim's version lacks.
    fn absent_since(&self, fresh: bool, pods: &[P], l: &L) -> bool {
        self.cache_since
            && fresh
            && (!l.create || self.rule == Rule::CacheSinceCreates)
            && !pods.iter().any(|p| p.uid == l.uid)
    }

    /// The quorum read of the pod of the name lock `l` names, as the rule is given it.
    fn writer<'a>(&self, pods: &'a [Pod], l: &L) -> Fact<&'a Pod> {
        writer_of(pods, &lock_of(l))
    }

    /// The lock's pod when `LockHolds::read` does not read it: its UID seen deleted (`gone`), or a
    /// lock its cache has held for the grace (the placement it names is over, landed, a user the
    /// consistent LIST shows, or never to land). The broken `WriterUnread` never reads it and
    /// passes it as read missing.
    fn unread<'a>(&self, gone: bool, cached: &Quiet, l: &L) -> Option<LockPod<&'a Pod>> {
        match self.rule {
            Rule::WriterUnread => Some(Fact::Missing.into()),
            _ if gone => Some(LockPod::SeenGone),
            _ if cached.held(l) >= BIND_GRACE => Some(LockPod::PastGrace),
            _ => None,
        }
    }

    /// Whether the users' LIST is the quorum one: for a lock whose pod is not read for its age
    /// (that placement may have landed after the claim's version); else "not older than" the
    /// claim, but in the broken `ClaimListPastGrace` there too.
    fn quorum_list(&self, unread: &Option<LockPod<&Pod>>) -> bool {
        matches!(unread, Some(LockPod::PastGrace)) && self.rule != Rule::ClaimListPastGrace
    }

    /// Whether pod `name` may be created now: always with `same_name_race`, else only when no
    /// pod of that name is stored or its create in flight.
    fn name_free(&self, s: &S, name: u8) -> bool {
        self.same_name_race
            || !(s.pods.iter().any(|p| p.name == name)
                || s.flights.iter().any(|f| f.create && f.name == name))
    }

    /// What may land after the read of the lock's pod and be delivered before "seen stored" is
    /// sampled: only where the broken rule samples it there (with the sound one it is a
    /// `Persist` and a `Watch` after the decision).
    fn lates(&self, s: &S) -> Vec<Option<u8>> {
        match self.rule {
            Rule::LateStoredSample => mids(s).collect(),
            _ => vec![None],
        }
    }
}

/// The apiserver stores placement `i` in flight: a bind binds the pod of its UID (a replaced or
/// deleted pod is not bound); a create stores its pod unless one of that name is stored (it
/// fails: AlreadyExists). The UID stored, if any.
fn land(s: &mut S, i: u8) -> Option<u8> {
    if (i as usize) >= s.flights.len() {
        return None;
    }
    let f = s.flights.remove(i as usize);
    if f.create {
        if s.pods.iter().any(|p| p.name == f.name) {
            return None;
        }
        s.pods.push(P {
            name: f.name,
            uid: f.uid,
            node: Some(f.node),
            ended: false,
        });
        return Some(f.uid);
    }
    let p = s
        .pods
        .iter_mut()
        .find(|p| p.uid == f.uid && p.node.is_none())?;
    p.node = Some(f.node);
    Some(f.uid)
}

/// The least a LIST "not older than" the claim may show of the users on `node`: those that used
/// the claim there both when the claim was last written (`at_claim`) and when the LIST is served
/// (`now`, before anything lands in the take-over's middle). A pod is a user at every moment
/// between two at which it is one (a bind is never undone, an end never either, a UID never
/// comes back), so every snapshot between shows at least these; an earlier one may also show a
/// user that has ended or gone since, a later one a user stored since. Fewer users only let a
/// take-over through sooner: the model answers with the least.
fn least_users(at_claim: &[P], now: &[Pod], node: &str) -> Vec<Pod> {
    let users_now: Vec<&Pod> = now
        .iter()
        .filter(|p| rwo_lock::uses_on(p, NS, CLAIM, node))
        .collect();
    at_claim
        .iter()
        .map(pod_of)
        .filter(|p| rwo_lock::uses_on(p, NS, CLAIM, node))
        .filter(|p| users_now.iter().any(|n| n.metadata.uid == p.metadata.uid))
        .collect()
}

/// The invariant: non-terminal stored pods run on at most one in-service node.
fn one_node(s: &S) -> bool {
    let mut on = [false; 2];
    for p in &s.pods {
        if let (Some(n), false) = (p.node, p.ended) {
            on[n as usize] = true;
        }
    }
    (0..2).filter(|i| on[*i] && !s.out_of_service[*i]).count() <= 1
}

/// What may land between two quorum reads: nothing, or one of the placements in flight.
/// Every way one placement may go: by which replica, to which node, what lands in its middle,
/// and which late step it meets.
fn tries<L: Copy>(s: &S, lates: &[L]) -> Vec<(u8, u8, Option<u8>, bool, L)> {
    let mut out = Vec::new();
    for replica in 0..2 {
        for node in 0..2 {
            for mid in mids(s) {
                // The order of the two reads matters only to a placement landing between them.
                let orders: &[bool] = if mid.is_some() {
                    &[false, true]
                } else {
                    &[false]
                };
                for &writer_first in orders {
                    for &late in lates {
                        out.push((replica, node, mid, writer_first, late));
                    }
                }
            }
        }
    }
    out
}

fn mids(s: &S) -> impl Iterator<Item = Option<u8>> {
    std::iter::once(None).chain((0..s.flights.len() as u8).map(Some))
}

/// Whether a watch would report a deletion not reported yet.
fn unseen_gone(gone: &[u8], deleted: &[u8]) -> bool {
    deleted.iter().any(|u| gone.binary_search(u).is_err())
}

/// Whether a watch would deliver something not seen yet.
fn unseen(seen: &[u8], pods: &[P]) -> bool {
    pods.iter().any(|p| seen.binary_search(&p.uid).is_err())
}

impl Model for LockModel {
    type State = S;
    type Action = A;

    fn init_states(&self) -> Vec<S> {
        let empty = Replica {
            pods: Vec::new(),
            claim: Claimed { lock: None, rv: 0 },
            quiet: Quiet::default(),
            cached: Quiet::default(),
            seen: Vec::new(),
            gone: Vec::new(),
            pods_fresh: false,
        };
        vec![S {
            pods: Vec::new(),
            claim: Claimed { lock: None, rv: 0 },
            replicas: [empty.clone(), empty],
            controller: Quiet::default(),
            controller_cached: Quiet::default(),
            controller_seen: Vec::new(),
            controller_gone: Vec::new(),
            flights: Vec::new(),
            out_of_service: [false; 2],
            next_uid: 0,
            aged: false,
            deleted: Vec::new(),
            at_claim: Vec::new(),
            controller_pods: Vec::new(),
            controller_pods_fresh: false,
        }]
    }

    fn actions(&self, s: &S, out: &mut Vec<A>) {
        let lates = self.lates(s);
        for name in 0..NAMES as u8 {
            match s.pods.iter().find(|p| p.name == name) {
                None if s.next_uid < self.max_pods && self.name_free(s, name) => {
                    out.push(A::Create(name))
                }
                None => {}
                Some(p) => {
                    if p.node.is_none() && !p.ended && !s.flights.iter().any(|f| f.uid == p.uid) {
                        for (replica, node, mid, writer_first, late) in tries(s, &lates) {
                            out.push(A::Place {
                                replica,
                                name,
                                node,
                                mid,
                                writer_first,
                                late,
                            });
                        }
                    }
                    if !p.ended {
                        out.push(A::End(name));
                    }
                    out.push(A::Delete(name));
                }
            }
            // A pod CREATE with `spec.nodeName` (with `same_name_race`, whether or not a pod of
            // that name is stored or being created).
            if self.creates && s.next_uid < self.max_pods && self.name_free(s, name) {
                for (replica, node, mid, writer_first, late) in tries(s, &lates) {
                    out.push(A::Admit {
                        replica,
                        name,
                        node,
                        mid,
                        writer_first,
                        late,
                    });
                }
            }
        }
        for i in 0..s.flights.len() as u8 {
            out.push(A::Persist(i));
            out.push(A::Lose(i));
        }
        for r in 0..2 {
            out.push(A::Sync(r));
            let replica = &s.replicas[r as usize];
            if self.cache_since && !(replica.pods_fresh && replica.pods == s.pods) {
                out.push(A::PodSync(r));
            }
            if (self.creates && unseen(&s.replicas[r as usize].seen, &s.pods))
                || (self.gone && unseen_gone(&s.replicas[r as usize].gone, &s.deleted))
            {
                out.push(A::Watch(r));
            }
            let young = |q: &Quiet| q.0.as_ref().is_some_and(|q| !q.1);
            if s.flights.is_empty()
                && (young(&s.replicas[r as usize].quiet) || young(&s.replicas[r as usize].cached))
            {
                out.push(A::Tick(r));
            }
        }
        let young = |q: &Quiet| q.0.as_ref().is_some_and(|q| !q.1);
        if s.flights.is_empty() && (young(&s.controller) || young(&s.controller_cached)) {
            out.push(A::ControllerTick);
        }
        if s.controller_cached.0.as_ref().map(|q| &q.0) != s.claim.lock.as_ref() {
            out.push(A::ControllerSync);
        }
        if self.cache_since && !(s.controller_pods_fresh && s.controller_pods == s.pods) {
            out.push(A::ControllerPods);
        }
        if (self.creates && unseen(&s.controller_seen, &s.pods))
            || (self.gone && unseen_gone(&s.controller_gone, &s.deleted))
        {
            out.push(A::ControllerWatch);
        }
        if s.claim.lock.is_some() {
            for mid in mids(s) {
                for &late in &lates {
                    out.push(A::ControllerClear {
                        mid,
                        late,
                        writer_first: false,
                    });
                    // Told apart only when a placement lands between the two reads.
                    if mid.is_some() {
                        out.push(A::ControllerClear {
                            mid,
                            late,
                            writer_first: true,
                        });
                    }
                }
            }
            if self.creates && !s.aged {
                out.push(A::ApiTimeout);
            }
        }
        for n in 0..2 {
            if !s.out_of_service[n as usize] {
                out.push(A::OutOfService(n));
            }
        }
    }

    fn next_state(&self, last: &S, a: A) -> Option<S> {
        let mut s = last.clone();
        match a {
            A::Create(name) => {
                s.pods.push(P {
                    name,
                    uid: s.next_uid,
                    node: None,
                    ended: false,
                });
                s.next_uid += 1;
            }
            A::Place {
                replica,
                name,
                node,
                mid,
                writer_first,
                late,
            } => {
                let target = s.pods.iter().find(|p| p.name == name).cloned()?;
                let t = Try {
                    replica: replica as usize,
                    node,
                    via: Via::Bind,
                    mid,
                    writer_first,
                    late,
                };
                self.place(&mut s, &target, &t);
            }
            A::Admit {
                replica,
                name,
                node,
                mid,
                writer_first,
                late,
            } => {
                let target = P {
                    name,
                    uid: s.next_uid,
                    node: Some(node),
                    ended: false,
                };
                let t = Try {
                    replica: replica as usize,
                    node,
                    via: Via::Create,
                    mid,
                    writer_first,
                    late,
                };
                self.place(&mut s, &target, &t);
            }
            A::Persist(i) => {
                land(&mut s, i);
            }
            A::Lose(i) => {
                s.flights.remove(i as usize);
            }
            A::End(name) => {
                if let Some(p) = s.pods.iter_mut().find(|p| p.name == name) {
                    p.ended = true;
                }
            }
            A::Delete(name) => {
                if self.gone
                    && let Some(p) = s.pods.iter().find(|p| p.name == name)
                {
                    let uid = p.uid;
                    note(&mut s.deleted, uid);
                }
                s.pods.retain(|p| p.name != name)
            }
            A::Sync(r) => {
                let replica = &mut s.replicas[r as usize];
                replica.pods = s.pods.clone();
                replica.claim = s.claim.clone();
                replica.pods_fresh = self.cache_since;
                replica
                    .cached
                    .hold(s.claim.lock.as_ref(), self.rule == Rule::CarryAcrossChange);
                // The cache shows what the watch delivered: `pod_seen` reads it.
                if self.creates {
                    watch(&mut replica.seen, &s.pods);
                }
                if self.gone {
                    for &u in &s.deleted {
                        note(&mut replica.gone, u);
                    }
                }
            }
            A::Watch(r) => {
                let replica = &mut s.replicas[r as usize];
                if self.creates {
                    watch(&mut replica.seen, &s.pods);
                }
                if self.gone {
                    for &u in &s.deleted {
                        note(&mut replica.gone, u);
                    }
                }
            }
            A::PodSync(r) => {
                let replica = &mut s.replicas[r as usize];
                replica.pods = s.pods.clone();
                replica.pods_fresh = true;
            }
            A::ControllerPods => {
                s.controller_pods = s.pods.clone();
                s.controller_pods_fresh = true;
            }
            A::Tick(r) => {
                let replica = &mut s.replicas[r as usize];
                for q in [&mut replica.quiet.0, &mut replica.cached.0]
                    .into_iter()
                    .flatten()
                {
                    q.1 = true;
                }
            }
            A::ControllerTick => {
                for q in [&mut s.controller.0, &mut s.controller_cached.0]
                    .into_iter()
                    .flatten()
                {
                    q.1 = true;
                }
            }
            A::ControllerSync => s
                .controller_cached
                .hold(s.claim.lock.as_ref(), self.rule == Rule::CarryAcrossChange),
            A::ControllerWatch => {
                if self.creates {
                    watch(&mut s.controller_seen, &s.pods);
                }
                if self.gone {
                    for &u in &s.deleted {
                        note(&mut s.controller_gone, u);
                    }
                }
            }
            A::ControllerClear {
                mid,
                late,
                writer_first,
            } => self.clear(&mut s, mid, late, writer_first),
            A::ApiTimeout => {
                // Every placement in flight wrote a lock no later than the stored one: its
                // request arrived before that write, and the apiserver has given up on it.
                s.aged = true;
                s.flights.clear();
            }
            A::OutOfService(n) => s.out_of_service[n as usize] = true,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![Property::always("one node", |_, s| one_node(s))]
    }
}

/// The depth `make test` checks (debug build, about two minutes); `VOLGUARD_MODEL_DEPTH` goes
/// deeper (a release build explores several times as fast).
fn depth() -> usize {
    std::env::var("VOLGUARD_MODEL_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(10)
}

/// The depth of the configuration with pod CREATEs (more actions per state);
/// `VOLGUARD_MODEL_CREATE_DEPTH` goes deeper.
fn create_depth() -> usize {
    std::env::var("VOLGUARD_MODEL_CREATE_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(8)
}

fn check(model: LockModel, depth: usize) -> (usize, Option<String>) {
    let c = model.checker().target_max_depth(depth).spawn_bfs().join();
    let found = c
        .discovery("one node")
        .map(|path| format!("{:#?}", path.into_actions()));
    (c.unique_state_count(), found)
}

/// Placements by bind only.
fn binds(rule: Rule) -> LockModel {
    LockModel {
        max_pods: 3,
        rule,
        creates: false,
        same_name_race: false,
        gone: true,
        cache_since: false,
    }
}

/// Placements by bind and by pod CREATE with `spec.nodeName`, the pod watches and the
/// apiserver's clock.
fn creates(rule: Rule) -> LockModel {
    LockModel {
        max_pods: 3,
        rule,
        creates: true,
        same_name_race: false,
        gone: true,
        cache_since: false,
    }
}

/// Placements by bind and by create, each process's pod cache catching up on its own
/// (`PodSync`, `ControllerPods`), and the shortcut of a process that never saw a lock's pod go
/// (`LockHolds::absent_since`). Its own configuration: the two actions more per state would take
/// the others past the machine's memory at their depths.
fn cache_since(rule: Rule) -> LockModel {
    LockModel {
        cache_since: true,
        ..creates(rule)
    }
}

/// The depth of `cache_since`; `VOLGUARD_MODEL_CACHE_DEPTH` goes deeper.
fn cache_since_depth() -> usize {
    std::env::var("VOLGUARD_MODEL_CACHE_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(7)
}

#[test]
fn model_rwo_lock_with_caches_catching_up_holds_to_its_depth() {
    let depth = cache_since_depth();
    let (states, found) = check(cache_since(Rule::Sound), depth);
    if let Some(path) = found {
        panic!("model rwo-lock, caches catching up: counterexample after {states} states:\n{path}");
    }
    println!(
        "model rwo-lock, caches catching up: {states} states explored (depth {depth}), invariant holds"
    );
}

#[test]
fn model_rwo_lock_holds_to_its_depth() {
    let depth = depth();
    let (states, found) = check(binds(Rule::Sound), depth);
    if let Some(path) = found {
        panic!("model rwo-lock: counterexample after {states} states:\n{path}");
    }
    println!("model rwo-lock: {states} states explored (depth {depth}), invariant holds");
}

#[test]
fn model_rwo_lock_finds_the_cache_take_over() {
    let (states, found) = check(binds(Rule::CacheTakeOver), depth());
    let path = found.unwrap_or_else(|| {
        panic!("the broken rule (take-over from a cache) survived {states} states: the model checks nothing")
    });
    println!("model rwo-lock, broken rule (take-over from the cache): counterexample\n{path}");
}

#[test]
fn model_rwo_lock_finds_the_silent_same_node_placement() {
    let (states, found) = check(binds(Rule::SilentSameNode), depth());
    let path = found.unwrap_or_else(|| {
        panic!("a same-node placement that writes nothing survived {states} states")
    });
    println!("model rwo-lock, a same-node placement that writes nothing: counterexample\n{path}");
}

#[test]
fn model_rwo_lock_with_creates_holds_to_its_depth() {
    let depth = create_depth();
    let (states, found) = check(creates(Rule::Sound), depth);
    if let Some(path) = found {
        panic!("model rwo-lock with creates: counterexample after {states} states:\n{path}");
    }
    println!(
        "model rwo-lock with creates: {states} states explored (depth {depth}), invariant holds"
    );
}

#[test]
fn model_rwo_lock_finds_the_late_stored_sample() {
    let (states, found) = check(creates(Rule::LateStoredSample), create_depth());
    let path = found.unwrap_or_else(|| {
        panic!("\"seen stored\" sampled after the read of the lock's pod survived {states} states")
    });
    println!(
        "model rwo-lock, \"seen stored\" sampled after the read of the lock's pod: counterexample \
         after {states} states\n{path}"
    );
}

/// Two pods of one name raced: a CREATE admitted (its lock written) while another pod of that
/// name is stored, or one stored while that create is in flight, then deleted before the create
/// lands. `placement_gone` took the lock's pod found with another UID as "its pod was replaced",
/// which holds after a bind (its pod was stored before the lock) but proves nothing of a create
/// still in flight: the apiserver admits a create before it finds the name taken, and stores it
/// if the other is gone by then. The rule now judges a created lock's pod of another UID as it
/// judges a missing one (gone only when this process saw the lock's own UID stored).
///
/// The counterexample it found before (depth 6, 1.4 million states, 80 s): pod p0 (u0) is stored, unbound; a
/// CREATE of p0 (u1) with node n1 is admitted and writes the lock (n1, p0/u1, create); the
/// scheduler's bind of p0/u0 to n1 renames the lock (n1, p0/u0, bind), since `placement_settled`
/// finds p0 under u0 and calls u1 "replaced"; p0/u0 is deleted; a CREATE of p1 with node n2 reads
/// nobody on n1, then the create of p0/u1 lands on n1, then p0 is read under u1: "replaced"
/// again, so the lock is taken over for n2, and p1 is stored there.
#[test]
fn model_rwo_lock_with_creates_racing_one_name_holds() {
    let depth = create_depth();
    let model = LockModel {
        same_name_race: true,
        ..creates(Rule::Sound)
    };
    let (states, found) = check(model, depth);
    if let Some(path) = found {
        panic!("model rwo-lock, one name raced: counterexample after {states} states:\n{path}");
    }
    println!("model rwo-lock, one name raced: {states} states explored (depth {depth}), holds");
}

/// The shortcut judged on the replica's pod cache ("not cached, so gone") instead of its watch's
/// record of the UID going: found at once.
#[test]
fn model_rwo_lock_finds_gone_if_uncached() {
    let (states, found) = check(binds(Rule::GoneIfUncached), depth());
    let path = found
        .unwrap_or_else(|| panic!("\"not in the cache\" taken as gone survived {states} states"));
    println!("model rwo-lock, \"not in the cache\" taken as gone: counterexample\n{path}");
}

/// A restarted process's shortcut (`LockHolds::absent_since`: the lock's pod absent from a pod
/// cache at least as new as the claim's version, so gone) taken for a create's lock too: found
/// (the create is admitted and its lock written, a cache synced before it lands lacks its pod,
/// the lock is taken over, and the create lands). A bind's pod is stored before its lock.
#[test]
fn model_rwo_lock_finds_cache_since_for_a_create() {
    let (states, found) = check(cache_since(Rule::CacheSinceCreates), cache_since_depth());
    let path = found.unwrap_or_else(|| {
        panic!("\"absent at the claim's version, so gone\" for a create's lock survived {states} states")
    });
    println!(
        "model rwo-lock, \"absent at the claim's version, so gone\" for a create's lock: counterexample \
         after {states} states\n{path}"
    );
}

/// The users listed "not older than" the claim with the lock's pod unread for the lock's age:
/// found (that pod's bind landed after the claim's version, the LIST does not show it, the
/// lock is taken over). The sound rule lists them consistently there.
#[test]
fn model_rwo_lock_finds_the_claim_list_past_grace() {
    let (states, found) = check(binds(Rule::ClaimListPastGrace), depth());
    let path = found.unwrap_or_else(|| {
        panic!("the users' LIST at the claim's version for a lock not read for its age survived {states} states")
    });
    println!(
        "model rwo-lock, the users' LIST at the claim's version past the grace: counterexample\n{path}"
    );
}

/// The lock's pod taken as missing without a read whatever the lock's age: found (a bind in
/// flight taken over as "its pod was deleted"). The sound rule skips the read only once the
/// cache has held the lock for the grace, or this process saw its UID go.
#[test]
fn model_rwo_lock_finds_the_unread_writer() {
    let (states, found) = check(binds(Rule::WriterUnread), depth());
    let path = found.unwrap_or_else(|| {
        panic!("the lock's pod never read survived {states} states: the read is not needed")
    });
    println!("model rwo-lock, the lock's pod never read: counterexample\n{path}");
}

/// A placement with no read racing it: a bind (`Place`), or a create (`Admit`).
fn quiet_placement(create: bool, replica: u8, name: u8, node: u8) -> A {
    let (mid, writer_first, late) = (None, false, None);
    match create {
        false => A::Place {
            replica,
            name,
            node,
            mid,
            writer_first,
            late,
        },
        true => A::Admit {
            replica,
            name,
            node,
            mid,
            writer_first,
            late,
        },
    }
}

/// `trace` applied to `m`'s initial state while each action is enabled: the state reached and how
/// many actions were applied.
fn replay(m: &LockModel, trace: &[A]) -> (S, usize) {
    let mut s = m.init_states().remove(0);
    for (done, a) in trace.iter().enumerate() {
        let mut enabled = Vec::new();
        m.actions(&s, &mut enabled);
        if !enabled.contains(a) {
            return (s, done);
        }
        s = m.next_state(&s, a.clone()).expect("next");
    }
    (s, trace.len())
}

/// The adversary review's trace for a shortcut that also skipped the users' LIST: p0 created on
/// n0; p1 created on n0 (renaming the lock); p1 deleted and seen gone; p1 again, on n1. Its first
/// `steps` actions applied with `rule`, each enabled.
fn gone_trace(rule: Rule, steps: usize) -> S {
    let trace = [
        quiet_placement(true, 0, 0, 0),
        A::Persist(0),
        quiet_placement(true, 0, 1, 0),
        A::Persist(0),
        A::Delete(1),
        A::Watch(0),
        quiet_placement(true, 0, 1, 1),
        A::Persist(0),
    ];
    let (s, done) = replay(&creates(rule), &trace[..steps]);
    assert_eq!(done, steps, "{rule:?}: action {done} not enabled in {s:#?}");
    s
}

/// A shortcut that also skipped the users' LIST (a lock's pod seen gone taken as "stale" at once)
/// needs 8 steps with creates, beyond what the exhaustive check reaches on two cores: its trace
/// is replayed. The sound rule, shortcut included, is checked exhaustively by the tests above
/// (`gone` is on in every configuration).
#[test]
fn model_rwo_lock_gone_skipping_the_users_list_puts_two_nodes_on_the_claim() {
    let s = gone_trace(Rule::GoneSkipsList, 8);
    assert!(
        !one_node(&s),
        "the broken rule did not put two nodes on the claim: pods {:?}, lock {:?}",
        s.pods,
        s.claim.lock
    );
}

/// The same trace with volguard's rule: the take-over at step 7 is refused (the LIST finds the
/// user), the lock stays on the first node.
#[test]
fn model_rwo_lock_the_sound_rule_refuses_that_take_over() {
    let s = gone_trace(Rule::Sound, 7);
    assert!(
        s.flights.is_empty(),
        "the sound rule let the take-over through: {s:#?}"
    );
    assert_eq!(s.claim.lock.as_ref().map(|l| l.node), Some(0));
}

/// The cache's clock kept across a change of the lock's value (what `Pvc::lock_seen`'s carry must
/// not do) needs 9 actions, past the exhaustive depth: an adversary review's trace, replayed. p0's
/// bind is admitted on n0 and lost; time passes; p1's bind renames the lock on n0 (its bind in
/// flight), the cache keeping the old lock's age; p0's bind to n1 then takes the lock over, and
/// both land.
#[test]
fn model_rwo_lock_a_cache_clock_carried_across_a_new_lock_puts_two_nodes_on_the_claim() {
    let trace = [
        A::Create(0),
        quiet_placement(false, 1, 0, 0),
        A::Lose(0),
        A::Tick(1),
        A::Create(1),
        quiet_placement(false, 1, 1, 0),
        quiet_placement(false, 1, 0, 1),
        A::Persist(0),
        A::Persist(0),
    ];
    for (rule, two_nodes) in [(Rule::CarryAcrossChange, true), (Rule::Sound, false)] {
        let (s, _) = replay(&binds(rule), &trace);
        assert_eq!(
            !one_node(&s),
            two_nodes,
            "{rule:?}: pods {:?}, lock {:?}",
            s.pods,
            s.claim.lock
        );
    }
}
