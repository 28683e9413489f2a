//! The RWO lock under races: many placements at once on one claim, and the detection of a claim
//! found on several nodes.

use super::*;

/// The app's pods that are Running on a node, and the refusals the scheduler met for the others.
/// `Err` when the app's pods sit on two nodes (rules.md §2f broken), saying which.
pub(super) async fn race_state(c: &kube::Client, ns: &str, app: &str) -> Result<RaceState, String> {
    let pods = Api::<Pod>::namespaced(c.clone(), ns)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list")
        .items;
    split_nodes(&pods, app)?;
    let mut running = Vec::new();
    let mut refused = Vec::new();
    for p in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let name = p.metadata.name.clone().unwrap_or_default();
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
        let phase = p.status.as_ref().and_then(|s| s.phase.clone());
        match (node, phase.as_deref()) {
            (Some(n), Some("Running")) => running.push((name, n)),
            (None, _) => {
                // The lock's refusal when the scheduler's first bind met it, else the first one.
                let all = rwo_refusals(c, ns, &name).await;
                if let Some(m) = all
                    .iter()
                    .find(|m| m.contains("locked to node"))
                    .or(all.first())
                {
                    refused.push((name, m.clone()));
                }
            }
            _ => {}
        }
    }
    Ok((running, refused))
}

/// Two nodes on one claim: fail with every decision both replicas logged about placements.
pub(super) fn race_lost(
    cp: &ControlPlane,
    replicas: &[Option<harness::Proc>],
    round: usize,
    e: &str,
) -> ! {
    let logs: Vec<String> = cp
        .serve
        .iter()
        .chain(replicas.iter().flatten())
        .map(|p| p.lines_with("rwo", 40))
        .collect();
    panic!("round {round}: {e}\n{}", logs.join("\n"))
}

