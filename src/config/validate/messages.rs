//! `field.Error` texts: the type, then the bad value, then the detail (`ErrorBody` in
//! `staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go`).

pub(in crate::config) use crate::go::strconv::quote;

pub(in crate::config) fn required(detail: &str) -> String {
    with_detail("Required value".to_owned(), detail)
}

/// `value` is already rendered: [`quote`]d, a number, or a [`json_list`].
pub(in crate::config) fn invalid(value: &str, detail: &str) -> String {
    with_detail(format!("Invalid value: {value}"), detail)
}

pub(in crate::config) fn not_supported(value: &str, supported: &[&str]) -> String {
    let supported: Vec<String> = supported.iter().map(|s| quote(s)).collect();
    format!("Unsupported value: {}: supported values: {}", quote(value), supported.join(", "))
}

pub(in crate::config) fn duplicate(value: &str) -> String {
    format!("Duplicate value: {}", quote(value))
}

pub(in crate::config) fn forbidden(detail: &str) -> String {
    with_detail("Forbidden".to_owned(), detail)
}

pub(in crate::config) fn too_many(actual: usize, max: usize) -> String {
    format!("Too many: {actual}: must have at most {max} items")
}

pub(in crate::config) fn too_long(max_bytes: usize) -> String {
    format!("Too long: may not be more than {max_bytes} bytes")
}

fn with_detail(mut body: String, detail: &str) -> String {
    if !detail.is_empty() {
        body.push_str(": ");
        body.push_str(detail);
    }
    body
}

/// A list as `json.Marshal` prints it, for `Invalid value: ["CREATE","*"]`.
pub(in crate::config) fn json_list(values: &[String]) -> String {
    serde_json::to_string(values).unwrap_or_else(|_| format!("{values:?}"))
}
