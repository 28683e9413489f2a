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
