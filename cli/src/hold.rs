//! What `lock` and `elect` take: one trait over the library's guards, one enum over its
//! locks, and the wait for them (cancellable by a signal, reporting who holds).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver};
use zkguard::{
    Client, LeaderElection, Leadership, Mutex, MutexGuard, Participant, Permit, ReadGuard, RwLock,
    Semaphore, WriteGuard,
};

use crate::show::contenders;
use crate::{Fail, Say, Waiting};

/// A held lock or leadership, whatever its kind.
pub trait Held: Send + Sync {
    fn is_valid(&self) -> bool;
    fn lost(&self) -> Receiver<()>;
    fn confirm(&self) -> zkguard::Result<()>;
    fn token(&self) -> u64;
    fn node(&self) -> &str;
}

macro_rules! held {
    ($($guard:ty),*) => {$(
        impl Held for $guard {
            fn is_valid(&self) -> bool {
                <$guard>::is_valid(self)
            }
            fn lost(&self) -> Receiver<()> {
                <$guard>::lost(self)
            }
            fn confirm(&self) -> zkguard::Result<()> {
                <$guard>::confirm(self)
            }
            fn token(&self) -> u64 {
                <$guard>::token(self)
            }
            fn node(&self) -> &str {
                <$guard>::path(self)
            }
        }
    )*};
}

held!(MutexGuard, ReadGuard, WriteGuard, Permit, Leadership);

type Taken = zkguard::Result<Option<Arc<dyn Held>>>;

fn boxed<G: Held + 'static>(r: zkguard::Result<Option<G>>) -> Taken {
    r.map(|g| g.map(|g| Arc::new(g) as Arc<dyn Held>))
}

/// What is being taken.
pub enum Target {
    Mutex(Mutex),
    Read(RwLock),
    Write(RwLock),
    Semaphore(Semaphore),
    Elect(LeaderElection),
}

/// How long to wait.
#[derive(Clone, Copy)]
pub enum Wait {
    Forever,
    Try,
    For(Duration),
}

impl From<&Waiting> for Wait {
    fn from(w: &Waiting) -> Wait {
        match (w.nonblock, w.timeout) {
            (true, _) => Wait::Try,
            (false, Some(d)) => Wait::For(d),
            (false, None) => Wait::Forever,
        }
    }
}

impl Target {
    fn take(&self, wait: Wait) -> Taken {
        use Target as T;
        match wait {
            Wait::Try => match self {
                T::Mutex(l) => boxed(l.try_acquire()),
                T::Read(l) => boxed(l.try_read()),
                T::Write(l) => boxed(l.try_write()),
                T::Semaphore(l) => boxed(l.try_acquire()),
                T::Elect(l) => boxed(l.try_lead()),
            },
            Wait::For(d) => match self {
                T::Mutex(l) => boxed(l.acquire_timeout(d)),
                T::Read(l) => boxed(l.read_timeout(d)),
                T::Write(l) => boxed(l.write_timeout(d)),
                T::Semaphore(l) => boxed(l.acquire_timeout(d)),
                T::Elect(l) => boxed(l.lead_timeout(d)),
            },
            Wait::Forever => match self {
                T::Mutex(l) => boxed(l.acquire().map(Some)),
                T::Read(l) => boxed(l.read().map(Some)),
                T::Write(l) => boxed(l.write().map(Some)),
                T::Semaphore(l) => boxed(l.acquire().map(Some)),
                T::Elect(l) => boxed(l.lead().map(Some)),
            },
        }
    }

    pub fn participants(&self) -> zkguard::Result<Vec<Participant>> {
        match self {
            Target::Mutex(l) => l.participants(),
            Target::Read(l) | Target::Write(l) => l.participants(),
            Target::Semaphore(l) => l.participants(),
            Target::Elect(l) => l.participants(),
        }
    }

    pub fn path(&self) -> &str {
        match self {
            Target::Mutex(l) => l.path(),
            Target::Read(l) | Target::Write(l) => l.path(),
            Target::Semaphore(l) => l.path(),
            Target::Elect(l) => l.path(),
        }
    }

