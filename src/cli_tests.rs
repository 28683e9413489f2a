//! Unit tests of `src/cli.rs`.

use super::*;

fn controller(args: &[&str]) -> ControllerArgs {
    let mut all = vec!["volguard", "controller"];
    all.extend_from_slice(args);
    match Cli::try_parse_from(all).expect("parse").command {
        Command::Controller(a) => a,
        other => panic!("{other:?}"),
    }
}

#[test]
fn durations_read_units_and_the_former_flags_still_work() {
    let d = controller(&[]);
    assert_eq!(d.lease_duration(), std::time::Duration::from_secs(15));
    assert_eq!(d.backoff_base(), std::time::Duration::from_millis(200));
    let new = controller(&["--lease-duration=1m", "--backoff-max=90s"]);
    assert_eq!(new.lease_duration(), std::time::Duration::from_secs(60));
    assert_eq!(new.backoff_max(), std::time::Duration::from_secs(90));
    let old = controller(&["--lease-duration-seconds=6", "--backoff-base-ms=100"]);
    assert_eq!(old.lease_duration(), std::time::Duration::from_secs(6));
    assert_eq!(old.backoff_base(), std::time::Duration::from_millis(100));
    let bad = Cli::try_parse_from(["volguard", "controller", "--lease-duration=fast"])
        .expect_err("not a duration")
        .to_string();
    assert!(bad.contains("\"fast\" is not a duration like 15s"), "{bad}");
}

/// The lock's grace reaches both processes from one flag, read with units, defaulting to
/// kube-apiserver's own minute.
#[test]
fn the_apiserver_request_timeout_is_read_by_serve_and_controller_alike() {
    assert_eq!(
        controller(&[]).apiserver_request_timeout,
        std::time::Duration::from_secs(60)
    );
    assert_eq!(
        controller(&["--apiserver-request-timeout=2m"]).apiserver_request_timeout,
        std::time::Duration::from_secs(120)
    );
    let serve = |args: &[&str]| {
        let mut all = vec!["volguard", "serve", "--tls-cert=c.pem", "--tls-key=k.pem"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all).expect("parse").command {
            Command::Serve(a) => a.apiserver_request_timeout,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(serve(&[]), std::time::Duration::from_secs(60));
    assert_eq!(
        serve(&["--apiserver-request-timeout=90s"]),
        std::time::Duration::from_secs(90)
    );
    let bad = Cli::try_parse_from([
        "volguard",
        "serve",
        "--tls-cert=c.pem",
        "--tls-key=k.pem",
        "--apiserver-request-timeout=-1m",
    ])
    .expect_err("negative")
    .to_string();
    assert!(bad.contains("negative"), "{bad}");
}
