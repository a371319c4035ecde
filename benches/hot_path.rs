//! The CPU cost of each step of a review's path through the gateway, on the crate's own code
//! (`admission_gateway::bench`): decoding the received review, matching a fleet, applying a
//! patch, the mutating chain's combined patch, encoding the answer and a webhook's request.
//! `benches/README.md` says how to run them and what one run on the project's machine gave.
//!
//! Inputs are the fixtures of `tests/fixtures/reviews/` and the load test's 10 KB Pod review
//! (`pod-create.json` compact, padded with annotations, as `loadtest/compare.sh` makes it).

use std::hint::black_box;
use std::path::{Path, PathBuf};

use admission_gateway::bench;
use admission_gateway::patch::Patch;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde_json::value::RawValue;
use serde_json::{json, Value};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/reviews");

/// Every fixture review, compact as the API server sends it, by file stem.
fn fixtures() -> Vec<(String, Vec<u8>)> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(FIXTURES)
        .expect("tests/fixtures/reviews")
        .map(|entry| entry.expect("fixture entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|path| {
            let stem = path.file_stem().unwrap_or_default().to_string_lossy().into_owned();
            (stem, compact(&std::fs::read(&path).expect("fixture")))
        })
        .collect()
}

fn compact(json: &[u8]) -> Vec<u8> {
    let value: Value = serde_json::from_slice(json).expect("fixture JSON");
    serde_json::to_vec(&value).expect("encode")
}

/// `pod-create.json` padded with annotations to about `size` bytes, as the load test's review.
fn padded_pod(size: usize) -> Vec<u8> {
    let mut review: Value =
        serde_json::from_slice(&std::fs::read(Path::new(FIXTURES).join("pod-create.json")).expect("fixture"))
            .expect("fixture JSON");
    let mut notes = serde_json::Map::new();
    let (mut current, mut i) = (serde_json::to_vec(&review).expect("encode").len(), 0);
    while current < size {
        let key = format!("loadtest.example.com/pad-{i:06}");
        let value = "x".repeat((size.saturating_sub(current + key.len() + 6)).clamp(1, 200));
        current += key.len() + value.len() + 6;
        notes.insert(key, json!(value));
        i += 1;
    }
    review["request"]["object"]["metadata"]["annotations"] = Value::Object(notes);
    serde_json::to_vec(&review).expect("encode")
}

/// The received object of a review, raw.
fn object_of(body: &[u8]) -> Box<RawValue> {
    let value: Value = serde_json::from_slice(body).expect("review JSON");
    serde_json::value::to_raw_value(&value["request"]["object"]).expect("object")
}

/// The mock's label webhook's patch (`loadtest/mock_webhook.rs`), `n` of them with distinct keys.
fn label_patches(n: usize) -> Vec<Patch> {
    (0..n)
        .map(|i| {
            let patch = format!(r#"[{{"op":"add","path":"/metadata/labels/team-{i}","value":"a"}}]"#);
            Patch::decode(patch.as_bytes()).expect("patch")
        })
        .collect()
}

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");
    let mut inputs = fixtures();
    inputs.push(("pod-10k".into(), padded_pod(10 * 1024)));
    for (name, body) in &inputs {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(format!("review/{name}"), |b| {
            b.iter(|| bench::decode(black_box(body)).expect("decodes"))
        });
        // Baseline: the same bytes into a whole serde_json::Value tree.
        group.bench_function(format!("value/{name}"), |b| {
            b.iter(|| serde_json::from_slice::<Value>(black_box(body)).expect("JSON"))
        });
    }
    group.finish();
}

/// A fleet of `n` validating webhooks as the load test's fleet-1000 scenario: half on
/// deployments, half on pods with an objectSelector that does not match, the last one (in the
/// API server's order) matching the Pod review.
fn fleet(n: usize) -> (tempfile::TempDir, bench::Fleet) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut yaml = String::new();
    for i in 0..n {
        let last = i + 1 == n;
        let (resource, selector) = match (last, i % 2) {
            (true, _) => ("pods", "{}".to_owned()),
            (false, 0) => ("deployments", "{}".to_owned()),
            (false, _) => ("pods", format!("{{matchLabels: {{loadtest-fleet: other-{i}}}}}")),
        };
        let group = if resource == "deployments" { "apps" } else { "" };
        yaml.push_str(&format!(
            "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata: {{name: fleet-{i:05}}}\nwebhooks:\n- name: hook-{i}.bench.example.com\n  \
             clientConfig: {{url: \"https://127.0.0.1:9/validate\"}}\n  \
             rules: [{{operations: [CREATE], apiGroups: [\"{group}\"], apiVersions: [v1], resources: [{resource}]}}]\n  \
             objectSelector: {selector}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"
        ));
    }
    let path = dir.path().join("fleet.yaml");
    std::fs::write(&path, yaml).expect("write fleet");
    let fleet = bench::fleet(&[path]).expect("fleet loads");
    (dir, fleet)
}

fn matching(c: &mut Criterion) {
    let mut group = c.benchmark_group("matching");
    let review = bench::decode(&padded_pod(10 * 1024)).expect("decodes");
    for n in [10, 1000] {
        let (_dir, fleet) = fleet(n);
        assert_eq!(bench::matching_validating(&fleet, &review), 1, "one webhook of {n} matches");
        group.bench_function(format!("validating/{n}"), |b| {
            b.iter(|| bench::matching_validating(black_box(&fleet), black_box(&review)))
        });
    }
    group.finish();
}

