//! Partition healing, model-checked (issue 40 point 10): one incident on one partitioned node,
//! driven by the functions the controller calls (`rules::fencing::step`, `after_fence`,
//! `after_unfence`), against a world that does everything it may: the partition heals or does
//! not, the machine reboots or does not, a backend answers done, pending, failed or never (a
//! late answer is a failure to the driver), a controller dies between a backend's effect and
//! the record (the next one resumes from the record), a trusted remediator fences and taints on
//! its own, the kubelet of a reconnected node cleans up or not.
//!
//! Invariants: (1) volguard's out-of-service taint is only ever added on a proof — a backend
//! answered done, the Lease was still silent since detection and the node not Ready, and the
//! fence's scope covers every storage system the node's pods use; (2) a fence is undone only
//! after the reboot proof (the machine restarted, or its kubelet reports none of the released
//! volumes); (3) with honest backends, never two writers: once the node's pods are replaced
//! elsewhere, the old pods never write to storage they can reach. A deliberately broken driver
//! (the scope ignored) must yield a counterexample, so the model checks something.

use stateright::{Checker, Model, Property};
use volguard::model::fence::{BackendKind, Phase};
use volguard::rules::fencing::{
    self as rules, Answer, Do, Now, Record, Scope, Storage, Transition,
};

