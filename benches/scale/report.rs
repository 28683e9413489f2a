//! The table on stdout, `target/bench/scale.json` and `target/bench/scale.png`.

use crate::admission::{Compared, Guarded};
use crate::load::Cost as Load;
use crate::procs::{Peer, ProcStat};
use crate::release::Released;
use serde_json::json;

/// The objects volguard's caches hold: pods, claims, volumes and nodes, cluster-wide.
#[derive(Clone, Copy, Default, Debug)]
pub struct Objects {
    pub pods: usize,
    pub pvcs: usize,
    pub pvs: usize,
    pub nodes: usize,
}

impl Objects {
    pub fn total(&self) -> usize {
        self.pods + self.pvcs + self.pvs + self.nodes
    }
}

/// What one process costs at one size.
#[derive(Clone, Copy, Default)]
pub struct Cost {
    /// Running since the start (volguard) or started cold (the peers).
    pub rss: u64,
    /// Of `rss` and `cold_rss`, what maps files (the binary's code).
    pub rss_file: u64,
    pub cold_rss_file: u64,
    /// A replica started cold, 10 s after it turned ready, and its peak.
    pub cold_rss: u64,
    pub cold_peak: u64,
    /// CPU seconds per 1,000 objects added while the cluster grew.
    pub cpu_per_1000: f64,
    pub ready_seconds: f64,
    /// The cold start's LIST pages, and the bytes of its initial lists: LIST responses and watch
    /// events (volguard streams its initial lists as watch events) while it started (the
    /// apiserver's figures).
    pub lists: f64,
    pub list_bytes: f64,
    /// Requests the cold start made (its FlowSchema: LISTs, WATCHes, GETs).
    pub requests: f64,
}

/// One size's figures.
pub struct Row {
    pub nodes: usize,
    pub objects: Objects,
    pub grow_seconds: f64,
    pub serve: Cost,
    pub controller: Cost,
    /// The peers' caches started cold, in `Peer::ALL`'s order; None where memory would not hold
    /// them.
    pub peers: Vec<Option<Cost>>,
    pub components: Vec<(String, ProcStat)>,
}

/// The apiserver load of volguard and of kcm's protection controllers, steady and during churn.
pub struct Apiserver {
    pub steady: [Load; 2],
    pub churn: [Load; 2],
    /// Pods churned in each window.
    pub churned_pods: usize,
    /// Each window in its order: who, its churn's seconds, kube-apiserver's CPU seconds in it,
    /// serve's live reads and how APF treated serve in it.
    pub windows: Vec<crate::load::WindowLine>,
    /// The windows taken again (kwok replayed their pods), in order.
    pub replayed: Vec<crate::load::Replayed>,
    /// The mean churn seconds of each setup's windows: baseline, volguard, kcm.
    pub churn_seconds: [f64; 3],
    /// The writing no-op's window, when it ran: its churn seconds and kube-apiserver's CPU seconds
    /// per 1,000 churned pods (the floor under volguard's).
    pub writing_noop: Option<(f64, f64)>,
    /// kube-apiserver's CPU seconds per 1,000 churned pods (each setup's windows' mean):
    /// baseline, volguard.
    pub apiserver_cpu_per_1000: [f64; 2],
    /// The volguard churn's webhook calls and unread answers per entry, per 1,000 pods.
    pub calls_per_1000: std::collections::BTreeMap<String, (f64, f64)>,
    pub cpu_per_1000_churn: f64,
    pub reads_per_admission: f64,
    /// volguard's requests by kind from the audit log, steady and during the churn (top few).
    /// Each volguard window's, in order: steady, churn.
    pub volguard_requests: Vec<[Vec<String>; 2]>,
    /// The controller's catch-up after the baseline's churn without volguard.
    pub catch_up: crate::load::CatchUp,
}

