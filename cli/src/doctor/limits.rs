//! What the doctor flags: the bounds of the servers' latency and fsync figures.

/// mntr's average latency (ms) above which it is flagged.
pub const AVG_LATENCY_MS: f64 = 50.0;
/// mntr's largest latency (ms) above which it is flagged.
pub const MAX_LATENCY_MS: f64 = 1000.0;
/// mntr's average fsync time (ms) above which it is flagged (etcd's guidance: a p99 of
/// 10–20 ms).
pub const AVG_FSYNC_MS: f64 = 20.0;
/// mntr's largest fsync time (ms) above which it is flagged (ZooKeeper's own warning
/// threshold, `fsync.warningthresholdms`, 1 s by default).
pub const MAX_FSYNC_MS: f64 = 1000.0;