/// What a backend does when asked (the model tries each).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Reply {
    /// Done, and it did it.
    Done,
    Pending,
    /// Failed, or no answer in time.
    Failed,
    /// Done, but it did not (a backend that answers falsely).
    Lie,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum A {
    /// The driver takes one step; `reply` is what a backend answers if asked; `crash`: the
    /// controller dies after the effects on the cluster, before the record is written.
    Drive { reply: Reply, crash: bool },
    /// The network comes back: the kubelet renews its Lease and reports Ready.
    Heal,
    /// The machine restarts: its pods stop, its volumes are unmounted.
    Reboot,
    /// A reconnected kubelet sees its pods deleted: it stops them and unmounts their volumes.
    KubeletCleans,
    /// A trusted remediator fences the machine itself (power cycle) and adds the taint.
    Remediate,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct S {
    // The incident as recorded.
    phase: Phase,
    message: Option<String>,
    backend_index: usize,
    released_volumes: bool,
    // The node.
    lease: u8,
    ready: bool,
    boot: u8,
    /// The pods that ran there when it was partitioned still run.
    pods_running: bool,
    /// The kubelet reports their volume mounted.
    mounted: bool,
    /// A fence is in place: the machine off or its storage cut (for the backend's scope).
    cut: bool,
    /// The node's pods also use storage outside a driver-scoped fence.
    uses_other: bool,
    /// The current backend answered "fenced" (truly or not).
    said_done: bool,
    // The cluster.
    taint: bool,
    /// The pods were replaced elsewhere (PodGC acted on the taint).
    replaced: bool,
    // What the invariants check.
    unproven_taint: bool,
    early_unfence: bool,
}

const LEASE_AT_DETECTION: &str = "t0";
const LEASES: [&str; 4] = ["t0", "t1", "t2", "t3"];
const BOOTS: [&str; 4] = ["b0", "b1", "b2", "b3"];
const VOLUME: &str = "pvc-1";

struct FencingModel {
    /// The backends in order: a networkfence (one CSI driver's scope) then manual (the machine).
    backends: Vec<(BackendKind, u64)>,
    /// Ignore the fence's scope (a deliberately broken driver).
    broken: bool,
    /// Backends may answer falsely: "never two writers" cannot hold then (nothing can tell a
    /// lie from a fence while the node is silent); the proof invariants still must.
    liars: bool,
}

impl FencingModel {
    fn scope(&self, index: usize) -> Scope {
        match self.backends.get(index).map(|b| b.0) {
            Some(BackendKind::Networkfence) => Scope::Driver("csi-a".into()),
            _ => Scope::Machine,
        }
    }

    fn used(s: &S) -> Vec<Storage> {
        let mut u = vec![Storage::Csi("csi-a".into())];
        if s.uses_other {
            u.push(Storage::InTree("nfs".into()));
        }
        u
    }

    /// What the fence reaches: every storage for the machine, only `csi-a` for the driver's.
    fn covers_all(&self, s: &S) -> bool {
        self.scope(s.backend_index) == Scope::Machine || !s.uses_other
    }

    fn record<'a>(&'a self, s: &'a S, released: &'a [String]) -> Record<'a> {
        Record {
            node: "n1",
            phase: s.phase,
            lease_at_detection: Some(LEASE_AT_DETECTION),
            boot_id_at_detection: Some(BOOTS[0]),
            released_volumes: released,
            message: s.message.as_deref(),
            backend_index: s.backend_index,
            backends: &self.backends,
        }
    }

    /// The driver's step, as `Fencer::advance` takes it.
    fn drive(&self, s: &mut S, reply: Reply, crash: bool) {
        let released: Vec<String> = if s.released_volumes {
            vec![VOLUME.into()]
        } else {
            Vec::new()
        };
        let mounted: Vec<String> = if s.mounted {
            vec![VOLUME.into()]
        } else {
            Vec::new()
        };
        let scope = self.scope(s.backend_index);
        let missing = if self.broken {
            Vec::new()
        } else {
            rules::uncovered(&scope, &Self::used(s))
        };
        let now = |s: &S| Now {
            node: true,
            ready: Some(s.ready),
            lease: Some(LEASES[s.lease as usize]),
            boot_id: Some(BOOTS[s.boot as usize]),
            volumes: if s.mounted { &mounted } else { &[] },
            scope: (s.phase == Phase::Fenced).then_some((&scope, missing.as_slice())),
        };
        let next = rules::step(&self.record(s, &released), &now(s));
        let next = match next {
            Do::AskFence => {
                let answer = match reply {
                    Reply::Done => {
                        s.cut = true;
                        s.said_done = true;
                        Answer::Done("fenced".into())
                    }
                    Reply::Lie => {
                        s.said_done = true;
                        Answer::Done("fenced".into())
                    }
                    Reply::Pending => Answer::Pending("working".into()),
                    Reply::Failed => Answer::Failed("refused".into()),
                };
                let after = now(s);
                rules::after_fence(&self.record(s, &released), &after, answer)
            }
            Do::AskUnfence => {
                if s.boot == 0 && s.mounted {
                    s.early_unfence = true;
                }
                let answer = match reply {
                    Reply::Done | Reply::Lie => {
                        s.cut = false;
                        Answer::Done("unfenced".into())
                    }
                    Reply::Pending => Answer::Pending("working".into()),
                    Reply::Failed => Answer::Failed("refused".into()),
                };
                rules::after_unfence(&self.record(s, &released), answer)
            }
            other => other,
        };
        if let Do::Write(t) = next {
            self.apply(s, t, crash);
        }
    }

    fn apply(&self, s: &mut S, t: Transition, crash: bool) {
        let e = &t.effects;
        if e.unfence_best_effort {
            s.cut = false;
        }
        if e.taint {
            // What the driver's record promises: a proof, and a scope that covers.
            let proven = s.lease == 0 && !s.ready && s.said_done && self.covers_all(s);
            if !proven {
                s.unproven_taint = true;
            }
            s.taint = true;
            s.replaced = true;
        }
        if e.untaint {
            s.taint = false;
        }
        if crash {
            return;
        }
        if let Some(i) = e.request {
            s.backend_index = i;
            s.said_done = false;
        }
        if e.taint {
            s.released_volumes = s.mounted;
        }
        s.phase = t.phase;
        s.message = Some(t.message);
    }
}

/// The old pods write to storage they reach while their replacements run elsewhere.
fn two_writers(m: &FencingModel, s: &S) -> bool {
    let reach = !s.cut || !m.covers_all(s);
    s.replaced && s.pods_running && s.mounted && reach
}

impl Model for FencingModel {
    type State = S;
    type Action = A;

    fn init_states(&self) -> Vec<S> {
        [false, true]
            .into_iter()
            .map(|uses_other| S {
                phase: Phase::Detected,
                message: None,
                backend_index: 0,
                released_volumes: false,
                lease: 0,
                ready: false,
                boot: 0,
                pods_running: true,
                mounted: true,
                cut: false,
                said_done: false,
                uses_other,
                taint: false,
                replaced: false,
                unproven_taint: false,
                early_unfence: false,
            })
            .collect()
    }

