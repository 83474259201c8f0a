//! Which host and process this is, as a lock's node says it by default.

/// `HOST pid PID`: the host's name and this process's id, the data every recipe's node
/// gets unless the recipe is given its own (`with_data`), and what `zkguard lock`'s
/// `--id` defaults to. The host's name is the kernel's (`/proc/sys/kernel/hostname`), else
/// the `HOSTNAME` variable's, else `unknown-host`.
///
/// ```
/// let id = zkguard::host_id();
/// assert!(id.ends_with(&format!(" pid {}", std::process::id())));
/// ```
pub fn host_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into());
    format!("{host} pid {}", std::process::id())
}
