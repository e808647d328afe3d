//! The `ftcoll` binary.

fn main() {
    ftcoll::cli::exit_cleanly_on_stdout_failure();
    std::process::exit(ftcoll::cli::main_with_args(std::env::args_os()));
}
