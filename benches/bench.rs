//! `make bench`: admission throughput and latency against a floor server, cache memory, the
//! controller's release time against kube-controller-manager's on a real apiserver, and startup.
//! Prints a table and writes target/bench/report.json. Measures; never fails on a missed target.

#[path = "../tests/support/harness.rs"]
mod harness;
mod load;
mod synth;
// The tests' harness for `volguard serve` (certificates, start, wait until ready) and its TLS client.
#[path = "../tests/support/serve.rs"]
mod common;
#[path = "../tests/support/tls_client.rs"]
mod tls_client;

use serde_json::{Value, json};
use std::alloc::{GlobalAlloc, Layout, System};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

/// Counts live heap bytes, so cache memory is measured exactly rather than through noisy RSS.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCS: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_bytes(pid: u32) -> u64 {
    proc_status_bytes(pid, "VmRSS:")
}

/// One `kB` line of /proc/PID/status in bytes (VmRSS now, VmHWM the peak so far).
fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).map(str::to_string))
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// CPU time (user + system) a process has used so far. /proc reports clock ticks of USER_HZ,
/// which Linux fixes at 100 for userland.
fn cpu_seconds(pid: u32) -> [f64; 2] {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // Fields after the parenthesised command name; utime and stime are 14 and 15.
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some([
                f.get(11)?.parse::<f64>().ok()? / 100.0,
                f.get(12)?.parse::<f64>().ok()? / 100.0,
            ])
        })
        .unwrap_or([f64::NAN; 2])
}

/// One server's side of a head-to-head run.
#[derive(Default, Clone, Copy)]
struct Side {
    rps: f64,
    /// Server CPU per request, µs, in user space and in the kernel (TLS records, syscalls).
    user_us: f64,
    sys_us: f64,
}

impl Side {
    fn cpu_us(&self) -> f64 {
        self.user_us + self.sys_us
    }
    fn cpu(&self) -> String {
        format!(
            "{:.1} = {:.1} user + {:.1} sys",
            self.cpu_us(),
            self.user_us,
            self.sys_us
        )
    }
}

struct Proc(std::process::Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start a comparison server (the floor, another webhook implementation); return it with the
/// address it prints as `listening ADDR`.
fn start_server(bin: &std::path::Path, args: &[&std::ffi::OsStr]) -> (Proc, std::net::SocketAddr) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {} (make bench builds it): {e}", bin.display()));
    let out = child.stdout.take().expect("stdout");
    let proc = Proc(child);
    let addr = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("listening ").map(str::to_string))
        .unwrap_or_else(|| panic!("{} did not print its address", bin.display()));
    (proc, addr.parse().expect("addr"))
}

/// A Rust server of ours from target/release/examples, with the serving certificate.
fn start_example(
    name: &str,
    cert: &std::path::Path,
    key: &std::path::Path,
) -> (Proc, std::net::SocketAddr) {
    let bin = common::repo().join("target/release/examples").join(name);
    start_server(
        &bin,
        &[
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            key.as_os_str(),
        ],
    )
}

/// The same closed-loop load against each target in turn, twice round, so a burst of noise from
/// the machine lands on all of them: each target's rate and server CPU per request.
async fn interleaved<const N: usize>(
    targets: [(&load::Target, u32); N],
    proto: load::Proto,
    path: &'static str,
    body: &[u8],
    dur: Duration,
) -> [Side; N] {
    let mut out = [Side::default(); N];
    let mut n = [0u64; N];
    for _ in 0..2 {
        for (i, (t, pid)) in targets.into_iter().enumerate() {
            let c = cpu_seconds(pid);
            let r = load::closed_loop(t, proto, 32, path, body, dur / 2).await;
            let d = cpu_seconds(pid);
            out[i].user_us += d[0] - c[0];
            out[i].sys_us += d[1] - c[1];
            out[i].rps += r.rps / 2.0;
            n[i] += r.requests;
        }
    }
    for (o, n) in out.iter_mut().zip(n) {
        o.user_us *= 1e6 / n as f64;
        o.sys_us *= 1e6 / n as f64;
    }
    out
}