    fn actions(&self, s: &S, out: &mut Vec<A>) {
        if !s.phase.is_final() {
            let replies: &[Reply] = if self.liars {
                &[Reply::Done, Reply::Pending, Reply::Failed, Reply::Lie]
            } else {
                &[Reply::Done, Reply::Pending, Reply::Failed]
            };
            for &reply in replies {
                for crash in [false, true] {
                    out.push(A::Drive { reply, crash });
                }
            }
        }
        // A powered-off machine does not reconnect until it is started again; a node whose
        // storage network alone is cut does.
        let powered_off = s.cut && self.scope(s.backend_index) == Scope::Machine && s.boot == 0;
        if !s.ready && (s.lease as usize) < LEASES.len() - 1 && !powered_off {
            out.push(A::Heal);
        }
        if (s.boot as usize) < BOOTS.len() - 1 {
            out.push(A::Reboot);
        }
        if s.ready && s.replaced && (s.pods_running || s.mounted) {
            out.push(A::KubeletCleans);
        }
        if !s.taint {
            out.push(A::Remediate);
        }
    }

    fn next_state(&self, last: &S, a: A) -> Option<S> {
        let mut s = last.clone();
        match a {
            A::Drive { reply, crash } => self.drive(&mut s, reply, crash),
            A::Heal => {
                s.lease += 1;
                s.ready = true;
            }
            A::Reboot => {
                s.boot += 1;
                s.pods_running = false;
                s.mounted = false;
            }
            A::KubeletCleans => {
                s.pods_running = false;
                s.mounted = false;
            }
            A::Remediate => {
                // Its own fencing first (a power cycle), then the taint: its proof, not volguard's.
                s.boot += 1;
                s.pods_running = false;
                s.mounted = false;
                s.taint = true;
                s.replaced = true;
            }
        }
        if s.boot as usize >= BOOTS.len() {
            return None;
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("taint only on proof", |_, s: &S| !s.unproven_taint),
            Property::always("unfence only after the reboot proof", |_, s: &S| {
                !s.early_unfence
            }),
            Property::always("never two writers", |m: &FencingModel, s: &S| {
                m.liars || !two_writers(m, s)
            }),
        ]
    }
}

fn depth() -> usize {
    std::env::var("VOLGUARD_MODEL_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(12)
}

fn check(broken: bool, liars: bool, depth: usize) -> (usize, Vec<(&'static str, String)>) {
    let c = FencingModel {
        backends: vec![
            (BackendKind::Networkfence, 30),
            (BackendKind::Manual, 86400),
        ],
        broken,
        liars,
    }
    .checker()
    .target_max_depth(depth)
    .spawn_bfs()
    .join();
    let found = [
        "taint only on proof",
        "unfence only after the reboot proof",
        "never two writers",
    ]
    .into_iter()
    .filter_map(|p| {
        c.discovery(p)
            .map(|path| (p, format!("{:#?}", path.into_actions())))
    })
    .collect();
    (c.unique_state_count(), found)
}

#[test]
fn model_fencing_holds_to_its_depth() {
    let depth = depth();
    let (states, found) = check(false, false, depth);
    if let Some((property, path)) = found.first() {
        panic!("model fencing: {property} broken after {states} states:\n{path}");
    }
    let (lying, found) = check(false, true, depth);
    if let Some((property, path)) = found.first() {
        panic!(
            "model fencing (backends that lie): {property} broken after {lying} states:\n{path}"
        );
    }
    // Deeper finds nothing new: every reachable state was explored.
    let (deeper, _) = check(false, true, depth + 8);
    let every = if deeper == lying {
        "every reachable state"
    } else {
        "to its depth"
    };
    println!(
        "model fencing: {states} states explored (depth {depth}, {every}), invariants hold; with backends that answer falsely: {lying} states, the proof invariants hold"
    );
}

#[test]
fn model_fencing_finds_the_ignored_scope() {
    let (states, found) = check(true, false, depth());
    assert!(
        found.iter().any(|(p, _)| *p == "taint only on proof"),
        "the broken driver (scope ignored) survived {states} states: the model checks nothing"
    );
    let (p, path) = &found[0];
    println!("model fencing, broken driver (scope ignored): {p} broken\n{path}");
}
