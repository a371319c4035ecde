//! TEMPORARY stand-in, replaced on merge.
pub(crate) fn parse(text: &str) -> Result<i64, String> {
    let err = || format!("time: invalid duration {text:?}");
    if text == "0" {
        return Ok(0);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(err());
    }
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().map_err(|_| err())?;
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_end] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(err()),
        };
        total += number * seconds_per_unit;
        rest = &rest[unit_end..];
    }
    let nanos = total * 1e9;
    if nanos > i64::MAX as f64 {
        return Err(err());
    }
    Ok(nanos as i64)
}
