//! What `lock` and `elect` take: any of the library's locks as a [`DynLock`], held as its
//! [`Guard`], and the wait for them (cancellable by a signal, reporting who holds).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver};
use nix::sys::signal::Signal;
use zkguard::{Client, DynLock, Guard, LeaderElection, Leadership, Participant};

use crate::args::Waiting;
use crate::fail::Fail;
use crate::say::{seconds, Say};
use crate::show::{contenders, Layout};

/// A held lock or leadership, whatever its kind: the library's guard, shared with the
/// thread that confirms it.
pub type Held = Arc<dyn Guard + Send + Sync>;

/// Who lists a target's contenders (each lock type has its own `participants`).
type Lister = Box<dyn Fn() -> zkguard::Result<Vec<Participant>> + Send + Sync>;

/// What is being taken: any of the library's locks, through its [`DynLock`].
pub struct Target {
    lock: Box<dyn DynLock>,
    /// An election's, taken as its own type so that its leadership can be handed over.
    election: Option<LeaderElection>,
    recipe: Recipe,
    path: String,
    participants: Lister,
}

/// Which recipe a [`Target`] takes, for messages, the command's environment and where its
/// contenders' nodes are.
pub enum Recipe {
    Mutex,
    Read,
    Write,
    Semaphore,
    /// Leadership, standing as `id`.
    Elect {
        id: String,
    },
}

/// How long [`obtain`] waits, as `--nonblock` and `--timeout` ([`Waiting`]) say.
#[derive(Clone, Copy)]
pub enum Patience {
    Forever,
    Try,
    For(Duration),
}

impl From<&Waiting> for Patience {
    fn from(w: &Waiting) -> Patience {
        match (w.nonblock, w.timeout) {
            (true, _) => Patience::Try,
            (false, Some(d)) => Patience::For(d),
            (false, None) => Patience::Forever,
        }
    }
}

impl Target {
    /// `lock` at `path`, its contenders listed by `participants`.
    pub fn new(
        lock: impl DynLock + 'static,
        recipe: Recipe,
        path: &str,
        participants: impl Fn() -> zkguard::Result<Vec<Participant>> + Send + Sync + 'static,
    ) -> Target {
        Target {
            lock: Box::new(lock),
            election: None,
            recipe,
            path: path.to_string(),
            participants: Box::new(participants),
        }
    }

    /// An election at `path`, standing as its id.
    pub fn election(election: LeaderElection, path: &str) -> Target {
        let listed = election.clone();
        let mut t = Target::new(
            election.clone(),
            Recipe::Elect {
                id: election.id().to_string(),
            },
            path,
            move || listed.participants(),
        );
        t.election = Some(election);
        t
    }

    fn take(&self, patience: Patience) -> zkguard::Result<Option<Taken>> {
        if let Some(e) = &self.election {
            let led = match patience {
                Patience::Try => e.try_lead()?,
                Patience::For(d) => e.lead_timeout(d)?,
                Patience::Forever => Some(e.lead()?),
            };
            return Ok(led.map(|l| {
                let l = Arc::new(l);
                Taken {
                    held: l.clone(),
                    leadership: Some(l),
                }
            }));
        }
        let taken = match patience {
            Patience::Try => self.lock.try_acquire_boxed(),
            Patience::For(d) => self.lock.acquire_timeout_boxed(d),
            Patience::Forever => self.lock.acquire_boxed().map(Some),
        };
        Ok(taken?.map(|g| Taken {
            held: Held::from(g),
            leadership: None,
        }))
    }

    pub fn participants(&self) -> zkguard::Result<Vec<Participant>> {
        (self.participants)()
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The candidate's id, for an election.
    pub fn id(&self) -> Option<&str> {
        match &self.recipe {
            Recipe::Elect { id } => Some(id),
            _ => None,
        }
    }

    /// "lock", "read lock" … for messages.
    pub fn what(&self) -> &'static str {
        match self.recipe {
            Recipe::Mutex => "lock",
            Recipe::Read => "read lock",
            Recipe::Write => "write lock",
            Recipe::Semaphore => "permit of",
            Recipe::Elect { .. } => "leadership of",
        }
    }
}

/// What was taken: the guard, and for an election the same guard as its [`Leadership`]
/// (to hand it over).
pub struct Taken {
    pub held: Held,
    pub leadership: Option<Arc<Leadership>>,
}

/// How a wait ended.
pub enum Outcome {
    Held(Taken),
    /// Not free (`--nonblock`) or not within `--timeout`.
    NotObtained,
    /// A signal arrived while waiting; nothing is held.
    Signalled(Signal),
}

/// Waits for `target` in a thread of its own, so that a signal can stop the wait. Says who
/// holds while it waits (after a moment, then every 30 s).
pub fn obtain(
    client: &Client,
    target: &Arc<Target>,
    patience: Patience,
    signals: &Receiver<Signal>,
    say: Say,
) -> Result<Outcome, Fail> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let t = target.clone();
    std::thread::spawn(move || {
        let _ = tx.send(t.take(patience));
    });
    let (stop_reports, stopped) = crossbeam_channel::bounded::<()>(0);
    if !say.quiet && !matches!(patience, Patience::Try) {
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
        Ok(list) => {
            let layout = match target.recipe {
                Recipe::Semaphore => Layout::Semaphore,
                _ => Layout::Flat,
            };
            contenders(client, path, list, layout)
        }
        Err(e) => return format!("{path} (cannot list its holders: {e})"),
    };
    let holders: Vec<String> = list
        .iter()
        .filter(|c| c.p.holds)
        .map(|c| {
            // A node's data is whoever made it's: escaped, never raw on the terminal.
            let id = zkguard::escape_bytes(&c.p.data);
            match c.age {
                Some(a) => format!("{id} for {}", seconds(a)),
                None => id.into_owned(),
            }
        })
        .collect();
    let waiting = list
        .iter()
        .filter(|c| !c.p.holds)
        .count()
        .saturating_sub(usize::from(queued));
    let verb = if target.id().is_some() { "led" } else { "held" };
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

/// A pause that a signal cuts short (`Some(signal)`).
pub fn pause(d: Duration, signals: &Receiver<Signal>) -> Option<Signal> {
    crate::child::next_signal(signals, Some(Instant::now() + d))
}
