//! `lock` and `elect`: take it, run the command, watch for suspension and loss, release
//! only after the command has exited.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{never, select, Receiver};
use zkguard::{Client, Error, LeaderElection, Mutex, NodeAcl, RwLock, Semaphore, SessionState};

use crate::child::{self, signal_group, signal_name, status_code, Child};
use crate::hold::{self, Held, Kind, Outcome, Target, Wait};
use crate::tty::Terminal;
use crate::{
    check_path, Connection, ElectArgs, Fail, LockArgs, OnSuspend, Say, Supervise, Waiting,
    EXIT_LOST, EXIT_USAGE,
};

/// `zkguard lock PATH -- CMD`.
pub fn lock(conn: &Connection, args: &LockArgs, say: Say) -> Result<i32, Fail> {
    check_path(&args.path)?;
    let acl = node_acl(args.acl.as_ref(), &args.trust)?;
    let client = conn.connect(say)?;
    warn_open_acl(conn, args.acl.as_ref(), &args.path, say);
    let made = |e| Fail::zk(format_args!("lock {}", args.path), e);
    let data = args.data.clone();
    let target = if let Some(n) = args.permits {
        let s = Semaphore::new_with_acl(&client, &args.path, n, acl).map_err(made)?;
        let s = match data {
            Some(d) => s.with_data(d),
            None => s,
        };
        let listed = s.clone();
        Target::new(s, Kind::Semaphore, &args.path, move || {
            listed.participants()
        })
    } else if args.read || args.write {
        let l = RwLock::new(&client, &args.path)
            .and_then(|l| l.with_acl(acl))
            .map_err(made)?;
        let l = match data {
            Some(d) => l.with_data(d),
            None => l,
        };
        let (read, write) = (l.read_lock().clone(), l.write_lock().clone());
        let list = move || l.participants();
        if args.read {
            Target::new(read, Kind::Read, &args.path, list)
        } else {
            Target::new(write, Kind::Write, &args.path, list)
        }
    } else {
        let l = Mutex::new(&client, &args.path)
            .and_then(|l| l.with_acl(acl))
            .map_err(made)?;
        let l = match data {
            Some(d) => l.with_data(d),
            None => l,
        };
        let listed = l.clone();
        Target::new(l, Kind::Mutex, &args.path, move || listed.participants())
    };
    let code = session(&client, Arc::new(target), args, say, false);
    client.close();
    code
}

/// `zkguard elect PATH --id ID [--loop] -- CMD`.
pub fn elect(conn: &Connection, args: &ElectArgs, say: Say) -> Result<i32, Fail> {
    check_path(&args.path)?;
    let acl = node_acl(args.acl.as_ref(), &args.trust)?;
    let client = conn.connect(say)?;
    warn_open_acl(conn, args.acl.as_ref(), &args.path, say);
    let id = args.id.clone().unwrap_or_else(default_id);
    let election = LeaderElection::new(&client, &args.path, id)
        .and_then(|e| e.with_acl(acl))
        .map_err(|e| Fail::zk(format_args!("election {}", args.path), e))?;
    let listed = election.clone();
    let target = Target::new(
        election.clone(),
        Kind::Elect {
            id: election.id().to_string(),
        },
        &args.path,
        move || listed.participants(),
    );
    let code = session(&client, Arc::new(target), args, say, args.repeat);
    client.close();
    code
}

/// The ACL of `--acl` (open without it), trusting each `--trust SCHEME:ID`.
fn node_acl(acl: Option<&NodeAcl>, trust: &[String]) -> Result<NodeAcl, Fail> {
    let mut acl = acl.cloned().unwrap_or_default();
    for t in trust {
        let (scheme, id) = t.split_once(':').unwrap_or((t, ""));
        acl = acl
            .trusting(scheme, id)
            .map_err(|e| Fail::new(EXIT_USAGE, format!("--trust {t}: {e}")))?;
    }
    Ok(acl)
}

/// Credentials given but no `--acl`: the nodes get the open ACL, which anyone may delete
/// (and so break the lock) whatever the credentials; says so once, with the way out.
fn warn_open_acl(conn: &Connection, acl: Option<&NodeAcl>, path: &str, say: Say) {
    if let (None, Some(creds)) = (acl, conn.credentials_given()) {
        say.say(format!(
            "warning: you log in with {creds}, but without --acl the nodes zkguard creates \
             at {path} get the open ACL: anyone who reaches ZooKeeper may delete them and \
             take the lock or leadership. Give --acl creator (only this identity may touch \
             them) or --acl creator-read (others may also see holders and leader); --acl \
             open keeps them open without this warning"
        ));
    }
}

fn default_id() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length; the name is NUL-terminated or
    // truncated, and only the bytes before the first NUL are read.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let host = match String::from_utf8_lossy(&buf[..end]) {
        h if ok && !h.is_empty() => h.into_owned(),
        _ => "unknown-host".into(),
    };
    format!("{host} pid {}", std::process::id())
}

/// What `lock` and `elect` share.
trait Job {
    fn supervise(&self) -> &Supervise;
    fn waiting(&self) -> &Waiting;
}