/// Figures taken at the largest size only.
pub struct Envelope {
    pub webhooks: Vec<Compared>,
    pub client: crate::admission::ClientTimed,
    /// kube-apiserver's settling before the comparison.
    pub settled: crate::admission::Settled,
    pub guard: Option<Guarded>,
    pub apiserver: Apiserver,
    pub release: (Released, Released),
    /// Why the growth stopped before the last size asked for, if it did.
    pub limit: Option<String>,
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn per(b: u64, n: usize) -> f64 {
    b as f64 / n.max(1) as f64
}

fn print_costs(who: &str, rows: &[Row], cost: impl Fn(&Row) -> Option<Cost>) {
    println!(
        "\n{who:<10} {:>6} {:>8} | {:>7} {:>6} | {:>8} {:>6} {:>8} | {:>8} {:>7} {:>6} {:>8}",
        "nodes",
        "objects",
        "MiB",
        "B/obj",
        "cold MiB",
        "B/obj",
        "peak MiB",
        "CPU s/1k",
        "ready s",
        "LISTs",
        "init MiB"
    );
    for r in rows {
        let Some(c) = cost(r) else {
            println!(
                "{:<10} {:>6} {:>8} | not run: the machine's memory would not hold it",
                "",
                r.nodes,
                r.objects.total()
            );
            continue;
        };
        let n = r.objects.total();
        println!(
            "{:<10} {:>6} {:>8} | {:>7.1} {:>6.0} | {:>8.1} {:>6.0} {:>8.1} | {:>8.3} {:>7.2} {:>6.0} {:>8.1}",
            "",
            r.nodes,
            n,
            mib(c.rss),
            per(c.rss, n),
            mib(c.cold_rss),
            per(c.cold_rss, n),
            mib(c.cold_peak),
            c.cpu_per_1000,
            c.ready_seconds,
            c.lists,
            c.list_bytes / (1024.0 * 1024.0)
        );
    }
}

/// volguard's RSS against objects, least squares over the sizes measured: (fixed, per object).
pub fn fit(rows: &[Row], rss: impl Fn(&Row) -> u64) -> (f64, f64) {
    let pts: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (r.objects.total() as f64, rss(r) as f64))
        .collect();
    let n = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - slope * mx, slope)
}

/// Kubernetes' envelope: 5,000 nodes, 150,000 pods, each with its claim and volume.
pub const ENVELOPE_OBJECTS: f64 = 5_000.0 + 3.0 * 150_000.0;

/// Every size so far, printed as each is measured: a run stopped before its end keeps them.
pub fn print_sizes(rows: &[Row]) {
    print_costs("serve", rows, |r| Some(r.serve));
    print_costs("controller", rows, |r| Some(r.controller));
    print_costs("kube-rs", rows, |r| r.peers[0]);
    print_costs("c-runtime", rows, |r| r.peers[1]);
    let Some(last) = rows.last() else { return };
    println!(
        "\ncomponents at {} nodes ({} pods):",
        last.nodes, last.objects.pods
    );
    for (name, s) in &last.components {
        println!(
            "  {name:<30} RSS {:>8.0} MiB, CPU {:>8.0} s",
            mib(s.rss_bytes),
            s.cpu_seconds
        );
    }
}

pub fn print(rows: &[Row], e: &Envelope) {
    print_sizes(rows);
    if rows.is_empty() {
        return;
    }
    if let Some(l) = &e.limit {
        println!("growth stopped: {l}");
    }
    for (who, f) in [
        ("serve", fit(rows, |r| r.serve.rss)),
        ("controller", fit(rows, |r| r.controller.rss)),
    ] {
        println!(
            "{who}: RSS ≈ {:.1} MiB + {:.0} B per object over the sizes measured; at the envelope ({} objects) {:.0} MiB, {:.0} B per object whole",
            f.0 / 1048576.0,
            f.1,
            ENVELOPE_OBJECTS,
            (f.0 + f.1 * ENVELOPE_OBJECTS) / 1048576.0,
            (f.0 + f.1 * ENVELOPE_OBJECTS) / ENVELOPE_OBJECTS
        );
    }
    print_admission(&e.webhooks, e.client);
    if let Some(g) = &e.guard {
        print_guard(g);
    }
    print_load(&e.apiserver);
    print_release(e.release);
}

/// `a / b` as the table prints it; "—" where `b`'s mode did not run (its figures are zeros: the
/// writing no-op where its caches would not fit).
fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "—".to_string()
    }
}

