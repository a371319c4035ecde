//! Label selectors (metav1 `LabelSelector`), compiled once per configuration load, and the
//! labels they read, found in one place for webhooks, policies, their parameters and the
//! cluster's namespaces.
//!
//! Semantics of `k8s.io/apimachinery/pkg/labels`: `matchLabels` and every `matchExpressions`
//! entry are ANDed; `NotIn` and `DoesNotExist` are satisfied by an absent key; the empty
//! selector matches everything.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use super::manifest::LabelSelector;

/// A compiled, validated label selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Selector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Operator {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// Labels of an object or namespace.
pub(crate) type Labels = BTreeMap<String, String>;

/// `metadata.labels` of an object held as a tree, as the policies' selectors and the mutating
/// chain's patched object read them: every string value (another value is skipped). `None`
/// without a `metadata` object (null, the options objects of CONNECT), which no object selector
/// matches.
pub(crate) fn labels_of(object: &Value) -> Option<Labels> {
    let metadata = object.get("metadata")?.as_object()?;
    let labels = metadata.get("labels").and_then(Value::as_object);
    Some(
        labels.into_iter().flatten().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect(),
    )
}

/// `metadata.labels` of an object's JSON text, decoded as `ObjectMeta` decodes them, without
/// parsing the rest of the object: a value that is not a string fails the decoding (`None`), as
/// does an object without `metadata`. Missing or null labels are no labels.
pub(crate) fn decoded_labels_of_text(text: &str) -> Option<Labels> {
    let only: MetadataOnly = serde_json::from_str(text).ok()?;
    Some(only.metadata?.labels.unwrap_or_default())
}

/// [`decoded_labels_of_text`] of an object already held as a tree (a parameter object).
pub(crate) fn decoded_labels_of(object: &Value) -> Option<Labels> {
    let only = MetadataOnly::deserialize(object).ok()?;
    Some(only.metadata?.labels.unwrap_or_default())
}

#[derive(Deserialize)]
struct MetadataOnly {
    metadata: Option<LabelsOnly>,
}

#[derive(Deserialize)]
struct LabelsOnly {
    #[serde(default)]
    labels: Option<Labels>,
}

impl Selector {
    /// Compiles a selector that validation accepted; an unknown operator matches nothing.
    pub(crate) fn compile(selector: &LabelSelector) -> Self {
        let mut requirements: Vec<Requirement> = selector
            .match_labels
            .iter()
            .map(|(key, value)| Requirement { key: key.clone(), operator: Operator::In(vec![value.clone()]) })
            .collect();
        requirements.extend(selector.match_expressions.iter().map(|expression| Requirement {
            key: expression.key.clone(),
            operator: match expression.operator.as_str() {
                "In" => Operator::In(expression.values.clone()),
                "NotIn" => Operator::NotIn(expression.values.clone()),
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                // Refused by validation; if it slips through, match nothing rather than everything.
                _ => Operator::In(Vec::new()),
            },
        }));
        Self { requirements }
    }

    /// The empty selector matches everything without looking at labels.
    pub(crate) fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub(crate) fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|requirement| {
            let value = labels.get(&requirement.key);
            match &requirement.operator {
                Operator::In(values) => value.is_some_and(|v| values.contains(v)),
                Operator::NotIn(values) => value.is_none_or(|v| !values.contains(v)),
                Operator::Exists => value.is_some(),
                Operator::DoesNotExist => value.is_none(),
            }
        })
    }
}

impl fmt::Display for Selector {
    /// The `kubectl -l` form, e.g. `env in (prod),!legacy`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.requirements.is_empty() {
            return f.write_str("<everything>");
        }
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let key = &requirement.key;
            match &requirement.operator {
                Operator::In(values) => write!(f, "{key} in ({})", values.join(","))?,
                Operator::NotIn(values) => write!(f, "{key} notin ({})", values.join(","))?,
                Operator::Exists => write!(f, "{key}")?,
                Operator::DoesNotExist => write!(f, "!{key}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(json: serde_json::Value) -> Selector {
        Selector::compile(&serde_json::from_value(json).unwrap())
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn selector_semantics() {
        use serde_json::json;
        let cases = [
            (json!({}), vec![], true),
            (json!({"matchLabels": {"env": "prod"}}), vec![("env", "prod")], true),
            (json!({"matchLabels": {"env": "prod"}}), vec![("env", "dev")], false),
            (json!({"matchLabels": {"env": "prod"}}), vec![], false),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["a", "b"]}]}),
                vec![("env", "b")],
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["a"]}]}),
                vec![],
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["a"]}]}),
                vec![("env", "a")],
                false,
            ),
            (json!({"matchExpressions": [{"key": "env", "operator": "Exists"}]}), vec![("env", "")], true),
            (json!({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}), vec![], true),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}),
                vec![("env", "x")],
                false,
            ),
            (
                json!({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}),
                vec![("a", "1")],
                false,
            ),
        ];
        for (json, pairs, expected) in cases {
            let compiled = selector(json.clone());
            assert_eq!(compiled.matches(&labels(&pairs)), expected, "{json} on {pairs:?}");
        }
    }

    #[test]
    fn displays_like_kubectl() {
        let compiled = selector(serde_json::json!({"matchLabels": {"env": "prod"},
            "matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]}));
        assert_eq!(compiled.to_string(), "env in (prod),!legacy");
    }
}