    /// "lock", "read lock" … for messages.
    pub fn what(&self) -> &'static str {
        match self {
            Target::Mutex(_) => "lock",
            Target::Read(_) => "read lock",
            Target::Write(_) => "write lock",
            Target::Semaphore(_) => "permit of",
            Target::Elect(_) => "leadership of",
        }
    }
}

/// How a wait ended.
pub enum Outcome {
    Held(Arc<dyn Held>),
    /// Not free (`--nonblock`) or not within `--timeout`.
    NotObtained,
    /// A signal arrived while waiting; nothing is held.
    Signalled(i32),
}

/// Waits for `target` in a thread of its own, so that a signal can stop the wait. Says who
/// holds while it waits (after a moment, then every 30 s).
pub fn obtain(
    client: &Client,
    target: &Arc<Target>,
    wait: Wait,
    signals: &Receiver<i32>,
    say: Say,
) -> Result<Outcome, Fail> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let t = target.clone();
    std::thread::spawn(move || {
        let _ = tx.send(t.take(wait));
    });
    let (stop_reports, stopped) = crossbeam_channel::bounded::<()>(0);
    if !say.quiet && !matches!(wait, Wait::Try) {
        let (t, client) = (target.clone(), client.clone());
        std::thread::spawn(move || {
            let mut every = Duration::from_millis(300);
            while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(every)
            {
                say.say(format!("waiting for {}", holders_line(&client, &t, true)));
                every = Duration::from_secs(30);
            }
        });
    }
    let taken = loop {
        select! {
            recv(rx) -> r => break r.expect("the acquiring thread always answers"),
            recv(signals) -> sig => {
                let sig = sig.expect("the signal thread never ends");
                if sig == crate::child::RESUMED {
                    continue;
                }
                // The caller closes the session next: that ends the blocked acquire and
                // removes its node at once (no lock's canceller needed).
                return Ok(Outcome::Signalled(sig));
            }
        }
    };
    drop(stop_reports);
    match taken {
        Ok(Some(g)) => Ok(Outcome::Held(g)),
        Ok(None) => Ok(Outcome::NotObtained),
        Err(e) => Err(Fail::zk(
            format_args!("cannot take the {} {}", target.what(), target.path()),
            e,
        )),
    }
}

/// "PATH, held by host-b pid 4242 for 12 s (2 others waiting)"; `queued`: this process is
/// one of the waiters, not counted.
pub fn holders_line(client: &Client, target: &Target, queued: bool) -> String {
    let path = target.path();
    let list = match target.participants() {
        Ok(list) => contenders(client, path, list),
        Err(e) => return format!("{path} (cannot list its holders: {e})"),
    };
    let holders: Vec<String> = list
        .iter()
        .filter(|c| c.p.holds)
        .map(|c| match c.age {
            Some(a) => format!("{} for {}", c.p.id(), seconds(a)),
            None => c.p.id(),
        })
        .collect();
    let waiting = list
        .iter()
        .filter(|c| !c.p.holds)
        .count()
        .saturating_sub(usize::from(queued));
    let verb = if matches!(target, Target::Elect(_)) {
        "led"
    } else {
        "held"
    };
    match (holders.is_empty(), waiting) {
        (true, 0) => format!("{path} (free)"),
        (true, n) => format!("{path} ({n} {} waiting)", others(n)),
        (false, 0) => format!("{path}, {verb} by {}", holders.join(", ")),
        (false, n) => format!(
            "{path}, {verb} by {} ({n} {} waiting)",
            holders.join(", "),
            others(n)
        ),
    }
}

fn others(n: usize) -> &'static str {
    if n == 1 {
        "other"
    } else {
        "others"
    }
}

/// "12 s", "3 min 4 s".
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{} h {} min", s / 3600, s % 3600 / 60)
    }
}

/// A pause that a signal cuts short (`Some(signal)`).
pub fn pause(d: Duration, signals: &Receiver<i32>) -> Option<i32> {
    crate::child::next_signal(signals, Some(Instant::now() + d))
}
