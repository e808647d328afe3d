//! `ftcoll plot KIND --out FILE.{svg,png} [--out ...]`: figures from simulator sweeps (`scaling`,
//! `messages`, `correction`), from `bench --hlog` logs (`cdf`) and from `bench --json` reports
//! (`compare`). The plotted values are printed as a table too.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use crate::cli::flags::AlgoArgs;
use crate::cli::values::MetricArg;
use crate::experiment::spec;
use crate::experiment::sweep::{Point, Sweep, run_all};
use crate::report::plot::{self, Chart, Format};
use crate::sim::DeadBefore;

#[derive(Args, Debug, Clone)]
pub struct PlotArgs {
    #[command(subcommand)]
    pub kind: PlotKind,
}

#[derive(Subcommand, Debug, Clone)]
pub enum PlotKind {
    /// Coloring (or quiescence) latency p50/p99 against node count per algorithm, simulated.
    Scaling(ScalingArgs),
    /// Messages per process against node count per algorithm, simulated.
    Messages(NodeSweepArgs),
    /// Correction latency p50/p99 against the fault rate, simulated.
    Correction(CorrectionArgs),
    /// Latency by percentile, one curve per tag of a `bench --hlog` interval log.
    Cdf(CdfArgs),
    /// Measured against predicted latency percentiles from a `bench --json` report.
    Compare(FileArgs),
}

/// Flags shared by the simulated figures.
#[derive(Args, Debug, Clone)]
pub struct SimFlags {
    /// Output image: FILE.svg or FILE.png (repeatable: the same figure in several files).
    #[arg(long, required = true)]
    pub out: Vec<PathBuf>,
    /// Algorithms, `;`-separated, each as `sim`'s algorithm flags without `--algo`
    /// (e.g. "corrected-tree --tree binomial;corrected-gossip;big") [default: per figure].
    #[arg(long)]
    pub algos: Option<String>,
    /// One more algorithm in the same form (repeatable; added after --algos).
    #[arg(long = "algo-spec")]
    pub algo_spec: Vec<String>,
    /// LogP latency L.
    #[arg(long = "L", default_value_t = 2)]
    pub l: u64,
    /// LogP overhead o (> 0).
    #[arg(long = "o", default_value_t = 1)]
    pub o: u64,
    /// Monte Carlo runs per point.
    #[arg(long, default_value_t = 200)]
    pub runs: u64,
    /// Base seed (as in `sim`).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads [default: all cores].
    #[arg(long)]
    pub threads: Option<usize>,
}

#[derive(Args, Debug, Clone)]
pub struct NodeSweepArgs {
    #[command(flatten)]
    pub sim: SimFlags,
    /// Node counts, comma-separated.
    #[arg(long, default_value = "256,1024,4096")]
    pub nodes: String,
    /// Processes dead before the operation, as in `sim` (5, 1%, 0.01).
    #[arg(long, default_value = "1%")]
    pub faults: String,
}

#[derive(Args, Debug, Clone)]
pub struct ScalingArgs {
    #[command(flatten)]
    pub sweep: NodeSweepArgs,
    /// Which latency.
    #[arg(long, value_enum, default_value = "coloring")]
    pub metric: MetricArg,
}

#[derive(Args, Debug, Clone)]
pub struct CorrectionArgs {
    #[command(flatten)]
    pub sim: SimFlags,
    /// Number of processes.
    #[arg(long, default_value_t = 4096)]
    pub nodes: u32,
    /// Fault rates, comma-separated percentages or fractions (> 0: the axis is logarithmic).
    #[arg(long, default_value = "0.01%,0.1%,0.5%,1%,2%,4%")]
    pub faults: String,
}

#[derive(Args, Debug, Clone)]
pub struct FileArgs {
    /// Input file.
    pub input: PathBuf,
    /// Output image: FILE.svg or FILE.png (repeatable: the same figure in several files).
    #[arg(long, required = true)]
    pub out: Vec<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct CdfArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// Logarithmic latency axis (HdrHistogram's plots are linear; long tails squash the body).
    #[arg(long = "log-y")]
    pub log_y: bool,
}

const SCALING_ALGOS: &str = "corrected-tree --tree binomial;corrected-tree --tree optimal;corrected-gossip;big";
const CORRECTION_ALGOS: &str = "corrected-tree --correction checked;corrected-tree --correction failproof:1;corrected-tree --correction optimized:4 --start overlapped";