/// Each webhook against the no-op and the writing no-op; printed as soon as the phase ends too, so
/// a run stopped later keeps it.
pub fn print_admission(webhooks: &[Compared], client: crate::admission::ClientTimed) {
    println!(
        "\n{:<34} {:>6} {:>15} {:>15} {:>15} {:>8} {:>8} {:>15}",
        "webhook (apiserver's p50 / p99 ms)",
        "calls",
        "no-op",
        "writing no-op",
        "volguard",
        "×noop",
        "×writing",
        "deciding"
    );
    let row = |name: &str, calls: String, [n, wr, v]: [(f64, f64); 3], inside: String| {
        println!(
            "{:<34} {:>6} {:>7.1} /{:>6.1} {:>7.1} /{:>6.1} {:>7.1} /{:>6.1} {:>4}/{:<5} {:>4}/{:<5} {inside:>15}",
            name,
            calls,
            n.0,
            n.1,
            wr.0,
            wr.1,
            v.0,
            v.1,
            ratio(v.0, n.0),
            ratio(v.1, n.1),
            ratio(v.0, wr.0),
            ratio(v.1, wr.1)
        );
    };
    // "deciding": serve's own time from the decoded review to the verdict, over the same calls.
    for w in webhooks {
        let inside = format!("{:.1} /{:>6.1}", w.inside.0, w.inside.1);
        row(&w.webhook, format!("{:.0}", w.calls), w.modes, inside);
    }
    // Pod creates as the client times them, the three modes interleaved call by call, in the same
    // columns: left to the scheduler (the create writes nothing) and with its node named (the
    // create writes the lock).
    row(
        "pod create, client, unplaced",
        "—".into(),
        client.unplaced,
        "—".into(),
    );
    row(
        "pod create, client, node named",
        "—".into(),
        client.placed,
        "—".into(),
    );
}

/// The finalizer guard in the namespace of 20,000 pods.
pub fn print_guard(g: &Guarded) {
    println!(
        "finalizer guard in a namespace of {} pods: refused naming the pod: {}; p50 {:.0} ms, max {:.0} ms; serve's peak RSS {:.1} → {:.1} MiB",
        g.pods,
        g.refused,
        g.p50_ms,
        g.max_ms,
        mib(g.peak_before),
        mib(g.peak_after)
    );
}

