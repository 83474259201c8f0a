//! The supervisor: what zkguard does while the command runs under the lock or leadership.
//! It forwards signals, stops the command while the lock cannot be known to be held
//! (`--on-suspend stop`), and terminates it on loss.
//!
//! This file alone moves its [`State`]: every change is one method of [`Supervisor`],
//! which says what it does and does it (signals to the command's group, the terminal).
//! [`Supervisor::look`] runs after every event and picks the transitions the guard's
//! validity and the clock call for.
//!
//! | from | cause (method) | to | does |
//! |---|---|---|---|
//! | Running | the guard not valid (disconnected), `--on-suspend stop` ([`suspend`]) | Suspended | SIGSTOP to the group, the terminal back |
//! | Running | the same, `--on-suspend ignore` ([`ignore`]) | Ignoring | says so once |
//! | Running | the same, `--on-suspend kill` ([`disconnected`]) | ended, terminated | SIGTERM, SIGKILL after `--kill-after` |
//! | Ignoring | the guard valid again ([`reconnected`]) | Running | says so |
//! | any but Confirming | zkguard continued after Ctrl-Z ([`resumed`]) | Suspended, a confirm due at once | says so |
//! | Suspended | a confirm due, the session connected ([`start_confirm`]) | Confirming | `confirm()` on a thread |
//! | Confirming | confirmed ([`confirmed`]) | Running | the terminal given, SIGCONT |
//! | Confirming | ZooKeeper could not be asked ([`confirmed`]) | Suspended, again in 500 ms | |
//! | Confirming | the lock is not ours ([`confirmed`]) | ended, terminated | |
//! | any | the guard's `lost()` ([`lost`]) | ended, terminated | |
//! | any | a revocation request (`zkguard revoke`, Curator's `Revoker`) ([`revoked`]) | unchanged | SIGTERM to the group, once (a stopped group sees it when continued); released after it exits |
//! | any | the watchdog gone, or unanswered for its bound ([`replace_watchdog`]) | unchanged (had the old one fired: as its report) | another started, the old one SIGKILLed; none: ended, terminated |
//! | any | the command exited | ended with its status | |
//!
//! [`suspend`]: Supervisor::suspend
//! [`ignore`]: Supervisor::ignore
//! [`disconnected`]: Supervisor::disconnected
//! [`reconnected`]: Supervisor::reconnected
//! [`resumed`]: Supervisor::resumed
//! [`start_confirm`]: Supervisor::start_confirm
//! [`confirmed`]: Supervisor::confirmed
//! [`lost`]: Supervisor::lost
//! [`revoked`]: Supervisor::revoked
//! [`replace_watchdog`]: Supervisor::replace_watchdog
//!
//! A signal for zkguard (SIGINT, SIGTERM, SIGHUP) is forwarded to the command's group in
//! every state and changes none ([`Supervisor::forward`]); it is remembered, so that
//! `elect --loop` stops after this term.

use std::time::{Duration, Instant};

use crossbeam_channel::{never, select, Receiver, RecvTimeoutError};
use nix::sys::signal::Signal;
use zkguard::{Client, Error, SessionState};

use crate::args::{OnSuspend, Supervise};
use crate::child::{self, signal_name, Child};
use crate::fail::{Fail, EXIT_SOFTWARE};
use crate::hold::Held;
use crate::say::Say;
use crate::watchdog::{self, Watchdog, WatchdogReport};

/// How one term of holding ended.
pub enum End {
    /// The command exited with this status (forwarded signals included).
    Exited(i32),
    /// Lost (or suspended with `--on-suspend kill`); the command was terminated.
    Lost,
}

/// Where the supervision of a running command stands (the module's table).
enum State {
    /// The command runs; the lock was held at the last look.
    Running,
    /// Disconnected with `--on-suspend ignore`, and said so; the command runs on.
    Ignoring,
    /// The command's group is stopped until the lock is proven again; the next confirm may
    /// start at `next_confirm`.
    Suspended { next_confirm: Instant },
    /// Suspended, and a confirm is on its way: its answer comes on the receiver.
    Confirming(Receiver<zkguard::Result<()>>),
}