/// `sim`'s algorithm flags, parsed alone.
#[derive(Parser, Debug)]
#[command(no_binary_name = true)]
struct AlgoSpec {
    #[command(flatten)]
    alg: AlgoArgs,
}

/// Parses one algorithm spec ("corrected-tree --tree binomial", with or without a leading
/// `--algo`) into `sim`'s algorithm flags; errors are one line.
pub fn algo_spec(s: &str) -> Result<AlgoArgs, String> {
    let words: Vec<&str> = s.split_whitespace().collect();
    if words.is_empty() {
        return Err("empty algorithm spec".into());
    }
    let mut argv = Vec::with_capacity(words.len() + 1);
    if !words[0].starts_with("--algo") {
        argv.push("--algo");
    }
    argv.extend(&words);
    AlgoSpec::try_parse_from(argv).map(|a| a.alg).map_err(|e| {
        let text = e.render().to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or("invalid flags")
            .trim_start_matches("error: ");
        format!("algorithm spec '{s}': {first}")
    })
}

/// The algorithm specs of `--algos` and `--algo-spec`, or `default` if neither is given.
fn specs(f: &SimFlags, default: &str) -> Result<Vec<(String, AlgoArgs)>, String> {
    let mut texts: Vec<String> = f
        .algos
        .as_deref()
        .unwrap_or(if f.algo_spec.is_empty() { default } else { "" })
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    texts.extend(f.algo_spec.iter().map(|s| s.trim().to_string()));
    if texts.is_empty() {
        return Err("no algorithm to plot (give --algos or --algo-spec)".into());
    }
    texts.into_iter().map(|t| algo_spec(&t).map(|a| (t, a))).collect()
}

fn node_list(s: &str) -> Result<Vec<u32>, String> {
    let v: Vec<u32> = s
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| x.trim().parse().map_err(|_| format!("invalid node count '{x}'")))
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err("--nodes needs at least one node count".into());
    }
    Ok(v)
}

/// One point of a sweep: `alg` on `nodes` processes with `faults` dead before the operation,
/// resolved exactly as `ftcoll sim` resolves its flags.
fn point(f: &SimFlags, alg: &AlgoArgs, nodes: u32, faults: &str) -> Result<Point, String> {
    Point::new(&alg.spec(), nodes, f.l, f.o, faults, f.runs, f.seed, f.threads)
}

fn context(f: &SimFlags, faults: Option<&str>) -> String {
    let mut s = format!("L = {}, o = {}", f.l, f.o);
    if let Some(x) = faults {
        s += &format!(", faults {x}");
    }
    s + &format!(", {} runs", f.runs)
}

fn node_sweeps(a: &NodeSweepArgs, default: &str) -> Result<Vec<Sweep>, String> {
    outputs(&a.sim.out)?;
    let nodes = node_list(&a.nodes)?;
    spec::dead(&a.faults)?;
    let series = specs(&a.sim, default)?
        .into_iter()
        .map(|(label, alg)| {
            let setups = nodes
                .iter()
                .map(|&n| point(&a.sim, &alg, n, &a.faults).map(|s| (f64::from(n), s)))
                .collect::<Result<Vec<_>, String>>()?;
            Ok((label, setups))
        })
        .collect::<Result<Vec<_>, String>>()?;
    run_all(series)
}

/// Fault rate in percent of `nodes` for one `--faults` entry.
fn rate_percent(s: &str, nodes: u32) -> Result<f64, String> {
    let p = match spec::dead(s)? {
        DeadBefore::Fraction(f) => 100.0 * f,
        DeadBefore::Count(c) => 100.0 * f64::from(c) / f64::from(nodes.max(1)),
        DeadBefore::List(l) => 100.0 * l.len() as f64 / f64::from(nodes.max(1)),
    };
    if p <= 0.0 {
        return Err(format!(
            "fault rate '{s}' must be > 0 (the fault-rate axis is logarithmic)"
        ));
    }
    Ok(p)
}