/// What volguard and kcm's protection controllers cost the apiserver.
pub fn print_load(a: &Apiserver) {
    println!(
        "\napiserver load for the collections volguard caches (requests/s from each client's FlowSchema; bytes/s the apiserver sent it, counted on the wire):"
    );
    for (i, who) in ["volguard (serve + controller)", "kcm pvc-/pv-protection"]
        .iter()
        .enumerate()
    {
        println!(
            "  {who:<30} steady {:>7.2} req/s {:>10.0} B/s | churn of {} pods: {:>7.2} req/s {:>10.0} B/s",
            a.steady[i].requests_per_second,
            a.steady[i].bytes_per_second,
            a.churned_pods,
            a.churn[i].requests_per_second,
            a.churn[i].bytes_per_second
        );
    }
    println!(
        "  churn seconds, each setup's mean (baseline / volguard / kcm): {:.0} / {:.0} / {:.0} (×{:.2} the baseline); volguard CPU {:.3} s per 1,000 pods churned; serve's API reads per admission call {:.3}",
        a.churn_seconds[0],
        a.churn_seconds[1],
        a.churn_seconds[2],
        a.churn_seconds[1] / a.churn_seconds[0].max(1e-9),
        a.cpu_per_1000_churn,
        a.reads_per_admission
    );
    if let Some((seconds, cpu)) = a.writing_noop {
        println!(
            "  the writing no-op (one lock write per placement, nothing else): churn {seconds:.0} s (×{:.2} the baseline; volguard ×{:.2} it), kube-apiserver CPU s per 1,000 pods {cpu:.1} (×{:.2} the baseline; volguard ×{:.2} it)",
            seconds / a.churn_seconds[0].max(1e-9),
            a.churn_seconds[1] / seconds.max(1e-9),
            cpu / a.apiserver_cpu_per_1000[0].max(1e-9),
            a.apiserver_cpu_per_1000[1] / cpu.max(1e-9),
        );
    }
    let order: Vec<String> = a
        .windows
        .iter()
        .map(|w| {
            format!(
                "{} {:.0} s ({:.0} CPU s)",
                w.who, w.seconds, w.apiserver_cpu_seconds
            )
        })
        .collect();
    println!("  windows in order: {}", order.join(", "));
    for r in &a.replayed {
        println!(
            "  taken again: a {} window of {:.0} s in which kwok patched {:.1} pod statuses per pod (it played them again)",
            r.who, r.seconds, r.status_patches_per_pod
        );
    }
    for (i, w) in a.windows.iter().filter(|w| w.who == "Volguard").enumerate() {
        let reads: Vec<String> = w
            .live_reads
            .iter()
            .map(|(k, n)| format!("{k} {n:.0}"))
            .collect();
        println!(
            "    volguard window {}: serve's live reads: {}; APF: {:.2} seats per request, {:.0} rejected",
            i + 1,
            reads.join(", "),
            w.serve_apf.0,
            w.serve_apf.1
        );
    }
    println!(
        "  kube-apiserver CPU s per 1,000 pods churned (baseline / volguard): {:.1} / {:.1} (×{:.2})",
        a.apiserver_cpu_per_1000[0],
        a.apiserver_cpu_per_1000[1],
        a.apiserver_cpu_per_1000[1] / a.apiserver_cpu_per_1000[0].max(1e-9)
    );
    println!(
        "  webhook calls per 1,000 pods churned, by entry (calls / answered from the request alone):"
    );
    for (entry, (calls, noop)) in &a.calls_per_1000 {
        println!("    {entry:<60} {calls:>8.1} / {noop:>8.1}");
    }
    let cu = a.catch_up;
    println!(
        "  catch-up after the baseline's churn with volguard stopped: {:.0} stale locks cleared in {:.0} s, {:.0} requests ({:.1} per lock), {:.1} MB sent to volguard",
        cu.locks_cleared,
        cu.seconds,
        cu.requests,
        cu.requests / cu.locks_cleared.max(1.0),
        cu.bytes / 1e6
    );
    for (i, window) in a.volguard_requests.iter().enumerate() {
        for (when, lines) in ["steady", "churn"].iter().zip(window) {
            println!(
                "  volguard's requests {when}, window {} (audit log):",
                i + 1
            );
            for l in lines {
                println!("    {l}");
            }
        }
    }
}

/// Claims released per second, kcm's pvc-protection against volguard's controller.
pub fn print_release((k, v): (Released, Released)) {
    println!(
        "release of {} unused claims each: kcm's pvc-protection {:.1} claims/s ({:.1} requests per claim), volguard's controller {:.1} claims/s ({:.1} requests per claim), × {:.2}",
        k.claims,
        k.per_second(),
        k.requests_per_claim,
        v.per_second(),
        v.requests_per_claim,
        v.per_second() / k.per_second().max(1e-9)
    );
}

fn cost_json(c: &Cost, objects: usize) -> serde_json::Value {
    json!({
        "rss_bytes": c.rss, "bytes_per_object": per(c.rss, objects), "whole_bytes_per_object": per(c.rss, objects),
        "rss_file_bytes": c.rss_file, "cold_rss_file_bytes": c.cold_rss_file,
        "cold_rss_bytes": c.cold_rss, "cold_bytes_per_object": per(c.cold_rss, objects),
        "cold_peak_rss_bytes": c.cold_peak, "cpu_seconds_per_1000_objects": c.cpu_per_1000,
        "ready_seconds": c.ready_seconds, "cold_lists": c.lists, "cold_list_bytes": c.list_bytes, "cold_requests": c.requests,
    })
}

fn memory_json(r: &Row) -> serde_json::Value {
    let n = r.objects.total();
    let mut m = serde_json::Map::new();
    m.insert("volguard_serve".into(), cost_json(&r.serve, n));
    m.insert("volguard_controller".into(), cost_json(&r.controller, n));
    for (p, c) in Peer::ALL.iter().zip(&r.peers) {
        if let Some(c) = c {
            // A peer runs only cold: its whole RSS is the cold one.
            let mut v = cost_json(c, n);
            v["bytes_per_object"] = json!(per(c.cold_rss, n));
            v["whole_bytes_per_object"] = json!(per(c.cold_rss, n));
            v["objects"] = json!(n);
            m.insert(p.name().into(), v);
        }
    }
    serde_json::Value::Object(m)
}

