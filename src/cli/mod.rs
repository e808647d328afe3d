//! Command-line interface: `ftcoll sim | model | reproduce`.
//!
//! Every misuse ends with a one-line `ftcoll: error: ...` on stderr and exit code 2, never a
//! panic (DESIGN.md decision 9).

pub mod args;
pub mod auth;
pub mod bench;
pub mod config;
pub mod defaults;
pub mod logp;
pub mod model;
pub mod node;
pub mod reproduce;
pub mod runner;
pub mod sim;
pub mod spec;

use clap::Parser;
use clap::error::ErrorKind;

use args::{Cli, Command};

/// Exit code for bad input.
pub const EXIT_USAGE: i32 = 2;

/// Parses `argv` and runs the command; returns the process exit code.
pub fn main_with_args(argv: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            return match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                        EXIT_USAGE
                    } else {
                        0
                    }
                }
                _ => {
                    // clap's message is multi-line (usage, hints): keep its first line.
                    let text = e.render().to_string();
                    let first = text
                        .lines()
                        .next()
                        .unwrap_or("invalid arguments")
                        .trim_start_matches("error: ");
                    eprintln!("ftcoll: error: {first}");
                    EXIT_USAGE
                }
            };
        }
    };
    let result = match &cli.command {
        Command::Sim(a) => sim::run(a),
        Command::Model(a) => model::run(a),
        Command::Reproduce(a) => reproduce::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Logp(a) => logp::run(a),
        Command::Node(a) => node::run(a),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ftcoll: error: {e}");
            EXIT_USAGE
        }
    }
}
