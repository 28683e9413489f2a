//! Unit tests of `src/model/quantity.rs`.

use super::*;

#[test]
fn quantities() {
    assert_eq!(parse_bytes("10Gi"), Some(10 * 1024 * 1024 * 1024));
    assert_eq!(parse_bytes("500M"), Some(500_000_000));
    assert_eq!(parse_bytes("1.5Gi"), Some(1_610_612_736));
    assert_eq!(parse_bytes("1e3"), Some(1000));
    assert_eq!(parse_bytes("1024"), Some(1024));
    assert_eq!(parse_bytes("ten"), None);
    assert_eq!(parse_bytes("5Xi"), None);
    assert_eq!(format_bytes(10 * 1024 * 1024 * 1024), "10Gi");
    assert_eq!(format_bytes(1_610_612_736), "1.5Gi");
}

#[test]
fn durations() {
    assert_eq!(parse_duration("30d"), Some(30 * 86_400));
    assert_eq!(parse_duration("2w"), Some(14 * 86_400));
    assert_eq!(parse_duration("12h"), Some(43_200));
    assert_eq!(parse_duration("d"), None);
    assert_eq!(parse_duration("3y"), None);
    // jiff's friendly format: compound units and any unit size.
    assert_eq!(parse_duration("1d12h"), Some(129_600));
    assert_eq!(parse_duration("720h"), Some(30 * 86_400));
    assert_eq!(parse_duration("1h30m"), Some(5_400));
    assert_eq!(parse_duration("P30D"), Some(30 * 86_400));
    assert_eq!(parse_duration("-5d"), None);
    assert_eq!(parse_duration("3mo"), None, "months have no fixed length");
    assert_eq!(format_duration(45 * 86_400 + 3 * 3600), "45d 3h");
    assert_eq!(format_duration(5 * 3600 + 600), "5h 10m");
    assert_eq!(format_duration(40), "40s");
}