fn load_json(l: &Load) -> serde_json::Value {
    json!({"requests_per_second": l.requests_per_second, "bytes_per_second": l.bytes_per_second})
}

pub fn json(rows: &[Row], e: &Envelope) -> serde_json::Value {
    let last = rows.last();
    // A peer's figures at the largest size it reached.
    let mut memory = last.map(memory_json).unwrap_or_default();
    for (i, p) in Peer::ALL.iter().enumerate() {
        if memory.get(p.name()).is_none()
            && let Some(r) = rows.iter().rev().find(|r| r.peers[i].is_some())
        {
            memory[p.name()] = memory_json(r)[p.name()].clone();
        }
    }
    let a = &e.apiserver;
    let webhook: serde_json::Map<_, _> = e
        .webhooks
        .iter()
        .map(|w| {
            let [n, wr, v] = w.modes;
            (w.webhook.clone(), json!({"calls": w.calls, "noop_ms": [n.0, n.1], "writing_noop_ms": [wr.0, wr.1],
                "volguard_ms": [v.0, v.1], "volguard_deciding_ms": [w.inside.0, w.inside.1], "p50_ratio_vs_noop": v.0 / n.0.max(1e-9), "p99_ratio_vs_noop": v.1 / n.1.max(1e-9),
                "p50_ratio_vs_writing_noop": (wr.0 > 0.0).then(|| v.0 / wr.0),
                "p99_ratio_vs_writing_noop": (wr.1 > 0.0).then(|| v.1 / wr.1)}))
        })
        .collect();
    let pod_create = e
        .webhooks
        .iter()
        .find(|w| w.webhook.starts_with("pod-create"));
    let (k, v) = e.release;
    json!({
        "largest": last.map(|r| json!({"nodes": r.nodes, "pods": r.objects.pods, "objects": r.objects.total()})),
        "limit": e.limit,
        "memory": memory,
        "ready_seconds": last.map(|r| json!({"serve": r.serve.ready_seconds, "controller": r.controller.ready_seconds})),
        "apiserver_load": {
            "volguard": load_json(&a.steady[0]), "kcm": load_json(&a.steady[1]),
            "churn": {"pods": a.churned_pods, "volguard": load_json(&a.churn[0]), "kcm": load_json(&a.churn[1]),
                      "seconds": {"baseline": a.churn_seconds[0], "volguard": a.churn_seconds[1], "kcm": a.churn_seconds[2],
                                  "writing_noop": a.writing_noop.map(|w| w.0)},
                      "windows": a.windows.iter().map(|w| json!({"who": w.who, "seconds": w.seconds, "polled_seconds": w.polled_seconds, "apiserver_cpu_seconds": w.apiserver_cpu_seconds,
                                                                  "live_reads": w.live_reads.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                                                                  "serve_apf_seats_per_request": w.serve_apf.0, "serve_apf_rejected": w.serve_apf.1,
                                                                  "pace": w.pace.json()})).collect::<Vec<_>>(),
                      "replayed": a.replayed.iter().map(|r| json!({"who": r.who, "seconds": r.seconds, "status_patches_per_pod": r.status_patches_per_pod})).collect::<Vec<_>>(),
                      "apiserver_cpu_seconds_per_1000_pods": {"baseline": a.apiserver_cpu_per_1000[0], "volguard": a.apiserver_cpu_per_1000[1],
                                                               "writing_noop": a.writing_noop.map(|w| w.1)},
                      "volguard_cpu_seconds_per_1000_pods": a.cpu_per_1000_churn},
            "serve_reads_per_admission_call": a.reads_per_admission,
            "volguard_requests": a.volguard_requests.iter().map(|[steady, churn]| json!({"steady": steady, "churn": churn})).collect::<Vec<_>>(),
            "catch_up": {"seconds": a.catch_up.seconds, "locks_cleared": a.catch_up.locks_cleared,
                         "requests": a.catch_up.requests, "bytes": a.catch_up.bytes},
        },
        "webhook": {
            "p50_ratio_vs_noop": pod_create.map(|w| w.modes[2].0 / w.modes[0].0.max(1e-9)),
            "p99_ratio_vs_noop": pod_create.map(|w| w.modes[2].1 / w.modes[0].1.max(1e-9)),
            "by_webhook": webhook,
            "settled": {"seconds": e.settled.seconds, "steady": e.settled.steady, "apiserver_cores": e.settled.cores, "apiserver_cores_during": e.settled.cores_during},
            "calls_per_1000_pods": a.calls_per_1000.iter()
                .map(|(entry, (calls, noop))| (entry.clone(), json!({"calls": calls, "noop_answers": noop})))
                .collect::<serde_json::Map<_, _>>(),
            "client_pod_create_ms": {
                "unplaced": {"noop": e.client.unplaced[0], "writing_noop": e.client.unplaced[1], "volguard": e.client.unplaced[2]},
                "placed": {"noop": e.client.placed[0], "writing_noop": e.client.placed[1], "volguard": e.client.placed[2]}},
        },
        "finalizer_guard": e.guard.as_ref().map(|g| json!({"pods": g.pods, "refused": g.refused, "p50_ms": g.p50_ms,
            "max_ms": g.max_ms, "serve_peak_before": g.peak_before, "serve_peak_after": g.peak_after})),
        "release": {"claims_each": k.claims, "kcm_claims_per_second": k.per_second(), "volguard_claims_per_second": v.per_second(),
                    "kcm_requests_per_claim": k.requests_per_claim,
                    "kcm_deletes_issued_seconds": k.issued, "volguard_deletes_issued_seconds": v.issued, "volguard_requests_per_claim": v.requests_per_claim,
                    "ratio": v.per_second() / k.per_second().max(1e-9)},
        "sizes": rows.iter().map(|r| json!({"nodes": r.nodes, "pods": r.objects.pods, "pvcs": r.objects.pvcs, "pvs": r.objects.pvs,
            "objects": r.objects.total(), "grow_seconds": r.grow_seconds, "memory": memory_json(r),
            "components": r.components.iter().map(|(n, s)| json!({"name": n, "rss_bytes": s.rss_bytes, "cpu_seconds": s.cpu_seconds})).collect::<Vec<_>>()})).collect::<Vec<_>>(),
    })
}

