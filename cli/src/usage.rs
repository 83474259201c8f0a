//! A usage error as one line, with a hint where flock's habits lead astray.

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// Clap's error as one line (the first paragraph, without the usage that follows).
fn one_line(e: &clap::Error) -> String {
    let text = e.to_string();
    let first = text.split("\n\n").next().unwrap_or_default();
    let joined = first.split_whitespace().collect::<Vec<_>>().join(" ");
    joined
        .strip_prefix("error: ")
        .unwrap_or(&joined)
        .to_string()
}

/// A usage error as one line, with a hint where flock's habits lead astray: the command
/// goes after `--`.
pub fn usage_error(e: &clap::Error) -> String {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let before_dashes = args.iter().take_while(|a| *a != "--");
    let sub = before_dashes
        .clone()
        .find(|a| *a == "lock" || *a == "elect");
    let stray = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) if !a.starts_with('-') => Some(a.clone()),
        _ => None,
    };
    let hint = match (sub, e.kind(), stray) {
        (Some(sub), ErrorKind::UnknownArgument, Some(stray)) => {
            let path = before_dashes
                .skip_while(|a| *a != sub)
                .skip(1)
                .find(|p| p.starts_with('/'))
                .map_or("PATH", |p| p.as_str());
            format!(" (the command goes after --: zkguard {sub} {path} -- {stray} ...)")
        }
        _ => " (see zkguard --help)".into(),
    };
    format!("{}{hint}", one_line(e))
}
