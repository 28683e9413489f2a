//! The RWO lock's protocol, model-checked (trust review point 14): two webhook replicas, each
//! with its own lagging cache and its own clock, the controller's cleanup, the apiserver's
//! compare-and-swap, pods created, bound, ended, deleted and replaced by a pod of the same name,
//! placements whose answer is lost, and a node taken out of service. Every decision calls the
//! functions the webhook and the controller call (`rules::rwo::place`, `rules::rwo_lock::step`,
//! `uses_on`, `clearable`); only the I/O around them is modelled: what a replica's cache shows,
//! what a quorum read shows, what a compare-and-swap does, and `LockClock`'s rule (the grace runs
//! from the first time this process saw the lock's node empty; a use restarts it).
//!
//! Invariant: no ReadWriteOnce claim is used by non-terminal pods on two nodes of which more than
//! one is in service. Checked exhaustively to a stated depth; two deliberately broken rules must
//! each find a counterexample: the take-over judged on the replica's cache (as before the trust
//! review), and a placement on the lock's own node admitted without writing the lock (what the
//! review's point 5 asked for, and why volguard renames the lock instead).

use stateright::{Checker, Model, Property};
use std::time::Duration;
use volguard::model::{ClaimSource, Node, Pod, Pvc, Volume};
use volguard::rules::Fact;
use volguard::rules::claims::Claim;
use volguard::rules::rwo::{self, ClaimFacts};
use volguard::rules::rwo_lock::{self, BIND_GRACE, LockStep, Named, NodeHold, RwoLock, Via};

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
}

