//! `metav1.Time` as Go reads and writes it: `time.Parse(time.RFC3339, text)` — the generic
//! parser's walk over the layout `2006-01-02T15:04:05Z07:00`, its error texts included
//! (`time/format.go`: a one- or two-digit hour, fractional seconds after the seconds, `Z` or an
//! offset) — then written in UTC to the second.

const LAYOUT: &str = "2006-01-02T15:04:05Z07:00";

/// `text` in UTC to the second (`2024-01-01T02:30:00.5+02:00` → `2024-01-01T00:30:00Z`), or Go's
/// error (`parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as
/// "2006"`).
pub(crate) fn utc_seconds(text: &str) -> Result<String, String> {
    let cannot = |value: &str, element: &str| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            quote(text),
            quote(LAYOUT),
            quote(value),
            quote(element)
        )
    };
    let out_of_range = |what: &str| format!("parsing time {}: {what} out of range", quote(text));
    let mut value = text;
    // 2006
    if value.len() < 4 || !value.as_bytes()[..4].iter().all(u8::is_ascii_digit) {
        return Err(cannot(value, "2006"));
    }
    let year: i64 = value[..4].parse().map_err(|_| cannot(value, "2006"))?;
    value = &value[4..];
    let number = |value: &mut &str, prefix: &str, element: &str, fixed: bool| -> Result<i64, String> {
        *value = value.strip_prefix(prefix).ok_or_else(|| cannot(value, prefix))?;
        let b = value.as_bytes();
        if !b.first().is_some_and(u8::is_ascii_digit) {
            return Err(cannot(value, element));
        }
        let two = b.get(1).is_some_and(u8::is_ascii_digit);
        if !two && fixed {
            return Err(cannot(value, element));
        }
        let len = if two { 2 } else { 1 };
        let n = value[..len].parse().map_err(|_| cannot(value, element))?;
        *value = &value[len..];
        Ok(n)
    };
    let month = number(&mut value, "-", "01", true)?;
    if !(1..=12).contains(&month) {
        return Err(out_of_range("month"));
    }
    let day = number(&mut value, "-", "02", true)?;
    let hour = number(&mut value, "T", "15", false)?;
    if hour >= 24 {
        return Err(out_of_range("hour"));
    }
    let minute = number(&mut value, ":", "04", true)?;
    if minute >= 60 {
        return Err(out_of_range("minute"));
    }
    let second = number(&mut value, ":", "05", true)?;
    if second >= 60 {
        return Err(out_of_range("second"));
    }
    // Fractional seconds the layout does not name.
    let b = value.as_bytes();
    if b.len() >= 2 && (b[0] == b'.' || b[0] == b',') && b[1].is_ascii_digit() {
        let n = 2 + b[2..].iter().take_while(|c| c.is_ascii_digit()).count();
        value = &value[n..];
    }
    // Z07:00
    let offset_minutes = if let Some(rest) = value.strip_prefix('Z') {
        value = rest;
        0
    } else {
        let b = value.as_bytes();
        if b.len() < 6 || b[3] != b':' {
            return Err(cannot(value, "Z07:00"));
        }
        let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
        if !digits(&b[1..3]) || !digits(&b[4..6]) {
            return Err(cannot(value, "Z07:00"));
        }
        let (h, m): (i64, i64) = (value[1..3].parse().unwrap_or(0), value[4..6].parse().unwrap_or(0));
        if h > 24 {
            return Err(out_of_range("time zone offset hour"));
        }
        if m > 60 {
            return Err(out_of_range("time zone offset minute"));
        }
        let minutes = match b[0] {
            b'+' => h * 60 + m,
            b'-' => -(h * 60 + m),
            _ => return Err(cannot(value, "Z07:00")),
        };
        value = &value[6..];
        minutes
    };
    if !value.is_empty() {
        return Err(format!("parsing time {}: extra text: {}", quote(text), quote(value)));
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err(out_of_range("day"));
    }
    let seconds =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        // Go writes such a year in another form (and refuses to marshal some): kept.
        return Ok(text.to_owned());
    }
    Ok(format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60))
}

/// Go's `time.quote`: in double quotes, `"` and `\` escaped, other bytes outside printable ASCII
/// as `\x` escapes.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            other => {
                let mut buf = [0u8; 4];
                for byte in other.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::utc_seconds;

    #[test]
    fn times_in_utc_to_the_second() {
        for (written, utc) in [
            ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"),
            ("2024-01-01T02:30:00.5+02:00", "2024-01-01T00:30:00Z"),
            ("2024-01-01T00:30:00-01:00", "2024-01-01T01:30:00Z"),
            ("2024-03-01T00:30:00+01:00", "2024-02-29T23:30:00Z"),
            ("2023-12-31T23:59:59.999999999-00:30", "2024-01-01T00:29:59Z"),
            ("2024-01-01T1:00:00Z", "2024-01-01T01:00:00Z"),
        ] {
            assert_eq!(utc_seconds(written).as_deref(), Ok(utc), "{written}");
        }
    }

    #[test]
    fn go_s_parse_errors() {
        let layout = r#"as "2006-01-02T15:04:05Z07:00""#;
        for (written, error) in [
            (
                "yesterday",
                format!(r#"parsing time "yesterday" {layout}: cannot parse "yesterday" as "2006""#),
            ),
            ("2024/01/01", format!(r#"parsing time "2024/01/01" {layout}: cannot parse "/01/01" as "-""#)),
            (
                "2024-01-01 00:00:00Z",
                format!(r#"parsing time "2024-01-01 00:00:00Z" {layout}: cannot parse " 00:00:00Z" as "T""#),
            ),
            (
                "2024-01-01T00:00:00",
                format!(r#"parsing time "2024-01-01T00:00:00" {layout}: cannot parse "" as "Z07:00""#),
            ),
            ("2024-13-01T00:00:00Z", r#"parsing time "2024-13-01T00:00:00Z": month out of range"#.to_owned()),
            ("2024-02-30T00:00:00Z", r#"parsing time "2024-02-30T00:00:00Z": day out of range"#.to_owned()),
            (
                "2024-01-01T00:00:00Zjunk",
                r#"parsing time "2024-01-01T00:00:00Zjunk": extra text: "junk""#.to_owned(),
            ),
        ] {
            assert_eq!(utc_seconds(written), Err(error), "{written}");
        }
    }
}
