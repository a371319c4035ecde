//! Reading an AdmissionReview request within its limits: the body (size and time capped) and
//! the caller's `?timeout=`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;

/// The API server's own limit on an AdmissionReview body.
pub(crate) const MAX_REVIEW_BYTES: usize = 3 * 1024 * 1024;
/// An oversized body is read and discarded up to this size before the 413 is sent.
const DRAIN_BYTES: usize = 4 * MAX_REVIEW_BYTES;
/// How long reading a request body may take.
const READ_TIME: Duration = Duration::from_secs(10);
/// Draining an oversized body stops when no data arrives for this long.
const DRAIN_IDLE: Duration = Duration::from_millis(200);

/// Why a body could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    TooLarge,
    Unreadable(String),
}

/// Reads a body of at most [`MAX_REVIEW_BYTES`]. An oversized body (declared or found) is read
/// on and discarded, up to [`DRAIN_BYTES`] and while it keeps arriving, so a client that sends
/// it whole before reading gets its 413 rather than a connection reset; one that stops sending
/// gets it after [`DRAIN_IDLE`].
pub(crate) async fn read_capped(mut body: Incoming, declared: Option<u64>) -> Result<Bytes, ReadError> {
    let unreadable = |e: hyper::Error| ReadError::Unreadable(format!("cannot read the request body: {e}"));
    let mut received = 0usize;
    if declared.is_none_or(|length| length <= MAX_REVIEW_BYTES as u64) {
        let mut collected = Frames::default();
        let read = async {
            while let Some(frame) = body.frame().await {
                let Ok(data) = frame.map_err(unreadable)?.into_data() else { continue };
                received += data.len();
                if received > MAX_REVIEW_BYTES {
                    return Ok(());
                }
                collected.push(data, declared);
            }
            Ok(())
        };
        tokio::time::timeout(READ_TIME, read)
            .await
            .map_err(|_| ReadError::Unreadable("timed out reading the request body".into()))??;
        if received <= MAX_REVIEW_BYTES {
            return Ok(collected.into_bytes());
        }
    }
    while received <= DRAIN_BYTES {
        match tokio::time::timeout(DRAIN_IDLE, body.frame()).await {
            Ok(Some(Ok(frame))) => received += frame.data_ref().map_or(0, Bytes::len),
            _ => break,
        }
    }
    Err(ReadError::TooLarge)
}

/// A body's frames as they arrive. A body that comes in one frame, as a review does (hyper
/// hands out the part of its read buffer that holds it; every one of 16,000 10 KB reviews in
/// a load run did), is kept as that frame, not copied; from a second frame on they are
/// gathered in one buffer, sized from Content-Length when it is within the cap, so a body is
/// copied at most once. `BodyExt::collect` keeps one frame uncopied too, but takes the body,
/// which [`read_capped`] must go on draining past the cap.
#[derive(Default)]
enum Frames {
    #[default]
    Empty,
    One(Bytes),
    Many(Vec<u8>),
}

impl Frames {
    fn push(&mut self, data: Bytes, declared: Option<u64>) {
        *self = match std::mem::take(self) {
            Self::Empty => Self::One(data),
            Self::One(first) => {
                let capacity = declared.map_or(0, |n| n.min(MAX_REVIEW_BYTES as u64) as usize);
                let mut gathered = Vec::with_capacity(capacity.max(first.len() + data.len()));
                gathered.extend_from_slice(&first);
                gathered.extend_from_slice(&data);
                Self::Many(gathered)
            }
            Self::Many(mut gathered) => {
                gathered.extend_from_slice(&data);
                Self::Many(gathered)
            }
        };
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Self::Empty => Bytes::new(),
            Self::One(data) => data,
            Self::Many(gathered) => Bytes::from(gathered),
        }
    }
}

/// The caller's `?timeout=` (a Go duration, as the API server writes it). Absent: `None`;
/// unparsable or negative: the reason, for a 400. Any size is accepted here: the deadline
/// budget caps it (`pipeline/budget.rs`), so no timeout can overflow the clock.
pub(crate) fn caller_timeout(query: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(value) =
        query.into_iter().flat_map(|q| q.split('&')).find_map(|pair| pair.strip_prefix("timeout="))
    else {
        return Ok(None);
    };
    let invalid = |why: &str| format!("invalid timeout query parameter {value:?}: {why}");
    let nanos = crate::go::duration::parse(value).map_err(|e| invalid(&e))?;
    let nanos = u64::try_from(nanos).map_err(|_| invalid("must not be negative"))?;
    Ok(Some(Duration::from_nanos(nanos)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_of_one_frame_is_kept_as_it_came_and_several_are_gathered_in_order() {
        assert!(Frames::default().into_bytes().is_empty());
        let frame = Bytes::from_static(b"{\"kind\":\"AdmissionReview\"}");
        let mut one = Frames::default();
        one.push(frame.clone(), Some(frame.len() as u64));
        let kept = one.into_bytes();
        assert_eq!(kept, frame);
        assert_eq!(kept.as_ptr(), frame.as_ptr(), "one frame is not copied");
        for declared in [None, Some(3), Some(MAX_REVIEW_BYTES as u64 * 2)] {
            let mut many = Frames::default();
            for part in ["{\"a\"", ":", "1}"] {
                many.push(Bytes::from_static(part.as_bytes()), declared);
            }
            assert_eq!(many.into_bytes(), Bytes::from_static(b"{\"a\":1}"), "{declared:?}");
        }
    }

    #[test]
    fn the_callers_timeout_is_a_go_duration_and_never_negative() {
        assert_eq!(caller_timeout(None), Ok(None));
        assert_eq!(caller_timeout(Some("dryRun=All")), Ok(None));
        assert_eq!(caller_timeout(Some("timeout=10s")), Ok(Some(Duration::from_secs(10))));
        assert_eq!(caller_timeout(Some("a=b&timeout=1m30s")), Ok(Some(Duration::from_secs(90))));
        // Large values are taken as given (the budget caps them), never a panic.
        assert_eq!(caller_timeout(Some("timeout=2562047h")), Ok(Some(Duration::from_secs(2_562_047 * 3600))));
        for bad in ["timeout=-1s", "timeout=ten", "timeout=10", "timeout=9300000000000000000s"] {
            let error = caller_timeout(Some(bad)).unwrap_err();
            assert!(error.starts_with("invalid timeout query parameter"), "{bad}: {error}");
        }
    }
}
