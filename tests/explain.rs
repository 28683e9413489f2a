//! `volguard explain` over the example state file, as a user runs it, and as the kubectl plugin
//! (`kubectl-volguard`, a symlink to the binary, which kubectl's plugin lookup executes).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn state() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/examples/state.yaml")
}

fn run(bin: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin).args(args).output().expect("run");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn volguard() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_volguard"))
}

#[test]
fn terminating_claim_in_use_as_table_and_json() {
    let s = state();
    let s = s.to_str().expect("path");
    let (ok, out, err) = run(
        &volguard(),
        &["explain", "pvc", "data-web-1", "-n", "shop", "--state", s],
    );
    assert!(ok, "{err}");
    assert!(
        out.starts_with("PersistentVolumeClaim shop/data-web-1\n"),
        "{out}"
    );
    assert!(out.contains("deletion:     requested at"), "{out}");
    assert!(out.contains("web-1 (Running on node node-b)"), "{out}");
    assert!(
        out.contains("kubernetes.io/pvc-protection  (removed by kube-controller-manager"),
        "{out}"
    );
    assert!(out.contains("next:         stop pod(s) web-1"), "{out}");
    let in_format = |format: &str| {
        run(
            &volguard(),
            &[
                "explain",
                "pvc",
                "data-web-1",
                "-n",
                "shop",
                "--state",
                s,
                "-o",
                format,
            ],
        )
    };
    let (ok, out, _) = in_format("json");
    assert!(ok);
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["blockingPods"][0]["name"], "web-1");
    assert_eq!(v["blockingPods"][0]["node"], "node-b");
    assert_eq!(v["kind"], "PersistentVolumeClaim");
    let (ok, out, _) = in_format("yaml");
    assert!(ok && out.contains("blockingPods:"), "{out}");
}

#[test]
fn finished_pod_and_volume_and_missing_objects() {
    let s = state();
    let s = s.to_str().expect("path");
    // A terminating claim whose only user finished: delete that pod.
    let (ok, out, err) = run(
        &volguard(),
        &[
            "explain",
            "pvc",
            "job-1-scratch",
            "-n",
            "batch",
            "--state",
            s,
        ],
    );
    assert!(ok, "{err}");
    assert!(out.contains("next:"), "{out}");
    let (ok, out, err) = run(
        &volguard(),
        &["explain", "pv", "pv-data-web-0", "--state", s],
    );
    assert!(ok, "{err}");
    assert!(out.starts_with("PersistentVolume pv-data-web-0\n"), "{out}");
    assert!(out.contains("bound to:     shop/data-web-0"), "{out}");
    let (ok, _, err) = run(
        &volguard(),
        &["explain", "pvc", "nope", "-n", "shop", "--state", s],
    );
    assert!(!ok);
    assert!(
        err.starts_with(
            "error: persistentvolumeclaims \"nope\" not found in namespace \"shop\" of "
        ),
        "{err}"
    );
    let (ok, _, err) = run(&volguard(), &["explain", "deployment", "x", "--state", s]);
    assert!(!ok && err.contains("invalid value 'deployment'"), "{err}");
}

#[test]
fn runs_as_the_kubectl_plugin() {
    let dir = tempfile::tempdir().expect("tmp");
    let link = dir.path().join("kubectl-volguard");
    std::os::unix::fs::symlink(volguard(), &link).expect("symlink");
    let s = state();
    let s = s.to_str().expect("path");
    let (ok, out, err) = run(
        &link,
        &["explain", "pvc", "data-web-0", "-n", "shop", "--state", s],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("used by:\n    web-0 (Running on node node-a)")
            || out.contains("in use by pod(s) web-0"),
        "{out}"
    );
    let (ok, out, err) = run(&link, &["unused", "--state", s, "-A"]);
    assert!(ok, "{err}");
    assert!(out.contains("old-logs") || out.contains("results"), "{out}");
    let (_, out, _) = run(&link, &["--help"]);
    assert!(out.contains("Usage: kubectl volguard"), "{out}");
}