/// A placement volguard allowed that the apiserver has not stored yet.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Flight {
    name: u8,
    uid: u8,
    node: u8,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct S {
    pods: Vec<P>,
    claim: Claimed,
    replicas: [Replica; 2],
    controller: Quiet,
    flights: Vec<Flight>,
    out_of_service: [bool; 2],
    next_uid: u8,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum A {
    Create(u8),
    Place {
        replica: u8,
        name: u8,
        node: u8,
        /// A placement in flight lands between the quorum read of the users and the read of
        /// the lock's pod (two reads, two moments).
        mid: Option<u8>,
    },
    Persist(u8),
    Lose(u8),
    End(u8),
    Delete(u8),
    Sync(u8),
    /// Time passes for a replica (only while no placement is in flight: the apiserver gives up on
    /// a request within the grace).
    Tick(u8),
    ControllerTick,
    ControllerClear {
        mid: Option<u8>,
    },
    OutOfService(u8),
}

struct LockModel {
    /// Pods ever created (bounds the space).
    max_pods: u8,
    rule: Rule,
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
        via: Some(Via::Bind),
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

impl LockModel {
    /// The webhook's decision for placing pod `name` on `node` through `replica`, and its effect.
    fn place(&self, s: &mut S, r: usize, name: u8, node: u8, mid: Option<u8>) {
        let Some(target) = s.pods.iter().find(|p| p.name == name).cloned() else {
            return;
        };
        let pod = pod_of(&target);
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
                let users: Vec<Pod> = seen
                    .iter()
                    .filter(|p| rwo_lock::uses_on(p, NS, CLAIM, lock_node))
                    .cloned()
                    .collect();
                let observed = s.replicas[r].quiet.look(l, !users.is_empty());
                let later: Vec<Pod> = match mid {
                    Some(i) if !broken => {
                        persist(s, i);
                        s.pods.iter().map(pod_of).collect()
                    }
                    _ => seen.to_vec(),
                };
                hold_facts = Some((users, later, l.clone(), observed));
            }
            // On the lock's node, naming another placement: that one's pod by a quorum read.
            Some(l) if l.name != name || l.uid != target.uid => {
                named_facts = Some((l.clone(), s.replicas[r].quiet.look(l, false)));
            }
            _ => {}
        }
        let hold = hold_facts
            .as_ref()
            .map(|(users, later, l, observed)| NodeHold {
                claim: CLAIM,
                users: Fact::Found(users),
                writer: writer_of(later, &lock_of(l)),
                node: Fact::Found(&nodes[l.node as usize]),
                gone_recorded: false,
                observed: *observed,
                // The model places by bind only, where a missing pod already proves its
                // deletion; what a replica saw stored changes nothing here.
                writer_stored: false,
            });
        let named = named_facts.as_ref().map(|(l, observed)| Named {
            writer: writer_of(&truth, &lock_of(l)),
            observed: *observed,
            writer_stored: false,
        });
        let step = rwo_lock::step(
            &pod,
            node_name,
            Via::Bind,
            current_lock.as_ref(),
            hold.as_ref(),
            named.as_ref(),
            jiff::Timestamp::UNIX_EPOCH,
        );
        if self.rule == Rule::SilentSameNode && current.as_ref().is_some_and(|l| l.node == node) {
            s.flights.push(Flight {
                name,
                uid: target.uid,
                node,
            });
            return;
        }
        match step {
            LockStep::Held(_) | LockStep::Busy(_) => {}
            LockStep::Write { lock, .. } => {
                // The compare-and-swap against the stored claim's resourceVersion.
                if s.replicas[r].claim.rv != s.claim.rv {
                    // Lost: read again; this request is refused (the scheduler retries).
                    s.replicas[r].claim = s.claim.clone();
                    return;
                }
                let l = L {
                    node: node_index(&lock.node),
                    name,
                    uid: target.uid,
                    at: s.claim.rv.wrapping_add(1),
                };
                s.claim = Claimed {
                    lock: Some(l.clone()),
                    rv: s.claim.rv.wrapping_add(1),
                };
                s.replicas[r].claim = s.claim.clone();
                // Written here: young on this process's clock.
                s.replicas[r].quiet = Quiet(Some((l, false)));
                s.flights.push(Flight {
                    name,
                    uid: target.uid,
                    node,
                });
            }
        }
    }

    /// The controller's cleanup: consistent reads, its own clock, a `test` on the lock's value.
    fn clear(&self, s: &mut S, mid: Option<u8>) {
        let Some(l) = s.claim.lock.clone() else {
            return;
        };
        let lock_node = NODES[l.node as usize];
        let truth: Vec<Pod> = s.pods.iter().map(pod_of).collect();
        let users: Vec<Pod> = truth
            .iter()
            .filter(|p| rwo_lock::uses_on(p, NS, CLAIM, lock_node))
            .cloned()
            .collect();
        let observed = s.controller.look(&l, !users.is_empty());
        let node = node_of(l.node, s.out_of_service[l.node as usize]);
        let named = lock_of(&l);
        if let Some(i) = mid {
            persist(s, i);
        }
        let later: Vec<Pod> = s.pods.iter().map(pod_of).collect();
        let hold = NodeHold {
            claim: CLAIM,
            users: Fact::Found(&users),
            writer: writer_of(&later, &named),
            node: Fact::Found(&node),
            gone_recorded: false,
            observed,
            writer_stored: false,
        };
        if rwo_lock::clearable(&named, &hold).is_some() {
            s.claim = Claimed {
                lock: None,
                rv: s.claim.rv.wrapping_add(1),
            };
        }
    }
}