/// One patch of `n` operations, each adding a distinct label.
fn labels_patch(n: usize) -> Patch {
    let operations: Vec<String> =
        (0..n).map(|i| format!(r#"{{"op":"add","path":"/metadata/labels/many-{i}","value":"a"}}"#)).collect();
    Patch::decode(format!("[{}]", operations.join(",")).as_bytes()).expect("patch")
}

fn patch_apply(c: &mut Criterion) {
    let mut group = c.benchmark_group("patch");
    let object: Value = serde_json::from_str(object_of(&padded_pod(10 * 1024)).get()).expect("object");
    let patches = [
        ("label", label_patches(1).remove(0)),
        (
            "six-ops",
            Patch::decode(
                br#"[{"op":"add","path":"/metadata/labels/team","value":"a"},
                {"op":"add","path":"/metadata/annotations/stamp","value":"x"},
                {"op":"replace","path":"/spec/containers/0/image","value":"nginx:1.27"},
                {"op":"add","path":"/spec/containers/0/env","value":[{"name":"A","value":"1"}]},
                {"op":"copy","from":"/metadata/labels/team","path":"/metadata/labels/owner"},
                {"op":"remove","path":"/metadata/annotations/stamp"}]"#,
            )
            .expect("patch"),
        ),
    ];
    group.bench_function("clone-only/pod-10k", |b| b.iter(|| black_box(&object).clone()));
    for (name, patch) in &patches {
        group.bench_function(format!("apply/{name}/pod-10k"), |b| {
            b.iter_batched_ref(
                || object.clone(),
                |doc| patch.apply(doc).expect("applies"),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

fn combined_patch(c: &mut Criterion) {
    let mut group = c.benchmark_group("combined-patch");
    let object = object_of(&padded_pod(10 * 1024));
    for n in [1, 5] {
        let patches = label_patches(n);
        assert!(bench::combined_patch(&object, &patches).is_some());
        group.bench_function(format!("chain-of-{n}/pod-10k"), |b| {
            b.iter(|| bench::combined_patch(black_box(&object), black_box(&patches)))
        });
    }
    // One patch of n operations, each adding a label: on the object's text (n ≤ 8, as the
    // chain takes it) and on a tree, to place the threshold; and patches of many operations.
    for n in [1, 2, 4, 8, 16, 32] {
        let patch = labels_patch(n);
        for (path, on_tree) in [("text", false), ("tree", true)] {
            if !on_tree && n > 8 {
                continue;
            }
            assert_eq!(bench::patch_object(&object, &patch, on_tree), Some(true));
            group.bench_function(format!("one-patch-of-{n}/{path}/pod-10k"), |b| {
                b.iter(|| bench::patch_object(black_box(&object), black_box(&patch), on_tree))
            });
        }
    }
    for n in [1_000, 10_000, 100_000] {
        let patch = labels_patch(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("one-patch-of-{n}/pod-10k"), |b| {
            b.iter(|| bench::patch_object(black_box(&object), black_box(&patch), false))
        });
    }
    group.throughput(Throughput::Elements(1));
    // Baseline: the object parsed into a tree and nothing else.
    group.bench_function("parse-only/pod-10k", |b| {
        b.iter(|| serde_json::from_str::<Value>(black_box(object.get())).expect("JSON"))
    });
    group.finish();
}

fn encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode");
    let review = bench::decode(&padded_pod(10 * 1024)).expect("decodes");
    let patch = br#"[{"op":"add","path":"/metadata/labels/team","value":"a"}]"#.to_vec();
    group.bench_function("answer/allowed", |b| b.iter(|| bench::encode_answer(black_box(&review), None)));
    group.bench_function("answer/patched", |b| {
        b.iter_batched(|| patch.clone(), |p| bench::encode_answer(&review, Some(p)), BatchSize::SmallInput)
    });
    group.bench_function("webhook-request/pod-10k", |b| {
        b.iter(|| bench::encode_webhook_request(black_box(&review)))
    });
    group.bench_function("webhook-request-anew/pod-10k", |b| {
        b.iter(|| bench::encode_webhook_request_anew(black_box(&review)))
    });
    group.finish();
}

/// What recording a review costs off its path: the writer's line (the request checked as JSON
/// and copied in, the answer and webhooks serialized), against the check alone; and the
/// compressor's gzip of a file's lines, per line. The lines are the load test's: the same
/// 10 KB review over and over, which compresses better than a real recording.
fn recording(c: &mut Criterion) {
    let mut group = c.benchmark_group("recording");
    let body = bytes::Bytes::from(padded_pod(10 * 1024));
    let mut line = Vec::with_capacity(64 << 10);
    group.throughput(Throughput::Elements(1));
    group.bench_function("line/pod-10k", |b| {
        b.iter(|| {
            line.clear();
            bench::record_line(black_box(body.clone()), &mut line).expect("encodes")
        })
    });
    // Baseline: only the received bytes read again as JSON.
    group.bench_function("check-only/pod-10k", |b| {
        b.iter(|| serde_json::from_slice::<&RawValue>(black_box(&body)).expect("JSON"))
    });
    const LINES: usize = 100;
    let mut lines = Vec::new();
    for _ in 0..LINES {
        bench::record_line(body.clone(), &mut lines).expect("encodes");
    }
    group.throughput(Throughput::Elements(LINES as u64));
    group.bench_function("gzip-per-line/pod-10k", |b| b.iter(|| bench::record_gzip(black_box(&lines))));
    group.finish();
}

criterion_group!(benches, decode, matching, patch_apply, combined_patch, encode, recording);
criterion_main!(benches);
