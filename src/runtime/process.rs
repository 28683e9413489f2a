//! The conventional `process_*` series (CPU, memory, file descriptors, start time) that
//! dashboards and kube-prometheus-stack expect of every job, read from `/proc/self` at scrape
//! time. Hand-written: kubert-prometheus-process (the prometheus-client collector) is built on
//! prometheus-client 0.23, whose Registry is not ours (0.25). Off Linux nothing is exported.

use super::MetricsRegistry;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// Clock ticks per second of /proc's CPU times: USER_HZ, fixed at 100 by the Linux ABI.
const USER_HZ: f64 = 100.0;

/// What one read of /proc/self gives.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Sample {
    pub cpu_seconds: f64,
    pub resident_bytes: i64,
    pub virtual_bytes: i64,
    pub open_fds: i64,
    pub max_fds: i64,
}

/// utime + stime (fields 14 and 15 of /proc/self/stat; the command name, field 2, may hold
/// spaces and parentheses, so fields are counted after its closing parenthesis).
pub fn cpu_seconds(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: f64 = f.next()?.parse().ok()?;
    let stime: f64 = f.next()?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// A `Key:   123 kB` line of /proc/self/status, in bytes.
pub fn status_bytes(status: &str, key: &str) -> Option<i64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kb: i64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The soft limit of `Max open files` in /proc/self/limits.
pub fn max_fds(limits: &str) -> Option<i64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn sample() -> Option<Sample> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as i64);
    Some(Sample {
        cpu_seconds: cpu_seconds(&stat)?,
        resident_bytes: status_bytes(&status, "VmRSS:").unwrap_or(0),
        virtual_bytes: status_bytes(&status, "VmSize:").unwrap_or(0),
        open_fds,
        max_fds: max_fds(&limits).unwrap_or(0),
    })
}

pub fn register(r: &MetricsRegistry) {
    if sample().is_none() {
        return;
    }
    let cpu = r.add(
        "process_cpu_seconds",
        "User and system CPU time spent, in seconds",
        Counter::<f64, AtomicU64>::default(),
    );
    let rss = r.add(
        "process_resident_memory_bytes",
        "Resident memory size in bytes",
        Gauge::<i64>::default(),
    );
    let vsz = r.add(
        "process_virtual_memory_bytes",
        "Virtual memory size in bytes",
        Gauge::<i64>::default(),
    );
    let fds = r.add(
        "process_open_fds",
        "Open file descriptors",
        Gauge::<i64>::default(),
    );
    let max = r.add(
        "process_max_fds",
        "Limit of open file descriptors",
        Gauge::<i64>::default(),
    );
    let start = r.add(
        "process_start_time_seconds",
        "Start time of the process since the Unix epoch, in seconds",
        Gauge::<i64>::default(),
    );
    start.set(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64),
    );
    // The counter only moves forward: each scrape adds the CPU time since the last one.
    let last = Arc::new(Mutex::new(0.0_f64));
    r.on_scrape(move || {
        let Some(s) = sample() else { return };
        let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
        if s.cpu_seconds > *last {
            cpu.inc_by(s.cpu_seconds - *last);
            *last = s.cpu_seconds;
        }
        rss.set(s.resident_bytes);
        vsz.set(s.virtual_bytes);
        fds.set(s.open_fds);
        max.set(s.max_fds);
    });
}

#[cfg(test)]
#[path = "process_tests.rs"]
mod tests;
