//! `replay --export DIR`: recorded requests as AdmissionReview files that `review` reads, so a
//! live request becomes a test case. Files 0600 in a directory made 0700, named after the
//! request's kind, namespace, name and uid in safe characters only.

use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{json, Value};

/// Each part of a file name is cut to this many characters.
const MAX_PART_CHARS: usize = 63;

/// Makes `dir` (0700) if missing.
pub(crate) fn prepare(dir: &Path) -> anyhow::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create the export directory {}", dir.display()))
}

/// Writes the request of `review` (a recorded AdmissionReview) into `dir` as an
/// `admission.k8s.io/v1` AdmissionReview; the path written.
pub(crate) fn write(dir: &Path, review: &Value) -> anyhow::Result<PathBuf> {
    let request = &review["request"];
    let path = dir.join(file_name(request));
    let fixture = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    });
    let mut text = serde_json::to_vec_pretty(&fixture).context("the review could not be encoded")?;
    text.push(b'\n');
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    // A file that was there already keeps its mode through `open`: made private here.
    file.set_permissions(fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", path.display()))?;
    file.write_all(&text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// `KIND-NAMESPACE-NAME-UID.json`, lower case, `[a-z0-9._-]` only (empty parts left out).
fn file_name(request: &Value) -> String {
    let part = |value: &Value| {
        let text: String = value
            .as_str()
            .unwrap_or_default()
            .chars()
            .map(|c| c.to_ascii_lowercase())
            .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' { c } else { '_' })
            .take(MAX_PART_CHARS)
            .collect();
        // No name begins with a dot: `..` or a hidden file.
        text.trim_start_matches('.').to_owned()
    };
    let parts = [&request["kind"]["kind"], &request["namespace"], &request["name"], &request["uid"]];
    let mut name: Vec<String> = parts.into_iter().map(part).filter(|p| !p.is_empty()).collect();
    if name.is_empty() {
        name.push("review".to_owned());
    }
    name.join("-") + ".json"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_and_files_private() {
        let request = json!({"uid": "705ab4f5-6393-11e8", "kind": {"kind": "Pod"}, "namespace": "default", "name": "../../etc/passwd x"});
        assert_eq!(file_name(&request), "pod-default-_.._etc_passwd_x-705ab4f5-6393-11e8.json");
        assert_eq!(file_name(&json!({"name": "..hidden"})), "hidden.json");
        assert_eq!(file_name(&json!({})), "review.json");
        assert_eq!(file_name(&json!({"name": "n".repeat(300)})).len(), MAX_PART_CHARS + 5);

        let dir = tempfile::tempdir().unwrap();
        let exported = dir.path().join("fixtures");
        prepare(&exported).unwrap();
        let review = json!({"apiVersion": "admission.k8s.io/v1beta1", "request": request});
        let path = write(&exported, &review).unwrap();
        assert_eq!(path.parent(), Some(exported.as_path()));
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&exported), mode(&path)), (0o700, 0o600));
        let written: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(written["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(written["request"], review["request"]);
    }
}
