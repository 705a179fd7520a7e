//! Durations on the command line (`500ms`, `2s`, `1m30s`, `1.5h`) and in
//! output (`850ms`, `12.3s`, `4m58s`, `2h05m`, `3d04h`), and wall-clock
//! timestamps (UTC) for output.

use std::time::Duration;

use interlock::Timestamp;

/// Parses a positive duration: one or more `<number><unit>` parts, where
/// the number may have a fraction and the unit is `ms`, `s`, `m`, `h` or
/// `d` (`1m30s`, `1.5s`, `250ms`).
///
/// # Errors
///
/// A message naming the expected form, for an empty, malformed, zero or
/// overflowing input.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    const HINT: &str = "expected a duration such as 500ms, 2s, 1m30s or 1h";
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(format!("empty duration: {HINT}"));
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("`{text}` has a number without a unit: {HINT}"))?;
        let (number, after) = rest.split_at(number_len);
        let unit_len = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a duration: {HINT}"))?;
        let seconds_per_unit = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            _ => return Err(format!("`{text}` has an unknown unit `{unit}`: {HINT}")),
        };
        let part = Duration::try_from_secs_f64(value * seconds_per_unit)
            .map_err(|_| format!("`{text}` is out of range"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("`{text}` is out of range"))?;
        rest = after;
    }
    if total.is_zero() {
        return Err(format!("`{text}` is zero: the duration must be positive"));
    }
    Ok(total)
}

/// A short human form: `850ms`, `12.3s`, `4m58s`, `2h05m`, `3d04h`.
pub(crate) fn human(d: Duration) -> String {
    let ms = d.as_millis();
    let secs = d.as_secs();
    if ms < 1_000 {
        format!("{ms}ms")
    } else if secs < 60 {
        format!("{}.{}s", secs, d.subsec_millis() / 100)
    } else if secs < 3_600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else if secs < 86_400 {
        format!("{}h{:02}m", secs / 3_600, secs % 3_600 / 60)
    } else {
        format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3_600)
    }
}

/// The civil date (year, month, day) of a day count since 1970-01-01
/// (Howard Hinnant's `civil_from_days`, for non-negative days).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// A timestamp since the Unix epoch as RFC 3339 UTC with milliseconds:
/// `2026-11-30T12:00:05.123Z`.
pub(crate) fn rfc3339(t: Timestamp) -> String {
    let nanos = t.as_nanos();
    let secs = nanos / 1_000_000_000;
    let millis = nanos % 1_000_000_000 / 1_000_000;
    let (year, month, day) = civil_from_days(secs / 86_400);
    let s = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        s / 3_600,
        s % 3_600 / 60,
        s % 60
    )
}

/// The time of day of a timestamp since the Unix epoch, UTC:
/// `12:00:05.123Z`.
pub(crate) fn time_of_day(t: Timestamp) -> String {
    let full = rfc3339(t);
    full.split_once('T')
        .map_or(full.clone(), |(_, time)| time.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit_and_combination() {
        let ok = [
            ("500ms", Duration::from_millis(500)),
            ("2s", Duration::from_secs(2)),
            ("1m30s", Duration::from_secs(90)),
            ("1.5s", Duration::from_millis(1_500)),
            ("1h", Duration::from_secs(3_600)),
            ("1d", Duration::from_secs(86_400)),
            (" 2m ", Duration::from_secs(120)),
        ];
        for (text, want) in ok {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_durations_are_errors_with_a_hint() {
        for bad in [
            "",
            "5",
            "s",
            "1x",
            "1.2.3s",
            "-1s",
            "0s",
            "0ms",
            "1e9d",
            "9999999999999999999d",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(!err.is_empty(), "{bad}");
        }
        assert!(parse("5").unwrap_err().contains("500ms"));
    }

    #[test]
    fn durations_print_short() {
        let cases = [
            (Duration::from_millis(850), "850ms"),
            (Duration::from_millis(12_345), "12.3s"),
            (Duration::from_secs(298), "4m58s"),
            (Duration::from_secs(2 * 3_600 + 5 * 60), "2h05m"),
            (Duration::from_secs(3 * 86_400 + 4 * 3_600), "3d04h"),
        ];
        for (d, want) in cases {
            assert_eq!(human(d), want);
        }
    }

    #[test]
    fn timestamps_print_as_utc() {
        assert_eq!(rfc3339(Timestamp::ZERO), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day in a century leap year), 13:14:15.678.
        let t = Timestamp::from_nanos(951_830_055_678_000_000);
        assert_eq!(rfc3339(t), "2000-02-29T13:14:15.678Z");
        assert_eq!(time_of_day(t), "13:14:15.678Z");
        let t = Timestamp::from_secs(1_798_675_200); // 2026-12-31T00:00:00Z
        assert_eq!(rfc3339(t), "2026-12-31T00:00:00.000Z");
    }
}
