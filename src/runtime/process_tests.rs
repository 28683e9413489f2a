//! Unit tests of `src/runtime/process.rs`.

use super::*;

#[test]
fn cpu_time_is_counted_after_the_command_name() {
    // A command name with a space and a parenthesis must not shift the fields.
    let stat = "42 (vol guard) x) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1 2 3";
    assert_eq!(cpu_seconds(stat), Some(3.0));
    assert_eq!(cpu_seconds("garbage"), None);
}

#[test]
fn memory_and_fd_limits_are_read_in_bytes_and_counts() {
    let status = "Name:\tvolguard\nVmSize:\t  20480 kB\nVmRSS:\t    1024 kB\n";
    assert_eq!(status_bytes(status, "VmRSS:"), Some(1024 * 1024));
    assert_eq!(status_bytes(status, "VmSize:"), Some(20480 * 1024));
    assert_eq!(status_bytes(status, "VmSwap:"), None);
    let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n";
    assert_eq!(max_fds(limits), Some(1_048_576));
}

#[test]
fn this_process_is_sampled_and_exported() {
    let r = MetricsRegistry::default();
    register(&r);
    let text = r.render();
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    let rss: f64 = text
        .lines()
        .find(|l| l.starts_with("process_resident_memory_bytes "))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .expect("rss value");
    assert!(rss > 1e6, "resident memory {rss}");
}
