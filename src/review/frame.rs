//! The received review as the frame of the requests sent on: its bytes with the `uid`, the
//! `object` and the `oldObject` cut out, so that a webhook's request is the caller's own
//! review with the webhook's uid and the object as it stands put back in — no re-encoding,
//! and every field the caller sent kept, including any the gateway does not know (docs/differences.md,
//! "The request a webhook is sent").
//!
//! A frame is only made when putting the pieces back gives what `encode::request` would
//! write, field for field (`decode.rs` checks the request has every field that encoder
//! writes, as the API server's always has), and only used for a webhook that speaks the
//! caller's review version.

use std::ops::Range;

use serde_json::value::RawValue;

use super::ReviewVersion;

/// What goes into a hole of the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hole {
    /// The text of the uid string, between its quotes.
    Uid,
    /// The raw `object`, or the raw `oldObject` (`null` for none).
    Object,
    OldObject,
}

/// The received review without its uid, object and old object.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    version: ReviewVersion,
    /// The body with the holes' text taken out.
    text: Vec<u8>,
    /// Where each hole is in `text`, in order.
    holes: [(usize, Hole); 3],
}

/// Where in the body a value lies, from its address while the body was decoded
/// (`review::Located`); `None` if that was not inside `body`.
pub(super) fn span(body: &[u8], at: Option<usize>, len: usize) -> Option<Range<usize>> {
    let start = at?.checked_sub(body.as_ptr() as usize)?;
    let end = start.checked_add(len)?;
    (end <= body.len()).then_some(start..end)
}

impl Frame {
    /// `body` in `version` with the uid, the object and the old object at these ranges (the
    /// object's text `null` when there is none). The ranges lie in `body` and do not overlap
    /// (they are different values of one decoded document); `None` otherwise.
    pub(super) fn new(
        body: &[u8],
        version: ReviewVersion,
        uid: Range<usize>,
        object: Range<usize>,
        old_object: Range<usize>,
    ) -> Option<Self> {
        let mut cuts = [(uid, Hole::Uid), (object, Hole::Object), (old_object, Hole::OldObject)];
        cuts.sort_by_key(|(range, _)| range.start);
        let cut_len: usize = cuts.iter().map(|(range, _)| range.len()).sum();
        let mut text = Vec::with_capacity(body.len().checked_sub(cut_len)?);
        let mut holes = [(0, Hole::Uid); 3];
        let mut from = 0;
        for ((range, hole), slot) in cuts.into_iter().zip(&mut holes) {
            text.extend_from_slice(body.get(from..range.start)?);
            *slot = (text.len(), hole);
            from = range.end;
        }
        text.extend_from_slice(body.get(from..)?);
        Some(Self { version, text, holes })
    }

    /// The request for a webhook of `version`: this frame with `uid`, `object` and
    /// `old_object` put in (`null` for none, as the encoder writes it). `None` when the frame
    /// cannot give it: another version, or a uid that JSON would escape.
    pub(crate) fn request(
        &self,
        version: ReviewVersion,
        uid: &str,
        object: Option<&RawValue>,
        old_object: Option<&RawValue>,
    ) -> Option<Vec<u8>> {
        let plain = |b: u8| b >= 0x20 && b != b'"' && b != b'\\';
        if version != self.version || !uid.bytes().all(plain) {
            return None;
        }
        let (object, old_object) = (raw_or_null(object), raw_or_null(old_object));
        let fill = |hole: Hole| match hole {
            Hole::Uid => uid.as_bytes(),
            Hole::Object => object,
            Hole::OldObject => old_object,
        };
        let len = self.text.len() + self.holes.iter().map(|(_, hole)| fill(*hole).len()).sum::<usize>();
        let mut out = Vec::with_capacity(len);
        let mut from = 0;
        for &(at, hole) in &self.holes {
            out.extend_from_slice(&self.text[from..at]);
            out.extend_from_slice(fill(hole));
            from = at;
        }
        out.extend_from_slice(&self.text[from..]);
        Some(out)
    }
}

