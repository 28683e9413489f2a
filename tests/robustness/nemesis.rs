//! The nemesis: a schedule of overlapping faults drawn from a seed (pure: the same seed gives the
//! same schedule, printed and saved), and what each fault does to the real-node cluster.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The node's only link down: its kubelet and its containers cut off, still running.
    Partition,
    /// Only the node's way to the apiserver cut (the network between nodes, and the node's
    /// storage, still up): the kubelet goes silent while its containers keep writing.
    ApiserverPartition,
    /// Every process of the machine killed, then booted again (a new boot ID).
    PowerCycle,
    /// Every process of the machine stopped (a hung machine), then resumed.
    Freeze,
    KubeletRestart,
    ContainerdRestart,
    /// One of the two `volguard serve` replicas killed, started again at the fault's end.
    WebhookKill,
    /// The controller replica holding the Lease killed and started again as a follower; with
    /// the target `@fencing`, at the moment an incident is being fenced.
    LeaderKill,
    ApiserverRestart,
    /// etcd killed, started again on its data at the fault's end.
    EtcdRestart,
    /// Cordon and evict the node's pods (graceful), uncordon at the end.
    Drain,
    /// An impatient person force-deletes a writer's pod (on the node in trouble when there is one).
    OperatorForceDelete,
    /// An impatient person adds the out-of-service taint to a node, without any confirmation;
    /// removed at the end.
    OperatorTaint,
    /// An impatient person deletes the claim of a writer stuck on the node in trouble (the
    /// claims are delete-protected, as an operator protects a database's).
    OperatorDeleteClaim,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Partition => "partition",
            Kind::ApiserverPartition => "apiserver-partition",
            Kind::PowerCycle => "power-cycle",
            Kind::Freeze => "freeze",
            Kind::KubeletRestart => "kubelet-restart",
            Kind::ContainerdRestart => "containerd-restart",
            Kind::WebhookKill => "webhook-kill",
            Kind::LeaderKill => "leader-kill",
            Kind::ApiserverRestart => "apiserver-restart",
            Kind::EtcdRestart => "etcd-restart",
            Kind::Drain => "drain",
            Kind::OperatorForceDelete => "operator-force-delete",
            Kind::OperatorTaint => "operator-taint",
            Kind::OperatorDeleteClaim => "operator-delete-claim",
        }
    }

    /// A fault that takes a node out (one at a time per node: a machine is not frozen while off).
    pub fn holds_node(self) -> bool {
        matches!(
            self,
            Kind::Partition
                | Kind::ApiserverPartition
                | Kind::PowerCycle
                | Kind::Freeze
                | Kind::Drain
        )
    }

    /// kube-apiserver or etcd down: the API answers nothing until it heals.
    pub fn is_control_plane(self) -> bool {
        matches!(self, Kind::ApiserverRestart | Kind::EtcdRestart)
    }

    fn on_node(self) -> bool {
        self.holds_node()
            || matches!(
                self,
                Kind::KubeletRestart
                    | Kind::ContainerdRestart
                    | Kind::OperatorTaint
                    | Kind::OperatorDeleteClaim
            )
    }
}

const KINDS: [Kind; 14] = [
    Kind::Partition,
    Kind::ApiserverPartition,
    Kind::PowerCycle,
    Kind::Freeze,
    Kind::KubeletRestart,
    Kind::ContainerdRestart,
    Kind::WebhookKill,
    Kind::LeaderKill,
    Kind::ApiserverRestart,
    Kind::EtcdRestart,
    Kind::Drain,
    Kind::OperatorForceDelete,
    Kind::OperatorTaint,
    Kind::OperatorDeleteClaim,
];

/// A target resolved when the fault is injected: the node running `db-0`.
pub const FENCED_WRITER_NODE: &str = "@db";
/// A leader kill's target: wait (up to `MID_FENCE_WAIT`) for an incident being fenced, then kill.
pub const MID_FENCE: &str = "@fencing";
pub const MID_FENCE_WAIT: f64 = 40.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// Seconds from the run's start.
    pub at: f64,
    pub kind: Kind,
    /// A node, a webhook replica (`0`/`1`), or empty (the leader, the apiserver, a pod picked then).
    pub target: String,
    /// Seconds until it heals (0: a single action).
    pub lasts: f64,
}

/// splitmix64, so that a seed reproduces a schedule.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// Uniform in [lo, hi), to a tenth of a second.
    pub fn between(&mut self, lo: f64, hi: f64) -> f64 {
        let steps = ((hi - lo) * 10.0).max(1.0) as usize;
        lo + self.below(steps) as f64 / 10.0
    }
}