#[test]
fn rwo_lock_is_shown_as_table_and_json() {
    let s = state();
    let s = s.to_str().expect("path");
    let (ok, out, err) = run(
        &volguard(),
        &[
            "explain",
            "pvc",
            "stale-lock-data",
            "-n",
            "rwo",
            "--state",
            s,
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("rwo lock:     node node-a (pod gone-0, since 2026-11-01T00:00:00Z)"),
        "{out}"
    );
    let (ok, out, err) = run(
        &volguard(),
        &[
            "explain",
            "pvc",
            "stale-lock-data",
            "-n",
            "rwo",
            "--state",
            s,
            "-o",
            "json",
        ],
    );
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["rwoLock"]["node"], "node-a");
    assert_eq!(v["rwoLock"]["pod"], "gone-0");
    let (ok, out, _) = run(
        &volguard(),
        &["explain", "pvc", "data-web-1", "-n", "shop", "--state", s],
    );
    assert!(ok && out.contains("rwo lock:     none"), "{out}");
}

/// `KUBECONFIG` may list several files, as kubectl reads it (kube's own loader merges them), and a
/// failure is printed once, on one line, without the client library logging it again.
#[test]
fn kubeconfig_list_is_merged_and_an_error_is_printed_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let empty = dir.path().join("empty.yaml");
    let real = dir.path().join("real.yaml");
    std::fs::write(
        &empty,
        "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n",
    )
    .expect("write");
    // A cluster nobody listens on: the command must get as far as dialing it.
    std::fs::write(
        &real,
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n\
         clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: x, context: {cluster: c, user: u, namespace: team}}]\n",
    )
    .expect("write");
    let list = format!("{}:{}", empty.display(), real.display());
    let out = std::process::Command::new(volguard())
        .args(["explain", "pvc", "data"])
        .env("KUBECONFIG", &list)
        .env_remove("RUST_LOG")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!err.contains(&list), "the list was read as one path: {err}");
    assert!(err.contains("Connection refused"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert_eq!(
        err.matches("Connection refused").count(),
        1,
        "said once: {err}"
    );
}

/// README's `kubectl volguard` sample and docs/reference.md's are volguard's real output: each
/// command of the blocks is run against manifests/examples/state.yaml and must print exactly what
/// the file shows.
#[test]
fn readme_sample_is_real_output() {
    let mut checked = 0;
    for (file, marker) in [
        (
            "README.md",
            "```console\n$ make install PREFIX=$HOME/.local",
        ),
        (
            "docs/reference.md",
            "```console\n$ kubectl volguard explain pvc results",
        ),
    ] {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
            .expect("the sample's file");
        let start = text
            .find(marker)
            .unwrap_or_else(|| panic!("the explain sample block of {file}"));
        let block = &text[start + "```console\n".len()..];
        let block = &block[..block.find("```\n").expect("end of block")];
        checked += check_sample(file, block);
    }
    assert!(checked >= 5, "only {checked} commands checked");
}

/// Run each `$ kubectl volguard …` line of `block` and compare with the lines shown under it.
fn check_sample(file: &str, block: &str) -> usize {
    let s = state();
    let s = s.to_str().expect("path");
    let mut checked = 0;
    let mut lines = block.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(cmd) = line.strip_prefix("$ kubectl volguard ") else {
            continue;
        };
        let mut shown = String::new();
        while let Some(l) = lines.peek() {
            if l.starts_with("$ ") {
                break;
            }
            shown.push_str(l);
            shown.push('\n');
            lines.next();
        }
        if shown.is_empty() {
            continue;
        }
        let mut args: Vec<&str> = cmd.split_whitespace().collect();
        args.extend(["--state", s]);
        if args[0] == "unused" {
            // The sample's clock, so idle times do not move.
            args.extend(["--now", "2026-11-23T12:00:00Z"]);
        }
        let (ok, out, err) = run(&volguard(), &args);
        assert!(ok, "{cmd}: {err}");
        assert_eq!(out, shown, "{file} shows other output for `{cmd}`");
        checked += 1;
    }
    checked
}
