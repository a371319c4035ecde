//! Every expectation here was checked against evanphx/json-patch v4.13.0 itself (Go).

use serde_json::{json, Value};

use super::*;

/// Decodes `patch` and applies it to `doc`: the patched document, or the error's text.
fn patched(doc: &str, patch: &str) -> Result<Value, String> {
    let patch = Patch::decode(patch.as_bytes()).map_err(|e| format!("decode: {e}"))?;
    let mut doc: Value = serde_json::from_str(doc).unwrap();
    patch.apply(&mut doc).map_err(|e| e.to_string())?;
    Ok(doc)
}

#[test]
fn operations_apply_with_v4_semantics() {
    let cases = [
        // (what, document, patch, patched document)
        (
            "add sets a member",
            r#"{"a":1}"#,
            r#"[{"op":"add","path":"/b","value":{"c":[2]}}]"#,
            r#"{"a":1,"b":{"c":[2]}}"#,
        ),
        ("add overwrites a member", r#"{"a":1}"#, r#"[{"op":"add","path":"/a","value":2}]"#, r#"{"a":2}"#),
        ("add without value writes null", r#"{}"#, r#"[{"op":"add","path":"/a"}]"#, r#"{"a":null}"#),
        ("add inserts before an index", r#"[1,2]"#, r#"[{"op":"add","path":"/0","value":0}]"#, r#"[0,1,2]"#),
        ("add at len appends", r#"[1,2]"#, r#"[{"op":"add","path":"/2","value":3}]"#, r#"[1,2,3]"#),
        ("add at - appends", r#"[1,2]"#, r#"[{"op":"add","path":"/-","value":3}]"#, r#"[1,2,3]"#),
        (
            "add at -1 appends: counts from len+1",
            r#"[1,2]"#,
            r#"[{"op":"add","path":"/-1","value":3}]"#,
            r#"[1,2,3]"#,
        ),
        ("add at -(len+1) prepends", r#"[1,2]"#, r#"[{"op":"add","path":"/-3","value":0}]"#, r#"[0,1,2]"#),
        (
            "add index with sign and zeros",
            r#"[1,2]"#,
            r#"[{"op":"add","path":"/+01","value":9}]"#,
            r#"[1,9,2]"#,
        ),
        ("remove a member", r#"{"a":1,"b":2}"#, r#"[{"op":"remove","path":"/a"}]"#, r#"{"b":2}"#),
        ("remove a null member", r#"{"a":null}"#, r#"[{"op":"remove","path":"/a"}]"#, r#"{}"#),
        (
            "remove counts negative indices from the end",
            r#"[1,2,3]"#,
            r#"[{"op":"remove","path":"/-1"}]"#,
            r#"[1,2]"#,
        ),
        (
            "replace of a missing member adds it",
            r#"{"a":1}"#,
            r#"[{"op":"replace","path":"/b","value":2}]"#,
            r#"{"a":1,"b":2}"#,
        ),
        (
            "replace an element by negative index",
            r#"[1,2,3]"#,
            r#"[{"op":"replace","path":"/-3","value":0}]"#,
            r#"[0,2,3]"#,
        ),
        (
            "replace without value writes null",
            r#"{"a":1}"#,
            r#"[{"op":"replace","path":"/a"}]"#,
            r#"{"a":null}"#,
        ),
        ("replace the whole document", r#"{"a":1}"#, r#"[{"op":"replace","path":"","value":[1]}]"#, r#"[1]"#),
        (
            "move a member",
            r#"{"a":{"b":1},"c":{}}"#,
            r#"[{"op":"move","from":"/a/b","path":"/c/d"}]"#,
            r#"{"a":{},"c":{"d":1}}"#,
        ),
        (
            "move removes before adding",
            r#"[1,2,3]"#,
            r#"[{"op":"move","from":"/0","path":"/2"}]"#,
            r#"[2,3,1]"#,
        ),
        (
            "move a null member",
            r#"{"a":null}"#,
            r#"[{"op":"move","from":"/a","path":"/b"}]"#,
            r#"{"b":null}"#,
        ),
        (
            "copy is deep",
            r#"{"a":{"b":[1]}}"#,
            r#"[{"op":"copy","from":"/a","path":"/c"},{"op":"add","path":"/c/b/-","value":2}]"#,
            r#"{"a":{"b":[1]},"c":{"b":[1,2]}}"#,
        ),
        (
            "copy from a missing member writes null",
            r#"{}"#,
            r#"[{"op":"copy","from":"/x","path":"/y"}]"#,
            r#"{"y":null}"#,
        ),
        (
            "copy from a negative index",
            r#"[1,2]"#,
            r#"[{"op":"copy","from":"/-1","path":"/0"}]"#,
            r#"[2,1,2]"#,
        ),
        (
            "pointers unescape ~1 then ~0",
            r#"{"a/b":1,"~1":2}"#,
            r#"[{"op":"remove","path":"/a~1b"},{"op":"remove","path":"/~01"}]"#,
            r#"{}"#,
        ),
        ("/ names the empty key", r#"{"":1}"#, r#"[{"op":"replace","path":"/","value":2}]"#, r#"{"":2}"#),
        (
            "a path's text before its first / is ignored",
            r#"{"a":{"b":1}}"#,
            r#"[{"op":"add","path":"x/a/c","value":2}]"#,
            r#"{"a":{"b":1,"c":2}}"#,
        ),
        (
            "pointers walk arrays, negative indices too",
            r#"{"a":[{"b":1},{"b":2}]}"#,
            r#"[{"op":"replace","path":"/a/-1/b","value":3}]"#,
            r#"{"a":[{"b":1},{"b":3}]}"#,
        ),
        (
            "a repeated member: the last one wins",
            r#"{"a":1}"#,
            r#"[{"op":"add","path":"/b","value":2,"op":"remove","path":"/a"}]"#,
            r#"{}"#,
        ),
        (
            "member strings are decoded",
            r#"{}"#,
            r#"[{"op":"\u0061dd","path":"\/a","value":1}]"#,
            r#"{"a":1}"#,
        ),
        (
            "numbers are kept as serde_json keeps them",
            r#"{}"#,
            r#"[{"op":"add","path":"/a","value":[1,1.0,1e2,-0]}]"#,
            r#"{"a":[1,1.0,100.0,-0]}"#,
        ),
        (
            "operations apply in order",
            r#"{"a":[]}"#,
            r#"[{"op":"add","path":"/a/-","value":1},{"op":"test","path":"/a/0","value":1},{"op":"move","from":"/a","path":"/b"}]"#,
            r#"{"b":[1]}"#,
        ),
    ];
    for (what, doc, patch, want) in cases {
        let want: Value = serde_json::from_str(want).unwrap();
        assert_eq!(patched(doc, patch), Ok(want), "{what}");
    }
}

#[test]
fn test_passes_or_fails_like_v4() {
    let doc = r#"{"n":1,"f":1.5,"s":"x","z":null,"o":{"a":[1,{"b":2}],"c":"d"},"l":[1,2]}"#;
    let cases = [
        // (path, value member or "" for none, passes)
        ("/n", r#"1"#, true),
        ("/n", r#"1.0"#, false),
        ("/n", r#""1""#, false),
        ("/f", r#"1.5"#, true),
        ("/s", r#""x""#, true),
        ("/o", r#"{"c":"d","a":[1,{"b":2}]}"#, true),
        ("/o", r#"{"c":"d","a":[1,{"b":2}],"e":null}"#, false),
        ("/o", r#"{"c":"d","a":[{"b":2},1]}"#, false),
        ("/l/-1", r#"2"#, true),
        ("", r#"{"n":1,"f":1.5,"s":"x","z":null,"o":{"a":[1,{"b":2}],"c":"d"},"l":[1,2]}"#, true),
        ("", r#"{}"#, false),
        ("/missing", r#"null"#, true),
        ("/missing", "", true),
        ("/missing", r#"{}"#, false),
        ("/z", r#"null"#, true),
        ("/z", "", true),
        ("/z", r#"0"#, false),
        ("/n", r#"null"#, false),
        ("/n", "", false),
    ];
    for (path, value, passes) in cases {
        let value = if value.is_empty() { String::new() } else { format!(r#","value":{value}"#) };
        let patch = format!(r#"[{{"op":"test","path":"{path}"{value}}}]"#);
        let want = if passes {
            Ok(serde_json::from_str(doc).unwrap())
        } else {
            Err(format!("testing value {path} failed: test failed"))
        };
        assert_eq!(patched(doc, &patch), want, "{patch}");
    }
}

#[test]
fn failures_read_like_evanphx() {
    let doc = r#"{"a":{"b":1},"arr":[1,2],"n":null,"s":"x"}"#;
    let cases = [
        // (patch, error text)
        (r#"[{"op":"ADD","path":"/a"}]"#, "Unexpected kind: ADD"),
        (r#"[{"path":"/a"}]"#, "Unexpected kind: unknown"),
        (r#"[{"op":5,"path":"/a"}]"#, "Unexpected kind: unknown"),
        (r#"[null]"#, "Unexpected kind: unknown"),
        (r#"[{"op":"add","value":1}]"#, "add operation failed to decode path: missing value"),
        (r#"[{"op":"add","path":5}]"#, "add operation failed to decode path: missing value"),
        (r#"[{"op":"add","path":"/x/y","value":1}]"#, r#"add operation does not apply: doc is missing path: "/x/y": missing value"#),
        (r#"[{"op":"add","path":"/n/y","value":1}]"#, r#"add operation does not apply: doc is missing path: "/n/y": missing value"#),
        (r#"[{"op":"add","path":"/s/y","value":1}]"#, r#"add operation does not apply: doc is missing path: "/s/y": missing value"#),
        (r#"[{"op":"add","path":"","value":{}}]"#, r#"add operation does not apply: doc is missing path: "": missing value"#),
        (r#"[{"op":"add","path":"a","value":1}]"#, r#"add operation does not apply: doc is missing path: "a": missing value"#),
        (r#"[{"op":"add","path":"/arr/x","value":1}]"#, r#"error in add for path: '/arr/x': value was not a proper array index: 'x': strconv.Atoi: parsing "x": invalid syntax"#),
        (r#"[{"op":"add","path":"/arr/3","value":1}]"#, "error in add for path: '/arr/3': Unable to access invalid index: 3: invalid index referenced"),
        (r#"[{"op":"add","path":"/arr/-4","value":1}]"#, "error in add for path: '/arr/-4': Unable to access invalid index: -4: invalid index referenced"),
        (r#"[{"op":"add","path":"/arr/99999999999999999999","value":1}]"#, r#"error in add for path: '/arr/99999999999999999999': value was not a proper array index: '99999999999999999999': strconv.Atoi: parsing "99999999999999999999": value out of range"#),
        (r#"[{"op":"remove","path":"/zz"}]"#, "error in remove for path: '/zz': Unable to remove nonexistent key: zz: missing value"),
        (r#"[{"op":"remove","path":"/a/~0~1"}]"#, "error in remove for path: '/a/~0~1': Unable to remove nonexistent key: ~/: missing value"),
        (r#"[{"op":"remove","path":"/arr/2"}]"#, "error in remove for path: '/arr/2': Unable to access invalid index: 2: invalid index referenced"),
        (r#"[{"op":"remove","path":"/arr/-3"}]"#, "error in remove for path: '/arr/-3': Unable to access invalid index: -3: invalid index referenced"),
        (r#"[{"op":"remove","path":"/arr/-"}]"#, r#"error in remove for path: '/arr/-': strconv.Atoi: parsing "-": invalid syntax"#),
        (r#"[{"op":"remove","path":"/arr/\"\t\u00a0"}]"#, "error in remove for path: '/arr/\"\t\u{a0}': strconv.Atoi: parsing \"\\\"\\t\\u00a0\": invalid syntax"),
        (r#"[{"op":"remove","path":""}]"#, r#"remove operation does not apply: doc is missing path: "": missing value"#),
        (r#"[{"op":"remove"}]"#, "remove operation failed to decode path: missing value"),
        (r#"[{"op":"replace","path":"/x/y","value":1}]"#, "replace operation does not apply: doc is missing path: /x/y: missing value"),
        (r#"[{"op":"replace","path":"/arr/2","value":1}]"#, "replace operation does not apply: doc is missing key: /arr/2: missing value"),
        (r#"[{"op":"replace","path":"/arr/-","value":1}]"#, "replace operation does not apply: doc is missing key: /arr/-: missing value"),
        (r#"[{"op":"replace","value":1}]"#, "replace operation failed to decode path: operation missing path field: missing value"),
        (r#"[{"op":"replace","path":null,"value":1}]"#, "replace operation failed to decode path: operation missing path field: missing value"),
        (r#"[{"op":"replace","path":5,"value":1}]"#, "replace operation failed to decode path: json: cannot unmarshal number into Go value of type string"),
        (r#"[{"op":"replace","path":"","value":5}]"#, "replace operation value must be object or array: %!w(<nil>)"),
        (r#"[{"op":"replace","path":"","value":null}]"#, "replace operation value must be object or array: %!w(<nil>)"),
        (r#"[{"op":"test","path":"/x/y","value":1}]"#, "test operation does not apply: is missing path: /x/y: missing value"),
        (r#"[{"op":"test","path":"/arr/x","value":1}]"#, r#"error in test for path: '/arr/x': strconv.Atoi: parsing "x": invalid syntax"#),
        (r#"[{"op":"test","path":{},"value":1}]"#, "test operation failed to decode path: json: cannot unmarshal object into Go value of type string"),
        (r#"[{"op":"move","path":"/c"}]"#, "move operation failed to decode from: operation, missing from field: missing value"),
        (r#"[{"op":"move","from":[],"path":"/c"}]"#, "move operation failed to decode from: json: cannot unmarshal array into Go value of type string"),
        (r#"[{"op":"move","from":"/x/y","path":"/c"}]"#, "move operation does not apply: doc is missing from path: /x/y: missing value"),
        (r#"[{"op":"move","from":"/a/zz","path":"/c"}]"#, "error in move for path: 'zz': Unable to remove nonexistent key: zz: missing value"),
        (r#"[{"op":"move","from":"/arr/5","path":"/c"}]"#, "error in move for path: '5': Unable to access invalid index: 5: invalid index referenced"),
        (r#"[{"op":"move","from":"/a/b"}]"#, "move operation failed to decode path: operation missing path field: missing value"),
        (r#"[{"op":"move","from":"/a","path":"/a/b/c"}]"#, "move operation does not apply: doc is missing destination path: /a/b/c: missing value"),
        (r#"[{"op":"move","from":"/a","path":"/arr/9"}]"#, "error in move for path: '/arr/9': Unable to access invalid index: 9: invalid index referenced"),
        (r#"[{"op":"copy","path":"/c"}]"#, "copy operation failed to decode from: operation, missing from field: missing value"),
        (r#"[{"op":"copy","from":true,"path":"/c"}]"#, "copy operation failed to decode from: json: cannot unmarshal bool into Go value of type string"),
        (r#"[{"op":"copy","from":"","path":"/c"}]"#, "copy operation does not apply: doc is missing from path: : missing value"),
        (r#"[{"op":"copy","from":"/arr/7","path":"/c"}]"#, "error in copy for from: '/arr/7': Unable to access invalid index: 7: invalid index referenced"),
        (r#"[{"op":"copy","from":"/a","path":5}]"#, "copy operation failed to decode path: missing value"),
        (r#"[{"op":"copy","from":"/a","path":"/x/y"}]"#, "copy operation does not apply: doc is missing destination path: /x/y: missing value"),
        (r#"[{"op":"copy","from":"/a","path":"/arr/x"}]"#, r#"error while adding value during copy: value was not a proper array index: 'x': strconv.Atoi: parsing "x": invalid syntax"#),
        (r#"[{"op":"add","path":"/ok","value":1},{"op":"bogus"}]"#, "Unexpected kind: bogus"),
    ];
    for (patch, want) in cases {
        assert_eq!(patched(doc, patch), Err(want.to_owned()), "{patch}");
    }
}

#[test]
fn only_an_object_or_array_document_is_patched() {
    let patch = Patch::decode(br#"[{"op":"test","path":"/a","value":null}]"#).unwrap();
    for (doc, kind) in [("5", "number"), (r#""x""#, "string"), ("true", "bool"), ("null", "null")] {
        let mut doc: Value = serde_json::from_str(doc).unwrap();
        let want = format!("json: cannot unmarshal {kind} into Go value of type jsonpatch.partialDoc");
        assert_eq!(patch.apply(&mut doc).unwrap_err().to_string(), want);
    }
}

#[test]
fn decode_counts_operations() {
    let cases = [
        // (patch, operations)
        ("null", 0),
        (" [ ] ", 0),
        ("[null]", 1),
        (r#"[{},{"op":"add"}]"#, 2),
    ];
    for (patch, len) in cases {
        let decoded = Patch::decode(patch.as_bytes()).unwrap();
        assert_eq!((decoded.len(), decoded.is_empty()), (len, len == 0), "{patch}");
    }
}

#[test]
fn decode_errors_read_like_go_json() {
    let too_deep = format!("{}{}", "[".repeat(10_001), "]".repeat(10_001));
    let cases = [
        // (patch, error text)
        ("", "unexpected end of JSON input"),
        ("[", "unexpected end of JSON input"),
        (r#"[{"op":"add"}"#, "unexpected end of JSON input"),
        ("{}", "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        (r#""[]""#, "json: cannot unmarshal string into Go value of type jsonpatch.Patch"),
        ("-5", "json: cannot unmarshal number into Go value of type jsonpatch.Patch"),
        ("true", "json: cannot unmarshal bool into Go value of type jsonpatch.Patch"),
        ("[5]", "json: cannot unmarshal number into Go value of type jsonpatch.Operation"),
        (r#"[{},null,[],"x"]"#, "json: cannot unmarshal array into Go value of type jsonpatch.Operation"),
        ("[5,]", "invalid character ']' looking for beginning of value"),
        ("[,]", "invalid character ',' looking for beginning of value"),
        ("[{op:1}]", "invalid character 'o' looking for beginning of object key string"),
        (r#"[{"op" 1}]"#, "invalid character '1' after object key"),
        (r#"[{"a":1 "b":2}]"#, "invalid character '\"' after object key:value pair"),
        ("[1 2]", "invalid character '2' after array element"),
        ("[] x", "invalid character 'x' after top-level value"),
        ("[tru]", "invalid character ']' in literal true (expecting 'e')"),
        ("[nul", "invalid character ' ' in literal null (expecting 'l')"),
        ("[-]", "invalid character ']' in numeric literal"),
        ("-", "invalid character ' ' in numeric literal"),
        ("[1.]", "invalid character ']' after decimal point in numeric literal"),
        ("[1e+]", "invalid character ']' in exponent of numeric literal"),
        ("[01]", "invalid character '1' after array element"),
        (r#"["\x"]"#, "invalid character 'x' in string escape code"),
        (r#"["\u12g4"]"#, "invalid character 'g' in \\u hexadecimal character escape"),
        ("[\"a\tb\"]", "invalid character '\\t' in string literal"),
        ("['a']", "invalid character '\\'' looking for beginning of value"),
        ("[\\]", "invalid character '\\\\' looking for beginning of value"),
        ("[\u{e9}]", "invalid character 'Ã' looking for beginning of value"),
        ("[\u{80}]", "invalid character 'Â' looking for beginning of value"),
        ("[\u{7f}]", "invalid character '\\x7f' looking for beginning of value"),
        ("\u{feff}[]", "invalid character 'ï' looking for beginning of value"),
        (too_deep.as_str(), "invalid character '[' exceeded max depth"),
    ];
    for (patch, want) in cases {
        let error = Patch::decode(patch.as_bytes()).unwrap_err();
        assert_eq!(error.to_string(), want, "{patch:.40}");
    }
    // Go takes any UTF-8 and reads a lone surrogate as U+FFFD; serde_json refuses both.
    for patch in [&br#"[{"\ud800":1}]"#[..], b"[{\"op\":\"\xff\"}]"] {
        assert!(matches!(Patch::decode(patch), Err(DecodeError::Unsupported(_))));
    }
}

#[test]
fn annotation_is_go_json_marshal_of_the_operations() {
    let cases = [
        // (patch, annotation)
        ("[]", "[]"),
        ("[null,{}]", "[null,{}]"),
        (
            r#" [ { "value" : { "z" : [ 1 , 2.50 ] , "a" : "b c" } , "path" : "/x" , "op" : "add" } ] "#,
            r#"[{"op":"add","path":"/x","value":{"z":[1,2.50],"a":"b c"}}]"#,
        ),
        (
            r#"[{"path":"/a","op":"add","value":1,"value":"\u00e9\n","from":null,"Z":0}]"#,
            r#"[{"Z":0,"from":null,"op":"add","path":"/a","value":"\u00e9\n"}]"#,
        ),
        (
            "[{\"op\":\"add\",\"value\":\"<a & b>\u{2028}\"}]",
            r#"[{"op":"add","value":"\u003ca \u0026 b\u003e\u2028"}]"#,
        ),
        // Keys are re-encoded: `\b` and `\f` as Go 1.22+ writes them.
        (
            "[{\"<\":1,\"\\b\\f\\u0001\":2,\"\u{e9}\":3,\"a\\/b\":4}]",
            r#"[{"\b\f\u0001":2,"\u003c":1,"a/b":4,"é":3}]"#,
        ),
    ];
    for (patch, want) in cases {
        assert_eq!(Patch::decode(patch.as_bytes()).unwrap().annotation_json(), want, "{patch}");
    }
}

#[test]
fn copies_may_duplicate_at_most_the_api_servers_limit_per_patch() {
    // 1 MiB, then doubled: what a "copy bomb" webhook answers.
    let mut doc = json!({"a": "x".repeat(1024 * 1024)});
    let bomb = Patch::decode(
        br#"[{"op":"copy","from":"/a","path":"/b"},
             {"op":"copy","from":"/a","path":"/c"},
             {"op":"copy","from":"/b","path":"/d"}]"#,
    )
    .unwrap();
    let error = bomb.apply(&mut doc).unwrap_err().to_string();
    // Three copies of 1 MiB + 2 quotes: 6 bytes over.
    assert_eq!(
        error,
        "Unable to complete the copy, the accumulated size increase of copy is 3145734, exceeding the limit 3145728"
    );

    // Under the limit, copies apply; the limit is per patch, not per document.
    let mut doc = json!({"a": "x".repeat(1024 * 1024)});
    let two =
        Patch::decode(br#"[{"op":"copy","from":"/a","path":"/b"},{"op":"copy","from":"/a","path":"/c"}]"#)
            .unwrap();
    two.apply(&mut doc).unwrap();
    two.apply(&mut doc).unwrap();
    assert_eq!(doc["c"].as_str().map(str::len), Some(1024 * 1024));
}

#[test]
fn the_copy_size_is_the_go_marshalled_length() {
    // `<` is `\u003c` for Go: 6 bytes, so 524,288 of them weigh 3 MiB + the quotes.
    let mut doc = json!({"a": "<".repeat(524_288)});
    let copy = Patch::decode(br#"[{"op":"copy","from":"/a","path":"/b"}]"#).unwrap();
    let error = copy.apply(&mut doc).unwrap_err().to_string();
    assert!(error.contains("accumulated size increase of copy is 3145730,"), "{error}");
}