/// The apiserver stores placement `i` in flight (the bind names the pod's UID: a replaced or
/// deleted pod is not bound).
fn persist(s: &mut S, i: u8) {
    if (i as usize) >= s.flights.len() {
        return;
    }
    let f = s.flights.remove(i as usize);
    if let Some(p) = s
        .pods
        .iter_mut()
        .find(|p| p.uid == f.uid && p.node.is_none())
    {
        p.node = Some(f.node);
    }
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
fn mids(s: &S) -> impl Iterator<Item = Option<u8>> {
    std::iter::once(None).chain((0..s.flights.len() as u8).map(Some))
}

impl Model for LockModel {
    type State = S;
    type Action = A;

    fn init_states(&self) -> Vec<S> {
        let empty = Replica {
            pods: Vec::new(),
            claim: Claimed { lock: None, rv: 0 },
            quiet: Quiet::default(),
        };
        vec![S {
            pods: Vec::new(),
            claim: Claimed { lock: None, rv: 0 },
            replicas: [empty.clone(), empty],
            controller: Quiet::default(),
            flights: Vec::new(),
            out_of_service: [false; 2],
            next_uid: 0,
        }]
    }

    fn actions(&self, s: &S, out: &mut Vec<A>) {
        for name in 0..NAMES as u8 {
            match s.pods.iter().find(|p| p.name == name) {
                None if s.next_uid < self.max_pods => out.push(A::Create(name)),
                None => {}
                Some(p) => {
                    if p.node.is_none() && !p.ended {
                        for replica in 0..2 {
                            for node in 0..2 {
                                if !s.flights.iter().any(|f| f.uid == p.uid) {
                                    for mid in mids(s) {
                                        out.push(A::Place {
                                            replica,
                                            name,
                                            node,
                                            mid,
                                        });
                                    }
                                }
                            }
                        }
                    }
                    if !p.ended {
                        out.push(A::End(name));
                    }
                    out.push(A::Delete(name));
                }
            }
        }
        for i in 0..s.flights.len() as u8 {
            out.push(A::Persist(i));
            out.push(A::Lose(i));
        }
        for r in 0..2 {
            out.push(A::Sync(r));
            if s.flights.is_empty()
                && s.replicas[r as usize]
                    .quiet
                    .0
                    .as_ref()
                    .is_some_and(|q| !q.1)
            {
                out.push(A::Tick(r));
            }
        }
        if s.flights.is_empty() && s.controller.0.as_ref().is_some_and(|q| !q.1) {
            out.push(A::ControllerTick);
        }
        if s.claim.lock.is_some() {
            for mid in mids(s) {
                out.push(A::ControllerClear { mid });
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
            } => self.place(&mut s, replica as usize, name, node, mid),
            A::Persist(i) => persist(&mut s, i),
            A::Lose(i) => {
                s.flights.remove(i as usize);
            }
            A::End(name) => {
                if let Some(p) = s.pods.iter_mut().find(|p| p.name == name) {
                    p.ended = true;
                }
            }
            A::Delete(name) => s.pods.retain(|p| p.name != name),
            A::Sync(r) => {
                s.replicas[r as usize].pods = s.pods.clone();
                s.replicas[r as usize].claim = s.claim.clone();
            }
            A::Tick(r) => {
                if let Some(q) = &mut s.replicas[r as usize].quiet.0 {
                    q.1 = true;
                }
            }
            A::ControllerTick => {
                if let Some(q) = &mut s.controller.0 {
                    q.1 = true;
                }
            }
            A::ControllerClear { mid } => self.clear(&mut s, mid),
            A::OutOfService(n) => s.out_of_service[n as usize] = true,
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![Property::always("one node", |_, s| one_node(s))]
    }
}

/// The depth `make test` checks (debug build, about half a minute); `VOLGUARD_MODEL_DEPTH` goes
/// deeper (11: 6.3 million states, half a minute in a release build).
fn depth() -> usize {
    std::env::var("VOLGUARD_MODEL_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(10)
}

fn check(rule: Rule, depth: usize) -> (usize, Option<String>) {
    let c = LockModel { max_pods: 3, rule }
        .checker()
        .target_max_depth(depth)
        .spawn_bfs()
        .join();
    let found = c
        .discovery("one node")
        .map(|path| format!("{:#?}", path.into_actions()));
    (c.unique_state_count(), found)
}

#[test]
fn model_rwo_lock_holds_to_its_depth() {
    let depth = depth();
    let (states, found) = check(Rule::Sound, depth);
    if let Some(path) = found {
        panic!("model rwo-lock: counterexample after {states} states:\n{path}");
    }
    println!("model rwo-lock: {states} states explored (depth {depth}), invariant holds");
}

#[test]
fn model_rwo_lock_finds_the_cache_take_over() {
    let (states, found) = check(Rule::CacheTakeOver, depth());
    let path = found.unwrap_or_else(|| {
        panic!("the broken rule (take-over from a cache) survived {states} states: the model checks nothing")
    });
    println!("model rwo-lock, broken rule (take-over from the cache): counterexample\n{path}");
}

#[test]
fn model_rwo_lock_finds_the_silent_same_node_placement() {
    let (states, found) = check(Rule::SilentSameNode, depth());
    let path = found.unwrap_or_else(|| {
        panic!("a same-node placement that writes nothing survived {states} states")
    });
    println!("model rwo-lock, a same-node placement that writes nothing: counterexample\n{path}");
}
