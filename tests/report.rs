//! `volguard report unused` over a state file with every case, in each output format, through the
//! real binary.

mod support;

use serde_json::Value;
use std::process::Command;

fn report(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args(["report", "unused", "--state"])
        .arg(support::serve::repo().join("tests/fixtures/report/state.yaml"))
        .args(["--now", "2026-11-21T00:00:00Z"])
        .args(args)
        .output()
        .expect("run");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> Value {
    let mut a = vec!["-o", "json"];
    a.extend_from_slice(args);
    let (ok, out, err) = report(&a);
    assert!(ok, "{err}");
    serde_json::from_str(&out).expect("json")
}

fn names(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn every_case_sorted_by_idle_time() {
    let v = json(&["-A"]);
    // annot (51d) > cond (10d) > terminal-only (7d) > both (1d: the later of condition and
    // annotation) > neither (unknown).
    assert_eq!(
        names(&v),
        ["annot", "cond", "terminal-only", "both", "neither"]
    );
    let items = v["items"].as_array().expect("items");
    assert_eq!(
        items[3]["unusedSince"], "2026-11-20T00:00:00Z",
        "the later of condition (2026-08-01) and annotation: never earlier than the truth"
    );
    assert_eq!(items[3]["unusedSinceSource"], "annotation");
    assert_eq!(items[1]["unusedSinceSource"], "condition");
    assert_eq!(items[0]["unusedSinceSource"], "annotation");
    assert_eq!(items[0]["idleSeconds"], 51 * 86_400);
    assert_eq!(items[0]["reclaimPolicy"], "Delete");
    assert_eq!(items[1]["reclaimPolicy"], "Retain");
    assert_eq!(items[4]["unusedSinceSource"], "unknown");
    assert!(items[4]["idleSeconds"].is_null());
    let totals = v["totals"].as_array().expect("totals");
    let fast = totals
        .iter()
        .find(|t| t["storageClass"] == "fast")
        .expect("fast");
    assert_eq!(fast["count"], 4);
    assert_eq!(
        fast["requestedBytes"],
        10u64 * 1024 * 1024 * 1024
            + 500 * 1024 * 1024
            + 1024 * 1024 * 1024
            + 2 * 1024 * 1024 * 1024
    );
}

#[test]
fn filters() {
    assert_eq!(names(&json(&["-n", "team-a"])), ["annot", "cond"]);
    assert_eq!(names(&json(&["-l", "app=db"])), ["annot"]);
    assert_eq!(
        names(&json(&["-l", "app in (db,web)", "-n", "team-a"])),
        ["annot", "cond"]
    );
    // --older-than leaves out unknown times.
    assert_eq!(names(&json(&["--older-than", "30d"])), ["annot"]);
    // The same threshold written as hours, and as days and hours (jiff's duration syntax).
    assert_eq!(names(&json(&["--older-than", "720h"])), ["annot"]);
    assert_eq!(names(&json(&["--older-than", "29d24h"])), ["annot"]);
    assert_eq!(
        names(&json(&["--older-than", "1w"])),
        ["annot", "cond", "terminal-only"]
    );
}

#[test]
fn table_and_yaml() {
    let (ok, out, err) = report(&[]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("NAMESPACE")
            && lines[0].contains("UNUSED SINCE")
            && lines[0].contains("RECLAIM")
    );
    assert!(
        lines[1].starts_with("team-a") && lines[1].contains("annot") && lines[1].contains("51d 0h"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.contains("both")
            && l.contains("2026-11-20T00:00:00Z")
            && l.contains("1d 0h")),
        "{out}"
    );
    assert!(out.contains("not yet observed"));
    assert!(
        out.contains("total fast: 4 claim(s), 13.5Gi requested"),
        "{out}"
    );
    assert!(
        lines.iter().all(|l| l.chars().count() <= 160),
        "table should fit a terminal"
    );
    let (ok, out, err) = report(&["-o", "yaml"]);
    assert!(ok, "{err}");
    let y: Value = serde_yaml::from_str(&out).expect("yaml");
    assert_eq!(y, json(&[]), "yaml and json carry the same data");
}

#[test]
fn bad_flags_are_clear_errors() {
    let (ok, _, err) = report(&["--older-than", "3y"]);
    assert!(!ok);
    assert!(err.contains("--older-than \"3y\""), "{err}");
    let (ok, _, err) = report(&["-l", "a b=c"]);
    assert!(!ok);
    assert!(err.contains("invalid label selector"), "{err}");
}

#[test]
fn wide_and_name_outputs() {
    let (ok, wide, err) = report(&["-o", "wide"]);
    assert!(ok, "{err}");
    let header = wide.lines().next().expect("header");
    assert!(header.ends_with("RECLAIM   SINCE FROM"), "{header}");
    assert!(wide.contains("volguard.io/unused-since"), "{wide}");
    let (ok, names_out, err) = report(&["-o", "name"]);
    assert!(ok, "{err}");
    let v = json(&[]);
    let want: String = names(&v)
        .iter()
        .map(|n| format!("persistentvolumeclaim/{n}\n"))
        .collect();
    assert_eq!(names_out, want);
    assert!(!want.is_empty());
}
