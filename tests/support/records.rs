//! The writer every real-node scenario runs and the checker that reads its volume afterwards:
//! the measure of record for data loss (`target/e2e/data-loss.json`).
//!
//! The writer (busybox sh in the pod) appends one line per record to `/data/log`:
//! `POD_UID NODE SEQ UPTIME CRC`, where UPTIME is the machine's `/proc/uptime` (all real nodes
//! share one kernel, so writers on two nodes share one clock; busybox's `date` has no
//! sub-second field) and CRC is busybox `crc32` (zlib's CRC-32, hex) of the first four fields
//! and a newline. The checker parses the file as it is on the shared storage root.

use std::collections::{BTreeMap, BTreeSet};

/// The container command of a writer: appends a record every ~100 ms, forever.
pub const WRITER: &str = r#"f=/data/log; i=0
while true; do
  i=$((i+1)); read up _ < /proc/uptime; r="$POD $NODE $i $up"
  c=$(echo "$r" | crc32)
  echo "$r $c" >> "$f"
  sleep 0.1
done"#;

/// The env a writer container needs (its pod UID and node, from the downward API).
pub fn writer_env() -> serde_json::Value {
    serde_json::json!([
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    ])
}

#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub writer: String,
    pub node: String,
    pub seq: u64,
    /// Seconds since the machine booted.
    pub at: f64,
}

/// One line: a record, or `None` when it is torn or its checksum does not match.
pub fn parse(line: &str) -> Option<Record> {
    let f: Vec<&str> = line.split(' ').collect();
    if f.len() != 5 {
        return None;
    }
    let body = format!("{} {} {} {}\n", f[0], f[1], f[2], f[3]);
    if u32::from_str_radix(f[4], 16).ok()? != crc32fast::hash(body.as_bytes()) {
        return None;
    }
    Some(Record {
        writer: f[0].into(),
        node: f[1].into(),
        seq: f[2].parse().ok()?,
        at: f[3].parse().ok()?,
    })
}

/// What the checker reports for one volume.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    /// Records seen earlier (or implied by a later sequence number) that are not there now.
    pub lost: usize,
    /// Lines that are not a whole record with a matching checksum.
    pub corrupted: usize,
    /// Records an older writer appended after a newer writer's first record: "at most one
    /// writer" was broken once per such record.
    pub overlaps: usize,
    /// From the last record of the writer before the newest to the newest writer's first record
    /// (negative when they overlapped); `None` with fewer than two writers.
    pub gap_seconds: Option<f64>,
    pub records: usize,
    pub writers: Vec<String>,
}

/// Check `text` (the volume's log now; `None` when the file or the volume is gone) against
/// `seen`, every record an earlier read of the same volume found.
pub fn check(text: Option<&str>, seen: &BTreeSet<(String, u64)>) -> Report {
    let mut r = Report::default();
    let mut present: BTreeSet<(String, u64)> = BTreeSet::new();
    let mut max_seq: BTreeMap<String, u64> = BTreeMap::new();
    let mut first_at: BTreeMap<String, usize> = BTreeMap::new();
    let mut order: Vec<Record> = Vec::new();
    for line in text.unwrap_or("").lines() {
        let Some(rec) = parse(line) else {
            r.corrupted += 1;
            continue;
        };
        if !first_at.contains_key(&rec.writer) {
            first_at.insert(rec.writer.clone(), order.len());
            r.writers.push(rec.writer.clone());
        }
        let m = max_seq.entry(rec.writer.clone()).or_default();
        *m = (*m).max(rec.seq);
        present.insert((rec.writer.clone(), rec.seq));
        order.push(rec);
    }
    r.records = order.len();
    // Every sequence number below a writer's highest was written; so was every one seen before.
    let mut expected: BTreeSet<(String, u64)> = seen.clone();
    for (w, max) in &max_seq {
        expected.extend((1..=*max).map(|s| (w.clone(), s)));
    }
    r.lost = expected.difference(&present).count();
    // Writers ranked by when they began; a record from any but the newest begun is an overlap.
    let mut newest = 0usize;
    for rec in &order {
        let rank = r.writers.iter().position(|w| *w == rec.writer).unwrap_or(0);
        if rank < newest {
            r.overlaps += 1;
        }
        newest = newest.max(rank);
    }
    if r.writers.len() >= 2 {
        let new = &r.writers[r.writers.len() - 1];
        let old = &r.writers[r.writers.len() - 2];
        let first_new = order.iter().find(|x| &x.writer == new).map(|x| x.at);
        let last_old = order
            .iter()
            .filter(|x| &x.writer == old)
            .map(|x| x.at)
            .fold(None, |m: Option<f64>, a| Some(m.map_or(a, |m| m.max(a))));
        if let (Some(a), Some(b)) = (first_new, last_old) {
            r.gap_seconds = Some(a - b);
        }
    }
    r
}

/// The (writer, seq) pairs in `text`, to pass as `seen` to a later `check`.
pub fn snapshot(text: &str) -> BTreeSet<(String, u64)> {
    text.lines()
        .filter_map(parse)
        .map(|r| (r.writer, r.seq))
        .collect()
}

/// One row of `target/e2e/data-loss.json`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub scenario: String,
    pub with_volguard: bool,
    pub lost: usize,
    pub corrupted: usize,
    pub overlaps: usize,
    pub gap_seconds: Option<f64>,
    pub records: usize,
    pub writers: usize,
    /// What happened, in a few words (refused by which rule, what the cluster did).
    pub outcome: String,
}

impl Row {
    pub fn new(scenario: &str, with_volguard: bool, r: &Report, outcome: &str) -> Row {
        Row {
            scenario: scenario.into(),
            with_volguard,
            lost: r.lost,
            corrupted: r.corrupted,
            overlaps: r.overlaps,
            gap_seconds: r.gap_seconds,
            records: r.records,
            writers: r.writers.len(),
            outcome: outcome.into(),
        }
    }
}

pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<31} {:<9} {:>6} {:>9} {:>8} {:>8} {:>8}  {}\n",
        "scenario", "volguard", "lost", "corrupted", "overlaps", "gap s", "records", "outcome"
    );
    for r in rows {
        s += &format!(
            "{:<31} {:<9} {:>6} {:>9} {:>8} {:>8} {:>8}  {}\n",
            r.scenario,
            if r.with_volguard { "with" } else { "without" },
            r.lost,
            r.corrupted,
            r.overlaps,
            r.gap_seconds.map_or("-".into(), |g| format!("{g:.1}")),
            r.records,
            r.outcome
        );
    }
    s
}
