//! Command-line interface: `ftcoll sim | model | reproduce | bench | logp | node | plot`.
//!
//! Every misuse ends with a one-line `ftcoll: error: ...` on stderr and exit code 2, never a
//! panic (`docs/architecture.md`, "Bad input never takes a node down"). A simulation in which some run hit its event cap ends with a
//! one-line `ftcoll: error: ... aborted ...` on stderr and exit code 3 (`sim` and `agree --sim`
//! print their table first; `--allow-aborts` accepts such runs). A run that completed and failed
//! its checks (`bench`, `agree`, `stress`: violations, timeouts, disagreements, false
//! suspicions, lost messages) prints its report, then one line `ftcoll: bench failed: ...` on
//! stderr, and exits with code 1.

pub mod agree;
pub mod agree_args;
pub mod agree_bench;
pub mod args;
pub mod auth;
pub mod bench;
pub mod bootstrap;
pub mod failure;
pub mod flags;
pub mod logp;
pub mod model;
pub mod node;
pub mod overlay;
pub mod plot;
pub mod reproduce;
pub mod sim;
pub mod stress;
pub mod values;
pub mod verbs;

use clap::Parser;
use clap::error::ErrorKind;

use args::{Cli, Command};

pub use failure::{EXIT_ABORTED, EXIT_FAILED, EXIT_USAGE, Failure};

/// Makes a failed write to standard output (a full disk, a pipe whose reader has gone, as
/// `ftcoll launch-tree --nodes 100000 | head -1`) end the process as every other error does:
/// one line `ftcoll: error: cannot write to standard output: ...` on stderr and exit code 2.
/// The commands print their reports with `println!`, which panics on such a failure, in any
/// of them; other panics keep the default hook. For the binary (`main.rs`), not the library.
pub fn exit_cleanly_on_stdout_failure() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied());
        if let Some(why) = msg.and_then(|m| m.strip_prefix("failed printing to stdout: ")) {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "ftcoll: error: cannot write to standard output: {why}"
            );
            std::process::exit(EXIT_USAGE);
        }
        default(info)
    }));
}

/// Parses `argv` and runs the command; returns the process exit code.
pub fn main_with_args(argv: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            return match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    if let Err(why) = e.print() {
                        eprintln!("ftcoll: error: cannot write to standard output: {why}");
                        return EXIT_USAGE;
                    }
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        EXIT_USAGE
                    } else {
                        0
                    }
                }
                _ => {
                    // clap's message is multi-line (usage, hints): keep its first line.
                    let text = e.render().to_string();
                    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
                    let first = lines
                        .next()
                        .unwrap_or("invalid arguments")
                        .trim_start_matches("error: ");
                    // "...not provided:" names the arguments on the next line: keep it.
                    match lines.next().filter(|_| first.ends_with(':')) {
                        Some(next) => eprintln!("ftcoll: error: {first} {}", next.trim()),
                        None => eprintln!("ftcoll: error: {first}"),
                    }
                    EXIT_USAGE
                }
            };
        }
    };
    let result: Result<(), Failure> = match &cli.command {
        Command::Sim(a) => sim::run(a),
        Command::Agree(a) => agree::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Stress(a) => stress::run(a),
        other => run_other(other).map_err(Failure::Error),
    };
    match result {
        Ok(()) => 0,
        Err(Failure::Error(e)) => {
            eprintln!("ftcoll: error: {e}");
            EXIT_USAGE
        }
        Err(Failure::Aborted(e)) => {
            eprintln!("ftcoll: error: {e}");
            EXIT_ABORTED
        }
        Err(Failure::Failed(why)) => {
            eprintln!("ftcoll: {why}");
            EXIT_FAILED
        }
    }
}

/// The commands that fail only with a one-line error.
fn run_other(command: &Command) -> Result<(), String> {
    match command {
        Command::Sim(_) | Command::Agree(_) | Command::Bench(_) | Command::Stress(_) => {
            Err("internal: dispatched above".into())
        }
        Command::Model(a) => model::run(a),
        Command::Reproduce(a) => reproduce::run(a),
        Command::Logp(a) => logp::run(a),
        Command::Node(a) => node::run(a),
        Command::AgreeNode { spec } => crate::experiment::launch::agree_node::child(spec),
        Command::Bootstrap(a) => bootstrap::run(a),
        Command::BootNode(a) => bootstrap::run_node(a),
        Command::LaunchTree { nodes } => bootstrap::print_launch_tree(*nodes),
        Command::Plot(a) => plot::run(a),
    }
}