/// A raw value's text, `null` for none (as `serde_json` writes `None`).
fn raw_or_null(value: Option<&RawValue>) -> &[u8] {
    value.map_or(b"null", |raw| raw.get().as_bytes())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::decode::{review, IncomingReview};
    use super::super::encode;
    use super::*;

    /// As the API server writes a review (Go's field order: `kind` first), with a line break.
    const UPDATE: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"0b7e5c1a-3f2d-4e8b-9a1c-5d6e7f8a9b0c",
        "kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},
        "subResource":"scale","requestKind":{"group":"apps","version":"v1","kind":"Deployment"},
        "requestResource":{"group":"apps","version":"v1","resource":"deployments"},"requestSubResource":"scale",
        "name":"web","namespace":"team-a","operation":"UPDATE","userInfo":{"username":"alice","groups":["g"]},
        "object":{"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":3}},
        "oldObject":{"metadata":{"name":"web"},"spec":{"replicas":2}},"dryRun":false,"options":{"kind":"UpdateOptions"}}}"#;

    fn decoded(body: &str) -> IncomingReview {
        review(body.as_bytes()).unwrap_or_else(|e| panic!("{body}: {e}"))
    }

    /// What the encoder sends for `review` with `uid` and its own object.
    fn encoded(review: &IncomingReview, version: ReviewVersion, uid: &str) -> Vec<u8> {
        encode::request(version, &review.outgoing(uid, review.object()))
    }

    fn framed(review: &IncomingReview, uid: &str, object: Option<&RawValue>) -> Vec<u8> {
        let frame = review.frame.as_ref().expect("the review has a frame");
        frame.request(review.version, uid, object, review.old_object()).expect("the frame gives the request")
    }

    fn raw(json: &str) -> Box<RawValue> {
        RawValue::from_string(json.to_owned()).unwrap()
    }

    #[test]
    fn a_framed_request_decodes_to_what_the_encoder_sends() {
        let pod = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"kind":{"group":"","version":"v1","kind":"Pod"},
            "resource":{"group":"","version":"v1","resource":"pods"},"requestKind":{"group":"","version":"v1","kind":"Pod"},
            "requestResource":{"group":"","version":"v1","resource":"pods"},"namespace":"ns","operation":"CREATE",
            "userInfo":{},"object" : {"metadata":{"name":"p"}} ,"uid":"u1","oldObject":null,"dryRun":true,"options":null}}"#;
        let delete = UPDATE.replace(r#""operation":"UPDATE""#, r#""operation":"DELETE""#).replace(
            r#""object":{"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":3}},"#,
            r#""object":null,"#,
        );
        for body in [UPDATE, pod, &delete, &UPDATE.replace("scale", "")] {
            let received = decoded(body);
            let sent = framed(&received, "a1b2", received.object());
            let arrived = review(&sent).unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(&sent)));
            assert_eq!(*arrived.request.uid, "a1b2");
            // Field for field what the encoder would have sent with that uid.
            assert_eq!(
                encoded(&arrived, ReviewVersion::V1, "a1b2"),
                encoded(&received, ReviewVersion::V1, "a1b2")
            );
            // The object and old object are put back byte for byte.
            assert_eq!(arrived.object().map(RawValue::get), received.object().map(RawValue::get));
            assert_eq!(arrived.old_object().map(RawValue::get), received.old_object().map(RawValue::get));
        }
    }

    #[test]
    fn the_frame_of_an_encoded_request_gives_the_encoded_request_byte_for_byte() {
        let received = decoded(UPDATE);
        let as_encoder_writes = String::from_utf8(encoded(&received, ReviewVersion::V1, "u0")).unwrap();
        let reread = decoded(&as_encoder_writes);
        for uid in ["6f1c4a2e-0d3b-4c5a-8e7f-9a0b1c2d3e4f", "", "x"] {
            assert_eq!(
                framed(&reread, uid, reread.object()),
                encoded(&received, ReviewVersion::V1, uid),
                "{uid}"
            );
        }
        // And with the object as a mutating webhook patched it.
        let patched =
            raw(r#"{"metadata":{"name":"web","labels":{"app":"web","team":"a"}},"spec":{"replicas":3}}"#);
        assert_eq!(
            framed(&reread, "u9", Some(&patched)),
            encode::request(ReviewVersion::V1, &received.outgoing("u9", Some(&patched)))
        );
    }

    #[test]
    fn fields_the_gateway_does_not_know_reach_the_webhook() {
        let body = UPDATE
            .replace(r#""dryRun":false"#, r#""dryRun":false,"futureField":{"x":[1,"\"uid\""]}"#)
            .replace(
                r#""apiVersion":"admission.k8s.io/v1","#,
                r#""apiVersion":"admission.k8s.io/v1","note":"n","#,
            );
        let received = decoded(&body);
        let sent: Value =
            serde_json::from_slice(&received.request_body(ReviewVersion::V1, "u2", received.object()))
                .unwrap();
        assert_eq!(sent["request"]["futureField"], serde_json::json!({"x": [1, "\"uid\""]}));
        assert_eq!(sent["note"], "n");
        assert_eq!(sent["request"]["uid"], "u2");
        // The encoder, for another version, knows only its own fields.
        let beta: Value =
            serde_json::from_slice(&received.request_body(ReviewVersion::V1beta1, "u2", received.object()))
                .unwrap();
        assert_eq!(beta["apiVersion"], "admission.k8s.io/v1beta1");
        assert!(beta["request"].get("futureField").is_none() && beta.get("note").is_none());
    }

    #[test]
    fn without_a_frame_or_beyond_it_the_request_is_encoded() {
        // Fields the encoder fills in when absent: no frame.
        for (from, to) in [
            (r#""requestKind":{"group":"apps","version":"v1","kind":"Deployment"},"#, ""),
            (r#""requestResource":{"group":"apps","version":"v1","resource":"deployments"},"#, ""),
            (r#""requestSubResource":"scale","#, ""),
            (r#""userInfo":{"username":"alice","groups":["g"]},"#, ""),
            (r#""dryRun":false,"#, ""),
            (r#","options":{"kind":"UpdateOptions"}"#, ""),
            (r#""object":{"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":3}},"#, ""),
            (r#""oldObject":{"metadata":{"name":"web"},"spec":{"replicas":2}},"#, ""),
            // A uid read through an escape is not where its text is.
            (r#""uid":"0b7e5c1a"#, r#""uid":"\u0030b7e5c1a"#),
        ] {
            let body = UPDATE.replace(from, to);
            assert_ne!(body, UPDATE);
            let received = decoded(&body);
            assert!(received.frame.is_none(), "{body}");
            assert_eq!(
                received.request_body(ReviewVersion::V1, "u2", received.object()),
                encoded(&received, ReviewVersion::V1, "u2")
            );
        }
        let received = decoded(UPDATE);
        let frame = received.frame.as_ref().unwrap();
        let (object, old) = (received.object(), received.old_object());
        assert!(frame.request(ReviewVersion::V1beta1, "u2", object, old).is_none(), "another version");
        assert!(frame.request(ReviewVersion::V1, "u\"2", object, old).is_none(), "a uid needing escapes");
        // No object (a patch cannot remove it, but the frame does not rely on that): `null`,
        // as the encoder writes it; and an object where the caller sent `null`.
        let sent = frame.request(ReviewVersion::V1, "u2", None, old).unwrap();
        let arrived = review(&sent).unwrap();
        assert!(arrived.object().is_none());
        assert_eq!(
            encoded(&arrived, ReviewVersion::V1, "u2"),
            encode::request(ReviewVersion::V1, &received.outgoing("u2", None))
        );
        let created = decoded(&UPDATE.replace(
            r#""object":{"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":3}},"#,
            r#""object":null,"#,
        ));
        let object = raw(r#"{"metadata":{"name":"web"}}"#);
        let arrived = review(&framed(&created, "u2", Some(&object))).unwrap();
        assert_eq!(arrived.object().map(RawValue::get), Some(object.get()));
        assert_eq!(
            encoded(&arrived, ReviewVersion::V1, "u2"),
            encode::request(ReviewVersion::V1, &created.outgoing("u2", Some(&object)))
        );
    }

    #[test]
    fn a_span_outside_the_body_is_none() {
        let body = b"0123456789";
        let at = body.as_ptr() as usize;
        assert_eq!(span(body, Some(at + 2), 3), Some(2..5));
        assert_eq!(span(body, Some(at + 7), 3), Some(7..10));
        assert_eq!(span(body, Some(at + 8), 3), None);
        assert_eq!(span(body, Some(at.wrapping_sub(1)), 3), None);
        assert_eq!(span(body, None, 0), None);
    }
}