/// What the supervisor works with, and its state.
struct Supervisor<'a> {
    client: &'a Client,
    held: &'a Held,
    child: &'a Child,
    sup: &'a Supervise,
    say: Say,
    /// "the lock /jobs/nightly", for messages.
    label: &'a str,
    /// The guard's loss signal (empty while the loss is not known).
    lost: Receiver<()>,
    state: State,
    /// A signal was forwarded to the command.
    signalled: bool,
    /// The watchdog over the command's group (see `watchdog.rs`), heartbeaten at every turn.
    dog: Watchdog,
    /// After a revocation request: when the command's group gets SIGKILL if still there.
    kill_at: Option<Instant>,
}

/// Watches the holder while the command runs (the module's table): starts the command's
/// watchdog, then lets the command run (its gate opened: [`Child::release`]). Returns how it
/// ended and whether a signal was forwarded; the failure of a command that could not be run
/// (not found: 127; else 126).
pub fn watch(
    client: &Client,
    held: &Held,
    child: &Child,
    sup: &Supervise,
    signals: &Receiver<Signal>,
    say: Say,
    label: &str,
) -> Result<(End, bool), Fail> {
    let bound = watchdog::bound(client.session_timeout());
    let dog = match Watchdog::start(
        child.pid,
        child.start,
        bound,
        sup.on_suspend,
        sup.kill_after,
        say,
    ) {
        Ok(dog) => dog,
        Err(f) => {
            say.say(format!("{}: not running the command without it", f.msg));
            terminate(child, sup, say, None);
            return Ok((End::Exited(EXIT_SOFTWARE), false));
        }
    };
    dog.beat();
    // Not waited for here: a watchdog that fired before the go has stopped the gate, and
    // only the loop below continues it.
    let exec_failed = child.release();
    let mut exec_news = exec_failed.clone();
    let mut s = Supervisor {
        client,
        held,
        child,
        sup,
        say,
        label,
        lost: held.lost(),
        state: State::Running,
        signalled: false,
        dog,
        kill_at: None,
    };
    let lost = s.lost.clone();
    let mut revoked = held.revocation();
    let events = client.events();
    let tick = crossbeam_channel::tick(watchdog::step(bound));
    // When the watchdog was last heartbeaten, and whether zkguard ever went unheard past its
    // bound since (frozen or stalled: the watchdog may have acted). Kept across turns: after
    // a thaw, a tick or another event may take a turn before the command's exit is seen.
    let mut last_beat = Instant::now();
    let mut stalled = false;
    loop {
        if last_beat.elapsed() > bound {
            // zkguard itself was unheard: the watchdog owed no answer meanwhile.
            stalled = true;
            s.dog.excuse();
        }
        s.dog.beat();
        last_beat = Instant::now();
        let confirmation = match &s.state {
            State::Confirming(rx) => rx.clone(),
            _ => never(),
        };
        let reports = s.dog.reports.clone();
        let ended = select! {
            recv(exec_news) -> failed => match failed {
                Ok(f) => return Err(f),
                // The command runs.
                Err(_) => {
                    exec_news = never();
                    None
                }
            },
            recv(child.exited) -> code => {
                // A gate whose exec failed says why before it exits.
                if let Ok(f) = exec_failed.recv() {
                    return Err(f);
                }
                // Frozen past the watchdog's bound with `--on-suspend kill`: the watchdog
                // terminated the command (its report may still be on its way).
                if sup.on_suspend == OnSuspend::Kill && (stalled || last_beat.elapsed() > bound) {
                    s.say.say(format!(
                        "zkguard was frozen or stalled and its watchdog terminated the command; \
                         ending the term of {label}"
                    ));
                    Some(End::Lost)
                } else {
                    Some(End::Exited(code.unwrap_or(EXIT_SOFTWARE)))
                }
            }
            recv(lost) -> _ => Some(s.lost()),
            recv(revoked) -> request => {
                // Once: a request, or the guard's signal gone (nothing was asked).
                if request.is_ok() {
                    s.revoked();
                }
                revoked = never();
                None
            }
            recv(signals) -> sig => {
                match sig.expect("the signal thread never ends") {
                    child::RESUMED => s.resumed(),
                    sig => s.forward(sig),
                }
                None
            }
            recv(child.stopped) -> sig => {
                if let Ok(sig) = sig {
                    s.command_stopped(sig);
                }
                None
            }
            recv(events) -> _ => None,
            recv(tick) -> _ => None,
            recv(confirmation) -> r => s.confirmed(r.unwrap_or(Err(Error::Closed))),
            recv(reports) -> r => match r.unwrap_or(WatchdogReport::Died) {
                WatchdogReport::Fired => s.frozen(),
                WatchdogReport::Died => s.replace_watchdog("is gone"),
            },
        };
        if let Some(end) = ended.or_else(|| s.look()) {
            return Ok((end, s.signalled));
        }
    }
}