macro_rules! job {
    ($($args:ty),*) => {$(
        impl Job for $args {
            fn supervise(&self) -> &Supervise {
                &self.supervise
            }
            fn waiting(&self) -> &Waiting {
                &self.waiting
            }
        }
    )*};
}

job!(LockArgs, ElectArgs);

/// How one term of holding ended.
enum End {
    /// The command exited with this status (forwarded signals included).
    Exited(i32),
    /// Lost (or suspended with `--on-suspend kill`); the command was terminated.
    Lost,
}

/// Takes the target, runs the command while holding it, and (with `repeat`) again.
fn session(
    client: &Client,
    target: Arc<Target>,
    job: &dyn Job,
    say: Say,
    repeat: bool,
) -> Result<i32, Fail> {
    let sup = job.supervise();
    let wait = Wait::from(job.waiting());
    let signals = child::signals()?;
    let (what, path) = (target.what(), target.path().to_string());
    let argv = sup.argv();
    loop {
        let held = match hold::obtain(client, &target, wait, &signals, say)? {
            Outcome::Held(h) => h,
            Outcome::NotObtained => {
                say.say(format!(
                    "did not get the {what} {}",
                    hold::holders_line(client, &target, false)
                ));
                return Ok(job.waiting().conflict_exit_code.into());
            }
            Outcome::Signalled(sig) => {
                say.say(format!("{} while waiting; nothing held", signal_name(sig)));
                return Ok(128 + sig);
            }
        };
        let started = Instant::now();
        let label = format!("the {what} {path}");
        let (end, signalled) = if argv.is_empty() {
            say.say(format!(
                "got the {what} {path} (token {}); holding it until signalled",
                held.token()
            ));
            hold_until_signalled(&held, &signals, say, &label)
        } else {
            say.say(format!(
                "got the {what} {path} (token {}); running the command",
                held.token()
            ));
            let mut env = vec![
                ("ZKGUARD_TOKEN", held.token().to_string()),
                ("ZKGUARD_PATH", path.clone()),
                ("ZKGUARD_NODE", held.path().to_string()),
            ];
            if let Some(id) = target.id() {
                env.push(("ZKGUARD_ID", id.to_string()));
            }
            let child = child::spawn(&argv, &env, Terminal::stdin())?;
            let (end, signalled) = watch(client, &held, &child, sup, &signals, say, &label);
            child.take_terminal_back();
            // Ctrl-C typed to a command with the terminal reached it, not zkguard: as a
            // shell does, take the command's death by SIGINT as the wish to stop (--loop).
            let interrupted = child.has_terminal()
                && matches!(end, End::Exited(code) if code == 128 + libc::SIGINT);
            (end, signalled || interrupted)
        };
        // The command has exited: only now let the lock go.
        drop(held);
        match end {
            End::Exited(code) if !repeat || signalled => return Ok(code),
            End::Lost if !repeat || signalled => return Ok(EXIT_LOST),
            End::Exited(code) => say.say(format!(
                "the command exited with {code}; queueing again for {path}"
            )),
            End::Lost => say.say(format!("queueing again for {path}")),
        }
        // A command that ends at once must not make a single candidate spin.
        if let Some(sig) = hold::pause(
            Duration::from_secs(1).saturating_sub(started.elapsed()),
            &signals,
        ) {
            return Ok(128 + sig);
        }
    }
}

