//! `kubernetes.NamedFormat` (k8s.io/apiserver `pkg/cel/library/format.go`): the constant
//! formats `format.dns1123Label()` … `format.datetime()`, `format.named(name)` (an optional)
//! and `<format>.validate(string)` (an optional list of error texts, none when valid), with
//! the validations of apimachinery 0.36 (`util/validation`, `api/validate/content`) and of
//! kube-openapi's `strfmt`, and their exact texts.

mod validation;

use std::any::Any;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::func::{Cost, Ctx, Registry};
use crate::value::{Object, Value};

pub(crate) const TYPE_NAME: &str = "kubernetes.NamedFormat";

/// A named format: its name (equality compares names), its validation and the regex size
/// cost.go charges for it.
#[derive(Debug)]
pub struct NamedFormat {
    name: &'static str,
    validate: fn(&str) -> Vec<String>,
    max_regex_size: u64,
}

impl Object for NamedFormat {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn equals(&self, other: &dyn Object) -> bool {
        other.as_any().downcast_ref::<NamedFormat>().is_some_and(|o| o.name == self.name)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `urlLength`: govalidator's URL regex, for the estimate of `uri`.
const URL_LENGTH: u64 = 1103;
/// `base64Length`.
const BASE64_LENGTH: u64 = 84;
/// `len(strfmt.UUIDPattern)`.
const UUID_PATTERN_LENGTH: u64 = 70;
/// `len(strfmt.DateTimePattern)`.
const DATE_TIME_PATTERN_LENGTH: u64 = 71;

/// `ConstantFormats`: the key (`format.<key>()`, `format.named("<key>")`) and the format.
static FORMATS: [(&str, NamedFormat); 13] = [
    (
        "dns1123Label",
        NamedFormat { name: "DNS1123Label", validate: validation::dns1123_label, max_regex_size: 30 },
    ),
    (
        "dns1123Subdomain",
        NamedFormat { name: "DNS1123Subdomain", validate: validation::dns1123_subdomain, max_regex_size: 60 },
    ),
    (
        "dns1035Label",
        NamedFormat { name: "DNS1035Label", validate: validation::dns1035_label, max_regex_size: 30 },
    ),
    (
        "qualifiedName",
        NamedFormat { name: "QualifiedName", validate: validation::qualified_name, max_regex_size: 60 },
    ),
    (
        "dns1123LabelPrefix",
        NamedFormat {
            name: "DNS1123LabelPrefix",
            validate: validation::dns1123_label_prefix,
            max_regex_size: 30,
        },
    ),
    (
        "dns1123SubdomainPrefix",
        NamedFormat {
            name: "DNS1123SubdomainPrefix",
            validate: validation::dns1123_subdomain_prefix,
            max_regex_size: 60,
        },
    ),
    (
        "dns1035LabelPrefix",
        NamedFormat {
            name: "DNS1035LabelPrefix",
            validate: validation::dns1035_label_prefix,
            max_regex_size: 30,
        },
    ),
    ("labelValue", NamedFormat { name: "LabelValue", validate: validation::label_value, max_regex_size: 40 }),
    ("uri", NamedFormat { name: "URI", validate: validation::uri, max_regex_size: URL_LENGTH }),
    ("uuid", NamedFormat { name: "uuid", validate: validation::uuid, max_regex_size: UUID_PATTERN_LENGTH }),
    ("byte", NamedFormat { name: "byte", validate: validation::byte, max_regex_size: BASE64_LENGTH }),
    (
        "date",
        NamedFormat { name: "date", validate: validation::date, max_regex_size: DATE_TIME_PATTERN_LENGTH },
    ),
    (
        "datetime",
        NamedFormat {
            name: "datetime",
            validate: validation::datetime,
            max_regex_size: DATE_TIME_PATTERN_LENGTH,
        },
    ),
];

/// The value of a constant format (shared: formats are immutable).
fn format_value(key: &str) -> Option<Value> {
    static VALUES: std::sync::LazyLock<Vec<(&'static str, Value)>> = std::sync::LazyLock::new(|| {
        FORMATS
            .iter()
            .map(|(key, f)| {
                let object: Arc<dyn Object> = Arc::new(NamedFormat {
                    name: f.name,
                    validate: f.validate,
                    max_regex_size: f.max_regex_size,
                });
                (*key, Value::Object(object))
            })
            .collect()
    });
    VALUES.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone())
}

fn format_arg(value: &Value) -> Result<&NamedFormat> {
    match value {
        Value::Object(o) => o.as_any().downcast_ref::<NamedFormat>().ok_or_else(Error::no_match),
        _ => Err(Error::no_match()),
    }
}

fn named(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let name = args[0].as_str().ok_or_else(Error::no_match)?;
    Ok(Value::Optional(format_value(name).map(Arc::new)))
}

fn validate(_: &mut Ctx<'_>, args: &[Value]) -> Result<Value> {
    let format = format_arg(&args[0])?;
    let text = args[1].as_str().ok_or_else(Error::no_match)?;
    let errors = (format.validate)(text);
    if errors.is_empty() {
        return Ok(Value::Optional(None));
    }
    Ok(Value::Optional(Some(Arc::new(Value::list(errors.into_iter().map(Value::string).collect())))))
}

/// cost.go's `validate`: ⌈(1 + size) × 0.1⌉ × ⌈regex size × 0.25⌉.
fn validate_cost(args: &[Value], _: &Value) -> u64 {
    let Ok(format) = format_arg(&args[0]) else { return 1 };
    let size = args[1].size().unwrap_or(1) as f64;
    let str_cost = ((1.0 + size) * 0.1).ceil() as u64;
    let regex_cost = (format.max_regex_size as f64 * 0.25).ceil() as u64;
    str_cost * regex_cost
}

macro_rules! constant {
    ($key:literal) => {{
        fn call(_: &mut Ctx<'_>, _: &[Value]) -> Result<Value> {
            format_value($key).ok_or_else(Error::no_such_overload)
        }
        (concat!("format.", $key), call as crate::func::Call)
    }};
}

pub(super) fn register(registry: &mut Registry) {
    let constants = [
        constant!("dns1123Label"),
        constant!("dns1123Subdomain"),
        constant!("dns1035Label"),
        constant!("qualifiedName"),
        constant!("dns1123LabelPrefix"),
        constant!("dns1123SubdomainPrefix"),
        constant!("dns1035LabelPrefix"),
        constant!("labelValue"),
        constant!("uri"),
        constant!("uuid"),
        constant!("byte"),
        constant!("date"),
        constant!("datetime"),
    ];
    // Not in cost.go: cel-go's default 1.
    for (name, call) in constants {
        registry.global(name, 0, call, Cost::Fixed(1));
    }
    registry.global("format.named", 1, named, Cost::Fixed(1));
    registry.method("validate", 1, validate, Cost::Of(validate_cost));
}

#[cfg(test)]
mod tests;
