//! `lock` and `elect`: take it, run the command, watch for suspension and loss, release
//! only after the command has exited.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver};
use nix::sys::signal::Signal;
use zkguard::{Client, Error, LeaderElection, Leadership, Mutex, NodeAcl, RwLock, Semaphore};

use crate::args::{check_path, node_acl, ElectArgs, LockArgs, Supervise, Waiting};
use crate::child::{self, signal_name};
use crate::conn::Connection;
use crate::fail::{Fail, EXIT_LOST};
use crate::hold::{self, Held, Outcome, Patience, Recipe, Taken, Target};
use crate::say::Say;
use crate::supervise::{self, End};
use crate::tty::Terminal;
use crate::watchdog;

/// `zkguard lock PATH -- CMD`.
pub fn lock(conn: &Connection, args: &LockArgs, say: Say) -> Result<i32, Fail> {
    check_path(&args.path)?;
    let acl = node_acl(args.acl.as_ref(), &args.trust)?;
    let client = connect(conn, &args.supervise, say)?;
    conn.warn_cleartext(Some(&acl), say);
    warn_open_acl(conn, args.acl.as_ref(), &args.path, say);
    let made = |e| Fail::zk(format_args!("lock {}", args.path), e);
    // Without --data: "host pid N" and the granted session timeout, which `break` reads
    // to wait out the watchdog's bound (`watchdog::record`).
    let data = Some(
        args.data
            .clone()
            .unwrap_or_else(|| watchdog::record(&zkguard::host_id(), client.session_timeout())),
    );
    let target = if let Some(n) = args.permits {
        let s = Semaphore::new(&client, &args.path, n)
            .and_then(|s| s.with_acl(acl))
            .map_err(made)?;
        let s = match data {
            Some(d) => s.with_data(d),
            None => s,
        };
        let listed = s.clone();
        Target::new(s, Recipe::Semaphore, &args.path, move || {
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
            Target::new(read, Recipe::Read, &args.path, list)
        } else {
            Target::new(write, Recipe::Write, &args.path, list)
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
        Target::new(l, Recipe::Mutex, &args.path, move || listed.participants())
    };
    let code = session(&client, Arc::new(target), args, say, false, None);
    client.close();
    code
}

/// `zkguard elect PATH --id ID [--loop] -- CMD`.
pub fn elect(conn: &Connection, args: &ElectArgs, say: Say) -> Result<i32, Fail> {
    check_path(&args.path)?;
    let acl = node_acl(args.acl.as_ref(), &args.trust)?;
    let client = connect(conn, &args.supervise, say)?;
    conn.warn_cleartext(Some(&acl), say);
    warn_open_acl(conn, args.acl.as_ref(), &args.path, say);
    let id = args.id.clone().unwrap_or_else(zkguard::host_id);
    let election = LeaderElection::new(&client, &args.path, id)
        .and_then(|e| e.with_acl(acl))
        .map_err(|e| Fail::zk(format_args!("election {}", args.path), e))?;
    let target = Target::election(election, &args.path);
    let code = session(
        &client,
        Arc::new(target),
        args,
        say,
        args.repeat,
        args.hand_over_on_exit.map(|within| HandOver {
            within,
            to: args.hand_over_to.clone(),
        }),
    );
    client.close();
    code
}

/// The session for `lock` and `elect`: with a command to run, one whose session timeout,
/// asked and granted, is not below the watchdog's floor ([`watchdog::check_floor`]),
/// refused before anything is taken or run.
fn connect(conn: &Connection, sup: &Supervise, say: Say) -> Result<Client, Fail> {
    let supervised = !sup.argv().is_empty();
    if supervised {
        watchdog::check_floor(conn.session_timeout, None)?;
    }
    let client = conn.connect(say)?;
    if supervised {
        if let Err(f) = watchdog::check_floor(conn.session_timeout, Some(client.session_timeout()))
        {
            client.close();
            return Err(f);
        }
    }
    Ok(client)
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

/// An election's `--hand-over-on-exit` (its bound) and `--hand-over-to` (whom; `None`: the
/// next candidate).
struct HandOver {
    within: Duration,
    to: Option<zkguard::Prefer>,
}

/// Takes the target, runs the command while holding it, and (with `repeat`) again. With
/// `hand_over` (an election's `--hand-over-on-exit`), leadership still held as zkguard
/// exits is handed over ([`hand_over`]) instead of resigned.
fn session(
    client: &Client,
    target: Arc<Target>,
    job: &dyn Job,
    say: Say,
    repeat: bool,
    hand_over: Option<HandOver>,
) -> Result<i32, Fail> {
    let patience = Patience::from(job.waiting());
    let signals = child::signals()?;
    let (what, path) = (target.what(), target.path());
    loop {
        let Taken { held, leadership } =
            match hold::obtain(client, &target, patience, &signals, say)? {
                Outcome::Held(taken) => taken,
                Outcome::NotObtained => {
                    say.say(format!(
                        "did not get the {what} {}",
                        hold::holders_line(client, &target, false)
                    ));
                    return Ok(job.waiting().conflict_exit_code.into());
                }
                Outcome::Signalled(sig) => {
                    say.say(format!("{} while waiting; nothing held", signal_name(sig)));
                    return Ok(128 + sig as i32);
                }
            };
        let started = Instant::now();
        let (end, signalled) = term(client, &target, &held, job.supervise(), &signals, say)?;
        // The command has exited: only now let the lock go; handed over if zkguard exits
        // leading and was asked to.
        let exiting = signalled || !repeat;
        if let (End::Exited(_), true, Some(h), Some(l)) = (&end, exiting, &hand_over, &leadership) {
            self::hand_over(l, h, &signals, say, path);
        }
        drop(leadership);
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
            return Ok(128 + sig as i32);
        }
    }
}

/// One term of holding: runs the command under `held` (without one, holds until
/// signalled). Returns how it ended and whether zkguard was asked to stop (a signal, or
/// Ctrl-C typed to the command).
fn term(
    client: &Client,
    target: &Target,
    held: &Held,
    sup: &Supervise,
    signals: &Receiver<Signal>,
    say: Say,
) -> Result<(End, bool), Fail> {
    let (what, path) = (target.what(), target.path());
    let label = format!("the {what} {path}");
    let argv = sup.argv();
    if argv.is_empty() {
        say.say(format!(
            "got the {what} {path} (token {}); holding it until signalled",
            held.token()
        ));
        return Ok(hold_until_signalled(held, signals, say, &label));
    }
    say.say(format!(
        "got the {what} {path} (token {}); running the command",
        held.token()
    ));
    let mut env = vec![
        ("ZKGUARD_TOKEN", held.token().to_string()),
        ("ZKGUARD_PATH", path.to_string()),
        ("ZKGUARD_NODE", held.path().to_string()),
    ];
    if let Some(id) = target.id() {
        env.push(("ZKGUARD_ID", id.to_string()));
    }
    let child = child::spawn(&argv, &env, Terminal::stdin())?;
    let watched = supervise::watch(client, held, &child, sup, signals, say, &label);
    child.take_terminal_back();
    let (end, signalled) = watched?;
    // Ctrl-C typed to a command with the terminal reached it, not zkguard: as a shell
    // does, take the command's death by SIGINT as the wish to stop (--loop).
    let interrupted = child.has_terminal()
        && matches!(end, End::Exited(code) if code == 128 + Signal::SIGINT as i32);
    Ok((end, signalled || interrupted))
}

/// Without a command (as `etcdctl lock`): holds until SIGINT, SIGTERM or SIGHUP (then
/// ends as a command exiting with 0 would) or until lost.
fn hold_until_signalled(
    held: &Held,
    signals: &Receiver<Signal>,
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

/// `--hand-over-on-exit`: the command has exited (or, without one, zkguard was signalled)
/// and zkguard is about to exit leading. Instead of a plain resign, leadership goes to the
/// next candidate in the queue (or the one `--hand-over-to` prefers, asked first, `within`
/// at most: [`Leadership::hand_over_to`]) and zkguard waits, `within` at most, until it is
/// seen leading ([`Leadership::hand_over`]: the term ends before the node is deleted, so
/// the two never lead at once). Nobody queued behind: resigned as without the flag (the caller's
/// drop). Another signal for zkguard cuts the wait short (the session's close then deletes
/// the node if the step down had not been sent yet).
fn hand_over(
    leadership: &Arc<Leadership>,
    how: &HandOver,
    signals: &Receiver<Signal>,
    say: Say,
    path: &str,
) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let l = leadership.clone();
    let (within, to) = (how.within, how.to.clone());
    std::thread::spawn(move || {
        let _ = tx.send(match to {
            None => l.hand_over(within),
            Some(to) => l.hand_over_to(to, within),
        });
    });
    let answer = loop {
        select! {
            recv(rx) -> r => break r.ok(),
            recv(signals) -> sig => {
                let sig = sig.expect("the signal thread never ends");
                if sig != child::RESUMED {
                    say.say(format!(
                        "{} while handing the leadership of {path} over: not waiting for a \
                         successor",
                        signal_name(sig)
                    ));
                    break None;
                }
            }
        }
    };
    match answer {
        Some(Ok(Some(s))) => say.say(format!(
            "handed the leadership of {path} over to {} (token {})",
            zkguard::escape(&s.id),
            s.token
        )),
        Some(Ok(None)) => say.say(format!(
            "nobody is queued behind to hand the leadership of {path} over to: resigning"
        )),
        Some(Err(Error::Timeout { .. })) => say.say(format!(
            "stepped down from {path}, but no successor was seen leading within {} \
             (--hand-over-on-exit)",
            humantime::format_duration(within)
        )),
        Some(Err(e)) => say.say(format!(
            "cannot hand the leadership of {path} over ({e}): resigning"
        )),
        None => {}
    }
}