/// Watches the holder while the command runs: forwards signals, stops the command while
/// the lock cannot be known to be held (`--on-suspend stop`), terminates it on loss.
/// Returns how it ended and whether a signal was forwarded.
fn watch(
    client: &Client,
    held: &Held,
    child: &Child,
    sup: &Supervise,
    signals: &Receiver<i32>,
    say: Say,
    label: &str,
) -> (End, bool) {
    let lost = held.lost();
    let events = client.events();
    let tick = crossbeam_channel::tick(Duration::from_millis(100));
    let mut signalled = false;
    let mut suspended = false;
    // Suspended with `--on-suspend ignore`, and said so.
    let mut noted = false;
    let mut confirming: Option<Receiver<zkguard::Result<()>>> = None;
    let mut next_confirm = Instant::now();
    loop {
        let confirm_rx = confirming.clone().unwrap_or_else(never);
        select! {
            recv(child.exited) -> st => {
                let code = status_code(&st.unwrap_or_else(|_| Err(std::io::Error::other("lost"))));
                return (End::Exited(code), signalled);
            }
            recv(lost) -> _ => {
                say.say(format!("{label} was lost (session expired or node deleted)"));
                return (terminate(child, sup.kill_after, say), signalled);
            }
            recv(signals) -> sig => {
                let sig = sig.expect("the signal thread never ends");
                if sig == child::RESUMED {
                    say.say(format!("continued after SIGTSTP: the command stays stopped until {label} is proven again"));
                    suspended = true;
                    next_confirm = Instant::now();
                    continue;
                }
                signalled = true;
                let note = if suspended { " (it is stopped: it sees it once resumed or killed)" } else { "" };
                say.say(format!("forwarding {} to the command{note}", signal_name(sig)));
                signal_group(child.pid, sig);
            }
            recv(child.stopped) -> sig => {
                if let Ok(sig) = sig {
                    on_stopped(child, sig, suspended, say);
                }
            }
            recv(events) -> _ => {}
            recv(tick) -> _ => {}
            recv(confirm_rx) -> r => {
                confirming = None;
                match r {
                    Ok(Ok(())) => {
                        say.say(format!("{label} is proven again; continuing the command (SIGCONT)"));
                        child.give_terminal();
                        signal_group(child.pid, libc::SIGCONT);
                        suspended = false;
                    }
                    Ok(Err(Error::LockLost { .. } | Error::NotLeader { .. })) => {
                        say.say(format!("{label} was lost while disconnected"));
                        return (terminate(child, sup.kill_after, say), signalled);
                    }
                    _ => next_confirm = Instant::now() + Duration::from_millis(500),
                }
            }
        }
        if noted && held.is_valid() {
            say.say("connected again");
            noted = false;
        }
        if !suspended && !held.is_valid() && lost.is_empty() {
            match sup.on_suspend {
                OnSuspend::Ignore if !noted => {
                    say.say(
                        "disconnected from ZooKeeper: the command runs on (--on-suspend ignore)",
                    );
                    noted = true;
                }
                OnSuspend::Ignore => {}
                OnSuspend::Stop => {
                    say.say(format!("disconnected from ZooKeeper: stopping the command (SIGSTOP) until {label} is proven again"));
                    signal_group(child.pid, libc::SIGSTOP);
                    child.take_terminal_back();
                    suspended = true;
                }
                OnSuspend::Kill => {
                    say.say("disconnected from ZooKeeper (--on-suspend kill)");
                    return (terminate(child, sup.kill_after, say), signalled);
                }
            }
        }
        if suspended
            && confirming.is_none()
            && Instant::now() >= next_confirm
            && client.state() == SessionState::Connected
        {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let h = held.clone();
            std::thread::spawn(move || {
                let _ = tx.send(h.confirm());
            });
            confirming = Some(rx);
        }
    }
}

/// Without a command (as `etcdctl lock`): holds until SIGINT, SIGTERM or SIGHUP (then
/// ends as a command exiting with 0 would) or until lost.
fn hold_until_signalled(
    held: &Held,
    signals: &Receiver<i32>,
    say: Say,
    label: &str,
) -> (End, bool) {
    let lost = held.lost();
    loop {
        select! {
            recv(lost) -> _ => {
                say.say(format!("{label} was lost (session expired or node deleted)"));
                return (End::Lost, false);
            }
            recv(signals) -> sig => {
                let sig = sig.expect("the signal thread never ends");
                if sig != child::RESUMED {
                    say.say(format!("{}: letting {label} go", signal_name(sig)));
                    return (End::Exited(0), true);
                }
            }
        }
    }
}

/// The command itself was stopped by `sig`. With the terminal (zkguard's stdin):
/// Ctrl-Z (SIGTSTP, which the terminal sends to the command, its foreground job) stops
/// zkguard too, so the shell sees the job stopped; a command stopped for wanting the
/// terminal (SIGTTIN, SIGTTOU) gets it and goes on, or, if zkguard is in the background,
/// zkguard stops too until `fg`. Once zkguard is continued, the command is continued after
/// the lock is proven again. Without a terminal a stop is someone else's to undo (one for
/// the terminal is said once); our own SIGSTOP (suspension) needs nothing.
fn on_stopped(child: &Child, sig: i32, suspended: bool, say: Say) {
    let wants_terminal = sig == libc::SIGTTIN || sig == libc::SIGTTOU;
    if suspended || !(wants_terminal || sig == libc::SIGTSTP) {
        return;
    }
    if !child.has_terminal() {
        if wants_terminal {
            say.say(format!(
                "the command is stopped ({}): it wants the terminal, and zkguard has none to \
                 give (its stdin is not a terminal)",
                signal_name(sig)
            ));
        }
        return;
    }
    if wants_terminal && child.give_terminal() {
        signal_group(child.pid, libc::SIGCONT);
        return;
    }
    say.say(format!(
        "the command was stopped ({}): stopping zkguard too; fg continues both",
        signal_name(sig)
    ));
    child.take_terminal_back();
    child::stop_self();
}

/// SIGTERM to the command's group at once (and SIGCONT, should it be stopped), SIGKILL
/// after `kill_after`; then SIGKILL for whatever is left of the group.
fn terminate(child: &Child, kill_after: Duration, say: Say) -> End {
    say.say(format!(
        "terminating the command (SIGTERM to process group {}, SIGKILL in {})",
        child.pid,
        humantime::format_duration(kill_after)
    ));
    signal_group(child.pid, libc::SIGTERM);
    signal_group(child.pid, libc::SIGCONT);
    if child.exited.recv_timeout(kill_after).is_err() {
        say.say("the command outlived --kill-after: SIGKILL");
        signal_group(child.pid, libc::SIGKILL);
        let _ = child.exited.recv();
    }
    signal_group(child.pid, libc::SIGKILL);
    End::Lost
}
