//! One evaluation at 100, 1,000 and 10,000 entries: the work is linear in the entries, however
//! often the expression names the large value. Each group's baseline, in the same run, is the
//! conversion of the same object from JSON (what every review pays once): evaluation should
//! stay a small multiple of it at every size.
//!
//! ```sh
//! cargo bench --locked -p cel-engine --bench evaluate
//! ```

use std::hint::black_box;

use cel_engine::eval::{Limits, Meter};
use cel_engine::value::from_json;
use cel_engine::{compile, library, Declarations, NoHost};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::{json, Map, Value};

fn labelled(n: usize) -> Value {
    let labels: Map<String, Value> = (0..n).map(|i| (format!("label-{i}"), json!(format!("v{i}")))).collect();
    json!({"metadata": {"name": "web", "labels": labels}})
}

fn bench(c: &mut Criterion) {
    let registry = library::standard();
    let declarations = Declarations::with_variables(&["object"]);
    let cases = [
        ("labels-all", "object.metadata.labels.all(k, object.metadata.labels[k] != '')"),
        ("labels-startswith", "object.metadata.labels.all(k, object.metadata.labels[k].startsWith('v'))"),
        (
            "labels-map-filter",
            "object.metadata.labels.map(k, object.metadata.labels[k]).filter(v, v.size() > 1).size() >= 0",
        ),
    ];
    for (name, source) in cases {
        let program = compile(source, &declarations, &registry).expect("compiles");
        let mut group = c.benchmark_group(name);
        for n in [100, 1_000, 10_000] {
            let json = labelled(n);
            let object = vec![from_json(&json)];
            group.bench_with_input(BenchmarkId::new("evaluate", n), &n, |b, _| {
                b.iter(|| {
                    let mut meter = Meter::new(Limits { cost: u64::MAX, deadline: None });
                    black_box(program.evaluate(&object, &NoHost, &mut meter).expect("evaluates"))
                })
            });
            group.bench_with_input(BenchmarkId::new("convert-baseline", n), &n, |b, _| {
                b.iter(|| black_box(from_json(&json)))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
