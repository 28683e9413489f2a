//! Kubernetes resource quantities ("10Gi", "500M", "1.5Ti", "1e9") to bytes and back.

/// Bytes of a quantity, or None when it does not parse.
pub fn parse_bytes(q: &str) -> Option<u128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let mult: f64 = match suffix {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "m" => 1e-3,
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    let n: f64 = num.parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Some((n * mult).ceil() as u128)
}

/// Bytes in binary units, e.g. "50Gi", "1.5Ti".
pub fn format_bytes(b: u128) -> String {
    const UNITS: [&str; 6] = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if (v - v.round()).abs() < 0.05 {
        format!("{}{}", v.round() as u128, UNITS[i])
    } else {
        format!("{v:.1}{}", UNITS[i])
    }
}

/// A duration as jiff reads it ("30d", "1d12h", "720h", "2w", "90m", "45s", ISO 8601 "P30D") to
/// seconds, days being 24 hours. Years, months, negative or malformed durations: `None`.
pub fn parse_duration(s: &str) -> Option<i64> {
    let span: jiff::Span = s.trim().parse().ok()?;
    let d = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .ok()?;
    (!d.is_negative()).then(|| d.as_secs())
}

/// Seconds in the largest human units: "45d 3h", "5h 10m", "40s".
pub fn format_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (d, h, m) = (secs / 86_400, (secs % 86_400) / 3600, (secs % 3600) / 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m")
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
#[path = "quantity_tests.rs"]
mod tests;
