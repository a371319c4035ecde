//! The object as it travels the mutating chain: raw JSON until a stage needs a tree, and
//! patched where it can be as text.
//!
//! A patch of `add`, `remove` and `replace` operations (what webhooks send) is applied to the
//! object's text: each operation's container is found along its path without parsing the rest
//! (`object/text.rs`), parsed alone, patched as `patch.rs` patches it, and its encoding spliced
//! back in place; the next webhook is sent that text. Any other patch, or one that fails
//! there, is applied to a tree of the whole object, parsed once and patched in place, which
//! gives Go's error texts.
//!
//! Three costs a naive chain pays per webhook are avoided. The object is neither parsed whole
//! nor re-encoded for a patch that writes to a few small containers. Whether a patch changed
//! the object is decided by comparing only the containers its operations write to, not the
//! whole object. And the one patch returned to the API server is the concatenation of the
//! applied patches' writing operations, which replayed in order on the received object give
//! the final object exactly (the API server applies it with the same evanphx/json-patch v4
//! semantics as `patch.rs`), instead of a diff of two whole trees.

mod replace;
mod snapshot;
mod text;

use std::cell::OnceCell;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::Value;
use tokio::time::Instant;

use crate::config::selector::{self, Labels};
use crate::patch::{ApplyError, Patch, Step};
use snapshot::Snapshot;
use text::Found;

/// The request's `object` (current) with what is needed to answer with one combined patch,
/// and the labels object selectors look at, found once rather than once per webhook.
#[derive(Debug)]
pub(crate) struct ObjectState<'a> {
    /// The object as received; `None` for a null object (DELETE).
    received: Option<&'a RawValue>,
    /// The request's `oldObject`, which patches never change.
    old: Option<&'a RawValue>,
    /// Labels of the current object (`None` inside: no object, or no metadata).
    labels: OnceCell<Option<Labels>>,
    /// Labels of the old object.
    old_labels: OnceCell<Option<Labels>>,
    /// The old object as a tree, parsed once for whoever needs it first (the CEL `oldObject`
    /// of matchConditions and of policies, the policies' selectors).
    old_tree: OnceCell<Option<Value>>,
    /// The current object as a tree, once some stage needed it (`None` again when a patch
    /// changes the text).
    tree: Option<Value>,
    /// The current object's text after a patch applied to the text, until a webhook needs it
    /// as a [`RawValue`] (`encoded`).
    spliced: Option<String>,
    /// Whether some patch changed the object since it was received.
    changed: bool,
    /// The writing operations of every patch that changed the object, in order, as JSON
    /// objects separated by commas: the combined patch without its brackets.
    writes: String,
    /// Encoding of `tree` after a change, made when a webhook next needs the bytes.
    encoded: Option<Box<RawValue>>,
    /// The most bytes a patched object may encode to (`maxPatchedObjectBytes`).
    size_limit: u64,
    /// At least the current object's encoded length: exact when measured, otherwise the last
    /// measure plus every applied patch's [`Patch::growth_bound`], so that the object is only
    /// encoded to be measured when it may be near the limit.
    size_bound: u64,
}

/// Why the object could not be patched: both become internal errors (§9.3).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PatchError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("couldn't decode the patched object: {0}")]
    Decode(String),
    /// A patch made the object larger than `maxPatchedObjectBytes`.
    #[error("the patched object is {size} bytes, more than the {limit} bytes admission-gateway allows (maxPatchedObjectBytes)")]
    TooLarge { size: u64, limit: u64 },
    /// The review's deadline came before the patch was applied; the object is as it was
    /// before the patch. Judged by the webhook's `failurePolicy` (`mutate.rs`).
    #[error("admission-gateway could not apply the patch before the review's deadline ({applied} of {operations} operations applied)")]
    OutOfTime { applied: usize, operations: usize },
}

/// A patch of more operations than this is applied to a tree of the object, not to its text:
/// each operation on the text scans and copies the text (`apply_to_text`), so the text path is
/// linear only for a bounded number of operations, and beyond a few the one parse and encoding
/// of the tree cost less: on the 10 KB Pod the two cross between 4 and 8 label additions
/// (`cargo bench -- combined-patch/one-patch`, `benches/README.md`).
const MOST_TEXT_STEPS: usize = 4;

/// Operations applied to a tree between two looks at the clock.
const OPS_PER_LOOK: usize = 8;

/// The longest a patch is applied before the other reviews on the thread get a turn.
const SLICE: Duration = Duration::from_millis(1);

impl<'a> ObjectState<'a> {
    pub(crate) fn new(received: Option<&'a RawValue>, old: Option<&'a RawValue>) -> Self {
        Self {
            received: received.filter(|raw| raw.get() != "null"),
            old,
            labels: OnceCell::new(),
            old_labels: OnceCell::new(),
            old_tree: OnceCell::new(),
            tree: None,
            spliced: None,
            changed: false,
            writes: String::new(),
            encoded: None,
            size_limit: crate::config::settings::DEFAULT_MAX_PATCHED_OBJECT_BYTES,
            size_bound: received.map_or(0, |raw| raw.get().len() as u64),
        }
    }

