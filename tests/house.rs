//! The house's shape as facts the build can check: the core crate (the rules and the objects they
//! read) reaches no Kubernetes client, no async runtime, no command line and no HTTP, whatever its
//! dependencies pull in (read from Cargo.lock, transitively).

use std::collections::{BTreeMap, BTreeSet};

/// Every package of Cargo.lock with the names of its dependencies.
fn lock() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"))
        .expect("Cargo.lock");
    let mut out = BTreeMap::new();
    for block in text.split("[[package]]").skip(1) {
        let mut name = String::new();
        let mut deps = Vec::new();
        let mut in_deps = false;
        for line in block.lines() {
            let line = line.trim();
            if let Some(n) = line.strip_prefix("name = ") {
                name = n.trim_matches('"').to_string();
            } else if line.starts_with("dependencies = [") {
                in_deps = true;
            } else if in_deps && line == "]" {
                in_deps = false;
            } else if in_deps {
                // `"name"` or `"name version"`.
                let d = line.trim_matches(|c| c == '"' || c == ',');
                deps.push(d.split(' ').next().unwrap_or(d).to_string());
            }
        }
        out.entry(name).or_insert_with(Vec::new).extend(deps);
    }
    out
}

#[test]
fn the_core_crate_reaches_no_client_runtime_cli_or_http() {
    let lock = lock();
    assert!(
        lock.contains_key("volguard-core"),
        "no volguard-core in Cargo.lock"
    );
    let mut seen = BTreeSet::new();
    let mut todo = vec!["volguard-core".to_string()];
    while let Some(p) = todo.pop() {
        if seen.insert(p.clone()) {
            todo.extend(lock.get(&p).cloned().unwrap_or_default());
        }
    }
    let forbidden = [
        "kube",
        "kube-client",
        "kube-core",
        "k8s-openapi",
        "tokio",
        "clap",
        "hyper",
        "axum",
        "reqwest",
        "rustls",
        "tracing",
    ];
    let found: Vec<&&str> = forbidden.iter().filter(|f| seen.contains(**f)).collect();
    assert!(found.is_empty(), "volguard-core reaches {found:?}");
    // And the main crate does reach them (the check reads the right graph).
    let mut main = BTreeSet::new();
    let mut todo = vec!["volguard".to_string()];
    while let Some(p) = todo.pop() {
        if main.insert(p.clone()) {
            todo.extend(lock.get(&p).cloned().unwrap_or_default());
        }
    }
    assert!(main.contains("kube") && main.contains("volguard-core"));
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// No job holds a Kubernetes client: the cluster is read through `state::View` and written
/// through `state::Writer`, and only `state` and the runtime's client setup name the client.
/// Unit-test files (`*_tests.rs`) may, to point a view at a socket of their own.
#[test]
fn only_state_and_the_client_setup_name_a_kubernetes_client() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let allowed = |rel: &str| {
        rel.starts_with("src/state/") || rel == "src/runtime/kube.rs" || rel.ends_with("_tests.rs")
    };
    let mut found = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(root)
            .expect("under the crate")
            .to_string_lossy()
            .replace('\\', "/");
        if allowed(&rel) {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("source");
        for (i, line) in text.lines().enumerate() {
            let imports = line.trim_start().starts_with("use kube::") && line.contains("Client");
            if line.contains("kube::Client") || imports {
                found.push(format!("{rel}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(files.len() > 50, "read the sources ({} files)", files.len());
    assert!(
        found.is_empty(),
        "a Kubernetes client named outside src/state and src/runtime/kube.rs:\n{}",
        found.join("\n")
    );
}

/// What admission can do is read in one place: `Admission` is the context the rule families are
/// functions over, and its only `impl` block (built, configured, asked to decide) is in
/// `src/admission/context.rs`. The RWO lock's protocol is a type of its own (`RwoLocks`).
#[test]
fn the_admission_context_has_one_impl_block() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("source");
        for (i, line) in text.lines().enumerate() {
            let l = line.trim_start();
            if l.starts_with("impl Admission") || l.starts_with("impl crate::admission::Admission")
            {
                let rel = path.strip_prefix(root).expect("under the crate");
                found.push(format!("{}:{}", rel.display(), i + 1));
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "`impl Admission` outside src/admission/context.rs, or more than one: {found:?}"
    );
    assert!(
        found[0].starts_with("src/admission/context.rs:"),
        "{found:?}"
    );
}
