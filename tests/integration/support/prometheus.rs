//! Reads the Prometheus text exposition format the gateway serves on `/metrics`: enough of it
//! to find a family's samples and their labels (no timestamps, no exemplars: the gateway
//! emits neither).

use std::collections::BTreeMap;

/// One sample: its labels and its value.
pub type Sample = (BTreeMap<String, String>, f64);

/// The samples named exactly `name` (for a histogram, ask for `NAME_count`, `NAME_bucket`…).
pub fn samples(text: &str, name: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(parse_line)
        .filter(|(metric, _, _)| metric == name)
        .map(|(_, labels, value)| (labels, value))
        .collect()
}

/// The samples named `name` whose labels include every `(key, value)` of `with`.
pub fn matching(text: &str, name: &str, with: &[(&str, &str)]) -> Vec<Sample> {
    samples(text, name)
        .into_iter()
        .filter(|(labels, _)| with.iter().all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v)))
        .collect()
}

/// The sum of the samples `matching` finds (0 when there are none).
pub fn total(text: &str, name: &str, with: &[(&str, &str)]) -> f64 {
    matching(text, name, with).iter().map(|(_, value)| value).sum()
}

/// `name{a="1",b="x\"y"} 3` → (name, labels, 3). `None` for anything else.
fn parse_line(line: &str) -> Option<(String, BTreeMap<String, String>, f64)> {
    let line = line.trim();
    let name_end = line.find(['{', ' '])?;
    let (name, mut rest) = line.split_at(name_end);
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.chars();
        let (mut key, mut value) = (String::new(), String::new());
        loop {
            match chars.next()? {
                '}' => break,
                ',' | ' ' => {}
                '=' => {
                    if chars.next()? != '"' {
                        return None;
                    }
                    loop {
                        match chars.next()? {
                            '\\' => match chars.next()? {
                                'n' => value.push('\n'),
                                other => value.push(other),
                            },
                            '"' => break,
                            other => value.push(other),
                        }
                    }
                    labels.insert(std::mem::take(&mut key), std::mem::take(&mut value));
                }
                other => key.push(other),
            }
        }
        rest = chars.as_str();
    }
    let value = match rest.split_whitespace().next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().ok()?,
    };
    Some((name.to_owned(), labels, value))
}

#[test]
fn reads_names_labels_escapes_and_values() {
    let text =
        "# HELP x y\n# TYPE x counter\nx 3\ny{a=\"1\",b=\"q\\\"z\\\\\"} 2.5\nz_bucket{le=\"+Inf\",} 7\n";
    assert_eq!(samples(text, "x"), vec![(BTreeMap::new(), 3.0)]);
    let y = samples(text, "y");
    assert_eq!(y[0].0["a"], "1");
    assert_eq!(y[0].0["b"], "q\"z\\");
    assert_eq!(y[0].1, 2.5);
    assert_eq!(total(text, "z_bucket", &[("le", "+Inf")]), 7.0);
    assert!(samples(text, "w").is_empty());
}
