//! The command line shared by the member benches: `--quick`, `--nodes a,b,...` and
//! `--reps R`.

/// What a member bench was asked for.
pub struct Args {
    /// A shorter run.
    pub quick: bool,
    /// The group sizes.
    pub nodes: Vec<u32>,
    /// Alternations of the variants compared.
    pub reps: u32,
}

impl Args {
    /// This process's arguments, `nodes` when `--nodes` is not given, 2 reps by default.
    pub fn parse(nodes: &[u32]) -> Args {
        let args: Vec<String> = std::env::args().collect();
        let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
        Args {
            quick: args.iter().any(|a| a == "--quick"),
            nodes: match value("--nodes") {
                Some(v) => v.split(',').filter_map(|s| s.trim().parse().ok()).collect(),
                None => nodes.to_vec(),
            },
            reps: value("--reps").and_then(|v| v.parse().ok()).unwrap_or(2),
        }
    }
}
