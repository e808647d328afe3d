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
    let threads = match a.threads {
        Some(0) => return Err("--threads must be at least 1".into()),
        Some(t) => t,
        None => std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1),
    };
    // The output is opened before the experiments (minutes to hours), so an unwritable path
    // fails now instead of losing the run; its old content stays until the new one is written.
    if let Some(dir) = a.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut out_file = crate::report::output::open_for_output(&a.out)?;
    let started = std::time::Instant::now();
    let spec = ReproduceSpec {
        quick: a.quick,
        out: a.out.clone(),
        threads: Some(threads),
    };
    let doc = reproduce::run(&spec, sim_flags)?;
    crate::report::output::replace_contents(&mut out_file, doc.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", a.out.display()))?;
    println!("wrote {} ({:.0} s)", a.out.display(), started.elapsed().as_secs_f64());
    Ok(())
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
