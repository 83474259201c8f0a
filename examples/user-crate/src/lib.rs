//! A user's crate: a nightly job that must never run twice at once, under a zkguard lock.

/// Runs `job` if no one else holds `/jobs/<name>` now; `Ok(false)` if someone does.
pub fn run_exclusive(
    client: &zkguard::Client,
    name: &str,
    job: impl FnOnce(),
) -> zkguard::Result<bool> {
    let lock = zkguard::Mutex::new(client, &format!("/jobs/{name}"))?;
    match lock.try_acquire()? {
        Some(guard) => {
            job();
            drop(guard);
            Ok(true)
        }
        None => Ok(false),
    }
}