/// The lock's race on the real cluster: two `volguard serve` replicas (each with its own caches)
/// behind one address, a Deployment of two pods that must use two nodes on one RWO claim, created
/// 20 times: each time one pod runs and the other waits Pending with volguard's refusal in the
/// scheduler's event; never two nodes, never a `MultiNodeRWO`. Then scale to 0 and back: the lock
/// moves to the new pod.
pub(super) async fn rwo_lock_race(cp: &mut ControlPlane, ns: &str) {
    use k8s_openapi::api::apps::v1::Deployment;
    let c = cp.admin().await;
    // Replica 0 is the harness's own serve; replica 1 is started here. Before each round one of
    // them is replaced (a new process on a new port, the old one drained): the apiserver keeps one
    // HTTP/2 connection per webhook, so without it one replica would judge nearly every bind.
    let mut ports = vec![cp.webhook_port, harness::free_port()];
    let (second, second_probe) = cp.spawn_serve("volguard-serve-r1", ports[1], &[]).await;
    let mut replicas: Vec<Option<harness::Proc>> = vec![None, Some(second)];
    let mut probes = [cp.serve_probe, second_probe];
    let mut served = [0.0f64; 2];
    let fwd = harness::Forwarder::start_many(ports.clone()).await;
    cp.route_webhooks_to(fwd.port).await;
    let rwo_calls = |text: String| -> f64 {
        text.lines()
            .filter(|l| {
                l.starts_with("volguard_admission_requests_total{endpoint=\"rwo-single-node\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .fold(0.0, |a, b| a + b)
    };
    claim(cp, ns, "shared").await;
    let deploys = Api::<Deployment>::namespaced(c.clone(), ns);
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
    let (mut by_lock, mut by_cache) = (0, 0);
    const ROUNDS: usize = 20;
    for round in 1..=ROUNDS {
        let r = round % 2;
        served[r] += rwo_calls(metrics_text(probes[r]).await);
        let port = harness::free_port();
        let (fresh, probe) = cp
            .spawn_serve(
                &format!("volguard-serve-r{r}-{round}"),
                port,
                &["--shutdown-drain=1s"],
            )
            .await;
        ports[r] = port;
        probes[r] = probe;
        fwd.route_to_many(ports.clone());
        let old = if r == 0 {
            cp.replace_serve(fresh, port, probe)
        } else {
            replicas[1].replace(fresh)
        };
        if let Some(mut old) = old {
            old.signal("TERM");
            tokio::task::spawn_blocking(move || {
                let _ = old.child.wait();
            })
            .await
            .expect("join");
        }
        let started = Instant::now();
        deploys
            .create(
                &PostParams::default(),
                &spread_deployment("pair", "shared", 2),
            )
            .await
            .expect("deployment");
        let (runner, waiter) = cp
            .eventually(
                &format!("round {round}: one pod runs, the other refused"),
                LONG,
                || {
                    let c = c.clone();
                    async move {
                        let (running, refused) = match race_state(&c, ns, "pair").await {
                            Ok(s) => s,
                            Err(e) => return Some(Err(e)),
                        };
                        if running.len() > 1 {
                            return Some(Err(format!("two pods run: {running:?}")));
                        }
                        Some(Ok((
                            running.into_iter().next()?,
                            refused.into_iter().next()?,
                        )))
                    }
                },
            )
            .await
            .unwrap_or_else(|e| race_lost(cp, &replicas, round, &e));
        // A moment later it still holds: the waiter stays Pending.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (running, _) = race_state(&c, ns, "pair")
            .await
            .unwrap_or_else(|e| race_lost(cp, &replicas, round, &e));
        assert_eq!(running.len(), 1, "round {round}: {running:?}");
        if waiter.1.contains("locked to node") {
            by_lock += 1;
        } else {
            by_cache += 1;
        }
        println!(
            "rwo-lock-race round {round} ({:.1}s): {} runs on {}, {} refused: {}",
            started.elapsed().as_secs_f64(),
            runner.0,
            runner.1,
            waiter.0,
            waiter
                .1
                .split("denied the request: ")
                .nth(1)
                .unwrap_or(&waiter.1)
        );
        if round < ROUNDS {
            deploys
                .delete("pair", &DeleteParams::background())
                .await
                .expect("delete deployment");
            cp.eventually(&format!("round {round}: pods gone"), LONG, || {
                let pods = pods.clone();
                async move {
                    pods.list(&ListParams::default().labels("app=pair"))
                        .await
                        .ok()?
                        .items
                        .is_empty()
                        .then_some(())
                }
            })
            .await;
            gone_within(cp, &deploys, "deployment", "pair", LONG).await;
        }
    }
    // Scale to 0 and back: the lock moves to whichever pod now runs.
    deploys
        .patch(
            "pair",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .expect("scale to 0");
    cp.eventually("scaled to 0", LONG, || {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default().labels("app=pair"))
                .await
                .ok()?
                .items
                .is_empty()
                .then_some(())
        }
    })
    .await;
    let lock_of = |p: PersistentVolumeClaim| {
        p.metadata
            .annotations
            .and_then(|a| a.get("volguard.io/rwo-lock").cloned())
            .unwrap_or_default()
    };
    let before = lock_of(pvcs.get("shared").await.expect("claim"));
    deploys
        .patch(
            "pair",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .expect("scale back");
    let (runner, _) = cp
        .eventually("scaled back: one pod runs, the other refused", LONG, || {
            let c = c.clone();
            async move {
                let (running, refused) = match race_state(&c, ns, "pair").await {
                    Ok(s) => s,
                    Err(e) => return Some(Err(e)),
                };
                Some(Ok((
                    running.into_iter().next()?,
                    refused.into_iter().next()?,
                )))
            }
        })
        .await
        .unwrap_or_else(|e| race_lost(cp, &replicas, ROUNDS + 1, &e));
    let after = lock_of(pvcs.get("shared").await.expect("claim"));
    assert!(
        after.contains(&format!("\"pod\":\"{}\"", runner.0))
            && after.contains(&format!("\"node\":\"{}\"", runner.1)),
        "the lock did not move to {runner:?}: {after}"
    );
    let multi = events(&c, ns, "shared", Some("MultiNodeRWO")).await;
    assert!(multi.is_empty(), "MultiNodeRWO emitted: {multi:?}");
    for r in 0..2 {
        served[r] += rwo_calls(metrics_text(probes[r]).await);
    }
    let before = if before.is_empty() {
        "none (the controller had cleared it)".to_string()
    } else {
        before
    };
    println!(
        "rwo-lock-race: {ROUNDS} rounds, one pod ran each time (refused by the lock {by_lock}, by the caches {by_cache}); \
         scale 0 and back: lock {before} -> {after}; no MultiNodeRWO; binds judged by replica 0: {}, replica 1: {} (each replaced every other round)",
        served[0], served[1]
    );
    assert!(
        served.iter().all(|n| *n > 0.0),
        "a replica judged no bind: {served:?}"
    );
    deploys
        .delete("pair", &DeleteParams::default())
        .await
        .expect("delete deployment");
    drop(replicas);
    cp.route_webhooks_to(ports[0]).await;
}

/// rules.md §2f detection: with the webhook down (failurePolicy Ignore lets everything through),
/// two pods on two nodes share an RWO claim; the controller raises `MultiNodeRWO` on the claim
/// and `volguard_pvcs_multi_node_rwo`.
pub(super) async fn multi_node_rwo_detection(cp: &mut ControlPlane, ns: &str) {
    let c = cp.admin().await;
    claim(cp, ns, "shared").await;
    cp.stop_webhook();
    for (name, node) in [("w-1", "kwok-1"), ("w-2", "kwok-2")] {
        pod(&c, ns, name, Some(node), &["shared"])
            .await
            .expect("pod (webhook down)");
        running(cp, ns, name).await;
    }
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.clone(), ns);
    let msg = cp
        .eventually("MultiNodeRWO event on the claim", WAIT, || {
            let events = events.clone();
            async move {
                events
                    .list(&kube::api::ListParams::default().fields("involvedObject.name=shared"))
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("MultiNodeRWO"))
                    .and_then(|e| (e.type_.as_deref() == Some("Warning")).then_some(e.message?))
            }
        })
        .await;
    assert!(msg.contains("2 nodes at once (kwok-1, kwok-2)"), "{msg}");
    let metrics = metrics_text(cp.controller_probes[0]).await;
    assert!(
        metrics.contains("volguard_pvcs_multi_node_rwo 1"),
        "{metrics}"
    );
    println!("multi-node RWO detected: {msg}");
    cp.start_webhook().await;
}