impl Supervisor<'_> {
    /// After every event: the transitions the guard's validity and the clock call for.
    fn look(&mut self) -> Option<End> {
        let bound = watchdog::bound(self.client.session_timeout());
        // A new watchdog gets one bound to start before its silence counts.
        let unanswered = self.dog.unanswered_for(bound);
        if unanswered > bound {
            let why = format!(
                "has not answered for {} (stopped or frozen: it would not act)",
                humantime::format_duration(Duration::from_millis(unanswered.as_millis() as u64))
            );
            if let Some(end) = self.replace_watchdog(&why) {
                return Some(end);
            }
        }
        if self.kill_at.is_some_and(|at| Instant::now() >= at) {
            self.say
                .say("the command outlived --kill-after after the revocation request: SIGKILL");
            self.child.signal(Signal::SIGKILL);
            self.kill_at = None;
        }
        let valid = self.held.is_valid();
        match self.state {
            State::Ignoring if valid => self.reconnected(),
            State::Running if !valid && self.lost.is_empty() => return self.disconnected(),
            State::Suspended { next_confirm }
                if Instant::now() >= next_confirm
                    && self.client.state() == SessionState::Connected =>
            {
                self.start_confirm();
            }
            _ => {}
        }
        None
    }

    /// `Running`, the guard not valid: what `--on-suspend` says.
    fn disconnected(&mut self) -> Option<End> {
        match self.sup.on_suspend {
            OnSuspend::Ignore => self.ignore(),
            OnSuspend::Stop => self.suspend(),
            OnSuspend::Kill => {
                self.say
                    .say("disconnected from ZooKeeper (--on-suspend kill)");
                return Some(self.terminate());
            }
        }
        None
    }

    /// `Running` → `Ignoring`.
    fn ignore(&mut self) {
        self.say
            .say("disconnected from ZooKeeper: the command runs on (--on-suspend ignore)");
        self.state = State::Ignoring;
    }

    /// `Ignoring` → `Running`.
    fn reconnected(&mut self) {
        self.say.say("connected again");
        self.state = State::Running;
    }

    /// `Running` → `Suspended`: the command's group stopped, the terminal taken back.
    fn suspend(&mut self) {
        self.say.say(format!(
            "disconnected from ZooKeeper: stopping the command (SIGSTOP) until {} is proven \
             again",
            self.label
        ));
        self.child.signal(Signal::SIGSTOP);
        self.child.take_terminal_back();
        self.state = State::Suspended {
            next_confirm: Instant::now(),
        };
    }

    /// zkguard was continued after Ctrl-Z: the command, stopped with it, waits for a confirm
    /// (one already on its way serves).
    fn resumed(&mut self) {
        self.say.say(format!(
            "continued after SIGTSTP: the command stays stopped until {} is proven again",
            self.label
        ));
        if !matches!(self.state, State::Confirming(_)) {
            self.state = State::Suspended {
                next_confirm: Instant::now(),
            };
        }
    }

    /// `Suspended` → `Confirming`: one quorum round trip, on a thread of its own.
    fn start_confirm(&mut self) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let held = self.held.clone();
        std::thread::spawn(move || {
            let _ = tx.send(held.confirm());
        });
        self.state = State::Confirming(rx);
    }

    /// `Confirming` → `Running` (proven: the command continues), `Suspended` (not asked:
    /// again in 500 ms) or the end (the lock is not ours).
    fn confirmed(&mut self, answer: zkguard::Result<()>) -> Option<End> {
        match answer {
            Ok(()) => {
                self.say.say(format!(
                    "{} is proven again; continuing the command (SIGCONT)",
                    self.label
                ));
                self.child.give_terminal();
                self.child.signal(Signal::SIGCONT);
                self.state = State::Running;
            }
            Err(Error::LockLost { .. } | Error::NotLeader { .. }) => {
                self.say
                    .say(format!("{} was lost while disconnected", self.label));
                return Some(self.terminate());
            }
            Err(_) => {
                self.state = State::Suspended {
                    next_confirm: Instant::now() + Duration::from_millis(500),
                };
            }
        }
        None
    }

    /// The guard's `lost()` fired: the end, the command terminated.
    fn lost(&mut self) -> End {
        self.say.say(format!(
            "{} was lost (session expired or node deleted)",
            self.label
        ));
        self.terminate()
    }

    /// Asked to let go (`zkguard revoke`): the command's group gets SIGTERM, as if zkguard
    /// had, and SIGCONT (a stopped command could not act on it), and SIGKILL after
    /// `--kill-after` ([`Supervisor::look`]); the lock is released once it exits, and zkguard
    /// exits with its status. Not a signal for zkguard: `elect --loop` queues again.
    fn revoked(&mut self) {
        self.say.say(format!(
            "asked to let go of {} (revoke): SIGTERM to the command (and SIGCONT), SIGKILL in \
             {}; released when it exits",
            self.label,
            humantime::format_duration(self.sup.kill_after)
        ));
        self.child.signal(Signal::SIGTERM);
        self.child.signal(Signal::SIGCONT);
        self.kill_at = Some(Instant::now() + self.sup.kill_after);
    }

    /// The watchdog found zkguard unheard for its bound (frozen or stalled) and stopped the
    /// command's group (`--on-suspend stop` or `ignore`): `Suspended`, a confirm due at once
    /// (one already on its way started before the freeze: not trusted); with
    /// `--on-suspend kill` it terminated the group: the end.
    fn frozen(&mut self) -> Option<End> {
        if self.sup.on_suspend == OnSuspend::Kill {
            self.say.say(format!(
                "zkguard was frozen or stalled and its watchdog terminated the command; \
                 ending the term of {}",
                self.label
            ));
            return Some(self.terminate());
        }
        self.say.say(format!(
            "zkguard was frozen or stalled and its watchdog stopped the command: it stays \
             stopped until {} is proven again",
            self.label
        ));
        self.child.take_terminal_back();
        self.state = State::Suspended {
            next_confirm: Instant::now(),
        };
        None
    }

    /// The watchdog is gone, or has not answered for its bound (`why`): another one
    /// started, the old one ended (SIGKILL) and what it reported before read (had it fired,
    /// [`Supervisor::frozen`]); if none can start, the command terminated.
    fn replace_watchdog(&mut self, why: &str) -> Option<End> {
        let bound = watchdog::bound(self.client.session_timeout());
        let old = self.dog.pid();
        let dog = match Watchdog::start(
            self.child.pid,
            self.child.start,
            bound,
            self.sup.on_suspend,
            self.sup.kill_after,
            self.say,
        ) {
            Ok(dog) => dog,
            Err(f) => {
                self.say.say(format!(
                    "the watchdog (pid {old}) {why}, and {}: the command cannot run unguarded",
                    f.msg
                ));
                return Some(self.terminate());
            }
        };
        dog.beat();
        self.say.say(format!(
            "the watchdog (pid {old}) {why}: ended it, started another (pid {})",
            dog.pid()
        ));
        if std::mem::replace(&mut self.dog, dog).end() {
            return self.frozen();
        }
        None
    }

    /// A signal for zkguard, passed on to the command's group.
    fn forward(&mut self, sig: Signal) {
        self.signalled = true;
        let note = if self.is_suspended() {
            " (it is stopped: it sees it once resumed or killed)"
        } else {
            ""
        };
        self.say.say(format!(
            "forwarding {} to the command{note}",
            signal_name(sig)
        ));
        self.child.signal(sig);
    }

    fn is_suspended(&self) -> bool {
        matches!(self.state, State::Suspended { .. } | State::Confirming(_))
    }

    /// The command itself was stopped by `sig`. With the terminal (zkguard's stdin):
    /// Ctrl-Z (SIGTSTP, which the terminal sends to the command, its foreground job) stops
    /// zkguard too, so the shell sees the job stopped; a command stopped for wanting the
    /// terminal (SIGTTIN, SIGTTOU) gets it and goes on, or, if zkguard is in the
    /// background, zkguard stops too until `fg`. Once zkguard is continued, the command is
    /// continued after the lock is proven again. Without a terminal a stop is someone
    /// else's to undo (one for the terminal is said once); our own SIGSTOP (suspension)
    /// needs nothing.
    fn command_stopped(&mut self, sig: Signal) {
        let wants_terminal = matches!(sig, Signal::SIGTTIN | Signal::SIGTTOU);
        if self.is_suspended() || !(wants_terminal || sig == Signal::SIGTSTP) {
            return;
        }
        if !self.child.has_terminal() {
            if wants_terminal {
                self.say.say(format!(
                    "the command is stopped ({}): it wants the terminal, and zkguard has none \
                     to give (its stdin is not a terminal)",
                    signal_name(sig)
                ));
            }
            return;
        }
        if wants_terminal && self.child.give_terminal() {
            self.child.signal(Signal::SIGCONT);
            return;
        }
        self.say.say(format!(
            "the command was stopped ({}): stopping zkguard too; fg continues both",
            signal_name(sig)
        ));
        self.child.take_terminal_back();
        child::stop_self();
    }

    /// SIGTERM to the command's group at once (and SIGCONT, should it be stopped), SIGKILL
    /// after `--kill-after`; then SIGKILL for whatever is left of the group.
    fn terminate(&self) -> End {
        terminate(self.child, self.sup, self.say, Some(&self.dog));
        End::Lost
    }
}

/// [`Supervisor::terminate`], also for a command that must not run without its watchdog
/// (`dog` None); heartbeats `dog` while it waits. Returns the command's status.
fn terminate(child: &Child, sup: &Supervise, say: Say, dog: Option<&Watchdog>) -> i32 {
    say.say(format!(
        "terminating the command (SIGTERM to process group {}, SIGKILL in {})",
        child.pid,
        humantime::format_duration(sup.kill_after)
    ));
    child.signal(Signal::SIGTERM);
    child.signal(Signal::SIGCONT);
    let deadline = Instant::now() + sup.kill_after;
    let code = loop {
        if let Some(dog) = dog {
            dog.beat();
        }
        let slice = (Instant::now() + Duration::from_millis(100)).min(deadline);
        match child.exited.recv_deadline(slice) {
            Ok(code) => break code,
            Err(RecvTimeoutError::Disconnected) => break EXIT_SOFTWARE,
            Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(RecvTimeoutError::Timeout) => {
                say.say("the command outlived --kill-after: SIGKILL");
                child.signal(Signal::SIGKILL);
                break child.exited.recv().unwrap_or(EXIT_SOFTWARE);
            }
        }
    };
    child.signal(Signal::SIGKILL);
    code
}
