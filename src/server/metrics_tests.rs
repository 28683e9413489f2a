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
    assert_eq!(
        text.matches("volguard_admission_requests_total{").count(),
        2
    );
}
