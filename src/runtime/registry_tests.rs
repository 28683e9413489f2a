//! Unit tests of `src/runtime/registry.rs`.

use super::*;

#[test]
fn openmetrics_becomes_prometheus_text() {
    let om = "# HELP volguard_requests Requests.\n# TYPE volguard_requests counter\n\
volguard_requests_total{rule=\"a\"} 3 # {trace=\"x\"} 1\n\
# HELP volguard_build Build.\n# TYPE volguard_build info\nvolguard_build_info{version=\"1\"} 1\n\
# HELP volguard_seconds Time.\n# TYPE volguard_seconds histogram\n# UNIT volguard_seconds seconds\n\
volguard_seconds_bucket{le=\"+Inf\"} 1\nvolguard_seconds_sum 0.5\nvolguard_seconds_count 1\n# EOF\n";
    let text = to_prometheus_text(om);
    assert_eq!(
        text,
        "# HELP volguard_requests_total Requests.\n# TYPE volguard_requests_total counter\n\
volguard_requests_total{rule=\"a\"} 3\n\
# HELP volguard_build_info Build.\n# TYPE volguard_build_info gauge\nvolguard_build_info{version=\"1\"} 1\n\
# HELP volguard_seconds Time.\n# TYPE volguard_seconds histogram\n\
volguard_seconds_bucket{le=\"+Inf\"} 1\nvolguard_seconds_sum 0.5\nvolguard_seconds_count 1\n"
    );
}