/// The answer `t` gives `body` at `path` must be an allowed review carrying a patch: a comparison
/// server that skipped the work would make any ratio meaningless.
async fn assert_patches(t: &load::Target, path: &str, body: &[u8], who: &str) {
    let r: Value = common::client(&t.ca_pem)
        .post(format!("https://localhost:{}{path}", t.addr.port()))
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .unwrap_or_else(|e| panic!("{who}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("{who}: {e}"));
    assert_eq!(r["response"]["allowed"], true, "{who}: {r}");
    // Base64 as Go writes []byte, or (kube-core's serialization) an array of byte values, which the
    // apiserver's decoder also accepts.
    let p = &r["response"]["patch"];
    assert!(
        p.as_str().is_some_and(|s| !s.is_empty()) || p.as_array().is_some_and(|a| !a.is_empty()),
        "{who} answered without a patch: {r}"
    );
}

#[derive(Default)]
struct Table(Vec<[String; 4]>);
impl Table {
    fn row(
        &mut self,
        what: impl Into<String>,
        value: impl Into<String>,
        target: impl Into<String>,
        ok: Option<bool>,
    ) {
        let mark = match ok {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "",
        };
        self.0
            .push([what.into(), value.into(), target.into(), mark.into()]);
    }
    fn print(&self) {
        let mut w = [0usize; 4];
        for r in &self.0 {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.len());
            }
        }
        println!(
            "\n{:<a$}  {:>b$}  {:<c$}  result",
            "measure",
            "value",
            "target",
            a = w[0],
            b = w[1],
            c = w[2]
        );
        for r in &self.0 {
            println!(
                "{:<a$}  {:>b$}  {:<c$}  {}",
                r[0],
                r[1],
                r[2],
                r[3],
                a = w[0],
                b = w[1],
                c = w[2]
            );
        }
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let out_dir = common::repo().join("target/bench");
    std::fs::create_dir_all(&out_dir).expect("out dir");
    let secs = env_usize("VOLGUARD_BENCH_SECONDS", 5) as u64;
    let n_pvc = env_usize("VOLGUARD_BENCH_PVCS", 100_000);
    let n_pods = env_usize("VOLGUARD_BENCH_PODS", 300_000);
    let mut report = json!({"machine": machine(), "admission": {}, "memory": {}, "controller": {}, "startup": {}});
    // VOLGUARD_BENCH_ONLY=big-namespace: only the finalizer guard's memory in a large namespace.
    if std::env::var("VOLGUARD_BENCH_ONLY").as_deref() == Ok("big-namespace") {
        let n = env_usize("VOLGUARD_BENCH_NS_PODS", 20_000);
        println!(
            "{}",
            serde_json::to_string_pretty(&guard_big_namespace(n).await).expect("json")
        );
        return;
    }
    let mut table = Table::default();

    // ---------------------------------------------------------------- state + memory
    eprintln!("generating state: {n_pvc} PVCs, {n_pvc} PVs, 5000 nodes");
    let state_path = out_dir.join("state.json");
    let text = serde_json::to_string(&synth::state(n_pvc, n_pvc, 5_000)).expect("state json");
    std::fs::write(&state_path, &text).expect("write state");
    let serve_objects = 2 * n_pvc + 5_000;
    let before = live();
    let store = volguard::state::Store::default();
    volguard::state::loader::load_str(&text, &store).expect("load");
    let serve_bpo = (live() - before) as f64 / serve_objects as f64;
    drop(store);
    drop(text);
    report["memory"]["serve_bytes_per_object"] = json!(serve_bpo);
    table.row(
        "serve cache bytes/object (PVC+PV+Node)",
        format!("{serve_bpo:.0}"),
        "<= 600",
        Some(serve_bpo <= 600.0),
    );

    // VOLGUARD_BENCH_ONLY=admission skips the slowest setup (300k synthetic pods) while tuning.
    if std::env::var("VOLGUARD_BENCH_ONLY").as_deref() != Ok("admission") {
        eprintln!("controller caches: {n_pods} pods, {n_pvc} PVCs");
        let before = live();
        let store = volguard::state::Store::default();
        let index = volguard::state::claim_index::ClaimIndex::default();
        for i in 0..n_pods {
            let ns = synth::ns(i);
            let p: volguard::model::Pod = serde_json::from_value(synth::pod(
                &format!("db-{i}"),
                &ns,
                &format!("node-{}", i % 5000),
                &[format!("data-{}", i % n_pvc)],
            ))
            .expect("pod");
            index.add(&p);
            store.pods.apply(p);
        }
        for i in 0..n_pvc {
            store
                .pvcs
                .apply(serde_json::from_value(synth::pvc(i)).expect("pvc"));
        }
        let ctl_bpo = (live() - before) as f64 / (n_pods + n_pvc) as f64;
        drop(store);
        drop(index);
        report["memory"]["controller_bytes_per_object"] = json!(ctl_bpo);
        table.row(
            "controller cache bytes/object (pod+PVC, with claim index)",
            format!("{ctl_bpo:.0}"),
            "<= 600",
            Some(ctl_bpo <= 600.0),
        );
    }

    // ---------------------------------------------------------------- watch decoding
    let (decode, rows) = watch_decode(env_usize("VOLGUARD_BENCH_DECODE_OBJECTS", 20_000));
    report["watch_decode"] = decode;
    for (what, value) in rows {
        table.row(what, value, "", None);
    }

    if std::env::var("VOLGUARD_BENCH_ONLY").as_deref() == Ok("memory") {
        table.print();
        return;
    }

    // ---------------------------------------------------------------- servers
    let certs = common::Certs::new();
    let (cert, key) = (certs.cert(), certs.key());
    let started = Instant::now();
    let state_arg = state_path.to_string_lossy().into_owned();
    let serve = common::Server::start(&cert, &key, &["--state", &state_arg]);
    let serve_addr: std::net::SocketAddr = serve.webhook.parse().expect("webhook address");
    let startup = started.elapsed().as_secs_f64();
    report["startup"]["state_seconds"] = json!(startup);
    report["startup"]["state_pvcs"] = json!(n_pvc);
    table.row(
        format!("serve start→ready, state file {n_pvc} PVCs"),
        format!("{startup:.2} s"),
        "<= 5 s",
        Some(startup <= 5.0),
    );
    let rss = rss_bytes(serve.child.id());
    report["memory"]["serve_rss_bytes"] = json!(rss);
    table.row(
        "serve RSS with that state",
        format!("{:.0} MiB", rss as f64 / 1048576.0),
        "",
        None,
    );

    let (floor, floor_addr) = start_example("floor", &cert, &key);
    let (vg_pid, fl_pid) = (serve.child.id(), floor.0.id());
    let vg = load::Target {
        addr: serve_addr,
        ca_pem: certs.ca_pem.clone(),
    };
    let fl = load::Target {
        addr: floor_addr,
        ca_pem: certs.ca_pem.clone(),
    };

    // `make bench-compare`: volguard as of an earlier commit, on the same state, measured in the
    // same rounds as now (VOLGUARD_BENCH_BASE names its binary, VOLGUARD_BENCH_BASE_REV the commit).
    let base_server = std::env::var_os("VOLGUARD_BENCH_BASE")
        .map(|bin| common::Server::start_bin(bin.as_ref(), &cert, &key, &["--state", &state_arg]));
    let base = base_server.as_ref().map(|s| {
        let t = load::Target {
            addr: s.webhook.parse().expect("base webhook address"),
            ca_pem: certs.ca_pem.clone(),
        };
        let rev = std::env::var("VOLGUARD_BENCH_BASE_REV").unwrap_or_else(|_| "base".into());
        (t, s.child.id(), rev)
    });
    let mut base_rows = Vec::new();

    // ---------------------------------------------------------------- admission
    let dur = Duration::from_secs(secs);
    // VOLGUARD_BENCH_REVIEW=pod_delete_force_deny: one review kind only (for profiling).
    let only_review = std::env::var("VOLGUARD_BENCH_REVIEW").ok();
    for (name, path, body) in synth::reviews() {
        if only_review.as_deref().is_some_and(|r| r != name) {
            continue;
        }
        for proto in [load::Proto::H1, load::Proto::H2] {
            // Server CPU per request is measured alongside: it does not depend on how the two
            // cores are shared with the load generator, so it shows volguard's own cost plainly.
            // The base's figures, added to the row's report after it is written.
            let mut base_json = None;
            let (v, f) = match &base {
                None => {
                    let [v, f] =
                        interleaved([(&vg, vg_pid), (&fl, fl_pid)], proto, path, &body, dur).await;
                    (v, f)
                }
                // Before and after in one run: the base build takes its turn between them.
                Some((bt, bpid, rev)) => {
                    let [v, f, b] = interleaved(
                        [(&vg, vg_pid), (&fl, fl_pid), (bt, *bpid)],
                        proto,
                        path,
                        &body,
                        dur,
                    )
                    .await;
                    let before = b.rps / f.rps;
                    base_json = Some(json!({"rev": rev, "rps": b.rps, "ratio": before,
                        "server_cpu_us": b.cpu_us(), "server_user_us": b.user_us, "server_sys_us": b.sys_us}));
                    base_rows.push((
                        format!(
                            "admission {name} {}: before ({rev}) → now, x floor",
                            proto.name()
                        ),
                        format!(
                            "{before:.2}x → {:.2}x; CPU µs {:.1} → {:.1}",
                            v.rps / f.rps,
                            b.cpu_us(),
                            v.cpu_us()
                        ),
                        v.rps / f.rps >= before,
                    ));
                    (v, f)
                }
            };
            let ratio = v.rps / f.rps;
            report["admission"][name][proto.name()] = json!({"volguard_rps": v.rps, "floor_rps": f.rps, "ratio": ratio,
                "volguard_server_cpu_us": v.cpu_us(), "floor_server_cpu_us": f.cpu_us(),
                "volguard_server_user_us": v.user_us, "volguard_server_sys_us": v.sys_us,
                "floor_server_user_us": f.user_us, "floor_server_sys_us": f.sys_us});
            if let Some(b) = base_json {
                report["admission"][name][proto.name()]["base"] = b;
            }
            table.row(
                format!(
                    "admission {name} {} req/s (floor {:.0})",
                    proto.name(),
                    f.rps
                ),
                format!("{:.0} ({ratio:.2}x)", v.rps),
                ">= 0.8x floor",
                Some(ratio >= 0.8),
            );
            table.row(
                format!("  server CPU µs/request (floor {})", f.cpu()),
                format!("{} (+{:.1})", v.cpu(), v.cpu_us() - f.cpu_us()),
                "",
                None,
            );
        }
    }
    // ---------------------------------------------------------------- other webhook implementations
    // The PVC CREATE mutation as the kube-rs admission example and a controller-runtime webhook
    // write it (same review, same finalizer patch). controller-runtime serves HTTP/1.1 only.
    let (_, path, body) = &synth::reviews()[0];
    let mut others = vec![(
        "kube-rs example",
        start_example("kube_rs", &cert, &key),
        vec![load::Proto::H1, load::Proto::H2],
    )];
    match std::env::var_os("VOLGUARD_BENCH_CONTROLLER_RUNTIME") {
        Some(bin) => others.push((
            "controller-runtime",
            start_server(
                bin.as_ref(),
                &["--cert-dir".as_ref(), certs.dir.path().as_os_str()],
            ),
            vec![load::Proto::H1],
        )),
        None => eprintln!(
            "VOLGUARD_BENCH_CONTROLLER_RUNTIME not set: `make bench` builds the controller-runtime webhook"
        ),
    }
    for (who, (proc, addr), protos) in &others {
        let t = load::Target {
            addr: *addr,
            ca_pem: certs.ca_pem.clone(),
        };
        assert_patches(&t, path, body, who).await;
        assert_patches(&vg, path, body, "volguard").await;
        for proto in protos.iter().copied() {
            let [v, o] =
                interleaved([(&vg, vg_pid), (&t, proc.0.id())], proto, path, body, dur).await;
            report["admission"]["pvc_create_mutate"][proto.name()][*who] = json!({"volguard_rps": v.rps, "rps": o.rps,
                "ratio": v.rps / o.rps, "volguard_server_cpu_us": v.cpu_us(), "server_cpu_us": o.cpu_us()});
            table.row(
                format!(
                    "admission pvc_create_mutate {} vs {who} ({:.0} req/s)",
                    proto.name(),
                    o.rps
                ),
                format!("{:.0} ({:.2}x)", v.rps, v.rps / o.rps),
                ">= 1x",
                Some(v.rps >= o.rps),
            );
            table.row(
                format!("  server CPU µs/request ({who} {})", o.cpu()),
                format!("{} ({:.2}x)", v.cpu(), v.cpu_us() / o.cpu_us()),
                "",
                None,
            );
        }
    }
    drop(others);
    for (what, value, ok) in base_rows {
        table.row(what, value, "no lower", Some(ok));
    }
    drop(base_server);

    let (_, path, body) = &synth::reviews()[1];
    // Three interleaved rounds each, so a burst of noise from the machine lands on both.
    let (mut lat, mut flat) = (load::Samples::default(), load::Samples::default());
    for _ in 0..3 {
        let round = Duration::from_secs(secs * 2) / 3;
        lat.extend(load::open_loop(&vg, 32, path, body, 2000.0, round).await);
        flat.extend(load::open_loop(&fl, 32, path, body, 2000.0, round).await);
    }
    let (lat, flat) = (lat.summary(), flat.summary());
    report["admission"]["latency_2000rps"] = json!({"p50_ms": lat.p50_ms, "p99_ms": lat.p99_ms, "p999_ms": lat.p999_ms, "requests": lat.sent,
        "floor_p50_ms": flat.p50_ms, "floor_p99_ms": flat.p99_ms, "floor_p999_ms": flat.p999_ms,
        "pacer_late_p99_ms": lat.pacer_late_p99_ms.max(flat.pacer_late_p99_ms)});
    table.row(
        "latency @2000 req/s pod create: p50",
        format!("{:.3} ms (floor {:.3})", lat.p50_ms, flat.p50_ms),
        "",
        None,
    );
    table.row(
        "latency @2000 req/s pod create: p99",
        format!("{:.3} ms (floor {:.3})", lat.p99_ms, flat.p99_ms),
        "<= 1 ms",
        Some(lat.p99_ms <= 1.0),
    );
    table.row(
        "latency @2000 req/s pod create: p99.9",
        format!("{:.3} ms (floor {:.3})", lat.p999_ms, flat.p999_ms),
        "",
        None,
    );
    table.row(
        "  load generator's own pacing lateness, p99",
        format!(
            "{:.3} ms",
            lat.pacer_late_p99_ms.max(flat.pacer_late_p99_ms)
        ),
        "",
        None,
    );
    drop(serve);

    // ---------------------------------------------------------------- controller vs kube-controller-manager
    if std::env::var("VOLGUARD_CONTROLPLANE_DIR").is_ok() {
        let n = env_usize("VOLGUARD_BENCH_RELEASE_PVCS", 2000);
        let (vs, vreq) = release_run(true, n).await;
        let (ks, kreq) = release_run(false, n).await;
        report["controller"] = json!({"pvcs": n, "volguard_seconds": vs, "kcm_seconds": ks, "ratio": vs / ks,
            "volguard_requests_per_pvc": vreq, "kcm_requests_per_pvc": kreq});
        table.row(
            format!("release {n} PVCs: volguard (kcm {ks:.1} s)"),
            format!("{vs:.1} s ({:.2}x)", vs / ks),
            "<= 0.5x kcm",
            Some(vs / ks <= 0.5),
        );
        table.row(
            format!("API requests per released PVC (kcm {kreq:.2})"),
            format!("{vreq:.2}"),
            "<= kcm",
            Some(vreq <= kreq),
        );
        let m = env_usize("VOLGUARD_BENCH_API_PVCS", 20_000);
        let s = startup_from_apiserver(m).await;
        report["startup"]["apiserver_seconds"] = json!(s);
        report["startup"]["apiserver_pvcs"] = json!(m);
        table.row(
            format!("serve start→ready from a real apiserver with {m} PVCs"),
            format!("{s:.2} s"),
            "",
            None,
        );
        let n = env_usize("VOLGUARD_BENCH_NS_PODS", 20_000);
        let g = guard_big_namespace(n).await;
        table.row(
            format!(
                "finalizer guard, {n}-pod namespace ({:.0} MB of JSON): serve peak RSS (idle {:.0} MiB)",
                g["namespace_json_bytes"].as_f64().unwrap_or(0.0) / 1e6,
                g["idle_rss_bytes"].as_f64().unwrap_or(0.0) / MIB
            ),
            format!(
                "{:.0} MiB, {:.1} s/review",
                g["peak_rss_bytes"].as_f64().unwrap_or(0.0) / MIB,
                g["review_seconds"].as_f64().unwrap_or(0.0)
            ),
            "< 256 MiB limit",
            Some(g["peak_rss_bytes"].as_f64().unwrap_or(f64::MAX) < 256.0 * MIB),
        );
        report["memory"]["finalizer_guard_big_namespace"] = g;
    } else {
        eprintln!(
            "VOLGUARD_CONTROLPLANE_DIR not set: controller and apiserver startup benchmarks need `make bench`"
        );
    }

    table.print();
    let path = out_dir.join("report.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report).expect("json"))
        .expect("write report");
    println!("\nwrote {}", path.display());
}

const MIB: f64 = 1024.0 * 1024.0;

/// The finalizer guard's consistent read of one namespace with `n` pods of ~10 KB each (the
/// `limit`/`continue` pages of `state::live`): two strips of a claim in use sent at once through
/// the apiserver, as two admins would, with `volguard serve`'s peak RSS (VmHWM) before and after.
/// Without pages the namespace's JSON would be held whole, once per request.
async fn guard_big_namespace(n: usize) -> Value {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod};
    use kube::api::{Api, Patch, PatchParams, PostParams};
    let mut cp = harness::ControlPlane::start(harness::Profile::Standalone).await;
    cp.install_manifests().await;
    let c = cp.admin().await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "big"}})).expect("ns");
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("ns");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "big");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data", "finalizers": ["kubernetes.io/pvc-protection"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("pvc");
    pvcs.create(&PostParams::default(), &claim)
        .await
        .expect("pvc");
    let pods = Api::<Pod>::namespaced(c.clone(), "big");
    let filler = "x".repeat(9_000);
    futures::stream::iter(0..=n)
        .map(|i| {
            let pods = pods.clone();
            let filler = filler.clone();
            async move {
                // Pod 0 mounts the claim on a node; the rest are the namespace's bulk.
                let p: Pod = serde_json::from_value(if i == 0 {
                    json!({"metadata": {"name": "user"}, "spec": {"nodeName": "node-a",
                        "containers": [{"name": "c", "image": "app"}],
                        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}})
                } else {
                    json!({"metadata": {"name": format!("bulk-{i}"), "annotations": {"filler": filler}},
                        "spec": {"containers": [{"name": "c", "image": "app"}]}})
                })
                .expect("pod");
                pods.create(&PostParams::default(), &p).await.expect("pod");
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    let list = c
        .request_text(
            http::Request::get("/api/v1/namespaces/big/pods")
                .body(Vec::new())
                .expect("request"),
        )
        .await
        .expect("list");
    let json_bytes = list.len();
    drop(list);
    cp.start_webhook().await;
    let pid = cp.serve.as_ref().expect("serve").child.id();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = rss_bytes(pid);
    let hwm_before = proc_status_bytes(pid, "VmHWM:");
    let strip = Patch::Json::<()>(
        serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers"}]))
            .expect("patch"),
    );
    let start = Instant::now();
    let outcomes = futures::future::join_all((0..2).map(|_| {
        let pvcs = pvcs.clone();
        let strip = strip.clone();
        async move {
            match pvcs.patch("data", &PatchParams::default(), &strip).await {
                Ok(_) => "stored (not refused)".to_string(),
                Err(e) => e.to_string(),
            }
        }
    }))
    .await;
    let secs = start.elapsed().as_secs_f64() / 2.0;
    let peak = proc_status_bytes(pid, "VmHWM:");
    for o in &outcomes {
        eprintln!("finalizer strip in the {n}-pod namespace: {o}");
    }
    json!({"pods": n, "namespace_json_bytes": json_bytes, "idle_rss_bytes": idle,
        "peak_rss_bytes_before": hwm_before, "peak_rss_bytes": peak, "review_seconds": secs,
        "refused_naming_pod": outcomes.iter().all(|o| o.contains("user"))})
}

fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    json!({"cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), "cpu": cpu})
}

async fn apiserver_requests(c: &kube::Client) -> f64 {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("req");
    let text = c.request_text(req).await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

/// Time from the pods' deletion until every PVC is gone, and apiserver requests per PVC in that
/// window (the driver's own requests subtracted).
async fn release_run(volguard: bool, n: usize) -> (f64, f64) {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim, Pod};
    use kube::api::{Api, DeleteParams, ListParams, PostParams};
    let profile = if volguard {
        harness::Profile::Standalone
    } else {
        harness::Profile::BesideUpstream
    };
    let mut cp = harness::ControlPlane::start(profile).await;
    let c = cp.admin().await;
    if volguard {
        cp.install_manifests().await;
        cp.start_controller("bench").await;
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "bench"}})).expect("ns");
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("ns");
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("sa");
    let _ = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(c.clone(), "bench")
        .create(&PostParams::default(), &sa)
        .await;
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-a"}})).expect("node");
    Api::<Node>::all(c.clone())
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "bench");
    let pods = Api::<Pod>::namespaced(c.clone(), "bench");
    futures::stream::iter(0..n)
        .map(|i| {
            let (pvcs, pods) = (pvcs.clone(), pods.clone());
            async move {
                let p: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": format!("c-{i}"), "finalizers": ["kubernetes.io/pvc-protection"]},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": ""}})).expect("pvc");
                pvcs.create(&PostParams::default(), &p).await.expect("create pvc");
                let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p-{i}")}, "spec": {"nodeName": "node-a", "automountServiceAccountToken": false,
                    "containers": [{"name": "c", "image": "example.invalid/c"}], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": format!("c-{i}")}}]}})).expect("pod");
                pods.create(&PostParams::default(), &pod).await.expect("create pod");
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    futures::stream::iter(0..n)
        .map(|i| {
            let pvcs = pvcs.clone();
            async move {
                pvcs.delete(&format!("c-{i}"), &DeleteParams::default())
                    .await
                    .expect("delete pvc")
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    // Let the controller see every claim blocked before the clock starts.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = apiserver_requests(&c).await;
    let kubelet = Api::<Pod>::namespaced(cp.kubelet("node-a").await, "bench");
    let start = Instant::now();
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    futures::stream::iter(0..n)
        .map(|i| {
            let (kubelet, force) = (kubelet.clone(), force.clone());
            async move {
                kubelet
                    .delete(&format!("p-{i}"), &force)
                    .await
                    .expect("kubelet delete")
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    let mut polls = 0usize;
    let lp = ListParams::default().limit(1);
    loop {
        polls += 1;
        let l = pvcs.list_metadata(&lp).await.expect("list");
        if l.items.is_empty() {
            break;
        }
        if start.elapsed() > Duration::from_secs(900) {
            eprintln!("release did not finish within 900 s");
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    let after = apiserver_requests(&c).await;
    // Driver: n pod deletes, the polls, and one /metrics read.
    let controller_requests = (after - before - n as f64 - polls as f64 - 1.0).max(0.0);
    eprintln!(
        "{}: released {n} PVCs in {secs:.1} s, {controller_requests} controller requests",
        if volguard { "volguard" } else { "kcm" }
    );
    drop(cp);
    (secs, controller_requests / n as f64)
}

/// A LIST page as the apiserver sends it, decoded the way the watches do (straight into the
/// pruned model) against the former path (k8s-openapi, then `Value`, then the model), same run.
fn watch_decode(n: usize) -> (Value, Vec<(String, String)>) {
    use k8s_openapi::api::core::v1 as k8s;
    use kube::core::ObjectList;
    use volguard::model::{Pod, Pvc};
    use volguard::state::decoded::Decoded;

    fn list(kind: &str, items: Vec<Value>) -> String {
        json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items})
            .to_string()
    }
    /// Best of 3 (seconds) and allocations of one pass.
    fn measure(f: &dyn Fn() -> usize, n: usize) -> (f64, f64) {
        let mut best = f64::MAX;
        let mut allocs = 0;
        for _ in 0..3 {
            let a = ALLOCS.load(Ordering::Relaxed);
            let t = Instant::now();
            assert_eq!(f(), n, "every object decoded");
            best = best.min(t.elapsed().as_secs_f64());
            allocs = ALLOCS.load(Ordering::Relaxed) - a;
        }
        (best, allocs as f64 / n as f64)
    }
    fn former<K, T>(text: &str) -> usize
    where
        K: serde::Serialize + serde::de::DeserializeOwned + Clone,
        T: serde::de::DeserializeOwned,
    {
        let l: ObjectList<K> = serde_json::from_str(text).expect("k8s-openapi list");
        let objects: Vec<T> = l
            .items
            .iter()
            .map(|k| {
                serde_json::from_value::<T>(serde_json::to_value(k).expect("value")).expect("model")
            })
            .collect();
        objects.len()
    }
    fn once<T: volguard::state::decoded::Wire + serde::de::DeserializeOwned>(text: &str) -> usize {
        let l: ObjectList<Decoded<T>> = serde_json::from_str(text).expect("list");
        let objects: Vec<T> = l.items.into_iter().map(Decoded::into_inner).collect();
        objects.len()
    }

    let pvcs = list(
        "PersistentVolumeClaimList",
        (0..n).map(synth::pvc).collect(),
    );
    let pods = list(
        "PodList",
        (0..n)
            .map(|i| {
                synth::pod(
                    &format!("db-{i}"),
                    &synth::ns(i),
                    &format!("node-{}", i % 5000),
                    &[format!("data-{i}")],
                )
            })
            .collect(),
    );
    let mut out = json!({"objects": n});
    let mut rows = Vec::new();
    for (kind, text, one, three) in [
        (
            "PVC",
            &pvcs,
            &(|| once::<Pvc>(&pvcs)) as &dyn Fn() -> usize,
            &(|| former::<k8s::PersistentVolumeClaim, Pvc>(&pvcs)) as &dyn Fn() -> usize,
        ),
        (
            "pod",
            &pods,
            &(|| once::<Pod>(&pods)) as &dyn Fn() -> usize,
            &(|| former::<k8s::Pod, Pod>(&pods)) as &dyn Fn() -> usize,
        ),
    ] {
        let (t1, a1) = measure(one, n);
        let (t3, a3) = measure(three, n);
        let per = |t: f64| t * 1e6 / n as f64;
        out[kind] = json!({"bytes_per_object": text.len() / n, "once_us": per(t1), "former_us": per(t3),
            "once_allocs": a1, "former_allocs": a3, "ratio": t1 / t3});
        rows.push((
            format!(
                "watch decode per {kind} ({} B): once vs k8s-openapi→Value→model",
                text.len() / n
            ),
            format!(
                "{:.1} vs {:.1} µs ({:.2}x); {a1:.0} vs {a3:.0} allocs",
                per(t1),
                per(t3),
                t1 / t3
            ),
        ));
    }
    (out, rows)
}

async fn startup_from_apiserver(m: usize) -> f64 {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};
    use kube::api::{Api, PostParams};
    let mut cp = harness::ControlPlane::start(harness::Profile::Standalone).await;
    cp.install_manifests().await;
    let c = cp.admin().await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "many"}})).expect("ns");
    Api::<Namespace>::all(c.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("ns");
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "many");
    futures::stream::iter(0..m)
        .map(|i| {
            let pvcs = pvcs.clone();
            async move {
                let p: PersistentVolumeClaim = serde_json::from_value(synth::pvc(i)).expect("pvc");
                let mut p = p;
                p.metadata.namespace = None;
                p.metadata.uid = None;
                p.metadata.resource_version = None;
                p.metadata.managed_fields = None;
                p.metadata.creation_timestamp = None;
                p.status = None;
                let _ = pvcs.create(&PostParams::default(), &p).await;
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    let start = Instant::now();
    cp.start_webhook().await;
    start.elapsed().as_secs_f64()
}