/// RSS of serve and controller and the peers' cold RSS against cluster size, in one PNG.
pub fn plot(rows: &[Row], path: &std::path::Path) {
    use plotters::prelude::*;
    let font = std::env::var("VOLGUARD_PLOT_FONT")
        .unwrap_or_else(|_| "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
    let bytes = std::fs::read(&font)
        .unwrap_or_else(|e| panic!("{font}: {e} (make bench-scale installs fonts-dejavu-core)"));
    plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into()))
        .map_err(|_| "font")
        .expect("register font");
    let root = BitMapBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    type Series = (&'static str, Vec<(f64, f64)>, RGBColor);
    let series: Vec<Series> = vec![
        (
            "volguard serve",
            rows.iter()
                .map(|r| (r.objects.pods as f64, mib(r.serve.rss)))
                .collect(),
            RED,
        ),
        (
            "volguard controller",
            rows.iter()
                .map(|r| (r.objects.pods as f64, mib(r.controller.rss)))
                .collect(),
            BLUE,
        ),
        (
            "kube-rs reflector (cold)",
            rows.iter()
                .filter_map(|r| Some((r.objects.pods as f64, mib(r.peers[0]?.cold_rss))))
                .collect(),
            MAGENTA,
        ),
        (
            "controller-runtime informer (cold)",
            rows.iter()
                .filter_map(|r| Some((r.objects.pods as f64, mib(r.peers[1]?.cold_rss))))
                .collect(),
            CYAN,
        ),
    ];
    let x_max = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(1.0, f64::max)
        * 1.05;
    let y_max = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.2;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "RSS (MiB) against pods (each with a claim and a volume)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .expect("chart");
    chart.configure_mesh().x_desc("pods").draw().expect("mesh");
    for (label, points, color) in series {
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .expect("line")
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .expect("points");
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .expect("legend");
    root.present().expect("write png");
}
