//! `ftcoll reproduce`: regenerates `docs/reproduction.md` ([`crate::experiment::reproduce`]).
//! Each row of the document names the `ftcoll sim` command line that reproduces it; this
//! module hands the experiment the CLI's own reading of those flags.

use clap::Parser;

use crate::cli::args::{Cli, Command};
use crate::cli::flags::ReproduceArgs;
use crate::experiment::reproduce::{self, ReproduceSpec};
use crate::experiment::sim::SimSpec;

/// The spec of `ftcoll sim ARGS`.
pub fn sim_flags(args: &str) -> Result<SimSpec, String> {
    let argv = ["ftcoll", "sim"].into_iter().chain(args.split_whitespace());
    let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
    let Command::Sim(a) = cli.command else {
        return Err("reproduce: internal".into());
    };
    crate::cli::flags::reject_unused(&a.overlay)?;
    Ok(a.spec())
}

/// Runs `ftcoll reproduce`.
pub fn run(a: &ReproduceArgs) -> Result<(), String> {
    let spec = ReproduceSpec {
        quick: a.quick,
        out: a.out.clone(),
        threads: a.threads,
    };
    reproduce::run(&spec, sim_flags)
}

#[cfg(test)]
mod tests {
    use crate::experiment::reproduce::Ctx;

    fn ctx() -> Ctx {
        Ctx::new(true, 1, super::sim_flags)
    }

    /// An experiment with an aborted run fails the reproduction loudly.
    #[test]
    fn an_aborted_run_fails_the_reproduction() {
        let e = ctx().sim("--nodes 64 --faults 0 --runs 2 --max-events 10").unwrap_err();
        assert!(e.contains("2 of 2 runs aborted at the event cap"), "{e}");
        assert!(e.contains("--nodes 64 --faults 0"), "{e}");
        let s = ctx().sim("--nodes 64 --faults 0 --runs 2").unwrap();
        assert_eq!((s.runs, s.aborted_runs), (2, 0));
    }
}
