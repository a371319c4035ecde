//! Integration tests (being written).
