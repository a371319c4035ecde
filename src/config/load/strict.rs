//! Strict reading, as `kubectl`'s strict validation: an object is deserialized into its
//! type, and every unknown or ill-typed field is named (an unknown one with the known name it
//! most likely misspells), not only the first.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// At most this many problems are reported per object (each unknown field is one).
const MAX_PROBLEMS_PER_OBJECT: usize = 50;

/// Deserializes `document` strictly and reports every problem, not only the first: each
/// unknown or ill-typed field is named (unknown ones with a did-you-mean), removed, and the
/// object read again.
pub(in crate::config) fn strict<T: DeserializeOwned>(document: &Value) -> Result<T, Vec<(String, String)>> {
    let mut document = document.clone();
    let mut problems = Vec::new();
    while problems.len() < MAX_PROBLEMS_PER_OBJECT {
        let error = match serde_path_to_error::deserialize::<_, T>(&document) {
            Ok(value) if problems.is_empty() => return Ok(value),
            Ok(_) => break,
            Err(error) => error,
        };
        let segments: Vec<String> = error.path().iter().map(ToString::to_string).collect();
        let field = error.path().to_string();
        let message = error.into_inner().to_string();
        problems.push((field, unknown_field_message(&message).unwrap_or(message)));
        if segments.is_empty() || !remove(&mut document, &segments) {
            break;
        }
    }
    Err(problems)
}

/// serde's "unknown field `x`, expected one of `a`, `b`" as `unknown field "x"`, with the
/// closest expected name when one is close.
fn unknown_field_message(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once('`')?;
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    Some(match did_you_mean(field, &known) {
        Some(close) => format!("unknown field {field:?} (did you mean {close:?}?)"),
        None if known.is_empty() => format!("unknown field {field:?}"),
        None => format!("unknown field {field:?}: expected one of {}", known.join(", ")),
    })
}

/// The known name closest to `field`, if it is a plausible misspelling.
pub(crate) fn did_you_mean<'k>(field: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = field.to_ascii_lowercase();
    known
        .iter()
        .map(|name| (edit_distance(&lower, &name.to_ascii_lowercase()), *name))
        .filter(|(distance, name)| *distance <= (name.len() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Removes the value at a serde path (`webhooks`, `[0]`, `sideEffect`); false if not found.
fn remove(document: &mut Value, segments: &[String]) -> bool {
    let Some((last, parents)) = segments.split_last() else { return false };
    let mut at = document;
    for segment in parents {
        let next = match segment.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            Some(index) => index.parse::<usize>().ok().and_then(|i| at.get_mut(i)),
            None => at.get_mut(segment.as_str()),
        };
        match next {
            Some(next) => at = next,
            None => return false,
        }
    }
    // A bad list item is reported and reading stops there: removing it would shift the
    // indices later problems are named by.
    match at {
        Value::Object(map) if !last.starts_with('[') => map.remove(last.as_str()).is_some(),
        _ => false,
    }
}
