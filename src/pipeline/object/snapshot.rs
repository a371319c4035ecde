//! Copies of the containers a patch may write to, taken before it is applied to a tree, so
//! that whether the patch changed the object is a comparison of those alone.

use serde_json::Value;

/// Copies of the containers a patch may write to, taken before it is applied.
pub(super) struct Snapshot {
    /// (pointer, value there) for containers none of which lies inside another.
    containers: Vec<(String, Option<Value>)>,
}

impl Snapshot {
    /// `written` are the containers' pointers as the patch writes them. Each is taken at its
    /// longest prefix that names a value now in a form `Value::pointer` reads as Go does
    /// (array indices without sign or leading zero), so what the patch changes lies inside.
    pub(super) fn of(tree: &Value, written: &[String]) -> Self {
        let mut pointers: Vec<&str> =
            written.iter().map(|pointer| resolvable_prefix(tree, pointer)).collect();
        // In segment order, whatever lies inside a pointer follows it directly: one pass keeps
        // the outermost (a pairwise check would be quadratic in a patch of many containers).
        pointers.sort_unstable_by(|a, b| a.split('/').cmp(b.split('/')));
        let mut kept: Vec<&str> = Vec::new();
        for pointer in pointers {
            if !kept.last().is_some_and(|outer| inside(pointer, outer)) {
                kept.push(pointer);
            }
        }
        let containers =
            kept.into_iter().map(|pointer| (pointer.to_owned(), tree.pointer(pointer).cloned())).collect();
        Self { containers }
    }

    pub(super) fn unchanged_in(&self, tree: &Value) -> bool {
        self.containers.iter().all(|(pointer, before)| tree.pointer(pointer) == before.as_ref())
    }
}

/// The longest prefix of `pointer`, cut at a `/`, that names a value in `tree` through
/// segments `Value::pointer` and Go's json-patch read alike (no number with a sign or a
/// leading zero, which Go's `strconv.Atoi` reads as an index where `Value::pointer` does not).
/// One walk down the tree: linear in the pointer's length.
pub(super) fn resolvable_prefix<'p>(tree: &Value, pointer: &'p str) -> &'p str {
    if !pointer.starts_with('/') {
        return "";
    }
    let mut node = tree;
    let mut end = 0;
    for segment in pointer[1..].split('/') {
        let numeric = segment.trim_start_matches(['+', '-']);
        let signed = numeric.len() != segment.len();
        let is_number = !numeric.is_empty() && numeric.bytes().all(|b| b.is_ascii_digit());
        if is_number && (signed || (numeric.len() > 1 && numeric.starts_with('0'))) {
            break;
        }
        // As `Value::pointer` reads a segment.
        let key = segment.replace("~1", "/").replace("~0", "~");
        let child = match node {
            Value::Object(map) => map.get(&key),
            Value::Array(items) => key.parse::<usize>().ok().and_then(|index| items.get(index)),
            _ => None,
        };
        let Some(child) = child else { break };
        node = child;
        end += 1 + segment.len();
    }
    &pointer[..end]
}

/// Whether `pointer` names `outer` or something inside it.
fn inside(pointer: &str, outer: &str) -> bool {
    pointer == outer || (pointer.starts_with(outer) && pointer.as_bytes().get(outer.len()) == Some(&b'/'))
}
