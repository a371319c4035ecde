//! The Status a policy's denial fails the request with (k8s.io/apiserver
//! `pkg/admission/plugin/policy/validating/dispatcher.go`, `pkg/admission/errors.go`): the
//! reason's code, `<resource>[.<group>] "<name>" is forbidden: …`, and one cause.

use super::*;

/// The Status a denial fails the request with: `reason` → code, the resource, the name.
pub(super) fn denial(review: &IncomingReview, inner: &str, reason: Option<&str>) -> Status {
    let reason = reason.unwrap_or("Invalid");
    let code = match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    };
    // `attr.GetResource()`: the resource as requested.
    let resource = review.request.request_resource.as_ref().unwrap_or(review.resource());
    let qualified = if resource.group.is_empty() {
        resource.resource.clone()
    } else {
        format!("{}.{}", resource.resource, resource.group)
    };
    let name = name_of(review);
    let mut details = serde_json::Map::new();
    for (key, value) in
        [("name", name.as_str()), ("group", resource.group.as_str()), ("kind", resource.resource.as_str())]
    {
        if !value.is_empty() {
            details.insert(key.to_owned(), json!(value));
        }
    }
    details.insert("causes".to_owned(), json!([{"message": inner}]));
    Status {
        metadata: None,
        status: Some("Failure".to_owned()),
        message: Some(format!("{qualified} {} is forbidden: {inner}", crate::go::strconv::quote(&name))),
        reason: Some(reason.to_owned()),
        details: Some(Value::Object(details)),
        code: Some(code),
    }
}

/// The request's name, else the object's name or generateName, else `Unknown`.
pub(super) fn name_of(review: &IncomingReview) -> String {
    let r = &review.request;
    if !r.name.is_empty() {
        return r.name.clone();
    }
    let object: Option<Value> = r
        .object
        .value
        .as_deref()
        .or(r.old_object.value.as_deref())
        .and_then(|raw| serde_json::from_str(raw.get()).ok());
    let Some(metadata) = object.as_ref().and_then(|o| o.get("metadata")) else {
        return "Unknown/errorGettingName".to_owned();
    };
    for field in ["name", "generateName"] {
        if let Some(value) = metadata.get(field).and_then(Value::as_str).filter(|v| !v.is_empty()) {
            return value.to_owned();
        }
    }
    "Unknown".to_owned()
}
