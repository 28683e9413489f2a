//! The checker's own tests: histories that hold and histories that break each invariant.

use super::*;

fn line(writer: &str, node: &str, seq: u64, at: f64) -> String {
    let body = format!("{writer} {node} {seq} {at:.2}");
    let crc = crc32fast::hash(format!("{body}\n").as_bytes());
    format!("{body} {crc:x}\n")
}

/// A writer on `node` from `from` to `to`, a record every 100 ms.
fn writer(w: &str, node: &str, from: f64, to: f64) -> Vec<(f64, String)> {
    let mut out = Vec::new();
    let mut t = from;
    let mut seq = 1;
    while t <= to + 1e-9 {
        out.push((t, line(w, node, seq, t)));
        seq += 1;
        t += 0.1;
    }
    out
}

fn log(writers: &[Vec<(f64, String)>]) -> String {
    let mut all: Vec<(f64, String)> = writers.iter().flatten().cloned().collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    all.into_iter().map(|(_, l)| l).collect()
}

fn history(log: String) -> History {
    History {
        started_at: 0.0,
        ended_at: 100.0,
        last_heal_at: 60.0,
        workloads: vec![Workload {
            name: "db".into(),
            rwo: true,
            log: Some(log),
            limit_seconds: 30.0,
            start_seconds: 4.0,
            forgive_seconds: 2.0,
            recovers: true,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn a_clean_handover_holds() {
    let h = history(log(&[
        writer("old", "node-a", 0.0, 40.0),
        writer("new", "node-b", 55.0, 100.0),
    ]));
    let v = check(&h);
    assert_eq!((v.lost, v.corrupted, v.overlaps), (0, 0, 0), "{v:?}");
    assert!(v.violations.is_empty(), "{v:?}");
    let a = v.availability["db"];
    assert!((0.84..0.87).contains(&a), "{a}");
}

#[test]
fn two_nodes_writing_at_once_is_an_overlap() {
    let h = history(log(&[
        writer("old", "node-a", 0.0, 50.0),
        writer("new", "node-b", 45.0, 100.0),
    ]));
    let v = check(&h);
    // 5 s of both: about 50 records of each.
    assert!((95..=105).contains(&v.overlaps), "{v:?}");
    // The same two writers on one node are not an overlap (RWO is per node).
    let same = history(log(&[
        writer("old", "node-a", 0.0, 50.0),
        writer("new", "node-a", 45.0, 100.0),
    ]));
    assert_eq!(check(&same).overlaps, 0);
}

#[test]
fn records_that_vanish_are_lost_and_torn_lines_corrupted() {
    let full = log(&[writer("w", "node-a", 0.0, 99.0)]);
    let seen: Vec<(String, u64)> = (1..=995).map(|s| ("w".to_string(), s)).collect();
    // The tail seen earlier is gone, and one line is torn.
    let mut text: String = full.lines().take(900).map(|l| format!("{l}\n")).collect();
    text.push_str("w node-a 901 90.0");
    let mut h = history(text);
    h.workloads[0].seen = seen;
    let v = check(&h);
    assert_eq!(v.lost, 95, "{v:?}");
    assert_eq!(v.corrupted, 1, "{v:?}");
}

#[test]
fn a_workload_that_never_writes_again_is_not_live() {
    let h = history(log(&[writer("w", "node-a", 0.0, 50.0)]));
    let v = check(&h);
    assert_eq!(v.not_live, vec!["db".to_string()]);
    // Writing again, but later than its limit after the heal, is not live either.
    let late = history(log(&[
        writer("w", "node-a", 0.0, 50.0),
        writer("v", "node-b", 95.0, 100.0),
    ]));
    assert_eq!(check(&late).not_live.len(), 1);
}

#[test]
fn a_release_needs_a_fence_before_it() {
    let mut h = history(log(&[writer("w", "node-a", 0.0, 100.0)]));
    h.releases = vec![
        Release {
            at: 30.0,
            node: "node-a".into(),
            what: "taint".into(),
        },
        Release {
            at: 31.0,
            node: "node-b".into(),
            what: "pod ns/db-0".into(),
        },
    ];
    h.incidents = vec![
        Incident {
            node: "node-a".into(),
            fenced: Some(29.0),
            ..Default::default()
        },
        // Fenced only after the release: the release had no record.
        Incident {
            node: "node-b".into(),
            fenced: Some(40.0),
            ..Default::default()
        },
    ];
    let v = check(&h);
    assert_eq!(v.releases_without_record, 1, "{v:?}");
    assert!(v.violations.iter().any(|l| l.contains("node-b")), "{v:?}");
}

#[test]
fn recovery_runs_from_the_heartbeat_to_the_first_record_elsewhere() {
    let mut h = released_and_replaced();
    h.incidents[0].detected = Some(35.5);
    h.incidents[0].fence_requested = Some(36.0);
    h.incidents[0].fenced = Some(37.0);
    h.not_ready = vec![
        NotReady {
            at: 39.0,
            node: "node-a".into(),
        },
        NotReady {
            at: 33.0,
            node: "node-a".into(),
        },
    ];
    let v = check(&h);
    assert_eq!(v.recovery.len(), 1, "{v:?}");
    let r = &v.recovery[0];
    assert!((r.total_seconds - 24.0).abs() < 0.01, "{r:?}");
    // kcm's grace 16 + the pods' forgiveness 2 + the agent 1 + a start 4.
    assert!((r.limit_seconds - 23.0).abs() < 0.01, "{r:?}");
    // kcm's NotReady 13 s after the heartbeat (the one after the release is another story).
    assert_eq!(
        r.cluster_limit_seconds.map(|l| (l * 100.0).round() / 100.0),
        Some(20.0),
        "{r:?}"
    );
    let phase = |k: &str| r.phases.get(k).copied().unwrap_or(f64::NAN);
    assert!((phase("detection") - 15.5).abs() < 0.01, "{r:?}");
    assert!((phase("fence") - 1.5).abs() < 0.01, "{r:?}");
    assert!((phase("release") - 1.0).abs() < 0.01, "{r:?}");
    assert!((phase("start") - 6.0).abs() < 0.01, "{r:?}");
}

#[test]
fn faults_met_before_the_release_add_to_the_limit() {
    let run = |kind: &str, start: f64, end: f64, outcome: &str| FaultRun {
        kind: kind.into(),
        target: String::new(),
        start,
        end,
        outcome: outcome.into(),
    };
    let faults = [
        // Killed mid-fence, 5 s before the release (under the lease's 6 s): the follower's wait
        // is what is left of it.
        run(
            "leader-kill",
            33.0,
            33.0,
            "mid-fence of node-a-1: replica-a killed, restarted as replica-1",
        ),
        // Killed before the heartbeat, and one without volguard: nothing.
        run(
            "leader-kill",
            10.0,
            10.0,
            "replica-b killed, restarted as replica-2",
        ),
        run("leader-kill", 30.0, 30.0, "no volguard"),
        // The apiserver down from 25 to 31, etcd from 37 to 45 (3 s before the release).
        run("apiserver-restart", 25.0, 31.0, "killed"),
        run("etcd-restart", 37.0, 45.0, "killed"),
        run("partition", 21.0, 60.0, "cut"),
    ];
    let w = waits(&faults, 20.0, 38.0, (Some(36.0), Some(37.0)));
    assert_eq!(w.get("leader-kill").copied(), Some(5.0), "{w:?}");
    assert_eq!(w.get("apiserver-restart").copied(), Some(6.0), "{w:?}");
    assert_eq!(w.get("etcd-restart").copied(), Some(1.0), "{w:?}");
    assert_eq!(w.len(), 3, "{w:?}");

    let mut h = released_and_replaced();
    h.faults = faults.to_vec();
    h.incidents[0].fence_requested = Some(36.0);
    h.incidents[0].fenced = Some(37.0);
    let v = check(&h);
    assert!((v.recovery[0].limit_seconds - 35.0).abs() < 0.01, "{v:?}");
    // Killed while the backend was fencing: inside the fence's own time already; so is the part
    // of an outage inside it (etcd down 37-45: 37-37.5 of it in the fence).
    let w = waits(&faults, 20.0, 38.0, (Some(32.0), Some(37.5)));
    assert_eq!(w.get("leader-kill"), None, "{w:?}");
    assert_eq!(w.get("apiserver-restart").copied(), Some(6.0), "{w:?}");
    assert_eq!(w.get("etcd-restart").copied(), Some(0.5), "{w:?}");
}

/// A writer on node-a until 20, released at 38, its replacement on node-b from 44.
fn released_and_replaced() -> History {
    let mut h = history(log(&[
        writer("old", "node-a", 0.0, 20.0),
        writer("new", "node-b", 44.0, 100.0),
    ]));
    h.incidents = vec![Incident {
        name: "node-a-1".into(),
        node: "node-a".into(),
        heartbeat: Some(20.0),
        released: Some(38.0),
        ..Default::default()
    }];
    h
}

/// A Job's replacement waits for its controller's backoff: no recovery ratio for it.
#[test]
fn a_workload_whose_owner_backs_off_has_no_recovery_ratio() {
    let mut h = released_and_replaced();
    assert_eq!(check(&h).recovery.len(), 1);
    h.workloads[0].recovers = false;
    assert!(check(&h).recovery.is_empty());
}

#[test]
fn quantiles_by_nearest_rank() {
    assert_eq!(quantile(&[], 0.5), None);
    assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
    assert_eq!(quantile(&[3.0, 1.0, 2.0], 1.0), Some(3.0));
}