    /// Bounds the size of the patched object: a patch that makes it encode to more than
    /// `bytes` fails with [`PatchError::TooLarge`].
    pub(crate) fn limited_to(mut self, bytes: u64) -> Self {
        self.size_limit = bytes;
        self
    }

    pub(crate) fn is_null(&self) -> bool {
        self.received.is_none()
    }

    /// Whether a patch has changed the object since it was received.
    pub(crate) fn changed(&self) -> bool {
        self.changed
    }

    /// The current object's JSON, as sent to the next webhook.
    pub(crate) fn raw(&mut self) -> Option<&RawValue> {
        if !self.changed() {
            return self.received;
        }
        if self.encoded.is_none() {
            self.encoded = match self.spliced.take() {
                // Checked as it becomes a RawValue: a splice gone wrong never reaches a webhook.
                Some(text) => RawValue::from_string(text).ok().or_else(|| self.replayed_raw()),
                // A serde_json::Value always encodes.
                None => serde_json::value::to_raw_value(self.tree.as_ref()?).ok(),
            };
        }
        self.encoded.as_deref()
    }

    /// The current object's text, unless it is held only as a tree.
    fn text(&self) -> Option<&str> {
        if !self.changed {
            return self.received.map(RawValue::get);
        }
        self.spliced.as_deref().or(self.encoded.as_deref().map(RawValue::get))
    }

    /// The current object's labels; `None` when there is no object or it has no metadata
    /// (options kinds on CONNECT), which no object selector matches (§4.4).
    pub(crate) fn labels(&self) -> Option<&Labels> {
        self.labels.get_or_init(|| labels_of(self.tree.as_ref(), self.text())).as_ref()
    }

    /// The old object's labels, on the same terms.
    pub(crate) fn old_labels(&self) -> Option<&Labels> {
        self.old_labels.get_or_init(|| labels_of(None, self.old.map(RawValue::get))).as_ref()
    }

    /// The old object as a tree, parsed on first use; `None` when there is none (or it does
    /// not parse, which a decoded review rules out).
    pub(crate) fn old_tree(&self) -> Option<&Value> {
        self.old_tree.get_or_init(|| self.old.and_then(|raw| serde_json::from_str(raw.get()).ok())).as_ref()
    }

    /// The current object as a tree.
    pub(crate) fn tree(&mut self) -> Option<&Value> {
        self.ensure_tree();
        self.tree.as_ref()
    }

    fn ensure_tree(&mut self) {
        if self.tree.is_none() {
            // The review decoded, and splices are of encoded values, so the text is valid JSON.
            self.tree = self.text().and_then(|text| serde_json::from_str(text).ok());
            if self.tree.is_none() && self.changed {
                self.tree = self.replayed();
            }
        }
    }

    /// The current object rebuilt from the received one and the writes applied so far, which
    /// replay to it exactly (`combined_patch`). Only for a spliced text that does not read
    /// back, which would be a bug in `object/text.rs`: the object is then never sent or
    /// judged wrong.
    fn replayed(&self) -> Option<Value> {
        tracing::error!("a patched object's text did not read back: rebuilt from the received object and its patches (a bug)");
        let mut tree: Value = serde_json::from_str(self.received?.get()).ok()?;
        Patch::decode(&self.combined_patch()?).ok()?.apply(&mut tree).ok()?;
        Some(tree)
    }

    fn replayed_raw(&mut self) -> Option<Box<RawValue>> {
        self.tree = self.replayed();
        serde_json::value::to_raw_value(self.tree.as_ref()?).ok()
    }

    /// Applies a webhook's patch in place; returns whether it changed the object (JSON
    /// equality of the object before and after). On error the object may be partly patched:
    /// the request then fails, and the object is not used again. A patch that leaves the
    /// object larger than its limit ([`ObjectState::limited_to`]) is an error too.
    ///
    /// Time is linear in the sizes of the patch and the object. A long patch lets other work
    /// on the thread run every [`SLICE`], and stops at `deadline` with
    /// [`PatchError::OutOfTime`], leaving the object as it was before the patch.
    pub(crate) async fn apply(
        &mut self,
        patch: &Patch,
        deadline: Option<Instant>,
    ) -> Result<bool, PatchError> {
        // A few operations on the text, when it is held (not only a tree: after a whole-tree
        // patch no webhook has been sent yet); more on a tree parsed once.
        if patch.len() <= MOST_TEXT_STEPS && self.text().is_some() {
            if let Some(applied) = patch.steps().and_then(|steps| self.apply_to_text(patch, &steps)) {
                return applied;
            }
        }
        self.apply_to_tree(patch, deadline).await
    }

    /// [`ObjectState::apply`] without a deadline, run to its end on this thread (fuzzing,
    /// benches, tests: outside any runtime, its yields return at once).
    pub(crate) fn apply_now(&mut self, patch: &Patch) -> Result<bool, PatchError> {
        run_now(self.apply(patch, None))
    }