/// The faults of a run of `seconds`, overlapping in time, all healed by `seconds - tail` so that
/// liveness can be judged. The first fault is always a partition with, inside it, the controller's
/// leader killed mid-fence and an impatient person's force delete (the moments a storage guard
/// exists for); the rest are drawn from the seed. No
/// node is in two node-holding faults at once, and at most one node is held at a time beyond the
/// first (two held nodes of two is a whole cluster down: nothing to recover to).
pub fn schedule(seed: u64, seconds: f64, tail: f64, nodes: &[&str]) -> Vec<Fault> {
    let mut rng = Rng::new(seed);
    let end = seconds - tail;
    let mut out = Vec::new();
    // The node the fenced StatefulSet's writer runs on when the run starts (the scheduler
    // places it): the partition every run begins with is the one fencing exists for.
    let first = FENCED_WRITER_NODE.to_string();
    let lasts = rng.between(40.0, 60.0);
    out.push(Fault {
        at: 15.0,
        kind: Kind::Partition,
        target: first.clone(),
        lasts,
    });
    out.push(Fault {
        at: 20.0,
        kind: Kind::LeaderKill,
        target: MID_FENCE.into(),
        lasts: 0.0,
    });
    out.push(Fault {
        at: 15.0 + rng.between(20.0, 30.0),
        kind: Kind::OperatorForceDelete,
        target: first,
        lasts: 0.0,
    });
    // Until it heals, no other fault holds a node (whichever `@db` turns out to be).
    let mut held_until: Vec<(String, f64)> = nodes
        .iter()
        .map(|n| (n.to_string(), 15.0 + lasts))
        .collect();
    let mut cp_windows: Vec<(f64, f64)> = Vec::new();
    let mut t = 15.0 + rng.between(10.0, 25.0);
    while t < end - 10.0 {
        t = (t * 10.0).round() / 10.0;
        let kind = KINDS[rng.below(KINDS.len())];
        let lasts = match kind {
            Kind::Partition | Kind::ApiserverPartition | Kind::Freeze => rng.between(20.0, 50.0),
            Kind::PowerCycle => rng.between(15.0, 40.0),
            Kind::Drain => rng.between(20.0, 40.0),
            Kind::WebhookKill => rng.between(5.0, 30.0),
            Kind::ApiserverRestart | Kind::EtcdRestart => rng.between(2.0, 8.0),
            Kind::OperatorTaint => rng.between(10.0, 30.0),
            _ => 0.0,
        }
        .min(end - t);
        // While the control plane is down nothing else may start or heal (a heal that waits for
        // the API, as powering a node on does, would wait for ever), and two outages do not overlap.
        let inside = |x: f64| cp_windows.iter().any(|(a, b)| x >= *a && x <= *b);
        let ends_inside = |a: f64, b: f64| {
            out.iter().any(|f: &Fault| {
                let e = f.at + f.lasts;
                e >= a && e <= b
            })
        };
        if inside(t) || inside(t + lasts) || (kind.is_control_plane() && ends_inside(t, t + lasts))
        {
            t += rng.between(3.0, 8.0);
            continue;
        }
        let target = if kind.on_node() {
            let free: Vec<&str> = nodes
                .iter()
                .copied()
                .filter(|n| !held_until.iter().any(|(h, u)| h == n && *u > t))
                .collect();
            let busy = held_until.iter().filter(|(_, u)| *u > t).count();
            if free.is_empty() || (kind.holds_node() && busy >= 1) {
                t += rng.between(3.0, 8.0);
                continue;
            }
            free[rng.below(free.len())].to_string()
        } else if kind == Kind::WebhookKill {
            rng.below(2).to_string()
        } else {
            String::new()
        };
        if kind.holds_node() {
            held_until.push((target.clone(), t + lasts));
        }
        if kind.is_control_plane() {
            cp_windows.push((t, t + lasts));
        }
        out.push(Fault {
            at: t,
            kind,
            target,
            lasts,
        });
        t += rng.between(6.0, 25.0);
    }
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_schedule() {
        let a = schedule(7, 480.0, 120.0, &["node-a", "node-b"]);
        assert_eq!(a, schedule(7, 480.0, 120.0, &["node-a", "node-b"]));
        assert_ne!(a, schedule(8, 480.0, 120.0, &["node-a", "node-b"]));
    }

    #[test]
    fn every_kind_is_drawn() {
        let drawn: std::collections::BTreeSet<Kind> = (0..50)
            .flat_map(|seed| schedule(seed, 480.0, 120.0, &["node-a", "node-b"]))
            .map(|f| f.kind)
            .collect();
        assert_eq!(drawn.len(), KINDS.len(), "{drawn:?}");
    }

    #[test]
    fn faults_overlap_heal_before_the_tail_and_never_stack_on_a_node() {
        let mut overlapping = 0;
        for seed in 0..200 {
            let s = schedule(seed, 480.0, 120.0, &["node-a", "node-b"]);
            assert!(s.len() >= 8, "seed {seed}: {s:?}");
            assert!(
                s.iter().all(|f| f.at + f.lasts <= 360.0 + 1e-6),
                "seed {seed}"
            );
            assert_eq!(s[0].kind, Kind::Partition);
            assert!(s.iter().any(|f| f.kind == Kind::OperatorForceDelete
                && f.target == s[0].target
                && f.at < s[0].at + s[0].lasts));
            assert!(s.iter().any(|f| f.kind == Kind::LeaderKill
                && f.target == MID_FENCE
                && f.at < s[0].at + s[0].lasts));
            let held: Vec<&Fault> = s.iter().filter(|f| f.kind.holds_node()).collect();
            for (i, a) in held.iter().enumerate() {
                for b in &held[i + 1..] {
                    let both = a.at < b.at + b.lasts && b.at < a.at + a.lasts;
                    assert!(!both, "seed {seed}: {a:?} and {b:?} hold nodes at once");
                }
            }
            for c in s.iter().filter(|f| f.kind.is_control_plane()) {
                let (a, b) = (c.at, c.at + c.lasts);
                for f in s.iter().filter(|f| !std::ptr::eq(*f, c)) {
                    let e = f.at + f.lasts;
                    assert!(
                        !((a..=b).contains(&f.at) || (a..=b).contains(&e)),
                        "seed {seed}: {f:?} starts or heals while {c:?} holds the control plane"
                    );
                }
            }
            // Another fault starts while a node is held (a partition, a freeze, ...).
            if held.iter().any(|h| {
                s.iter()
                    .any(|f| !std::ptr::eq(*h, f) && f.at > h.at && f.at < h.at + h.lasts)
            }) {
                overlapping += 1;
            }
        }
        assert_eq!(overlapping, 200, "every schedule overlaps faults");
    }
}
