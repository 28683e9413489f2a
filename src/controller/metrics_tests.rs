//! Unit tests of `src/controller/metrics.rs`.

use super::*;
use crate::report::{Report, Row, SinceSource};

fn row(ns: &str, name: &str, class: &str, bytes: u128, idle: Option<i64>) -> Row {
    Row {
        namespace: ns.into(),
        name: name.into(),
        unused_since: None,
        unused_since_source: SinceSource::Unknown,
        idle_seconds: idle,
        requested: None,
        requested_bytes: Some(bytes),
        storage_class: class.into(),
        volume: String::new(),
        reclaim_policy: String::new(),
    }
}

#[test]
fn unused_gauges_follow_the_report() {
    let m = MetricsRegistry::default();
    let c = ControllerMetrics::register(&m);
    c.register_per_pvc(&m);
    let report = Report {
        items: vec![
            row("a", "x", "fast", 100, Some(60)),
            row("a", "y", "fast", 50, None),
            row("b", "z", "slow", 7, Some(5)),
        ],
        totals: vec![],
    };
    c.set_unused(&report, true);
    let text = m.render();
    assert!(
        text.contains(r#"volguard_unused_pvcs{namespace="a",storageclass="fast"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"volguard_unused_pvc_requested_bytes{namespace="a",storageclass="fast"} 150"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"volguard_pvc_unused_seconds{namespace="a",persistentvolumeclaim="x",storageclass="fast"} 60"#));
    assert!(
        !text.contains(r#"persistentvolumeclaim="y""#),
        "unknown times are not exported"
    );
    // A claim that is used again disappears from the gauges.
    c.set_unused(
        &Report {
            items: vec![],
            totals: vec![],
        },
        true,
    );
    assert!(!m.render().contains(r#"namespace="b""#));
}