fn correction_sweeps(a: &CorrectionArgs) -> Result<Vec<Sweep>, String> {
    outputs(&a.sim.out)?;
    let rates: Vec<(&str, f64)> = a
        .faults
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| rate_percent(x, a.nodes).map(|p| (x, p)))
        .collect::<Result<_, _>>()?;
    if rates.is_empty() {
        return Err("--faults needs at least one fault rate".into());
    }
    let series = specs(&a.sim, CORRECTION_ALGOS)?
        .into_iter()
        .map(|(label, alg)| {
            let setups = rates
                .iter()
                .map(|&(text, p)| point(&a.sim, &alg, a.nodes, text).map(|s| (p, s)))
                .collect::<Result<Vec<_>, String>>()?;
            Ok((label, setups))
        })
        .collect::<Result<Vec<_>, String>>()?;
    run_all(series)
}

/// Checks every `--out` before any work is done.
fn outputs(paths: &[PathBuf]) -> Result<(), String> {
    paths.iter().try_for_each(|p| Format::of_output(p).map(|_| ()))
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn cdf(c: &CdfArgs) -> Result<Chart, String> {
    let a = &c.file;
    outputs(&a.out)?;
    let bytes = read(&a.input)?;
    let hists = plot::cdf::read_hlog(&bytes).map_err(|e| format!("{}: {e}", a.input.display()))?;
    let name = a
        .input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(plot::cdf::chart(&hists, &name, c.log_y))
}

fn compare(a: &FileArgs) -> Result<Chart, String> {
    outputs(&a.out)?;
    let bytes = read(&a.input)?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not a `bench --json` report: {e}", a.input.display()))?;
    plot::compare::chart(&v).map_err(|e| format!("{}: {e}", a.input.display()))
}

/// The plotted values, one row per point.
fn table(c: &Chart) -> String {
    let mut s = format!(
        "{}\nx: {}; y: {}\n{:<64}{:>14}{:>14}\n",
        c.title, c.x_label, c.y_label, "series", "x", "y"
    );
    for l in &c.lines {
        for (x, y) in &l.points {
            s += &format!("{:<64}{x:>14.4}{y:>14.3}\n", l.label);
        }
    }
    s
}

/// Runs `ftcoll plot`.
pub fn run(a: &PlotArgs) -> Result<(), String> {
    let (chart, out) = match &a.kind {
        PlotKind::Scaling(s) => {
            let sweeps = node_sweeps(&s.sweep, SCALING_ALGOS)?;
            let ctx = context(&s.sweep.sim, Some(&s.sweep.faults));
            (plot::scaling::chart(&sweeps, s.metric.into(), &ctx), &s.sweep.sim.out)
        }
        PlotKind::Messages(m) => {
            let sweeps = node_sweeps(m, SCALING_ALGOS)?;
            let ctx = context(&m.sim, Some(&m.faults));
            (plot::messages::chart(&sweeps, &ctx), &m.sim.out)
        }
        PlotKind::Correction(c) => {
            let sweeps = correction_sweeps(c)?;
            let ctx = format!("P = {}, {}", c.nodes, context(&c.sim, None));
            (plot::correction::chart(&sweeps, &ctx), &c.sim.out)
        }
        PlotKind::Cdf(c) => (cdf(c)?, &c.file.out),
        PlotKind::Compare(f) => (compare(f)?, &f.out),
    };
    print!("{}", table(&chart));
    for path in out {
        plot::render(&chart, path)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::flags::AlgoArg as AlgoName;

    #[test]
    fn algo_specs_parse_like_sim_flags() {
        let a = algo_spec("corrected-tree --tree kary:4 --correction failproof:2").unwrap();
        assert_eq!(a.algo, AlgoName::CorrectedTree);
        assert_eq!(a.tree.as_deref(), Some("kary:4"));
        assert_eq!(algo_spec("--algo big").unwrap().algo, AlgoName::Big);
        let e = algo_spec("corrected-tree --bogus 1").unwrap_err();
        assert!(e.contains("--bogus") && !e.contains('\n'), "{e}");
        assert!(algo_spec("   ").is_err());
        assert!(algo_spec("quantum").is_err());
    }

    #[test]
    fn rates_and_node_lists() {
        assert_eq!(rate_percent("1%", 100), Ok(1.0));
        assert_eq!(rate_percent("5", 1000), Ok(0.5));
        assert!(rate_percent("0%", 100).is_err());
        assert_eq!(node_list("256, 1024"), Ok(vec![256, 1024]));
        assert!(node_list("").is_err() && node_list("12x").is_err());
    }
}