    /// [`ObjectState::apply_now`] on a tree whatever the patch (the benches weigh the text
    /// path against it: [`MOST_TEXT_STEPS`]).
    pub(crate) fn apply_now_to_tree(&mut self, patch: &Patch) -> Result<bool, PatchError> {
        run_now(self.apply_to_tree(patch, None))
    }

    /// [`ObjectState::apply`] on a tree of the whole object, parsed once.
    async fn apply_to_tree(&mut self, patch: &Patch, deadline: Option<Instant>) -> Result<bool, PatchError> {
        if self.text().is_none() {
            // Held only as a tree: its text first, the object as it was should the patch not
            // finish in time. (A serde_json::Value always encodes.)
            self.encoded = self.tree.as_ref().and_then(|tree| serde_json::value::to_raw_value(tree).ok());
        }
        self.ensure_tree();
        let Some(mut tree) = self.tree.take() else {
            return Err(PatchError::Decode("no object".into()));
        };
        let before = Snapshot::of(&tree, &patch.written_containers());
        let mut application = patch.application();
        let mut slice_began = Instant::now();
        loop {
            application.run(&mut tree, OPS_PER_LOOK)?;
            if application.is_done() {
                break;
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                // The tree is dropped: the text still holds the object as it was.
                return Err(PatchError::OutOfTime {
                    applied: application.applied(),
                    operations: patch.len(),
                });
            }
            if now.duration_since(slice_began) >= SLICE {
                tokio::task::yield_now().await;
                slice_began = Instant::now();
            }
        }
        let tree = self.tree.insert(tree);
        if !tree.is_object() {
            return Err(PatchError::Decode(format!(
                "the patched object is not a JSON object: {}",
                kind_of(tree)
            )));
        }
        if before.unchanged_in(tree) {
            return Ok(false);
        }
        patch.push_writes(&mut self.writes);
        self.changed = true;
        self.encoded = None;
        self.spliced = None;
        self.labels = OnceCell::new();
        self.size_bound = self.size_bound.saturating_add(patch.growth_bound());
        if self.size_bound > self.size_limit {
            // Near the limit: measure. The encoding is kept for the next webhook.
            let encoded =
                serde_json::value::to_raw_value(tree).map_err(|e| PatchError::Decode(e.to_string()))?;
            self.size_bound = encoded.get().len() as u64;
            self.encoded = Some(encoded);
            if self.size_bound > self.size_limit {
                return Err(PatchError::TooLarge { size: self.size_bound, limit: self.size_limit });
            }
        }
        Ok(true)
    }

    /// Applies `steps` (the operations of `patch`) to the object's text, each to its container
    /// alone: found along its path, parsed, patched, encoded and spliced back. `None`, with
    /// nothing changed, where this does not apply — the object is held only as a tree, a step
    /// writes to the object itself, its container is not found or the step fails there — and
    /// the whole-tree path decides (and words any error as Go does).
    fn apply_to_text(&mut self, patch: &Patch, steps: &[Step]) -> Option<Result<bool, PatchError>> {
        let before = self.text()?;
        let mut after: Option<String> = None;
        // With one step, whether it changed its container is known on the spot.
        let mut one_changed = false;
        for step in steps {
            if step.container.is_empty() {
                return None;
            }
            let current = after.as_deref().unwrap_or(before);
            let Found::Container(range) = text::locate(current, &step.container)? else {
                return None;
            };
            let mut container: Value = serde_json::from_str(current.get(range.clone())?).ok()?;
            let original = (steps.len() == 1).then(|| container.clone());
            step.apply(&mut container).ok()?;
            one_changed = original.is_some_and(|original| original != container);
            let encoded = serde_json::to_string(&container).ok()?;
            // `get` above checked the range against the text and its character boundaries.
            let mut spliced = String::with_capacity(current.len() - range.len() + encoded.len());
            spliced.push_str(&current[..range.start]);
            spliced.push_str(&encoded);
            spliced.push_str(&current[range.end..]);
            after = Some(spliced);
        }
        let after = after?;
        let changed = if steps.len() == 1 {
            one_changed
        } else {
            // Every change lies inside the steps' containers: compare the outermost ones.
            let mut containers: Vec<&[String]> = steps.iter().map(|step| step.container.as_slice()).collect();
            containers.sort_by_key(|segments| segments.len());
            let mut outermost: Vec<&[String]> = Vec::new();
            for segments in containers {
                if !outermost.iter().any(|outer| segments.starts_with(outer)) {
                    outermost.push(segments);
                }
            }
            let mut changed = false;
            for segments in outermost {
                if container_at(before, segments)? != container_at(&after, segments)? {
                    changed = true;
                    break;
                }
            }
            changed
        };
        if !changed {
            return Some(Ok(false));
        }
        patch.push_writes(&mut self.writes);
        self.changed = true;
        self.tree = None;
        self.encoded = None;
        self.labels = OnceCell::new();
        self.size_bound = after.len() as u64;
        self.spliced = Some(after);
        if self.size_bound > self.size_limit {
            return Some(Err(PatchError::TooLarge { size: self.size_bound, limit: self.size_limit }));
        }
        Some(Ok(true))
    }

