//! Unit tests of `src/server/metrics.rs`.

use super::*;

#[test]
fn requests_are_counted_per_series_and_unknown_values_become_other() {
    let m = Metrics::new();
    m.count_request("validate", "Pod", "DELETE", "denied");
    m.count_request("validate", "Pod", "DELETE", "denied");
    m.count_request("validate", "Secret", "PATCH", "allowed");
    let text = m.render();
    assert!(
        text.contains(r#"volguard_admission_requests_total{endpoint="validate",kind="Pod",operation="DELETE",decision="denied"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"volguard_admission_requests_total{endpoint="validate",kind="other",operation="other",decision="allowed"} 1"#),
        "{text}"
    );
    // Only those two non-zero: every other series is a rule's known one, at zero.
    let counted: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("volguard_admission_requests_total{") && !l.ends_with(" 0"))
        .collect();
    assert_eq!(counted.len(), 2, "{counted:?}");
}

#[test]
fn each_rule_s_known_series_are_there_from_the_start() {
    let text = Metrics::new().render();
    for line in [
        r#"volguard_admission_requests_total{endpoint="force-delete",kind="Pod",operation="DELETE",decision="denied"} 0"#,
        r#"volguard_admission_requests_total{endpoint="force-delete",kind="Eviction",operation="CREATE",decision="warned"} 0"#,
        r#"volguard_admission_requests_total{endpoint="pvc-finalizer",kind="PersistentVolumeClaim",operation="CREATE",decision="patched"} 0"#,
        r#"volguard_admission_requests_total{endpoint="delete-protection",kind="Namespace",operation="DELETE",decision="allowed"} 0"#,
        r#"volguard_break_glass_total{rule="finalizer-removal"} 0"#,
        r#"volguard_tls_reloads_total{result="failure"} 0"#,
    ] {
        assert!(text.contains(line), "missing {line}");
    }
    // A mutating rule is never "denied"; nothing outside a rule's row is made up.
    assert!(!text.contains(r#"endpoint="pvc-finalizer",kind="PersistentVolumeClaim",operation="CREATE",decision="denied""#));
    assert!(!text.contains(r#"endpoint="force-delete",kind="Node""#));
}

#[test]
fn in_flight_is_read_from_its_source_when_scraped() {
    let m = Metrics::new();
    let taken = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(3));
    let source = taken.clone();
    m.in_flight_from(move || source.load(std::sync::atomic::Ordering::Relaxed));
    assert!(
        m.render()
            .contains("volguard_admission_in_flight_requests 3")
    );
    taken.store(0, std::sync::atomic::Ordering::Relaxed);
    assert!(
        m.render()
            .contains("volguard_admission_in_flight_requests 0")
    );
}

#[test]
fn the_duration_is_per_endpoint_and_every_endpoint_is_there_from_the_start() {
    let m = Metrics::new();
    let text = m.render();
    for e in ENDPOINTS {
        assert!(
            text.contains(&format!(
                "volguard_admission_request_duration_seconds_count{{endpoint=\"{e}\"}} 0"
            )),
            "{e} missing before any request:\n{text}"
        );
    }
    m.observe_duration("rwo-single-node", 0.002);
    m.observe_duration("no-such-path", 0.5);
    let text = m.render();
    assert!(
        text.contains(
            r#"volguard_admission_request_duration_seconds_count{endpoint="rwo-single-node"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"volguard_admission_request_duration_seconds_count{endpoint="other"} 1"#),
        "{text}"
    );
}
