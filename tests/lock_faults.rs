//! Lock recipes under faults (placeholder until the tests land).

mod common;