    /// One JSONPatch from the received object to the current one; `None` if no patch changed
    /// it.
    pub(crate) fn combined_patch(&self) -> Option<Vec<u8>> {
        if !self.changed || self.writes.is_empty() {
            return None;
        }
        let mut patch = Vec::with_capacity(self.writes.len() + 2);
        patch.push(b'[');
        patch.extend_from_slice(self.writes.as_bytes());
        patch.push(b']');
        Some(patch)
    }
}

/// Polls `future` on this thread until it is done; for futures that only yield, never wait.
fn run_now<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

/// The container `segments` lead to in `text`, as a tree: `Some(None)` where there is none,
/// `None` where the text does not scan.
fn container_at(text: &str, segments: &[String]) -> Option<Option<Value>> {
    match text::locate(text, segments)? {
        Found::Container(range) => Some(Some(serde_json::from_str(text.get(range)?).ok()?)),
        Found::Missing => Some(None),
    }
}

/// Labels of an object given as a tree or JSON text, without building a tree from the text.
/// The labels of the object held as a tree, else of its text (`config/selector.rs` reads both).
fn labels_of(tree: Option<&Value>, raw: Option<&str>) -> Option<Labels> {
    match tree {
        Some(tree) => selector::labels_of(tree),
        None => raw.filter(|raw| *raw != "null").and_then(selector::decoded_labels_of_text),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::snapshot::resolvable_prefix;
    use super::*;

    /// A repeatable stream of choices below a bound (xorshift64 from `seed`).
    fn choices(mut seed: u64) -> impl FnMut(usize) -> usize {
        move |bound| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % bound as u64) as usize
        }
    }

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    #[test]
    fn patches_accumulate_into_one_combined_patch() {
        let received = raw(r#"{"metadata":{"name":"p","labels":{"a":"1"}},"spec":{"x":1}}"#);
        let mut object = ObjectState::new(Some(&received), None);
        assert_eq!(object.raw().unwrap().get(), received.get(), "untouched object is forwarded as received");
        assert_eq!(object.labels().unwrap().get("b"), None);
        let add = Patch::decode(br#"[{"op":"add","path":"/metadata/labels/b","value":"2"}]"#).unwrap();
        assert!(object.apply_now(&add).unwrap());
        let same = Patch::decode(br#"[{"op":"add","path":"/metadata/labels/b","value":"2"}]"#).unwrap();
        assert!(!object.apply_now(&same).unwrap(), "re-adding an existing label changes nothing");
        let remove = Patch::decode(br#"[{"op":"remove","path":"/spec/x"}]"#).unwrap();
        assert!(object.apply_now(&remove).unwrap());
        assert_eq!(
            object.labels().unwrap().get("b").map(String::as_str),
            Some("2"),
            "labels follow the patches"
        );
        assert!(object.raw().unwrap().get().contains(r#""b":"2""#));
        let mut replayed: Value = serde_json::from_str(received.get()).unwrap();
        Patch::decode(&object.combined_patch().unwrap()).unwrap().apply(&mut replayed).unwrap();
        assert_eq!(&replayed, object.tree().unwrap());
    }

    #[test]
    fn labels_need_metadata() {
        assert_eq!(labels_of(None, Some(raw(r#"{"kind":"PodExecOptions","command":["sh"]}"#).get())), None);
        assert_eq!(labels_of(None, Some(raw(r#"{"metadata":{"name":"x"}}"#).get())), Some(Labels::new()));
        assert_eq!(labels_of(None, Some("null")), None);
        assert_eq!(labels_of(None, None), None);
    }

    #[test]
    fn an_unchanged_object_yields_no_patch() {
        let received = raw(r#"{"metadata":{}}"#);
        let object = ObjectState::new(Some(&received), None);
        assert_eq!(object.combined_patch(), None);
    }

    /// Whole-tree comparison is the definition of "changed"; the snapshot of written
    /// containers must agree with it on every patch, and the combined patch must replay to the
    /// final object.
    #[test]
    fn change_detection_agrees_with_whole_tree_equality() {
        let received = raw(r#"{"metadata":{"name":"p","labels":{"a":"1","01":"z"},"annotations":{"n":"x"}},
                "spec":{"list":[{"x":1},{"x":1},{"x":2}],"tags":["t","t"],"deep":{"k":{"v":[1,2]}}}}"#);
        let patches = [
            (r#"[{"op":"add","path":"/metadata/labels/b","value":"2"}]"#, true),
            (r#"[{"op":"add","path":"/metadata/labels/b","value":"2"}]"#, false),
            (
                r#"[{"op":"add","path":"/metadata/labels/c","value":"3"},{"op":"remove","path":"/metadata/labels/c"}]"#,
                false,
            ),
            (r#"[{"op":"move","from":"/spec/list/1","path":"/spec/list/0"}]"#, false),
            (r#"[{"op":"move","from":"/spec/list/2","path":"/spec/list/0"}]"#, true),
            (r#"[{"op":"replace","path":"/spec/list/01/x","value":5}]"#, true),
            (r#"[{"op":"add","path":"/spec/tags/-1","value":"u"}]"#, true),
            (
                r#"[{"op":"test","path":"/metadata/name","value":"p"},{"op":"copy","from":"/metadata/labels/a","path":"/metadata/labels/a"}]"#,
                false,
            ),
            (r#"[{"op":"copy","from":"/spec/deep","path":"/spec/copy"}]"#, true),
            (r#"[{"op":"replace","path":"/spec/deep/k/v/0","value":1}]"#, false),
            (r#"[{"op":"move","from":"/spec/copy","path":"/metadata/moved"}]"#, true),
            (r#"[{"op":"replace","path":"/metadata/labels/01","value":"y"}]"#, true),
            (r#"[{"op":"add","path":"a/spec/x","value":1}]"#, true),
            (r#"[{"op":"replace","path":"","value":{"metadata":{"name":"p"}}}]"#, true),
        ];
        let mut object = ObjectState::new(Some(&received), None);
        for (text, changes) in patches {
            let patch = Patch::decode(text.as_bytes()).unwrap();
            let before = object.tree().unwrap().clone();
            let changed = object.apply_now(&patch).unwrap();
            let after = object.tree().unwrap();
            assert_eq!(changed, &before != after, "{text}: snapshot and whole-tree equality disagree");
            assert_eq!(changed, changes, "{text}");
        }
        let combined = object.combined_patch().unwrap();
        assert!(!String::from_utf8_lossy(&combined).contains(r#""op":"test""#), "tests already passed");
        let mut replayed: Value = serde_json::from_str(received.get()).unwrap();
        Patch::decode(&combined).unwrap().apply(&mut replayed).unwrap();
        assert_eq!(&replayed, object.tree().unwrap());
    }

    /// The running bound is never below the true size, whatever the patch (numbers re-encode
    /// longer: `1e15`), and a patch crossing the limit fails with the measured size.
    #[test]
    fn the_size_bound_holds_and_the_limit_is_enforced() {
        let received = raw(r#"{"metadata":{"name":"p"},"spec":{"n":[1]}}"#);
        let patches = [
            r#"[{"op":"add","path":"/spec/n/-","value":[1e15,1e15,-1e15,1E15]}]"#,
            r#"[{"op":"copy","from":"/spec/n","path":"/spec/m"}]"#,
            r#"[{"op":"move","from":"/spec/m","path":"/spec/a-much-longer-member-name"}]"#,
            r#"[{"op":"replace","path":"/metadata/name","value":"\u00e9\u00e9"}]"#,
        ];
        let mut object = ObjectState::new(Some(&received), None);
        for text in patches {
            assert!(object.apply_now(&Patch::decode(text.as_bytes()).unwrap()).unwrap(), "{text}");
            let size = serde_json::to_string(object.tree().unwrap()).unwrap().len() as u64;
            assert!(object.size_bound >= size, "{text}: bound {} < size {size}", object.size_bound);
        }

        let mut object = ObjectState::new(Some(&received), None).limited_to(90);
        let add = |n: usize| format!(r#"[{{"op":"add","path":"/spec/x{n}","value":"{}"}}]"#, "y".repeat(20));
        assert!(object.apply_now(&Patch::decode(add(1).as_bytes()).unwrap()).unwrap());
        assert_eq!(object.size_bound, 70, "measured once near the limit: exact");
        match object.apply_now(&Patch::decode(add(2).as_bytes()).unwrap()) {
            Err(PatchError::TooLarge { size: 98, limit: 90 }) => {}
            other => panic!("{other:?}"),
        }
    }

    /// The text path against the whole-tree one (`Patch::apply` on a tree), over generated
    /// patches of every kind on an object with repeated and escaped names, nulls, scalars and
    /// arrays along the paths, one chain of patches applied after another: the same outcome,
    /// the same error text, the same object, the same "changed", and the combined patch
    /// replays to the object.
    #[test]
    fn patching_the_text_agrees_with_patching_the_tree() {
        let received = raw(concat!(
            r#"{"metadata":{"name":"p","labels":{"a":"1"},"labels":{"b":"2","a":"x"},"annotations":{"a/b":"s","x~y":"t"},"#,
            r#""n":null,"é":{"k":[1]}},"spec":{"containers":[{"name":"c","env":[{"name":"A"}]},{"name":"d"},[1,[2]]],"#,
            r#""s":"te\"x{t[","num":1.5e3,"empty":{},"list":[]},"status":null}"#
        ));
        let segments = [
            "metadata",
            "labels",
            "annotations",
            "a",
            "b",
            "a~1b",
            "x~0y",
            "n",
            "é",
            "k",
            "spec",
            "containers",
            "env",
            "name",
            "0",
            "1",
            "2",
            "3",
            "-",
            "01",
            "-1",
            "s",
            "num",
            "empty",
            "list",
            "status",
            "",
        ];
        let values = [r#""v""#, "1", "null", r#"{"k":"v"}"#, "[1,2]", "{}", r#""1""#, r#""x""#];
        let ops = [
            "add", "add", "add", "add", "remove", "remove", "replace", "replace", "replace", "test", "move",
            "copy",
        ];
        let mut next = choices(0x9e37_79b9_7f4a_7c15);
        let (mut by_text, mut failed) = (0, 0);
        for chain in 0..150 {
            let mut state = ObjectState::new(Some(&received), None);
            let mut tree: Value = serde_json::from_str(received.get()).unwrap();
            for _ in 0..8 {
                let operations: Vec<String> = (0..1 + next(2))
                    .map(|_| {
                        let op = ops[next(ops.len())];
                        let value = values[next(values.len())];
                        // Mostly a walk down the current object, so that most patches apply.
                        let mut pointer = || {
                            if next(6) == 0 {
                                let depth = 1 + next(4);
                                return (0..depth)
                                    .map(|_| format!("/{}", segments[next(segments.len())]))
                                    .collect();
                            }
                            let mut pointer = String::new();
                            let mut node = &tree;
                            loop {
                                let children: Vec<(String, &Value)> = match node {
                                    Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
                                    Value::Array(items) => {
                                        items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect()
                                    }
                                    _ => Vec::new(),
                                };
                                let last = if children.is_empty() || next(3) == 0 {
                                    let fresh =
                                        if node.is_array() { "-" } else { segments[next(segments.len())] };
                                    Some(fresh.to_owned())
                                } else {
                                    None
                                };
                                let (key, child) = match last {
                                    Some(key) => (key, None),
                                    None => {
                                        let (key, child) = &children[next(children.len())];
                                        (key.replace('~', "~0").replace('/', "~1"), Some(*child))
                                    }
                                };
                                pointer.push('/');
                                pointer.push_str(&key);
                                match child {
                                    Some(child) if child.is_object() || child.is_array() => {
                                        if pointer.len() > key.len() + 1 && next(2) == 0 {
                                            return pointer;
                                        }
                                        node = child;
                                    }
                                    _ => return pointer,
                                }
                            }
                        };
                        let (path, from) = (pointer(), pointer());
                        format!(r#"{{"op":"{op}","path":"{path}","from":"{from}","value":{value}}}"#)
                    })
                    .collect();
                let text = format!("[{}]", operations.join(","));
                let patch = Patch::decode(text.as_bytes()).unwrap();
                if next(4) != 0 {
                    // As the next webhook is sent it: the object held as text again.
                    state.raw();
                }
                let mut expected = tree.clone();
                let reference = patch.apply(&mut expected).map_err(|e| e.to_string());
                let outcome = state.apply_now(&patch);
                match (&reference, outcome) {
                    (Ok(()), Ok(changed)) => {
                        assert_eq!(changed, expected != tree, "chain {chain}, {text}: changed");
                        if changed && state.tree.is_none() {
                            by_text += 1;
                        }
                        assert_eq!(state.tree().unwrap(), &expected, "chain {chain}, {text}");
                        tree = expected;
                    }
                    (Err(want), Err(PatchError::Apply(got))) => {
                        assert_eq!(&got.to_string(), want, "chain {chain}, {text}");
                        failed += 1;
                        // A failed patch fails the review: the chain starts again.
                        state = ObjectState::new(Some(&received), None);
                        tree = serde_json::from_str(received.get()).unwrap();
                    }
                    (reference, outcome) => {
                        panic!("chain {chain}, {text}: tree {reference:?}, chain {outcome:?}")
                    }
                }
            }
            if let Some(combined) = state.combined_patch() {
                let mut replayed: Value = serde_json::from_str(received.get()).unwrap();
                Patch::decode(&combined).unwrap().apply(&mut replayed).unwrap();
                assert_eq!(&replayed, state.tree().unwrap(), "chain {chain}: the combined patch replays");
            }
            assert_eq!(
                serde_json::from_str::<Value>(state.raw().unwrap().get()).unwrap(),
                tree,
                "chain {chain}: sent"
            );
        }
        assert!(
            by_text >= 100 && failed >= 20,
            "both paths taken: {by_text} changed as text, {failed} failed"
        );
    }

    /// A spliced text that did not read back (a bug) is never sent: the object is rebuilt from
    /// the received one and the patches applied.
    #[test]
    fn a_spliced_text_that_does_not_read_back_is_rebuilt_from_the_patches() {
        let received = raw(r#"{"metadata":{"labels":{"a":"1"}}}"#);
        let mut object = ObjectState::new(Some(&received), None);
        let add = Patch::decode(br#"[{"op":"add","path":"/metadata/labels/b","value":"2"}]"#).unwrap();
        assert!(object.apply_now(&add).unwrap());
        assert!(object.spliced.is_some(), "applied to the text");
        object.spliced = Some(r#"{"metadata":{"labels":{"a":"1","b":"2"}"#.to_owned());
        assert_eq!(object.raw().unwrap().get(), r#"{"metadata":{"labels":{"a":"1","b":"2"}}}"#);
    }

    /// The longest resolvable prefix as it was first written, a pointer prefix at a time from
    /// the longest (quadratic in the pointer's depth): the oracle for the one walk that
    /// replaced it.
    fn resolvable_prefix_oracle<'p>(tree: &Value, pointer: &'p str) -> &'p str {
        let canonical = |pointer: &str| {
            pointer.split('/').skip(1).all(|segment| {
                let numeric = segment.trim_start_matches(['+', '-']);
                let signed = numeric.len() != segment.len();
                let is_number = !numeric.is_empty() && numeric.bytes().all(|b| b.is_ascii_digit());
                !(is_number && (signed || (numeric.len() > 1 && numeric.starts_with('0'))))
            })
        };
        let mut end = pointer.len();
        loop {
            let prefix = &pointer[..end];
            if canonical(prefix) && tree.pointer(prefix).is_some() {
                return prefix;
            }
            match prefix.rfind('/') {
                Some(cut) => end = cut,
                None => return "",
            }
        }
    }

    #[test]
    fn the_resolvable_prefix_is_the_longest_one_value_pointer_reads() {
        let tree: Value = serde_json::from_str(
            r#"{"a":{"b":[{"c":1},{"0":{"d":null}}],"x/y":{"~":2},"":{"":3},"+1":4,"01":5,"-":[6]}}"#,
        )
        .unwrap();
        let segments =
            ["a", "b", "0", "1", "2", "c", "d", "x~1y", "~0", "", "+1", "01", "-", "-1", "00", "1e0"];
        let mut next = choices(0x2545_f491_4f6c_dd1d);
        for _ in 0..5000 {
            let depth = next(6);
            let mut pointer: String =
                (0..depth).map(|_| format!("/{}", segments[next(segments.len())])).collect();
            if next(10) == 0 {
                pointer.insert(0, 'a');
            }
            assert_eq!(
                resolvable_prefix(&tree, &pointer),
                resolvable_prefix_oracle(&tree, &pointer),
                "{pointer}"
            );
        }
        assert_eq!(resolvable_prefix(&tree, "/a/b/1/0/d/e"), "/a/b/1/0/d");
        assert_eq!(resolvable_prefix(&tree, "/a/+1"), "/a");
    }

    /// Containers that are not inside one another but sort between one and what lies inside
    /// it (`/a!` between `/a` and `/a/b` as text): the snapshot keeps the outermost of each
    /// and sees a change in any.
    #[test]
    fn the_snapshot_keeps_every_outermost_container() {
        let received = raw(r#"{"a":{"b":{"k":1},"c":{"k":1}},"a!":{"k":1},"a0":{"k":1}}"#);
        let cases = [("/a!/k", true), ("/a0/k", true), ("/a/c/k", true), ("/a/b/k", true), ("/a!/k", false)];
        for (written, changes) in cases {
            // `/a/b` writes to `/a` itself, the same value.
            let patch: Vec<String> = ["/a/b", "/a/b/k", "/a!/k", "/a/c/k", "/a0/k"]
                .iter()
                .cycle()
                .take(5 * (MOST_TEXT_STEPS + 1))
                .map(|path| {
                    let value = match *path {
                        "/a/b" => r#"{"k":1}"#,
                        path if path == written && changes => "2",
                        _ => "1",
                    };
                    format!(r#"{{"op":"replace","path":"{path}","value":{value}}}"#)
                })
                .collect();
            let patch = Patch::decode(format!("[{}]", patch.join(",")).as_bytes()).unwrap();
            let mut object = ObjectState::new(Some(&received), None);
            assert_eq!(object.apply_now(&patch).unwrap(), changes, "{written}");
        }
    }

    /// A patch of many operations (more than the text path takes) of every kind, many
    /// containers among them: patched as `Patch::apply` patches, the change seen, the
    /// combined patch replaying to the object.
    #[test]
    fn a_patch_of_many_operations_is_applied_as_the_tree_applies_it() {
        let received = raw(r#"{"metadata":{"name":"p","labels":{"a":"1"}},"spec":{"list":[],"tags":["t"]}}"#);
        let mut operations = vec![r#"{"op":"test","path":"/metadata/name","value":"p"}"#.to_owned()];
        for i in 0..3000 {
            operations.push(format!(r#"{{"op":"add","path":"/metadata/labels/l{i}","value":"v{i}"}}"#));
            operations.push(format!(r#"{{"op":"add","path":"/spec/list/-","value":{{"i":{i}}}}}"#));
            operations.push(format!(r#"{{"op":"replace","path":"/spec/list/{i}/i","value":"{i}"}}"#));
            if i % 3 == 0 {
                operations.push(format!(r#"{{"op":"remove","path":"/metadata/labels/l{i}"}}"#));
                operations.push(format!(r#"{{"op":"copy","from":"/spec/tags","path":"/spec/list/{i}/t"}}"#));
                operations
                    .push(format!(r#"{{"op":"move","from":"/spec/list/{i}/t","path":"/spec/list/{i}/m"}}"#));
            }
        }
        let patch = Patch::decode(format!("[{}]", operations.join(",")).as_bytes()).unwrap();
        let mut expected: Value = serde_json::from_str(received.get()).unwrap();
        patch.apply(&mut expected).unwrap();

        let mut object = ObjectState::new(Some(&received), None);
        assert!(object.apply_now(&patch).unwrap());
        assert_eq!(object.tree().unwrap(), &expected);
        assert_eq!(object.labels().unwrap().len(), 2001, "labels follow the patch");
        let mut replayed: Value = serde_json::from_str(received.get()).unwrap();
        Patch::decode(&object.combined_patch().unwrap()).unwrap().apply(&mut replayed).unwrap();
        assert_eq!(replayed, expected);
        // Undone within the same patch: no change.
        let mut object = ObjectState::new(Some(&received), None);
        let undone: Vec<String> = (0..50)
            .flat_map(|i| {
                [
                    format!(r#"{{"op":"add","path":"/metadata/labels/x{i}","value":"v"}}"#),
                    format!(r#"{{"op":"remove","path":"/metadata/labels/x{i}"}}"#),
                ]
            })
            .collect();
        let undone = Patch::decode(format!("[{}]", undone.join(",")).as_bytes()).unwrap();
        assert!(!object.apply_now(&undone).unwrap());
        assert_eq!(object.combined_patch(), None);
    }

    fn labels_patch(count: usize) -> Patch {
        let operations: Vec<String> = (0..count)
            .map(|i| format!(r#"{{"op":"add","path":"/metadata/labels/l{i}","value":"v"}}"#))
            .collect();
        Patch::decode(format!("[{}]", operations.join(",")).as_bytes()).unwrap()
    }

    /// Past the deadline a long patch stops, and the object is as it was before it: as
    /// received, or as the patches before left it (also when held only as a tree).
    #[tokio::test]
    async fn a_patch_past_the_deadline_stops_and_leaves_the_object_as_it_was() {
        let received = raw(r#"{"metadata":{"name":"p","labels":{"a":"1"}}}"#);
        let past = Some(Instant::now());
        let long = labels_patch(100);

        let mut object = ObjectState::new(Some(&received), None);
        match object.apply(&long, past).await {
            Err(PatchError::OutOfTime { applied, operations: 100 }) => assert!(applied < 100, "{applied}"),
            other => panic!("{other:?}"),
        }
        assert!(!object.changed());
        assert_eq!(object.raw().unwrap().get(), received.get());
        assert_eq!(object.combined_patch(), None);

        // After a first patch applied to the tree, with no webhook sent since.
        let mut object = ObjectState::new(Some(&received), None);
        let first =
            Patch::decode(br#"[{"op":"move","from":"/metadata/labels/a","path":"/metadata/labels/b"}]"#)
                .unwrap();
        assert!(object.apply(&first, None).await.unwrap());
        let after_first = object.tree().unwrap().clone();
        assert!(matches!(object.apply(&long, past).await, Err(PatchError::OutOfTime { .. })));
        assert_eq!(object.tree().unwrap(), &after_first);
        assert_eq!(serde_json::from_str::<Value>(object.raw().unwrap().get()).unwrap(), after_first);
        assert_eq!(object.labels().unwrap().keys().collect::<Vec<_>>(), ["b"]);
        let mut replayed: Value = serde_json::from_str(received.get()).unwrap();
        Patch::decode(&object.combined_patch().unwrap()).unwrap().apply(&mut replayed).unwrap();
        assert_eq!(replayed, after_first, "the stopped patch is not in the combined patch");

        // With time left, the same patch applies.
        let later = Some(Instant::now() + Duration::from_secs(3600));
        assert!(object.apply(&long, later).await.unwrap());
        assert_eq!(object.labels().unwrap().len(), 101);
    }

    /// While a long patch is applied, other tasks of the thread get turns.
    #[tokio::test(flavor = "current_thread")]
    async fn a_long_patch_lets_other_work_on_the_thread_run() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let received = raw(r#"{"metadata":{"name":"p","labels":{}}}"#);
        let turns = Arc::new(AtomicUsize::new(0));
        let counting = tokio::spawn({
            let turns = turns.clone();
            async move {
                loop {
                    turns.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            }
        });
        // Long enough to pass several slices of SLICE on any machine, in any build.
        let long = labels_patch(200_000);
        let began = Instant::now();
        let mut object = ObjectState::new(Some(&received), None);
        assert!(object.apply(&long, None).await.unwrap());
        let took = began.elapsed();
        let turns = turns.load(Ordering::Relaxed);
        counting.abort();
        assert!(took < 2 * SLICE || turns >= 2, "{turns} turns for others in {took:?}");
        assert_eq!(object.labels().unwrap().len(), 200_000);
    }
}
